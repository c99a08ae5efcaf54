//===- TuneTestUtil.h - Shared helpers of the tuner tests -------*- C++ -*-===//
//
// Part of lina. A temporary directory for cache files, a spec and a tuning
// key to tune under, and backward schedules to tune.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TEST_UNIT_TUNE_TUNETESTUTIL_H
#define LINA_TEST_UNIT_TUNE_TUNETESTUTIL_H

#include "lina/Autotune/Cache.h"
#include "lina/Autotune/TunedLookup.h"
#include "lina/Codegen/KernelPlanner.h"

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace lina::tunetest {

class TempDir {
public:
  TempDir() {
    const char *base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base && *base ? base : "/tmp") + "/lina-tune-test-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()))
      dir = buf.data();
  }
  ~TempDir() {
    std::error_code ec;
    if (!dir.empty())
      std::filesystem::remove_all(dir, ec);
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  std::string file(const std::string &name) const { return dir + "/" + name; }

private:
  std::string dir;
};

inline cache::CacheOptions quiet() {
  cache::CacheOptions o;
  o.printWarnings = false;
  return o;
}

/// A gdn-like spec: 128-dim heads, so tile-v runs 16..128.
inline Spec testSpec() {
  Spec s;
  s.name = "gdn";
  s.decay = DecayKind::Scalar;
  s.update = UpdateRule::Delta;
  s.beta = BetaSource::Given;
  s.qkL2Norm = true;
  s.keyDim = s.valueDim = 128;
  s.heads = s.valueHeads = 8;
  return s;
}

inline GpuIdentity testGpu() { return {"NVIDIA H200", "sm_90", 132, "13.0"}; }

/// The backward schedule of chunk size `chunk`, tile-v `tile` and `warps`.
inline BackwardScheduleOptions backwardSchedule(int64_t chunk, int64_t tile,
                                                int64_t warps) {
  BackwardScheduleOptions s;
  s.chunkSize = chunk;
  s.tileV = tile;
  s.warps = warps;
  return s;
}

/// A stand-in for NVRTC over plans of type `Plan` (a decode or backward
/// plan, cached by source): counts its calls, fails when told to, and
/// returns bytes that start like a cubin and differ by arch and source.
template <typename Plan> struct CountingCompile {
  int calls = 0;
  bool fail = false;
  std::function<Expected<std::string>(const Plan &, const std::string &)>
  fn() {
    return [this](const Plan &plan,
                  const std::string &arch) -> Expected<std::string> {
      ++calls;
      if (fail)
        return Status::error(StatusCode::CompileError, "nvrtc said no");
      // Binary bytes, NULs included, as a cubin has.
      return std::string("\x7f"
                         "ELF\0\2",
                         6) +
             arch + plan.source;
    };
  }
};

} // namespace lina::tunetest

#endif // LINA_TEST_UNIT_TUNE_TUNETESTUTIL_H
