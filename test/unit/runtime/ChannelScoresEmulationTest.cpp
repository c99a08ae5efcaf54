//===- ChannelScoresEmulationTest.cpp - Per-channel scores, emulated ----===//
//
// Part of lina. The per-channel prepare kernels' decay product
// (WarpgroupChannels.cuh's wg_channel_gates and wg_channel_scores) on the
// emulated device, every kept element against a float64 sum over the
// channels, each within a fraction of its own terms' magnitude: so an
// element of a block far below the diagonal, which strong decays make
// small next to the diagonal's, is checked as closely as those. Below
// 2^-30 of the operands' product undecayed, a term may flush to zero. The
// scores whose left rows decay to the row before (DPLR's low-rank ones,
// strictly masked) are checked the same way.
//
//===----------------------------------------------------------------------===//
#include "EmulationHelpers.h"

#include "gtest/gtest.h"

#include <cmath>
#include <random>
#include <string>

using namespace lina;
using namespace lina::cuda;
using namespace lina::test;

namespace {

constexpr int kRows = 64, kKeys = 64;

// Each kernel's start, prepended to its source: a and b (fp32 [64][K],
// rows past n zero) into two of sm's mma_t tiles at at(r, c), then the
// running sums of g's log gates, the midpoints and the refusal bits.
const char *kScoresInputs = R"(
template <int K, int Tiles, typename At>
__device__ void scores_inputs(lina::wg_channel_smem<K, Tiles> &sm,
                              unsigned char *aTile, unsigned char *bTile,
                              const float *a, const float *b, const float *g,
                              int n, At at) {
  using namespace lina;
  for (int i = threadIdx.x; i < 64 * K; i += kThreads) {
    const int r = i / K, c = i % K;
    from_float(r < n ? a[i] : 0.0f, *(mma_t *)(aTile + at(r, c)));
    from_float(r < n ? b[i] : 0.0f, *(mma_t *)(bTile + at(r, c)));
  }
  wg_channel_gates_copy<K>(sm, g, K, n);
  copies_issued();
  copies_landed<0>();
  __syncthreads();
  wg_channel_gates<K, true>(sm, n, false,
                            [&](int r, int c, float x) { return x; });
}
)";

// out[t][s] = the scores of a (rows t) and b (rows s) under the running
// sums of g (natural log gates, [row][channel]) over the first n rows,
// inclusive of the diagonal; with `before`, a's rows decayed to the row
// before and the diagonal masked; out[64 * 64] = the refusal bits.
const std::string kScores = kScoresInputs + std::string(R"(
extern "C" __global__ void channel_scores(const float *a, const float *b,
                                          const float *g, int n, int before,
                                          float *out) {
  using namespace lina;
  constexpr int K = 64;
  LINA_DYNAMIC_SHARED_ALIGNED(unsigned char, dynamic, 16);
  wg_channel_smem<K> &sm = *(wg_channel_smem<K> *)dynamic;
  scores_inputs(sm, sm.tiles[0], sm.tiles[1], a, b, g, n,
                [](int r, int c) { return wg_offset(r, c); });
  auto put = [&](int t, int s, float x0, float x1) {
    out[t * 64 + s] = x0;
    out[t * 64 + s + 1] = x1;
  };
  auto one = [](int, int) { return 1.0f; };
  wg_channel_right<K>(sm, sm.tiles[1]);
  if (before)
    wg_channel_scores<K>(sm, sm.tiles[1], n,
                         wg_box_before(sm.tiles[0], true, one, put));
  else
    wg_channel_scores<K>(sm, sm.tiles[1], n,
                         wg_box(sm.tiles[0], false, one, put));
  if (threadIdx.x == 0)
    out[64 * 64] = (float)sm.refused;
}
LINA_KERNEL_ENTRY(channel_scores)
)");

