//===- TuneCApiUnsavedTest.cpp - lina_tune with an unusable cache ------===//
//
// Part of lina. A process of its own (the process's cache is opened once,
// at the first use): LINA_CACHE_DIR names a directory that cannot be made,
// so the cache lives in memory. The tune still finds its winner, and says
// that later processes will not see it, and why.
//
//===----------------------------------------------------------------------===//
#include "lina/lina_c.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace {

TEST(TuneCApiUnsaved, AnUnusableCacheIsReportedNotSaved) {
  setenv("LINA_CACHE_DIR", "/dev/null/x", 1);
  char *spec = nullptr;
  ASSERT_EQ(lina_preset_spec("kda", 64, 64, 2, 2, "bf16", &spec), LINA_OK);
  lina_tune_result r;
  lina_status status = lina_tune(spec, 1, 256, LINA_TUNE_FAST, 0, 1, &r);
  lina_free_string(spec);
  ASSERT_EQ(status, LINA_OK) << lina_last_error();
  EXPECT_GT(r.time_ms, 0);
  EXPECT_GT(r.tried, 0);
  EXPECT_EQ(r.saved, 0);
  EXPECT_NE(std::string(r.not_saved_reason)
                .find("cannot use the cache directory /dev/null/x"),
            std::string::npos)
      << r.not_saved_reason;
}

} // namespace
