//===- CompileCommand.cpp - `lina compile` -----------------------------===//
//
// Part of lina. A spec through the whole pipeline to scheduled MLIR, CUDA C++,
// PTX or a cubin. No GPU needed: NVRTC compiles for any arch.
//
//===----------------------------------------------------------------------===//
#include "Commands.h"
#include "ScheduleOptions.h"
#include "SpecSource.h"

#include "lina/Codegen/CudaEmitter.h"
#include "lina/Codegen/DecodePlanner.h"
#include "lina/Runtime/Nvrtc.h"
#include "lina/Runtime/PtxasReport.h"

#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <fstream>
#include <optional>

namespace lina::cli {

namespace {

void writeOutput(const std::string &path, const std::string &text) {
  if (path.empty() || path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return;
  }
  std::ofstream out(path, std::ios::binary);
  out.write(text.data(), text.size());
  if (!out)
    throw std::runtime_error("cannot write '" + path + "'");
}

/// --resource-usage: each kernel's registers, spills and shared memory, and
/// the CTAs of it a multiprocessor holds, to stderr (stdout may carry the
/// cubin).
void printResourceUsage(const std::vector<cuda::KernelResources> &kernels,
                        const KernelPlan *plan) {
  std::fprintf(stderr, "%-24s %9s %13s %13s %12s\n", "kernel", "registers",
               "spilled bytes", "shared bytes", "CTAs per SM");
  for (const cuda::KernelResources &k : kernels) {
    long long shared = -1;
    if (plan) {
      if (k.kernel == plan->prepareKernel)
        shared = plan->prepareSharedBytes;
      else if (k.kernel == plan->scanKernel ||
               k.kernel == halvesKernelName(plan->scanKernel))
        shared = plan->scanSharedBytes;
      else if (k.kernel == plan->outputKernel)
        shared = plan->outputSharedBytes;
    }
    std::string ctas =
        shared < 0 ? "-"
                   : std::to_string(cuda::ctasPerMultiprocessor(
                         k.registers, static_cast<int>(plan->threads), shared));
    std::fprintf(stderr, "%-24s %9d %13d %13s %12s\n", k.kernel.c_str(),
                 k.registers, k.spillStoreBytes + k.spillLoadBytes,
                 shared < 0 ? "-" : std::to_string(shared).c_str(),
                 ctas.c_str());
  }
}

/// "sm_90a" -> "compute_90a": PTX is compiled for a virtual arch.
std::string virtualArch(const std::string &arch) {
  return arch.rfind("sm_", 0) == 0 ? "compute_" + arch.substr(3) : arch;
}

} // namespace

int compileCommand(const std::vector<std::string> &args) {
  ArgParser p("compile", "<preset|file.mlir> --emit mlir|cuda|ptx|cubin [options]",
              "Compile a spec: specialize, chunk, schedule, then print the "
              "scheduled MLIR, the CUDA C++,\nor compile it with NVRTC to PTX "
              "or a cubin (no GPU needed).");
  p.option("emit", "mlir|cuda|ptx|cubin", "what to produce", "cuda");
  p.option("arch", "sm_80|sm_90|sm_90a", "target for ptx and cubin", "sm_90");
  p.option("o", "FILE", "output file ('-' for stdout)", "-");
  p.flag("decode", "the decode kernels (docs/decode.md) instead of the chunk "
                   "kernels");
  p.option("warp-columns", "4|8|16",
           "decode: value columns per warp (default: a kernel per width)");
  p.flag("resource-usage",
         "with --emit cubin: print each kernel's registers, spills, shared "
         "memory and CTAs per multiprocessor (sm_90) to stderr");
  addScheduleOptions(p);
  addSpecOverrideOptions(p);
  if (!p.parse(args))
    return 0;
  if (p.positional().size() != 1)
    throw UsageError("expected one preset name or spec file");
  std::string emit = p.get("emit");
  if (emit != "mlir" && emit != "cuda" && emit != "ptx" && emit != "cubin")
    throw UsageError("--emit must be mlir, cuda, ptx or cubin, got '" + emit +
                     "'");
  if (p.has("decode") && emit == "mlir")
    throw UsageError("--decode has no MLIR form to emit: the decode kernel "
                     "is printed from the specialized spec (use --emit cuda)");
  Spec spec = loadSpec(p.positional().front(), p);
  ScheduleOptions schedule = scheduleFromOptions(p, spec);

  if (emit == "mlir") {
    mlir::MLIRContext ctx;
    std::string error;
    auto module = buildScheduledProgram(ctx, spec, schedule, error);
    if (!module)
      throw UsageError(error);
    std::string text;
    llvm::raw_string_ostream os(text);
    module->print(os);
    writeOutput(p.get("o"), text);
    return 0;
  }
  if (p.has("resource-usage") && emit != "cubin")
    throw UsageError("--resource-usage needs --emit cubin (ptxas reports "
                     "while it makes the cubin)");
  std::string source;
  std::optional<KernelPlan> chunkPlan;
  if (p.has("decode")) {
    DecodeSchedule decode;
    decode.warpColumns = p.getInt("warp-columns", 1, 1024, 0);
    decode.warps = schedule.warps;
    Expected<DecodePlan> plan = planDecodeKernel(spec, decode);
    if (!plan.ok())
      throw UsageError(plan.message());
    source = plan->source;
  } else {
    if (p.has("warp-columns"))
      throw UsageError("--warp-columns is a decode knob: add --decode");
    Expected<KernelPlan> plan = planChunkKernel(spec, schedule);
    if (!plan.ok())
      throw UsageError(plan.message());
    source = plan->source;
    chunkPlan = std::move(plan).value();
  }
  if (emit == "cuda") {
    writeOutput(p.get("o"), source);
    return 0;
  }
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  if (!nvrtc.available())
    throw std::runtime_error(nvrtc.status().message());
  cuda::CompileOptions options;
  std::string arch = chunkPlan ? kernelArch(*chunkPlan, p.get("arch"))
                               : p.get("arch");
  options.arch = emit == "ptx" ? virtualArch(arch) : arch;
  options.programName = "lina_kernel.cu";
  if (p.has("resource-usage"))
    options.flags.push_back(cuda::kPtxasVerbose);
  Expected<cuda::CompiledKernel> compiled = nvrtc.compile(source, options);
  if (!compiled.ok())
    throw std::runtime_error(compiled.message());
  if (p.has("resource-usage"))
    printResourceUsage(cuda::parsePtxasReport(compiled->log),
                       chunkPlan ? &*chunkPlan : nullptr);
  writeOutput(p.get("o"), compiled->cubin);
  return 0;
}

} // namespace lina::cli