// The delta rule's P and A as the d128 prepare kernel sums them: two boxes
// of bf16 products against b's rows, P = a b^T (s <= t) into out, A = b
// b^T (s < t) into a's tile as it goes (in the tile's halves, as the solve
// reads it), then copied to out + 64 * 64; out[2 * 64 * 64] = the refusal
// bits.
const std::string kScoresTogether = kScoresInputs + std::string(R"(
extern "C" __global__ void channel_scores_together(const float *a,
                                                   const float *b,
                                                   const float *g, int n,
                                                   float *out) {
  using namespace lina;
  constexpr int K = 128;
  LINA_DYNAMIC_SHARED_ALIGNED(unsigned char, dynamic, 16);
  wg_channel_smem<K> &sm = *(wg_channel_smem<K> *)dynamic;
  // d128 tiles: two swizzled 64-column halves.
  scores_inputs(sm, sm.tiles[0], sm.tiles[1], a, b, g, n, [](int r, int c) {
    return c / 64 * 8192 + r * 128 + ((((c % 64) >> 3) ^ (r & 7)) << 4) +
           (c & 7) * 2;
  });
  float *matrix = (float *)sm.tiles[0];
  auto one = [](int, int) { return 1.0f; };
  wg_channel_right<K>(sm, sm.tiles[1]);
  wg_channel_scores<K, true>(
      sm, sm.tiles[1], n,
      wg_box(sm.tiles[0], false, one,
             [&](int t, int s, float x0, float x1) {
               out[t * 64 + s] = x0;
               out[t * 64 + s + 1] = x1;
             }),
      wg_box(sm.tiles[1], true, one, [&](int t, int s, float x0, float x1) {
        *(f32x2 *)(matrix + wg_halves_at(t, s)) = f32x2{x0, x1};
      }));
  for (int i = threadIdx.x; i < 64 * 64; i += kThreads)
    out[64 * 64 + i] = matrix[wg_halves_at(i / 64, i % 64)];
  if (threadIdx.x == 0)
    out[2 * 64 * 64] = (float)sm.refused;
}
LINA_KERNEL_ENTRY(channel_scores_together)
)");

// A DPLR chunk's scores against one right operand as its prepare kernel
// sums them: two boxes of tf32 products in fp32 left operands (four
// tiles), P = a b^T (s <= t) and A = a b^T with a's rows decayed to the
// row before (s < t), into out and out + 64 * 64; out[2 * 64 * 64] = the
// refusal bits.
const std::string kScoresMixed = kScoresInputs + std::string(R"(
extern "C" __global__ void channel_scores_mixed(const float *a,
                                                const float *b,
                                                const float *g, int n,
                                                float *out) {
  using namespace lina;
  constexpr int K = 64;
  LINA_DYNAMIC_SHARED_ALIGNED(unsigned char, dynamic, 16);
  wg_channel_smem<K, 4> &sm = *(wg_channel_smem<K, 4> *)dynamic;
  scores_inputs(sm, sm.tiles[2], sm.tiles[3], a, b, g, n,
                [](int r, int c) { return wg_offset(r, c); });
  auto one = [](int, int) { return 1.0f; };
  wg_channel_right<K>(sm, sm.tiles[3]);
  wg_channel_scores<K>(
      sm, sm.tiles[3], n,
      wg_box(sm.tiles[2], false, one,
             [&](int t, int s, float x0, float x1) {
               out[t * 64 + s] = x0;
               out[t * 64 + s + 1] = x1;
             }),
      wg_box_before(sm.tiles[2], true, one,
                    [&](int t, int s, float x0, float x1) {
                      out[64 * 64 + t * 64 + s] = x0;
                      out[64 * 64 + t * 64 + s + 1] = x1;
                    }));
  if (threadIdx.x == 0)
    out[2 * 64 * 64] = (float)sm.refused;
}
LINA_KERNEL_ENTRY(channel_scores_mixed)
)");

