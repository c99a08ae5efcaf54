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

#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <fstream>

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
  std::string source;
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
  }
  if (emit == "cuda") {
    writeOutput(p.get("o"), source);
    return 0;
  }
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  if (!nvrtc.available())
    throw std::runtime_error(nvrtc.status().message());
  cuda::CompileOptions options;
  options.arch = emit == "ptx" ? virtualArch(p.get("arch")) : p.get("arch");
  options.programName = "lina_kernel.cu";
  Expected<cuda::CompiledKernel> compiled = nvrtc.compile(source, options);
  if (!compiled.ok())
    throw std::runtime_error(compiled.message());
  writeOutput(p.get("o"), compiled->cubin);
  return 0;
}

} // namespace lina::cli
