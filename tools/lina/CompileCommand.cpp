//===- CompileCommand.cpp - `lina compile` -----------------------------===//
//
// Part of lina. A spec through the whole pipeline to scheduled MLIR, CUDA C++,
// PTX or a cubin. No GPU needed: NVRTC compiles for any arch.
//
//===----------------------------------------------------------------------===//
#include "BackwardCheck.h"
#include "Commands.h"
#include "ScheduleOptions.h"
#include "SpecSource.h"

#include "lina/Codegen/CudaEmitter.h"
#include "lina/Codegen/DecodePlanner.h"
#include "lina/Runtime/Nvrtc.h"
#include "lina/Runtime/PtxasReport.h"

#include "llvm/Support/raw_ostream.h"

#include <cctype>
#include <cstdio>
#include <fstream>
#include <optional>

#include <unistd.h>

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

/// Prints ptxas' report of each kernel to stderr, with the shared memory
/// `sharedOf` gives it (-1: not a kernel it knows) and the CTAs an SM that
/// leaves at `threads` threads.
void printResourceUsage(
    const std::vector<cuda::KernelResources> &kernels, int64_t threads,
    llvm::function_ref<long long(const std::string &)> sharedOf) {
  int width = 24;
  for (const cuda::KernelResources &k : kernels)
    width = std::max(width, static_cast<int>(k.kernel.size()));
  std::fprintf(stderr, "%-*s %9s %13s %13s %12s\n", width, "kernel",
               "registers", "spilled bytes", "shared bytes", "CTAs per SM");
  for (const cuda::KernelResources &k : kernels) {
    long long shared = sharedOf(k.kernel);
    std::string ctas =
        shared < 0 ? "-"
                   : std::to_string(cuda::ctasPerMultiprocessor(
                         k.registers, static_cast<int>(threads), shared));
    std::fprintf(stderr, "%-*s %9d %13d %13s %12s\n", width, k.kernel.c_str(),
                 k.registers, k.spillStoreBytes + k.spillLoadBytes,
                 shared < 0 ? "-" : std::to_string(shared).c_str(),
                 ctas.c_str());
  }
}

/// The shared memory of a chunk plan's kernel, -1 for another.
long long chunkSharedBytes(const KernelPlan &plan, const std::string &kernel) {
  if (kernel == plan.prepareKernel)
    return plan.prepareSharedBytes;
  if (kernel == plan.scanKernel)
    return plan.scanSharedBytes;
  if (kernel == plan.outputKernel)
    return plan.outputSharedBytes;
  return -1;
}

/// The same for a backward plan's kernels.
long long backwardSharedBytes(const BackwardPlan &plan,
                              const std::string &kernel) {
  if (kernel == plan.scansKernel)
    return plan.scansSharedBytes();
  if (kernel == plan.backwardKernel)
    return plan.backwardSharedBytes;
  for (const BackwardPlan::Prepare &prepare : plan.prepares)
    if (kernel == prepare.kernel)
      return prepare.sharedBytes;
  return -1;
}

/// --arch as given when it names an architecture lina's kernels run on (bf16
/// tensor-core products and cp.async need sm_80 or newer), else a usage
/// error: NVRTC's own answer to a wrong arch is thousands of lines.
std::string checkedArch(const std::string &arch) {
  size_t digits = 0;
  while (3 + digits < arch.size() && std::isdigit(arch[3 + digits]))
    ++digits;
  std::string suffix = arch.substr(std::min(arch.size(), 3 + digits));
  if (arch.rfind("sm_", 0) != 0 || digits < 2 || digits > 3 ||
      (suffix != "" && suffix != "a" && suffix != "f"))
    throw UsageError("--arch must name a GPU architecture such as sm_80, "
                     "sm_90 or sm_90a, got '" +
                     arch + "'");
  if (std::stoi(arch.substr(3, digits)) < 80)
    throw UsageError("--arch " + arch +
                     ": lina's kernels need sm_80 or newer (bf16 tensor-core "
                     "products and cp.async); use sm_80, sm_90 or sm_90a");
  return arch;
}