/// Checks got(t, s) for every kept element (s <= t < n) against the float64
/// scores of a and b ([row][keys] values) under the running sums of the log
/// gates g ([row][keys]) over the first n rows: within `tolerance` of the
/// sum of its terms' magnitudes, or of 2^-30 of the operands' product.
/// With `before`, a's rows decay to the row before (the sums at t - 1, 0
/// before the first) and the diagonal must be zero.
template <typename Got>
void expectScores(Got got, const std::vector<double> &a,
                  const std::vector<double> &b, const std::vector<float> &g,
                  int keys, int n, double tolerance, bool before = false,
                  bool strict = false) {
  std::vector<double> sums(kRows * keys);
  for (int c = 0; c < keys; ++c) {
    double run = 0.0;
    for (int r = 0; r < kRows; ++r) {
      run += r < n ? g[r * keys + c] : 0.0;
      sums[r * keys + c] = run;
    }
  }
  int failures = 0;
  for (int t = 0; t < n; ++t)
    for (int s = 0; s <= t; ++s) {
      if ((before || strict) && s == t) {
        EXPECT_EQ(got(t, s), 0.0) << "t " << t;
        continue;
      }
      double want = 0.0, magnitude = 0.0, undecayed = 0.0;
      for (int c = 0; c < keys; ++c) {
        const double left = before ? (t > 0 ? sums[(t - 1) * keys + c] : 0.0)
                                   : sums[t * keys + c];
        const double product = a[t * keys + c] * b[s * keys + c],
                     term = product * std::exp(left - sums[s * keys + c]);
        want += term;
        magnitude += std::fabs(term);
        undecayed += std::fabs(product);
      }
      const double x = got(t, s);
      if (!(std::fabs(x - want) <=
            tolerance * magnitude + std::ldexp(undecayed, -30)) &&
          failures++ < 5)
        ADD_FAILURE() << "t " << t << ", s " << s << ": got " << x << ", want "
                      << want << " (terms' magnitude " << magnitude << ")";
    }
}

/// Random scores' inputs: a and b of kRows x keys bf16 values (as floats
/// to upload and as doubles for the reference), log gates drawn from [lo,
/// hi] a token and channel.
struct RandomInputs {
  std::vector<float> a, b, g;
  std::vector<double> av, bv;
  RandomInputs(int keys, unsigned seed, double lo, double hi)
      : a(kRows * keys), b(kRows * keys), g(kRows * keys), av(kRows * keys),
        bv(kRows * keys) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> unit(-1.0f, 1.0f), gate(lo, hi);
    for (int i = 0; i < kRows * keys; ++i) {
      av[i] = asBf16(unit(rng));
      bv[i] = asBf16(unit(rng));
      a[i] = static_cast<float>(av[i]);
      b[i] = static_cast<float>(bv[i]);
    }
    for (float &x : g)
      x = gate(rng);
  }
};

/// Loads `source`'s kernel `name` on the emulated Hopper with
/// `sharedBytes` of dynamic shared memory, uploads `in` and an output of
/// `outFloats` NaNs, and launches it by launch(kernel, config, a, b, g,
/// out) (the kernel's own arguments between): the output, or nothing where
/// a step failed (a test failure says which).
template <typename Launch>
std::vector<float> runScores(const char *source, const char *name,
                             unsigned sharedBytes, const RandomInputs &in,
                             size_t outFloats, Launch launch) {
  Loaded scores;
  load(source, name, scores, kHopper);
  if (::testing::Test::HasFatalFailure())
    return {};
  scores.config.block.x = kHopper.threads;
  scores.config.sharedMemoryBytes = sharedBytes;
  Expected<DeviceBuffer> da = upload(in.a), db = upload(in.b),
                         dg = upload(in.g),
                         out = upload(std::vector<float>(outFloats, NAN));
  EXPECT_TRUE(da.ok() && db.ok() && dg.ok() && out.ok());
  if (!(da.ok() && db.ok() && dg.ok() && out.ok()))
    return {};
  Status launched = launch(scores.kernel, scores.config, da->pointer(),
                           db->pointer(), dg->pointer(), out->pointer());
  EXPECT_TRUE(launched.ok()) << launched.message();
  if (!launched.ok())
    return {};
  return download(*out, outFloats);
}

