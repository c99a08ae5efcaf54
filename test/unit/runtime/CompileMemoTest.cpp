//===- CompileMemoTest.cpp - Compiles remembered across processes ---------===//
//
// Part of lina. LINA_COMPILE_MEMO_DIR (CompileMemo.h): what NVRTC produced is
// read back for the same program, never for another, and a damaged or
// foreign file is compiled over.
//
//===----------------------------------------------------------------------===//
#include "TestKernels.h"

#include "CompileMemo.h"
#include "lina/Runtime/Nvrtc.h"

#include "gtest/gtest.h"

#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace lina;
using namespace lina::cuda;

namespace {

/// A fresh memo directory in LINA_COMPILE_MEMO_DIR for one test; the
/// variable's earlier value (test.sh sets one) comes back after.
class CompileMemoTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (!Nvrtc::get().available())
      GTEST_SKIP() << Nvrtc::get().status().message();
    if (const char *old = std::getenv("LINA_COMPILE_MEMO_DIR"))
      saved_ = old;
    char pattern[] = "/tmp/lina-memo-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    directory_ = pattern;
    setenv("LINA_COMPILE_MEMO_DIR", directory_.c_str(), 1);
  }
  void TearDown() override {
    if (saved_)
      setenv("LINA_COMPILE_MEMO_DIR", saved_->c_str(), 1);
    else
      unsetenv("LINA_COMPILE_MEMO_DIR");
    for (const std::string &file : files())
      std::remove((directory_ + "/" + file).c_str());
    if (!directory_.empty())
      rmdir(directory_.c_str());
  }

  std::vector<std::string> files() const {
    std::vector<std::string> names;
    if (DIR *dir = opendir(directory_.c_str())) {
      while (dirent *entry = readdir(dir))
        if (entry->d_name[0] != '.')
          names.push_back(entry->d_name);
      closedir(dir);
    }
    return names;
  }

  static CompileOptions sm90() {
    CompileOptions options;
    options.arch = "sm_90";
    return options;
  }

  static std::string read(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
  }
  static void write(const std::string &path, const std::string &data) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
  }

  std::string directory_;
  std::optional<std::string> saved_;
};

TEST_F(CompileMemoTest, ARememberedCompileIsReadBackForTheSameProgramOnly) {
  Expected<CompiledKernel> first = compileCuda(test::kMmaKernelSource, sm90());
  ASSERT_TRUE(first.ok()) << first.message();
  ASSERT_EQ(files().size(), 1u);
  const std::string path = directory_ + "/" + files()[0];
  EXPECT_EQ(CompileMemo("NVRTC", test::kMmaKernelSource, sm90())
                .path()
                .rfind(directory_ + "/", 0),
            0u);

  // Mark the remembered cubin: a later compile of the program returns the
  // mark, so it read the file instead of compiling.
  std::string data = read(path);
  const size_t at = data.rfind(first->cubin);
  ASSERT_NE(at, std::string::npos);
  data[at + first->cubin.size() - 1] ^= 0x5a;
  write(path, data);
  Expected<CompiledKernel> again = compileCuda(test::kMmaKernelSource, sm90());
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_NE(again->cubin, first->cubin);
  EXPECT_EQ(again->cubin, data.substr(at, first->cubin.size()));
  EXPECT_EQ(again->cubin.size(), first->cubin.size());
  EXPECT_EQ(again->arch, "sm_90");

  // Another arch, a flag or another source is another program.
  CompileOptions other = sm90();
  other.arch = "sm_80";
  ASSERT_TRUE(compileCuda(test::kMmaKernelSource, other).ok());
  CompileOptions flagged = sm90();
  flagged.flags.push_back("-DLINA_MEMO_TEST=1");
  Expected<CompiledKernel> withFlag =
      compileCuda(test::kMmaKernelSource, flagged);
  ASSERT_TRUE(withFlag.ok()) << withFlag.message();
  EXPECT_EQ(withFlag->cubin, first->cubin);
  ASSERT_TRUE(compileCuda(test::kSharedSumKernelSource, sm90()).ok());
  EXPECT_EQ(files().size(), 4u);
}

TEST_F(CompileMemoTest, ADamagedOrForeignFileIsCompiledOver) {
  Expected<CompiledKernel> first = compileCuda(test::kMmaKernelSource, sm90());
  ASSERT_TRUE(first.ok()) << first.message();
  ASSERT_EQ(files().size(), 1u);
  const std::string path = directory_ + "/" + files()[0];
  const std::string whole = read(path);
  for (const std::string &damaged :
       {whole.substr(0, whole.size() / 2), whole.substr(0, 7), std::string(),
        "not a memo file at all" + whole.substr(22),
        whole + "trailing bytes"}) {
    write(path, damaged);
    Expected<CompiledKernel> again =
        compileCuda(test::kMmaKernelSource, sm90());
    ASSERT_TRUE(again.ok()) << again.message();
    EXPECT_EQ(again->cubin, first->cubin);
    EXPECT_EQ(read(path), whole) << "the file is written whole again";
  }
  // A file of another program under this name (its hashes differ).
  std::string foreign = whole;
  foreign[8] ^= 1;
  write(path, foreign);
  Expected<CompiledKernel> again = compileCuda(test::kMmaKernelSource, sm90());
  ASSERT_TRUE(again.ok()) << again.message();
  EXPECT_EQ(again->cubin, first->cubin);
}

TEST_F(CompileMemoTest, AFailedCompileIsNotRemembered) {
  const char *broken = "extern \"C\" __global__ void broken() { int x = }\n";
  for (int attempt = 0; attempt < 2; ++attempt) {
    Expected<CompiledKernel> compiled = compileCuda(broken, sm90());
    ASSERT_FALSE(compiled.ok());
    EXPECT_EQ(compiled.status().code(), StatusCode::CompileError);
  }
  EXPECT_TRUE(files().empty());
}

TEST_F(CompileMemoTest, AnUnwritableDirectoryOnlyCostsTheMemo) {
  setenv("LINA_COMPILE_MEMO_DIR", "/proc/lina-no-such-directory", 1);
  Expected<CompiledKernel> compiled =
      compileCuda(test::kMmaKernelSource, sm90());
  ASSERT_TRUE(compiled.ok()) << compiled.message();
  EXPECT_FALSE(compiled->cubin.empty());
}

} // namespace