/// "sm_90a" -> "compute_90a": PTX is compiled for a virtual arch.
std::string virtualArch(const std::string &arch) {
  return arch.rfind("sm_", 0) == 0 ? "compute_" + arch.substr(3) : arch;
}

/// With --shape: the schedule a call of that shape gets untuned on a GPU
/// of --arch with --sm-count multiprocessors (lina-choose-schedule), the
/// schedule flags given on top; `spec` takes the shape's heads.
ScheduleOptions scheduleForCall(const ArgParser &p, Spec &spec) {
  if (p.has("decode"))
    throw UsageError("--shape plans the chunk kernels; the decode kernels "
                     "take --warp-columns");
  ProblemShape shape = parseShapeOption(p);
  takeShapeHeads(p, shape, "lina compile --shape", spec);
  int64_t smCount = p.getInt("sm-count", 1, 1024, 132);
  // The choice knows GPUs by their base arch, as the driver names them
  // (sm_90 for sm_90a).
  std::string arch = checkedArch(p.get("arch"));
  if (arch.size() > 3 && std::isalpha(static_cast<unsigned char>(arch.back())))
    arch.pop_back();
  return applyScheduleFlags(
      p, defaultSchedule(spec, shape.batch, smCount, shape.seqLen, arch),
      spec);
}

/// Writes `module`'s text to -o, or refuses with `error`, the planning
/// pass's complaint, where there is no module.
void writeModule(const ArgParser &p, mlir::OwningOpRef<mlir::ModuleOp> module,
                 const std::string &error) {
  if (!module)
    throw UsageError(error);
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);
  writeOutput(p.get("o"), text);
}

/// Writes the NVRTC compile of `source` for `emit` (ptx or cubin) and
/// `arch`, with ptxas' report of each kernel where --resource-usage asks.
void writeCompiled(
    const ArgParser &p, const std::string &source, const std::string &emit,
    const std::string &arch, int64_t threads,
    llvm::function_ref<long long(const std::string &)> sharedOf) {
  const cuda::Nvrtc &nvrtc = cuda::Nvrtc::get();
  if (!nvrtc.available())
    throw std::runtime_error(nvrtc.status().message());
  cuda::CompileOptions options;
  options.arch = emit == "ptx" ? virtualArch(arch) : arch;
  options.programName = "lina_kernel.cu";
  if (p.has("resource-usage"))
    options.flags.push_back(cuda::kPtxasVerbose);
  Expected<cuda::CompiledKernel> compiled = nvrtc.compile(source, options);
  if (!compiled.ok())
    throw std::runtime_error(compiled.message());
  if (p.has("resource-usage"))
    printResourceUsage(cuda::parsePtxasReport(compiled->log), threads,
                       sharedOf);
  writeOutput(p.get("o"), compiled->cubin);
}

/// `lina compile --backward`: the module planBackwardKernel prints, its
/// CUDA C++, or that compiled.
int compileBackward(const ArgParser &p, const Spec &spec,
                    const std::string &emit, const std::string &arch) {
  if (p.has("warp-columns"))
    throw UsageError("--warp-columns is a decode knob: drop it");
  if (p.has("resource-usage") && emit != "cubin")
    throw UsageError("--resource-usage needs --emit cubin (ptxas reports "
                     "while it makes the cubin)");
  BackwardScheduleOptions schedule = backwardScheduleFromOptions(p);
  if (emit == "mlir") {
    mlir::MLIRContext ctx;
    std::string error;
    writeModule(p, buildBackwardProgram(ctx, spec, schedule, error), error);
    return 0;
  }
  Expected<BackwardPlan> plan = planBackwardKernel(spec, schedule);
  if (!plan.ok())
    throw UsageError(plan.message());
  if (emit == "cuda")
    writeOutput(p.get("o"), plan->source);
  else
    writeCompiled(p, plan->source, emit, arch, plan->threads,
                  [&](const std::string &kernel) {
                    return backwardSharedBytes(*plan, kernel);
                  });
  return 0;
}

} // namespace