/// The scores of random a and b (bf16 values) under log gates drawn from
/// [lo, hi] a token and channel, over n rows, as expectScores checks them
/// (the gates' running sums in fp32 alone put the direct sums 1e-4 off at
/// -800); with `before`, a's rows decayed to the row before. Returns the
/// refusal bits.
int checkScores(double lo, double hi, int n, double tolerance,
                bool before = false) {
  const RandomInputs in(kKeys, 5, lo, hi);
  std::vector<float> got = runScores(
      kScores.c_str(), "channel_scores", 64 * 1024, in, 64 * 64 + 1,
      [&](auto &kernel, auto &config, auto a, auto b, auto g, auto out) {
        return kernel.launchWith(config, a, b, g, n, before ? 1 : 0, out);
      });
  if (got.empty())
    return -1;
  expectScores([&](int t, int s) { return double(got[t * 64 + s]); }, in.av,
               in.bv, in.g, kKeys, n, tolerance, before);
  return static_cast<int>(got[64 * 64]);
}

} // namespace

namespace {

/// The two boxes of one pass of `source`'s kernel `name` (P into out, A
/// into out + 64 * 64, the refusal bits after them) from random a and b
/// (bf16 values) of `keys` channels drawn with `seed`, under log gates
/// drawn from [lo, hi], over n rows, each as expectScores checks it: P = a
/// b^T (s <= t); A the scores of b's rows (`aOfB`) or a's with b's, its left
/// rows decayed to the row before with `before`, strictly masked with
/// `strict`. Returns the refusal bits.
int checkTwoBoxes(const char *source, const char *name, unsigned sharedBytes,
                  int keys, unsigned seed, double lo, double hi, int n,
                  double tolerance, bool aOfB, bool before, bool strict) {
  const RandomInputs in(keys, seed, lo, hi);
  std::vector<float> got = runScores(
      source, name, sharedBytes, in, 2 * 64 * 64 + 1,
      [&](auto &kernel, auto &config, auto a, auto b, auto g, auto out) {
        return kernel.launchWith(config, a, b, g, n, out);
      });
  if (got.empty())
    return -1;
  {
    SCOPED_TRACE("P");
    expectScores([&](int t, int s) { return double(got[t * 64 + s]); }, in.av,
                 in.bv, in.g, keys, n, tolerance);
  }
  {
    SCOPED_TRACE(before ? "A, decayed to the row before" : "A");
    expectScores(
        [&](int t, int s) { return double(got[64 * 64 + t * 64 + s]); },
        aOfB ? in.bv : in.av, in.bv, in.g, keys, n, tolerance, before, strict);
  }
  return static_cast<int>(got[2 * 64 * 64]);
}

/// The delta rule's P and A summed together (kScoresTogether, K = 128; bf16
/// products: a tolerance of bf16's rounding of the operands with their
/// factors).
int checkScoresTogether(double lo, double hi, int n, double tolerance) {
  return checkTwoBoxes(kScoresTogether.c_str(), "channel_scores_together",
                       112 * 1024, 128, 11, lo, hi, n, tolerance, /*aOfB=*/true,
                       /*before=*/false, /*strict=*/true);
}

/// A DPLR chunk's P and A summed together (kScoresMixed, tf32 products).
int checkScoresMixed(double lo, double hi, int n, double tolerance) {
  return checkTwoBoxes(kScoresMixed.c_str(), "channel_scores_mixed", 80 * 1024,
                       kKeys, 7, lo, hi, n, tolerance, /*aOfB=*/false,
                       /*before=*/true, /*strict=*/false);
}

} // namespace

