//===- NvrtcTest.cpp - NVRTC compiles lina-style kernels, no GPU needed ---===//
//
// Part of lina. NVRTC runs without a GPU, so these tests run wherever the
// toolkit's libnvrtc is installed and are skipped (not passed) elsewhere.
//
//===----------------------------------------------------------------------===//
#include "TestKernels.h"

#include "lina/Runtime/Nvrtc.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include <algorithm>
#include <thread>

using namespace lina;
using namespace lina::cuda;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

namespace {

#define SKIP_WITHOUT_NVRTC()                                                   \
  do {                                                                         \
    if (!Nvrtc::get().available())                                             \
      GTEST_SKIP() << Nvrtc::get().status().message();                         \
  } while (false)

CompileOptions optionsFor(const std::string &arch) {
  CompileOptions options;
  options.arch = arch;
  return options;
}

bool isElf(const std::string &image) {
  return image.size() > 4 && image.compare(0, 4,
                                           "\x7f"
                                           "ELF") == 0;
}

TEST(NvrtcTest, ReportsVersionAndArchs) {
  SKIP_WITHOUT_NVRTC();
  Expected<NvrtcVersion> version = Nvrtc::get().version();
  ASSERT_TRUE(version.ok()) << version.message();
  EXPECT_GE(version->major, 11);
  EXPECT_EQ(version->str(), std::to_string(version->major) + "." +
                                std::to_string(version->minor));
  Expected<std::vector<int>> archs = Nvrtc::get().supportedArchs();
  ASSERT_TRUE(archs.ok()) << archs.message();
  EXPECT_TRUE(std::is_sorted(archs->begin(), archs->end()));
  for (int needed : {80, 90})
    EXPECT_NE(std::find(archs->begin(), archs->end(), needed), archs->end())
        << "NVRTC cannot target sm_" << needed;
  EXPECT_FALSE(Nvrtc::get().libraryName().empty());
}

class MmaCubinTest : public ::testing::TestWithParam<const char *> {};

TEST_P(MmaCubinTest, CompilesToElfCubin) {
  SKIP_WITHOUT_NVRTC();
  Expected<CompiledKernel> compiled =
      compileCuda(test::kMmaKernelSource, optionsFor(GetParam()));
  ASSERT_TRUE(compiled.ok()) << compiled.message();
  EXPECT_EQ(compiled->arch, GetParam());
  EXPECT_FALSE(compiled->isPtx());
  ASSERT_FALSE(compiled->cubin.empty());
  EXPECT_TRUE(isElf(compiled->cubin)) << "cubin does not start with \\x7fELF";
  // The kernel's extern "C" name is in the ELF symbol table.
  EXPECT_NE(compiled->cubin.find("mma_bf16_16x8x16"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Archs, MmaCubinTest,
                         ::testing::Values("sm_80", "sm_90", "sm_90a"));

TEST(NvrtcTest, ComputeArchGivesPtx) {
  SKIP_WITHOUT_NVRTC();
  Expected<CompiledKernel> compiled =
      compileCuda(test::kMmaKernelSource, optionsFor("compute_80"));
  ASSERT_TRUE(compiled.ok()) << compiled.message();
  EXPECT_TRUE(compiled->isPtx());
  EXPECT_FALSE(isElf(compiled->cubin));
  EXPECT_THAT(compiled->cubin, HasSubstr(".target sm_80"));
  EXPECT_THAT(compiled->cubin,
              HasSubstr("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
  EXPECT_THAT(compiled->cubin, HasSubstr(".entry mma_bf16_16x8x16"));
  // The driver needs the text NUL-terminated and nothing after it.
  EXPECT_EQ(compiled->cubin.find('\0'), std::string::npos);
}

TEST(NvrtcTest, SyntaxErrorGivesLogAndNumberedSource) {
  SKIP_WITHOUT_NVRTC();
  // Eleven lines, so line numbers are padded to two digits; the error is on
  // line 4.
  const char *source = "extern \"C\" __global__ void broken(float *out) {\n"
                       "  int i = threadIdx.x;\n"
                       "  float x = 1.0f;\n"
                       "  out[i] = x\n"
                       "}\n"
                       "\n"
                       "\n"
                       "\n"
                       "\n"
                       "\n"
                       "// end\n";
  Expected<CompiledKernel> compiled = compileCuda(source, optionsFor("sm_90"));
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.status().code(), StatusCode::CompileError);
  EXPECT_EQ(compiled.status().apiResult(), 6) << "NVRTC_ERROR_COMPILATION";
  const std::string &message = compiled.message();
  EXPECT_THAT(message, StartsWith("NVRTC "));
  EXPECT_THAT(message, HasSubstr("could not compile lina_kernel.cu for sm_90 "
                                 "(NVRTC_ERROR_COMPILATION)"));
  // NVRTC's log: file, line and the diagnostic.
  EXPECT_THAT(message, HasSubstr("lina_kernel.cu(5): error"));
  EXPECT_THAT(message, HasSubstr("Options: --gpu-architecture=sm_90"));
  EXPECT_THAT(message, HasSubstr("\n04   out[i] = x\n"));
  EXPECT_THAT(message, HasSubstr("\n11 // end\n-----"));
}

TEST(NvrtcTest, UnsupportedArchNumberIsClearError) {
  SKIP_WITHOUT_NVRTC();
  Expected<CompiledKernel> compiled =
      compileCuda(test::kMmaKernelSource, optionsFor("sm_13"));
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.status().code(), StatusCode::InvalidArgument);
  EXPECT_THAT(compiled.message(), HasSubstr("cannot compile for sm_13"));
  EXPECT_THAT(compiled.message(), HasSubstr("sm_80"));
  EXPECT_THAT(compiled.message(), HasSubstr("sm_90"));
}

TEST(NvrtcTest, SuffixBeforeItsArchIsClearError) {
  SKIP_WITHOUT_NVRTC();
  Expected<CompiledKernel> compiled =
      compileCuda(test::kMmaKernelSource, optionsFor("sm_80a"));
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.status().code(), StatusCode::InvalidArgument);
  EXPECT_EQ(compiled.message(),
            "sm_80a does not exist: the 'a' suffix starts at sm_90a");
}

TEST(NvrtcTest, MalformedArchIsClearError) {
  // Rejected before NVRTC is asked, so this runs without NVRTC too.
  for (const char *arch : {"gfx90a", "sm90", "sm_9", "sm_90x", "90", ""}) {
    Expected<CompiledKernel> compiled =
        compileCuda(test::kMmaKernelSource, optionsFor(arch));
    ASSERT_FALSE(compiled.ok()) << arch;
    if (!Nvrtc::get().available())
      continue;
    EXPECT_EQ(compiled.status().code(), StatusCode::InvalidArgument);
    EXPECT_THAT(compiled.message(),
                StartsWith("unknown GPU architecture '" + std::string(arch) +
                           "': expected sm_<NN>"));
  }
}

TEST(NvrtcTest, ArchInFlagsIsRejected) {
  SKIP_WITHOUT_NVRTC();
  CompileOptions options = optionsFor("sm_90");
  options.flags = {"-arch=sm_80"};
  Expected<CompiledKernel> compiled =
      compileCuda(test::kMmaKernelSource, options);
  ASSERT_FALSE(compiled.ok());
  EXPECT_THAT(compiled.message(), HasSubstr("CompileOptions::arch"));
}

TEST(NvrtcTest, FlagsReachTheCompiler) {
  SKIP_WITHOUT_NVRTC();
  const char *source =
      "#if CHUNK != 64\n"
      "#error CHUNK must be 64\n"
      "#endif\n"
      "extern \"C\" __global__ void k(float *o) { *o = CHUNK; }\n";
  CompileOptions options = optionsFor("sm_80");
  Expected<CompiledKernel> without = compileCuda(source, options);
  ASSERT_FALSE(without.ok());
  options.flags = {"-DCHUNK=64"};
  Expected<CompiledKernel> with = compileCuda(source, options);
  EXPECT_TRUE(with.ok()) << with.message();
}

TEST(NvrtcTest, NoIncludePathIsPassed) {
  SKIP_WITHOUT_NVRTC();
  // lina's kernels must not depend on the CUDA headers being installed; if
  // this ever compiles, an include path crept in.
  const char *source = "#include <cuda_bf16.h>\n"
                       "extern \"C\" __global__ void k(__nv_bfloat16 *o) {}\n";
  Expected<CompiledKernel> compiled = compileCuda(source, optionsFor("sm_80"));
  ASSERT_FALSE(compiled.ok());
  EXPECT_THAT(compiled.message(), HasSubstr("cuda_bf16.h"));
}

TEST(NvrtcTest, ConcurrentCompilesAllSucceed) {
  SKIP_WITHOUT_NVRTC();
  constexpr int kThreads = 3;
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([t, &errors] {
      Expected<CompiledKernel> compiled = compileCuda(
          test::kMmaKernelSource, optionsFor(t % 2 ? "sm_80" : "sm_90a"));
      if (!compiled.ok())
        errors[t] = compiled.message();
      else if (!isElf(compiled->cubin))
        errors[t] = "not an ELF cubin";
    });
  for (std::thread &thread : threads)
    thread.join();
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(errors[t], "") << "thread " << t;
}

TEST(GpuArchTest, ParsesNvrtcSpellings) {
  Expected<GpuArch> sm90a = parseGpuArch("sm_90a");
  ASSERT_TRUE(sm90a.ok()) << sm90a.message();
  EXPECT_FALSE(sm90a->isVirtual);
  EXPECT_EQ(sm90a->number, 90);
  EXPECT_EQ(sm90a->suffix, 'a');
  EXPECT_EQ(sm90a->str(), "sm_90a");

  Expected<GpuArch> compute = parseGpuArch("compute_100f");
  ASSERT_TRUE(compute.ok()) << compute.message();
  EXPECT_TRUE(compute->isVirtual);
  EXPECT_EQ(compute->number, 100);
  EXPECT_EQ(compute->str(), "compute_100f");

  EXPECT_EQ(parseGpuArch("sm_80")->str(), "sm_80");
  for (const char *bad :
       {"sm_", "sm_08", "sm_1000", "compute", "SM_80", "sm_80ab", "sm_80 "})
    EXPECT_FALSE(parseGpuArch(bad).ok()) << bad;
}

TEST(NumberSourceLinesTest, PadsToTheWidestNumber) {
  EXPECT_EQ(numberSourceLines("a\nb"), "1 a\n2 b\n");
  EXPECT_EQ(numberSourceLines("a\nb\n"), "1 a\n2 b\n");
  EXPECT_EQ(numberSourceLines("x  \t\n"), "1 x\n");
  std::string ten;
  for (int i = 1; i <= 10; ++i)
    ten += "line" + std::to_string(i) + "\n";
  std::string numbered = numberSourceLines(ten);
  EXPECT_THAT(numbered, StartsWith("01 line1\n02 line2\n"));
  EXPECT_THAT(numbered, HasSubstr("\n09 line9\n10 line10\n"));
  EXPECT_THAT(numbered, Not(HasSubstr("\n11")));
}

} // namespace
