//===- RecordFlagsTest.cpp - The split scan waits for published records -===//
//
// Part of lina. Where a split scan leaves multiprocessors idle, forward()
// runs the prepare kernel beside it (ChunkKernel.h, runsPrepareBesideScan):
// the prepare kernel publishes each record once written (publish_record)
// and the scan reads a chunk's record only after await_chunk has seen it
// published. The GPU suite checks the results both ways; this pins where
// the kernels say so, which no result can show when the prepare kernel
// happens to run ahead.
//
//===----------------------------------------------------------------------===//
#include "KernelText.h"

#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

using namespace lina;
using lina::test::count;
using lina::test::kernelText;
using lina::test::plan;
using lina::test::scanKernel;

namespace {

Spec d128(const char *name) {
  Spec spec = findPreset(name)->spec;
  spec.keyDim = spec.valueDim = 128;
  return spec;
}

/// The statements of `kernel` after its last `what`.
std::string after(const std::string &kernel, const std::string &what) {
  size_t at = kernel.rfind(what);
  return at == std::string::npos ? "" : kernel.substr(at + what.size());
}

// The flag is the prepare kernel's last store: anything written after it
// could be read by a scan that saw the flag.
TEST(RecordFlags, PrepareKernelsPublishAfterTheirLastStore) {
  for (const Preset &preset : presets()) {
    SCOPED_TRACE(preset.name);
    Spec spec = preset.spec;
    spec.keyDim = spec.valueDim = 128;
    KernelPlan p = plan(spec, defaultSchedule(spec));
    if (p.prepareKernel.empty())
      continue;
    std::string prepare = kernelText(p, p.prepareKernel);
    EXPECT_EQ(count(prepare, "publish_record(p);"), 1u) << prepare;
    std::string rest = after(prepare, "publish_record(p);");
    EXPECT_EQ(rest.find_first_not_of(" \n}"), std::string::npos)
        << "statements after publish_record:" << rest;
  }
}

// A prefetching scan waits inside fetch_chunk, before the first copy of
// the chunk's record.
TEST(RecordFlags, PrefetchingScansWaitBeforeFetchingARecord) {
  for (const char *name : {"gdn", "mamba2", "kda", "gla", "rwkv7"}) {
    SCOPED_TRACE(name);
    Spec spec = d128(name);
    for (int64_t tileV : {int64_t(32), int64_t(128)}) {
      ScheduleOptions schedule = defaultSchedule(spec);
      if (tileV == 128 && spec.update == UpdateRule::DPLR)
        continue; // rwkv7 keeps its columns split
      schedule.tileV = tileV;
      std::string scan = scanKernel(plan(spec, schedule));
      size_t fetch = scan.find("auto fetch_chunk");
      ASSERT_NE(fetch, std::string::npos) << scan;
      size_t wait = scan.find("await_chunk(t0);", fetch);
      size_t firstRecord = scan.find("(record + ", fetch);
      ASSERT_NE(firstRecord, std::string::npos) << scan;
      EXPECT_LT(wait, firstRecord) << scan;
      EXPECT_EQ(count(scan, "await_chunk(t0);"), 1u) << scan;
    }
  }
}

// Without prefetch the scan loads a chunk's record in the chunk's own
// iteration, so it waits at the top of that iteration.
TEST(RecordFlags, ScansWithoutPrefetchWaitAtTheChunksTop) {
  Spec spec = d128("gdn");
  ScheduleOptions schedule = defaultSchedule(spec);
  schedule.prefetch = false;
  std::string scan = scanKernel(plan(spec, schedule));
  size_t loop = scan.find("for (i64 t0 = begin;");
  ASSERT_NE(loop, std::string::npos) << scan;
  size_t wait = scan.find("await_chunk(t0);", loop);
  size_t firstRecord = scan.find("p.chunk_data + ", loop);
  ASSERT_NE(wait, std::string::npos) << scan;
  EXPECT_LT(wait, firstRecord) << scan;
}

// Kernels that read no record neither wait nor publish.
TEST(RecordFlags, FusedAndMaterializedKernelsHaveNoFlags) {
  for (Strategy strategy : {Strategy::FusedScan, Strategy::Materialize}) {
    SCOPED_TRACE(toString(strategy));
    Spec spec = d128("gdn");
    ScheduleOptions schedule = defaultSchedule(spec);
    schedule.strategy = strategy;
    KernelPlan p = plan(spec, schedule);
    std::string kernels = p.source.substr(p.source.find("__launch_bounds__"));
    EXPECT_EQ(count(kernels, "await_chunk"), 0u);
    EXPECT_EQ(count(kernels, "publish_record"), 0u);
  }
}

} // namespace
