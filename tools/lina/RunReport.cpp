//===- RunReport.cpp - What `lina run` prints --------------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "RunReport.h"
#include "SpecJson.h"

#include "lina/Autotune/ScheduleKnobs.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>

namespace lina::cli {

namespace {

/// "final state 1.2e-03", or that the spec keeps none.
std::string describeStateError(std::optional<double> error) {
  if (!error)
    return "no final state in the spec";
  char text[48];
  std::snprintf(text, sizeof text, "final state %.3e", *error);
  return text;
}

} // namespace

void RunReport::spec(const Spec &spec) {
  object["spec"] = specToJson(spec);
  if (!json)
    std::printf("spec        %s (decay %s, update %s, %s)\n", spec.name.c_str(),
                toString(spec.decay), toString(spec.update),
                toString(spec.dtype));
}

void RunReport::shape(const ProblemShape &shape, const Spec &spec,
                      const std::vector<int64_t> &cuSeqlens) {
  llvm::json::Value lengths = nullptr;
  if (!cuSeqlens.empty()) {
    llvm::json::Array array;
    for (size_t i = 0; i + 1 < cuSeqlens.size(); ++i)
      array.push_back(cuSeqlens[i + 1] - cuSeqlens[i]);
    lengths = std::move(array);
  }
  object["shape"] = llvm::json::Object{
      {"batch", shape.batch},        {"seq_len", shape.seqLen},
      {"heads", spec.heads},         {"value_heads", spec.valueHeads},
      {"key_dim", spec.keyDim},      {"value_dim", spec.valueDim},
      {"varlen", std::move(lengths)}};
  if (!json)
    std::printf("shape       B=%lld T=%lld H=%lld HV=%lld dk=%lld dv=%lld%s\n",
                (long long)shape.batch, (long long)shape.seqLen,
                (long long)spec.heads, (long long)spec.valueHeads,
                (long long)spec.keyDim, (long long)spec.valueDim,
                spec.varlen ? " (varlen)" : "");
}

void RunReport::cpuDevice(int64_t chunkSize, UpdateRule compiled) {
  object["device"] =
      llvm::json::Object{{"kind", "cpu"},
                         {"precision", "float64"},
                         {"chunk_size", chunkSize},
                         {"compiled_update", toString(compiled)}};
  if (json)
    return;
  std::printf("compiled    update %s after lina-specialize\n",
              toString(compiled));
  std::printf("device      cpu (float64), chunk size %lld\n",
              (long long)chunkSize);
}

void RunReport::gpuDevice(const GpuRunFacts &f) {
  const LoadReport &load = f.load;
  // Kernel creation plus the first call (launch and wait); the upload in
  // between is the caller's business, not lina's.
  double firstCall = load.totalMs + f.launchMs;
  const char *cache = !load.cacheEnabled ? "off"
                      : load.cacheHit    ? "hit"
                                         : "miss";
  llvm::json::Object device{{"kind", "gpu"},
                            {"name", f.device.name},
                            {"arch", f.device.arch},
                            {"chunk_size", f.plan.chunkSize},
                            {"tile_v", f.plan.tileV},
                            {"threads", f.plan.threads},
                            {"strategy", toString(f.plan.strategy)},
                            {"schedule", describe(load.schedule)},
                            {"schedule_source", load.scheduleSource},
                            {"cache", cache}};
  object["device"] = std::move(device);
  object["timing"] = llvm::json::Object{
      {"median_ms", f.medianMs},
      {"calls", f.repeats},
      {"first_call_ms", firstCall},
      {"first_call_with_startup_ms", f.startupMs + firstCall},
      {"first_call_parts_ms",
       llvm::json::Object{{"device", load.deviceMs},
                          {"nvrtc_version", load.nvrtcMs},
                          {"tuned_lookup", load.tunedMs},
                          {"cache_lookup", load.lookupMs},
                          {"codegen", load.planMs},
                          {"nvrtc", load.compileMs},
                          {"store", load.storeMs},
                          {"load", load.loadMs},
                          {"launch", f.launchMs}}}};
  if (json)
    return;
  std::printf("device      %s (%s), chunk size %lld, tile-v %lld, %lld "
              "threads, %s\n",
              f.device.name.c_str(), f.device.arch.c_str(),
              (long long)f.plan.chunkSize, (long long)f.plan.tileV,
              (long long)f.plan.threads, toString(f.plan.strategy));
  std::printf("schedule    %s (%s)\n", describe(load.schedule).c_str(),
              load.scheduleSource.c_str());
  std::printf("cache       %s\n",
              !load.cacheEnabled ? "off"
              : load.cacheHit    ? "hit: cubin loaded without codegen or NVRTC"
                                 : "miss: generated, compiled and stored");
  std::printf("first call  %.1f ms to a finished first launch (device %.1f, "
              "nvrtc version %.1f, tuned lookup %.1f, cache lookup %.1f, "
              "codegen %.1f, nvrtc %.1f, store %.1f, load %.1f, launch %.1f); "
              "%.1f ms with the process start-up\n",
              firstCall, load.deviceMs, load.nvrtcMs, load.tunedMs,
              load.lookupMs, load.planMs, load.compileMs, load.storeMs,
              load.loadMs, f.launchMs, f.startupMs + firstCall);
  std::printf("time        %.3f ms median of %d calls (CUDA events)\n",
              f.medianMs, f.repeats);
}

void RunReport::errors(double output, std::optional<double> state,
                       double tolerance, bool onGpu) {
  object["errors"] = llvm::json::Object{
      {"output", output},
      {"final_state", state ? llvm::json::Value(*state) : nullptr},
      {"tolerance", tolerance},
      {"reference", "float64"}};
  if (!json)
    std::printf("rel. error  output %.3e, %s (tolerance %.0e%s)\n", output,
                describeStateError(state).c_str(), tolerance,
                onGpu ? ", float64 reference" : "");
}

int RunReport::verdict(bool pass) { return finish(pass); }

int RunReport::timed() { return finish(std::nullopt); }

int RunReport::referenceOverflowed() {
  std::fprintf(stderr,
               "lina run: error: the float64 reference overflowed: the "
               "recurrence diverges on these random inputs (a transition "
               "with norm above 1, such as a delta rule on unnormalised keys "
               "with beta above 1), so there is no error to measure\n");
  object["failure"] = "the float64 reference overflowed";
  return finish(false);
}

int RunReport::finish(std::optional<bool> pass) {
  if (!json) {
    if (pass)
      std::printf("%s\n", *pass ? "PASS" : "FAIL");
  } else {
    // Every key is present in every report: null where a run has none.
    for (const char *key : {"device", "timing", "errors", "failure"})
      if (!object.get(key))
        object[key] = nullptr;
    object["pass"] = pass ? llvm::json::Value(*pass) : nullptr;
    std::string text;
    llvm::raw_string_ostream os(text);
    os << llvm::formatv("{0:2}", llvm::json::Value(std::move(object)));
    std::printf("%s\n", os.str().c_str());
  }
  return pass.value_or(true) ? 0 : 1;
}

} // namespace lina::cli