// A DPLR chunk's two scores against one right operand in one pass, one
// box's left rows at G_t and the other's at G_{t-1}: factored over mild
// gates and a partial chunk; where the row before alone refuses a block
// row (gates of about -9.7) both boxes are summed directly there, the box
// that would have factored as exactly; and directly everywhere where the
// blocks span too much.
TEST(ChannelScoresEmulation, ScoresDecayedDifferentlyTogether) {
  EXPECT_EQ(checkScoresMixed(-0.5, 0.0, 64, 4e-3), 0);
  EXPECT_EQ(checkScoresMixed(-0.5, 0.0, 45, 4e-3), 0);
  EXPECT_EQ(checkScoresMixed(-8.0, -6.0, 64, 4e-3), 0);
  EXPECT_EQ(checkScoresMixed(-9.8, -9.6, 64, 5e-4), 0xf00);
  EXPECT_EQ(checkScoresMixed(-14.0, -12.0, 64, 5e-4), 0xfff);
}

// The delta rule's P and A summed together (one right operand, two left
// ones), A written into the rows of P's left tile as each block row is
// done: factored over mild gates and a partial chunk, and summed directly
// box by box where the blocks span too much (where A's writes would race
// P's reads without the barrier between the boxes).
TEST(ChannelScoresEmulation, PAndATogether) {
  EXPECT_EQ(checkScoresTogether(-0.5, 0.0, 64, 1e-2), 0);
  EXPECT_EQ(checkScoresTogether(-0.5, 0.0, 45, 1e-2), 0);
  EXPECT_EQ(checkScoresTogether(-8.0, -6.0, 64, 1e-2), 0);
  EXPECT_EQ(checkScoresTogether(-14.0, -12.0, 64, 5e-4), 0xfff);
}

// Gates of -6 to -8 a token keep each block's span under the bound (its
// rows factor on the tensor cores), but put the blocks' midpoints more than
// 2^126 apart: the factor between two blocks, applied whole, flushed to zero
// there and dropped terms of up to e^-6 of the operands' product.
TEST(ChannelScoresEmulation, BlocksFarApartFactorExactly) {
  EXPECT_EQ(checkScores(-8.0, -6.0, 64, 4e-3), 0);
}

// Gates of -14 to -12 a token span more than the bound over a block: every
// block row is summed directly, in fp32 (refusal bits 0-7; bits 8-11, for
// rows decayed to the row before, refuse too).
TEST(ChannelScoresEmulation, BlocksSpanningTooMuchAreSummedDirectly) {
  EXPECT_EQ(checkScores(-14.0, -12.0, 64, 5e-4), 0xfff);
}

// Mild gates over a partial chunk: the factored products, zero past n.
TEST(ChannelScoresEmulation, MildGatesOverAPartialChunk) {
  EXPECT_EQ(checkScores(-0.5, 0.0, 45, 4e-3), 0);
}

// DPLR's low-rank scores decay a's rows to the row before: factored where
// each block with the row before it stays within the bound (gates of -8 to
// -6), summed directly where even the block alone does not (-14 to -12).
TEST(ChannelScoresEmulation, RowsDecayedToTheRowBefore) {
  EXPECT_EQ(checkScores(-8.0, -6.0, 64, 4e-3, true), 0);
  EXPECT_EQ(checkScores(-14.0, -12.0, 64, 5e-4, true), 0xfff);
  EXPECT_EQ(checkScores(-0.5, 0.0, 45, 4e-3, true), 0);
}

// Gates of about -9.7 a token: a block's own rows factor (half its span,
// 73 nats, is within the bound of 75), the row before one more gate away
// does not: the plain scores factor, the scores decayed to the row before
// are summed directly (refusal bits 8-11), both exact.
TEST(ChannelScoresEmulation, TheRowBeforeAloneRefusesTheBlock) {
  EXPECT_EQ(checkScores(-9.8, -9.6, 64, 4e-3), 0xf00);
  EXPECT_EQ(checkScores(-9.8, -9.6, 64, 5e-4, true), 0xf00);
}
