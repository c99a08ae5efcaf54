//===- KeysTest.cpp - Cache keys, shape buckets, cache location ---------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "CacheTestUtil.h"

#include "lina/Autotune/CacheKeys.h"
#include "lina/Autotune/CacheLocation.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

#include <climits>
#include <cmath>

using namespace lina;
using namespace lina::cache;
using namespace lina::cache::test;

namespace {

TEST(ShapeBucket, BhIsBucketedByPowersOfTwo) {
  auto bh = [](int64_t b, int64_t h) {
    ShapeBucket s = shapeBucket(b, 100, h);
    return std::make_pair(s.bhMin, s.bhMax);
  };
  EXPECT_EQ(bh(1, 1), std::make_pair(int64_t(1), int64_t(1)));
  EXPECT_EQ(bh(1, 2), std::make_pair(int64_t(2), int64_t(2)));
  EXPECT_EQ(bh(3, 1), std::make_pair(int64_t(3), int64_t(4)));
  EXPECT_EQ(bh(2, 2), std::make_pair(int64_t(3), int64_t(4)));
  EXPECT_EQ(bh(5, 1), std::make_pair(int64_t(5), int64_t(8)));
  EXPECT_EQ(bh(2, 8), std::make_pair(int64_t(9), int64_t(16)));
  EXPECT_EQ(bh(17, 1), std::make_pair(int64_t(17), int64_t(32)));
  EXPECT_EQ(bh(64, 64), std::make_pair(int64_t(2049), int64_t(4096)));
  EXPECT_EQ(bh(4097, 1), std::make_pair(int64_t(4097), int64_t(0)));
  EXPECT_EQ(bh(1000, 1000), std::make_pair(int64_t(4097), int64_t(0)));
  // No overflow on absurd inputs, and nonsense counts as 1.
  EXPECT_EQ(bh(INT64_MAX, INT64_MAX),
            std::make_pair(int64_t(4097), int64_t(0)));
  EXPECT_EQ(bh(0, -5), std::make_pair(int64_t(1), int64_t(1)));
}

TEST(ShapeBucket, TRanges) {
  auto t = [](int64_t t) {
    ShapeBucket s = shapeBucket(1, t, 1);
    return std::make_pair(s.tMin, s.tMax);
  };
  EXPECT_EQ(t(1), std::make_pair(int64_t(1), int64_t(256)));
  EXPECT_EQ(t(256), std::make_pair(int64_t(1), int64_t(256)));
  EXPECT_EQ(t(257), std::make_pair(int64_t(257), int64_t(1024)));
  EXPECT_EQ(t(1024), std::make_pair(int64_t(257), int64_t(1024)));
  EXPECT_EQ(t(1025), std::make_pair(int64_t(1025), int64_t(4096)));
  EXPECT_EQ(t(4096), std::make_pair(int64_t(1025), int64_t(4096)));
  EXPECT_EQ(t(4097), std::make_pair(int64_t(4097), int64_t(16384)));
  EXPECT_EQ(t(16384), std::make_pair(int64_t(4097), int64_t(16384)));
  EXPECT_EQ(t(16385), std::make_pair(int64_t(16385), int64_t(0)));
  EXPECT_EQ(t(1 << 30), std::make_pair(int64_t(16385), int64_t(0)));
  EXPECT_EQ(t(0), std::make_pair(int64_t(1), int64_t(256)));
}

TEST(ShapeBucket, Text) {
  EXPECT_EQ(shapeBucket(2, 1000, 8).str(), "bh=9..16,t=257..1024");
  EXPECT_EQ(shapeBucket(1, 1, 1).str(), "bh=1..1,t=1..256");
  EXPECT_EQ(shapeBucket(100, 20000, 100).str(), "bh=4097..,t=16385..");
  // Nearby shapes share a bucket; the tuning result is reused for both.
  EXPECT_EQ(shapeBucket(2, 2000, 8), shapeBucket(4, 4000, 4));
  EXPECT_FALSE(shapeBucket(2, 2000, 8) == shapeBucket(2, 5000, 8));
}

TEST(CubinKey, EveryFieldCounts) {
  CubinKeyParts base{
      "__global__ void k() {}", {"-DCHUNK=64"}, "sm_90", "12.8", "0.1.0"};
  std::string key = cubinKey(base);
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(key.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_EQ(cubinKey(base), key);
  CubinKeyParts p = base;
  p.source += " ";
  EXPECT_NE(cubinKey(p), key);
  p = base;
  p.options.push_back("-lineinfo");
  EXPECT_NE(cubinKey(p), key);
  p = base;
  p.arch = "sm_90a";
  EXPECT_NE(cubinKey(p), key);
  p = base;
  p.nvrtcVersion = "12.9";
  EXPECT_NE(cubinKey(p), key);
  p = base;
  p.linaVersion = "0.2.0";
  EXPECT_NE(cubinKey(p), key);
}

TEST(CubinKey, FieldBoundariesAreUnambiguous) {
  CubinKeyParts a{"s", {"-a", "b"}, "sm_90", "12.8", "x"};
  CubinKeyParts b{"s", {"-a b"}, "sm_90", "12.8", "x"};
  CubinKeyParts c{"s", {"-ab"}, "sm_90", "12.8", "x"};
  CubinKeyParts d{"s-a", {"b"}, "sm_90", "12.8", "x"};
  EXPECT_NE(cubinKey(a), cubinKey(b));
  EXPECT_NE(cubinKey(a), cubinKey(c));
  EXPECT_NE(cubinKey(b), cubinKey(c));
  EXPECT_NE(cubinKey(a), cubinKey(d));
}

TEST(TuningKey, EveryFieldCounts) {
  TuningKey base = testKey();
  std::string d = base.digest();
  EXPECT_EQ(d.size(), 64u);
  std::vector<TuningKey> variants(8, base);
  variants[0].spec += " ";
  variants[1].gpuName = "NVIDIA H100";
  variants[2].arch = "sm_90a";
  variants[3].smCount = 114;
  variants[4].driverVersion = "12090";
  variants[5].nvrtcVersion = "12.9";
  variants[6].linaVersion = "0.2.0";
  variants[7].shapeBucket = "bh=1..1,t=1..256";
  for (size_t i = 0; i < variants.size(); ++i)
    EXPECT_NE(variants[i].digest(), d) << "field " << i;
  EXPECT_EQ(base.linaVersion, std::string(linaVersion()));
}

TEST(CanonicalSpec, IgnoresWhatDoesNotChangeTheKernel) {
  Spec gdn = findPreset("gdn")->spec;
  std::string text = canonicalSpecText(gdn);
  EXPECT_EQ(text.find("gdn"), std::string::npos) << text;
  EXPECT_NE(text.find("decay=scalar"), std::string::npos) << text;
  EXPECT_NE(text.find("update=delta"), std::string::npos) << text;
  EXPECT_EQ(text.find('\n'), std::string::npos);

  Spec renamed = gdn;
  renamed.name = "my_gdn";
  EXPECT_EQ(canonicalSpecText(renamed), text);
  Spec explicitScale = gdn;
  explicitScale.scale = 1.0 / std::sqrt(double(gdn.keyDim));
  EXPECT_EQ(canonicalSpecText(explicitScale), text);
  Spec unusedBound = gdn;
  unusedBound.gateLowerBound = -7.0; // gdn's gate is softplus
  EXPECT_EQ(canonicalSpecText(unusedBound), text);

  Spec other = gdn;
  other.dtype = DType::F16;
  EXPECT_NE(canonicalSpecText(other), text);
  other = gdn;
  other.scale = 0.5;
  EXPECT_NE(canonicalSpecText(other), text);
  other = gdn;
  other.gate = GateSource::LowerBound;
  std::string withBound = canonicalSpecText(other);
  EXPECT_NE(withBound.find("gate_lower_bound=-5"), std::string::npos)
      << withBound;
  other.gateLowerBound = -7.0;
  EXPECT_NE(canonicalSpecText(other), withBound);
}

/// Sets or unsets an environment variable for one scope.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const char *value) : name(name) {
    const char *old = std::getenv(name);
    if (old)
      saved = old;
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~ScopedEnv() {
    if (saved)
      setenv(name, saved->c_str(), 1);
    else
      unsetenv(name);
  }

private:
  const char *name;
  std::optional<std::string> saved;
};

TEST(CacheLocation, Precedence) {
  TempDir tmp;
  ScopedEnv home("HOME", tmp.file("home").c_str());
  {
    ScopedEnv lina("LINA_CACHE_DIR", tmp.file("explicit/").c_str());
    ScopedEnv xdg("XDG_CACHE_HOME", tmp.file("xdg").c_str());
    CacheLocation loc = findCacheLocation();
    EXPECT_TRUE(loc.ok()) << loc.error;
    EXPECT_EQ(loc.path, tmp.file("explicit/lina.db"));
  }
  {
    ScopedEnv lina("LINA_CACHE_DIR", "");
    ScopedEnv xdg("XDG_CACHE_HOME", tmp.file("xdg").c_str());
    EXPECT_EQ(findCacheLocation().path, tmp.file("xdg/lina/lina.db"));
  }
  {
    ScopedEnv lina("LINA_CACHE_DIR", nullptr);
    ScopedEnv xdg("XDG_CACHE_HOME", "relative/ignored");
    CacheLocation loc = findCacheLocation();
    EXPECT_EQ(loc.path, tmp.file("home/.cache/lina/lina.db"));
    EXPECT_TRUE(loc.ok()) << loc.error;
    // Created, private to the user.
    struct stat st;
    ASSERT_EQ(stat(loc.directory.c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0700u);
  }
}

TEST(CacheLocation, AFileInTheWay) {
  TempDir tmp;
  writeFile(tmp.file("plain"), "x");
  ScopedEnv lina("LINA_CACHE_DIR", tmp.file("plain").c_str());
  CacheLocation loc = findCacheLocation();
  EXPECT_FALSE(loc.ok());
  EXPECT_NE(loc.error.find("is not a directory"), std::string::npos)
      << loc.error;
  ScopedEnv lina2("LINA_CACHE_DIR", tmp.file("plain/below").c_str());
  EXPECT_FALSE(findCacheLocation().ok());
}

} // namespace