int compileCommand(const std::vector<std::string> &args) {
  ArgParser p("compile", "<preset|file.mlir> --emit mlir|cuda|ptx|cubin [options]",
              "Compile a spec: specialize, chunk, schedule, then print the "
              "scheduled MLIR, the CUDA C++,\nor compile it with NVRTC to PTX "
              "or a cubin (no GPU needed).");
  p.option("emit", "mlir|cuda|ptx|cubin", "what to produce", "cuda");
  p.option("arch", "sm_80|sm_90|sm_90a",
           "target for ptx and cubin, and the GPU --shape plans for", "sm_90");
  p.option("o", "FILE", "output file ('-' for stdout)", "-");
  p.flag("decode", "the decode kernels (docs/decode.md) instead of the chunk "
                   "kernels");
  p.flag("backward", "the backward's kernels (docs/training.md) instead of "
                     "the forward's; takes --chunk-size, --tile-v and --warps");
  p.option("warp-columns", "4|8|16",
           "decode: value columns per warp (default: a kernel per width)");
  p.flag("resource-usage",
         "with --emit cubin: print each kernel's registers, spills, shared "
         "memory and CTAs per multiprocessor (sm_90) to stderr");
  p.option("shape", "B,T,H[,HV]",
           "plan for a call of this shape on a GPU of --arch and --sm-count: "
           "the schedule it gets untuned (and its heads)");
  p.option("sm-count", "N",
           "with --shape: the GPU's multiprocessors (default: 132, an H100's "
           "or H200's)");
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
  // Binary on a terminal garbles it and helps nobody (as gzip and nvcc
  // refuse); refused before any work.
  if (emit == "cubin" && (p.get("o").empty() || p.get("o") == "-") &&
      isatty(fileno(stdout)))
    throw UsageError("refusing to write a cubin to a terminal: give -o FILE "
                     "or redirect standard output");
  std::string arch =
      emit == "ptx" || emit == "cubin" ? checkedArch(p.get("arch")) : "";
  if (p.has("backward") && p.has("decode"))
    throw UsageError("--backward and --decode name two kernels: give one");
  if (p.has("backward") && p.has("shape"))
    throw UsageError("--shape plans a forward call; the backward's default "
                     "layout does not depend on the call's shape (drop "
                     "--shape, or give --chunk-size, --tile-v and --warps)");
  if (p.has("sm-count") && !p.has("shape"))
    throw UsageError("--sm-count describes the GPU a call of --shape runs "
                     "on: add --shape B,T,H[,HV]");
  Spec spec = loadSpec(p.positional().front(), p);
  if (p.has("backward"))
    return compileBackward(p, spec, emit, arch);
  ScheduleOptions schedule = p.has("shape")
                                 ? scheduleForCall(p, spec)
                                 : scheduleFromOptions(p, spec);

  if (emit == "mlir") {
    mlir::MLIRContext ctx;
    std::string error;
    writeModule(p, buildScheduledProgram(ctx, spec, schedule, error), error);
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
  if (chunkPlan && chunkPlan->needsSm90a && arch.rfind("sm_90", 0) != 0)
    throw UsageError("--arch " + arch +
                     ": this schedule runs Hopper's warpgroup products "
                     "(wgmma), which need sm_90a; add --mma warp for the "
                     "mma.sync kernels of other GPUs");
  if (chunkPlan)
    arch = kernelArch(*chunkPlan, arch);
  writeCompiled(p, source, emit, arch, chunkPlan ? chunkPlan->threads : 0,
                [&](const std::string &kernel) {
                  return chunkPlan ? chunkSharedBytes(*chunkPlan, kernel) : -1;
                });
  return 0;
}

} // namespace lina::cli
