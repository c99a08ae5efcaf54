//===- WarpgroupChannels.cuh - Per-channel prepared chunks -*- CUDA -*-===//
//
// Part of lina's device library (appended after WarpgroupScan.cuh). The
// pieces of the prepare kernel printed for a rule with a per-channel decay
// (WarpgroupScan.cpp): a CTA a (chunk, value head) that stores, for the
// scan, every operand of the scan's products with its decays and row
// factors already applied. A per-channel exponential does not factor into a
// row's and a column's, so the scan's products could not apply it where
// they land, as the scalar decays' do.
//
// With G_t the gates' running sum over the chunk (a value a key channel,
// kept here in log2 units), the scores of two tiles a (rows t) and b (rows
// s) are
//   P[t][s] = sum_c a_tc b_sc 2^(G_tc - G_sc),
// summed on the tensor cores block by block: for rows 16 i .. 16 i + 15 and
// m_i, channel by channel, the midpoint of G over those rows,
//   2^(G_tc - G_sc) = 2^(G_tc - m_ic) 2^(m_ic - m_jc) 2^(m_jc - G_sc)
// for t in block i, s in block j <= i: block (i, j) is a tf32 product of
// block i's rows of a scaled by 2^(G_t - m_i) (the left operand) with block
// j's rows of b scaled by 2^(m_j - G_s) (the right operand, formed once a
// chunk) times the channels' 2^(m_i - m_j), applied as the right operand's
// fragments are formed. The left and right factors stay within
// kChannelFactorBound where no block's gates span more than twice it, and
// their product with the middle one where no midpoint lies more than that
// above an earlier row's gates (log decays, g <= 0: never); a block row
// where some channel breaks either is summed directly, an exponential a
// pair and channel. Strong decays put the midpoints far apart: the middle
// factor is applied as its square root twice, so that it flushes to zero
// only where the whole term is below 2^-36 of the operands' product (as one
// factor it flushed at 2^-126, where the right factor could still make the
// term large). The products need fp32's range for the factors: bf16
// products for bf16 inputs (whose rounding matches the inputs'), tf32 for
// f16 inputs and for DPLR's low-rank scores, whose 10 mantissa bits keep a
// sum whose terms cancel close.
//
// A DPLR chunk's low-rank scores decay the left rows to the row before
// (the left operand's gates are G_{t-1}, the exclusive sum): the same
// products with the left factor 2^(G_{t-1} - m_i), checked against the
// bound over the block's rows and the row before it.
//
//===----------------------------------------------------------------------===//

namespace lina {

/// 2^x in one MUFU instruction (subnormal results flush to zero: __expf's
/// range handling took three more instructions an exponential).
__device__ __forceinline__ float fast_exp2(float x) {
#ifdef LINA_HOST_EMULATION
  float y = exp2f(x);
  return fabsf(y) < 1.17549435e-38f ? 0.0f : y; // ftz
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
#endif
}

/// The largest exponent (log2 units) of a factor of the block products:
/// e^75 ~ 4e32 is still an fp32 with room for operands up to 1e6.
constexpr float kChannelFactorBound = 75.0f * 1.44269504f;

/// A per-channel prepare kernel's shared memory at key dim K with `Tiles`
/// fetched tiles (q and k; a DPLR chunk's a and b too).
template <int K, int Tiles = 2> struct wg_channel_smem {
  /// Row strides of the operands (fp32): a fragment's 32 loads meet no bank
  /// twice.
  static constexpr int C = 64, kRld = K + 4, kLld = K + 4;
  /// q's, k's (a's, b's) rows as [64][K] swizzled mma_t tiles
  /// (wg_load_rows).
  alignas(16) unsigned char tiles[Tiles][C * K * 2];
  /// G by (row, channel), log2 units (fp32, row stride K).
  alignas(16) float gates[C * K];
  /// The right operand: b_s 2^(m_j - G_s) for s in block j.
  alignas(16) float right[C * kRld];
  /// The block row's left operands: one in fp32 (rows of kLld), or two in
  /// bf16 (rows of ld(K)); with a DPLR chunk's four tiles, two in fp32
  /// (its low-rank scores are tf32 products: wg_channel_scores). The bound
  /// is written out: as a static member NVRTC emitted it as a device global
  /// in every kernel's module.
  alignas(16) float left[Tiles == 4 ? 2 * 16 * kLld : 16 * (K + 8)];
  /// The blocks' midpoints and the current block row's 2^((m_i - m_j) / 2)
  /// for j < i (1 at j = i).
  alignas(16) float mids[4 * K], factors[4 * K];
  /// Bits 0-3: block j's gates span too much to factor; bits 4-7: block
  /// i's midpoint lies too far above an earlier row's gates or midpoint;
  /// bits 8-11: block i's gates with the row before it span too much (a
  /// left operand decayed to the row before).
  int refused;
};

/// The chunk's per-channel gate inputs (`g` at the chunk's first row,
/// `stride` floats between rows) into sm.gates as they are, rows past n
/// zero, by cp.async like wg_copy_rows: nothing waits for them here, so
/// they are in flight with the fetched tiles. Clears sm.refused. Every
/// thread, before the barrier that publishes the copies (g null: the gates
/// have no per-channel input, and only sm.refused is cleared).
template <int K, int Tiles>
__device__ __forceinline__ void
wg_channel_gates_copy(wg_channel_smem<K, Tiles> &sm, const float *g, i64 stride,
                      int n) {
  static_assert(64 * K / 4 % kThreads == 0, "whole rounds of 16 bytes");
  if (threadIdx.x == 0)
    sm.refused = 0;
  if (g == nullptr)
    return;
  // A sliced tensor's rows may not be 16-byte aligned: four-byte copies.
  const bool words = aligned16(g) && stride % 4 == 0;
#pragma unroll
  for (int j = 0; j < 64 * K / 4 / kThreads; ++j) {
    const int i = threadIdx.x + j * kThreads, r = i / (K / 4),
              c = i % (K / 4) * 4;
    // Rows past n copy nothing from row 0 (always a valid address).
    const float *from = g + (r < n ? r : 0) * stride + c;
    float *to = sm.gates + r * K + c;
    if (words) {
      copy_async<16>(to, from, r < n ? 16 : 0);
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        copy_async<4>(to + e, from + e, r < n ? 4 : 0);
    }
  }
}

/// G = the running sums over the chunk's rows of pre(r, c, x) (rows r < n;
/// past n nothing is added, so G stays at its row n - 1) for each key
/// channel c, scaled to log2 units, into sm.gates; with `exclusive`, the
/// sum of the rows before r. x is the gate input at (r, c) as
/// wg_channel_gates_copy copied it (0 without `Input`). Also each 16-row
/// block's midpoints and whether its products factor (sm.refused). Every
/// thread, after the barrier that publishes the copies; ends at a barrier.
template <int K, bool Input, int Tiles, typename Pre>
__device__ __forceinline__ void wg_channel_gates(wg_channel_smem<K, Tiles> &sm,
                                                 int n, bool exclusive,
                                                 Pre pre) {
  static_assert(kThreads >= K, "a thread a channel");
  constexpr float kLog2e = 1.44269504f;
  const int c = threadIdx.x;
  if (c < K) {
    float run = 0.0f, prefix_min = 3.0e38f, mid_min = 3.0e38f, before = 0.0f;
    int refused = 0;
    for (int b = 0; b < 4; ++b) {
      float hi = -3.0e38f, lo = 3.0e38f;
      // The row before the block (0 before the chunk: G_{-1}).
      const float prior = before;
#pragma unroll
      for (int rr = 0; rr < 16; ++rr) {
        const int r = 16 * b + rr;
        const float x =
            r < n ? pre(r, c, Input ? sm.gates[r * K + c] : 0.0f) * kLog2e
                  : 0.0f;
        const float g = exclusive ? run : run + x;
        run += x;
        sm.gates[r * K + c] = g;
        hi = fmaxf(hi, g);
        lo = fminf(lo, g);
        before = g;
      }
      prefix_min = fminf(prefix_min, lo);
      const float mid = 0.5f * (hi + lo);
      mid_min = fminf(mid_min, mid);
      sm.mids[b * K + c] = mid;
      // Written to fail on NaN too (the direct sums then carry it).
      if (!(hi - mid <= kChannelFactorBound))
        refused |= 1 << b;
      if (!(mid - prefix_min <= kChannelFactorBound &&
            mid - mid_min <= kChannelFactorBound))
        refused |= 16 << b;
      if (!(fmaxf(hi, prior) - mid <= kChannelFactorBound &&
            mid - fminf(lo, prior) <= kChannelFactorBound))
        refused |= 256 << b;
    }
    if (refused)
      atomicOr(&sm.refused, refused);
  }
  __syncthreads();
}

/// Block row i's bridges to the blocks before it into `factors`, a key
/// channel each from the blocks' midpoints (log2 units): 2^((m_i - m_j) / 2)
/// for block j < i, 1 for j = i. Each is the square root of the factor
/// between the two midpoints, applied twice: strong decays put midpoints
/// more than 2^126 apart, where the factor itself flushes to zero though
/// the right operand's factor can keep the term large. Every thread.
template <int K>
__device__ __forceinline__ void wg_block_bridges(float *factors,
                                                 const float *mids, int i) {
  for (int j = threadIdx.x; j < (i + 1) * K; j += kThreads) {
    const int b = j / K, c = j % K;
    factors[j] =
        b < i ? fast_exp2(0.5f * (mids[i * K + c] - mids[b * K + c])) : 1.0f;
  }
}

/// Eight consecutive floats of shared memory (16-byte aligned) in two
/// 16-byte loads, all in flight at once: read one at a time, each waited
/// for before its exponential, and the next could not pass the last store.
__device__ __forceinline__ void wg_load8(const float *p, float (&x)[8]) {
  const f32x4 a = *(const f32x4 *)p, b = *(const f32x4 *)(p + 4);
  x[0] = a.x;
  x[1] = a.y;
  x[2] = a.z;
  x[3] = a.w;
  x[4] = b.x;
  x[5] = b.y;
  x[6] = b.z;
  x[7] = b.w;
}

/// The eight floats of row r, channels 8 piece .. 8 piece + 7, of a [64][K]
/// swizzled mma_t tile.
template <int K>
__device__ __forceinline__ void wg_tile_piece(const unsigned char *tile, int r,
                                              int piece, float (&f)[8]) {
  unpack(*(const u32x4 *)(tile + piece / 8 * 8192 + r * 128 +
                          (((piece % 8) ^ (r % 8)) << 4)),
         mma_t{}, f);
}

/// A chain of rows into the record (a decay_rows chain): dst = src's rows
/// times f(r) and, channel by channel, 2^(Ea G_rc + Eb G_{n-1,c} + Ep
/// G_{r-1,c}) (Ea 1 for each decay to the row, Eb 1 and Ea -1 for each from
/// the row to the chunk's end, Ep 1 for each to the row before, G_{-1} =
/// 0), both [64][K] swizzled mma_t tiles; rows past n zero.
template <int Ea, int Eb, int Ep, typename F> struct wg_rows_chain {
  static constexpr int kEa = Ea, kEb = Eb, kEp = Ep;
  unsigned char *dst;
  const unsigned char *src;
  F f;
};
template <int Ea, int Eb, int Ep = 0, typename F>
__device__ __forceinline__ wg_rows_chain<Ea, Eb, Ep, F>
wg_rows(unsigned char *dst, const unsigned char *src, F f) {
  return {dst, src, f};
}

/// Every chain's rows (wg_rows) in one pass over the pieces. A piece's loads
/// (the chains' tiles, row factors and gates) all come before its first
/// exponential, which the compiler keeps in place (an asm statement), so
/// that chains of one tile load it once; chains with the same exponents
/// share their exponentials (X and Y of the delta rule: one where three
/// passes took two). Every thread, after the gates' barrier.
template <int K, int Tiles, typename... Chains>
__device__ __forceinline__ void
wg_channel_rows_each(const wg_channel_smem<K, Tiles> &sm, int n,
                     Chains... chains) {
  constexpr int kChains = sizeof...(Chains);
  constexpr int ea[kChains] = {Chains::kEa...}, eb[kChains] = {Chains::kEb...},
                ep[kChains] = {Chains::kEp...};
  constexpr bool anyEa = ((Chains::kEa != 0) || ...),
                 anyEb = ((Chains::kEb != 0) || ...),
                 anyEp = ((Chains::kEp != 0) || ...);
  unsigned char *const dst[kChains] = {chains.dst...};
  const unsigned char *const src[kChains] = {chains.src...};
  // Unsigned: the pieces' rows and channels by shifts.
  for (unsigned i = threadIdx.x; i < 64 * K / 8; i += kThreads) {
    const int r = i / (K / 8), piece = i % (K / 8);
    const unsigned at =
        piece / 8 * 8192 + r * 128 + (((piece % 8) ^ (r % 8)) << 4);
    u32x4 w[kChains];
    if (r < n) {
      const float scale[kChains] = {chains.f(r)...};
      float x[kChains][8], g[8], last[8], prior[8];
#pragma unroll
      for (int k = 0; k < kChains; ++k)
        wg_tile_piece<K>(src[k], r, piece, x[k]);
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int c = 8 * piece + e;
        g[e] = anyEa ? sm.gates[r * K + c] : 0.0f;
        last[e] = anyEb ? sm.gates[(n - 1) * K + c] : 0.0f;
        prior[e] = anyEp && r > 0 ? sm.gates[(r - 1) * K + c] : 0.0f;
      }
      float ex[kChains][8];
#pragma unroll
      for (int k = 0; k < kChains; ++k) {
        int first = k;
#pragma unroll
        for (int j = k - 1; j >= 0; --j)
          if (ea[j] == ea[k] && eb[j] == eb[k] && ep[j] == ep[k])
            first = j;
#pragma unroll
        for (int e = 0; e < 8; ++e)
          ex[k][e] = first < k ? ex[first][e]
                     : (ea[k] == 0 && eb[k] == 0 && ep[k] == 0)
                         ? 1.0f
                         : fast_exp2(ea[k] * g[e] + eb[k] * last[e] +
                                     ep[k] * prior[e]);
      }
#pragma unroll
      for (int k = 0; k < kChains; ++k) {
        float y[8];
#pragma unroll
        for (int e = 0; e < 8; ++e)
          y[e] = x[k][e] * (scale[k] * ex[k][e]);
        w[k] = u32x4{pack_mma2(y[0], y[1]), pack_mma2(y[2], y[3]),
                     pack_mma2(y[4], y[5]), pack_mma2(y[6], y[7])};
      }
    } else {
#pragma unroll
      for (int k = 0; k < kChains; ++k)
        w[k] = u32x4{0u, 0u, 0u, 0u};
    }
#pragma unroll
    for (int k = 0; k < kChains; ++k)
      *(u32x4 *)(dst[k] + at) = w[k];
  }
}

/// The chunk's decay of the state's key rows, 2^(G_{n-1,c}) for each
/// channel c, into `to` (1024 bytes: zero past K). Every thread.
template <int K, int Tiles>
__device__ __forceinline__ void
wg_channel_decay(float *to, const wg_channel_smem<K, Tiles> &sm, int n) {
  for (int c = threadIdx.x; c < 256; c += kThreads)
    to[c] = c < K ? fast_exp2(sm.gates[(n - 1) * K + c]) : 0.0f;
}

/// The scores' right operand from the [64][K] swizzled tile b (rows s),
/// each row by its own block's midpoints: b_s 2^(m_j - G_s) into sm.right.
/// It depends on b alone, so scores of several left tiles against the same
/// b form it once. Every thread, after the gates' barrier; the scores'
/// first barrier publishes it.
template <int K, int Tiles>
__device__ __forceinline__ void wg_channel_right(wg_channel_smem<K, Tiles> &sm,
                                                 const unsigned char *b) {
  constexpr int kRld = wg_channel_smem<K, Tiles>::kRld;
  for (unsigned i = threadIdx.x; i < 64 * K / 8; i += kThreads) {
    const int s = i / (K / 8), piece = i % (K / 8);
    float x[8], g[8], m[8];
    wg_tile_piece<K>(b, s, piece, x);
    wg_load8(sm.gates + s * K + 8 * piece, g);
    wg_load8(sm.mids + s / 16 * K + 8 * piece, m);
#pragma unroll
    for (int e = 0; e < 8; ++e)
      x[e] *= fast_exp2(m[e] - g[e]);
    float *to = sm.right + s * kRld + 8 * piece;
    *(f32x4 *)to = f32x4{x[0], x[1], x[2], x[3]};
    *(f32x4 *)(to + 4) = f32x4{x[4], x[5], x[6], x[7]};
  }
}

/// Two neighbouring elements of a right operand's row times their bridge
/// factors (wg_block_bridges': each the square root of the factor between
/// two blocks' midpoints, applied twice), rounded to a bf16 pair: a word of
/// the block products' bf16 right fragment.
__device__ __forceinline__ unsigned wg_bridged_pair(const float *right,
                                                    const float *factors) {
  const f32x2 x = *(const f32x2 *)right, f = *(const f32x2 *)factors;
  return pack_bf16x2(x.x * f.x * f.x, x.y * f.y * f.y);
}

/// One box of scores for wg_channel_scores: the left tile `a` ([64][K]
/// swizzled, rows t), the mask (s < t with `strict`, else s <= t; t < n),
/// whether the left rows decay to the row before theirs (`before`: G_{t-1}
/// for G_t, a DPLR chunk's low-rank scores), the rows' factors f(t, s), and
/// put(t, s, x0, x1), which takes the elements (t, s) and (t, s + 1), s
/// even.
template <typename F, typename Put> struct wg_scores_box {
  const unsigned char *a;
  bool strict, before;
  F f;
  Put put;
};
template <typename F, typename Put>
__device__ __forceinline__ wg_scores_box<F, Put>
wg_box(const unsigned char *a, bool strict, F f, Put put) {
  return {a, strict, false, f, put};
}
/// A box whose left rows decay to the row before theirs.
template <typename F, typename Put>
__device__ __forceinline__ wg_scores_box<F, Put>
wg_box_before(const unsigned char *a, bool strict, F f, Put put) {
  return {a, strict, true, f, put};
}

/// The left rows' gates of the scores: G_t, or G_{t-1} (0 at t = 0) with
/// `before`.
template <int K, int Tiles>
__device__ __forceinline__ float
wg_left_gate(const wg_channel_smem<K, Tiles> &sm, bool before, int t, int c) {
  if (before)
    return t > 0 ? sm.gates[(t - 1) * K + c] : 0.0f;
  return sm.gates[t * K + c];
}

/// A box's block (i, j) accumulators d (m16n8, the 8 columns from n0) with
/// its factors and mask, to its put.
template <typename Box>
__device__ __forceinline__ void wg_put_scores(const Box &x, const float (&d)[4],
                                              int i, int n0, int n) {
  const int g = threadIdx.x % 32 / 4, tq = threadIdx.x % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int t = 16 * i + g + 8 * h, s = n0 + 2 * tq;
    // Selects: above the diagonal the factors may overflow.
    x.put(t, s, kept(t, s, n, x.strict) ? d[2 * h] * x.f(t, s) : 0.0f,
          kept(t, s + 1, n, x.strict) ? d[2 * h + 1] * x.f(t, s + 1) : 0.0f);
  }
}

/// A box's block row i summed directly, a pair of (t, s) elements a thread
/// at a time, in fp32 from the tiles (b's rows s); after a barrier unless
/// it is the `first` box, since it may write where the last one read.
template <int K, int Tiles, typename Box>
__device__ void wg_direct_scores(const wg_channel_smem<K, Tiles> &sm,
                                 const Box &x, const unsigned char *b, int i,
                                 int n, bool first) {
  if (!first)
    __syncthreads();
  const int cols = 16 * (i + 1);
  for (int j = threadIdx.x; j < 16 * cols / 2; j += kThreads) {
    const int t = 16 * i + j / (cols / 2), s = j % (cols / 2) * 2;
    float y[2] = {0.0f, 0.0f};
#pragma unroll
    for (int h = 0; h < 2; ++h)
      if (kept(t, s + h, n, x.strict))
        for (int piece = 0; piece < K / 8; ++piece) {
          float l[8], r[8];
          wg_tile_piece<K>(x.a, t, piece, l);
          wg_tile_piece<K>(b, s + h, piece, r);
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            const int c = 8 * piece + e;
            y[h] += l[e] * r[e] *
                    fast_exp2(wg_left_gate<K>(sm, x.before, t, c) -
                              sm.gates[(s + h) * K + c]);
          }
        }
    x.put(t, s, kept(t, s, n, x.strict) ? y[0] * x.f(t, s) : 0.0f,
          kept(t, s + 1, n, x.strict) ? y[1] * x.f(t, s + 1) : 0.0f);
  }
}

/// The per-channel decay products of each box's left tile a (rows t) with
/// the [64][K] swizzled tile b (rows s) under sm's gates, times the box's
/// f(t, s) where its mask keeps them and zero elsewhere: put for each pair
/// of elements of the blocks on and below the diagonal (those above it are
/// left to the caller). A box whose left rows decay to the row before
/// theirs (wg_box_before) takes 2^(G_{t-1} - G_s) (a DPLR chunk's low-rank
/// scores; with `strict`). b's right operand must be in sm.right
/// (wg_channel_right, since the last scores that began). Every thread,
/// after the gates' barrier; ends at a barrier.
///
/// Boxes against the same b share the right operand's fragments, the
/// bridges and the barriers (the delta rule's P and A; a DPLR chunk's P and
/// A against b, L and P against k); boxes that decay alike share the left
/// rows' exponentials too. A box's puts may overwrite the rows of the
/// block row being summed in an earlier box's left tile (the delta rule's A
/// in q's tile): a block row's left rows are read before its first barrier
/// (summed directly: box by box, a barrier between).
///
/// With `Bf16` the blocks are bf16 products (m16n8k16: half the products
/// and fragments of tf32's m16n8k8), the left operands and the right's
/// fragments rounded to bf16 with their factors: for bf16 inputs, whose
/// own rounding that matches, and never for DPLR's low-rank scores, whose
/// terms cancel (a . b with b = -a). Two boxes need it where two fp32 left
/// operands do not fit (two CTAs an SM at two tiles); four tiles leave
/// room for two in fp32.
template <int K, bool Bf16 = false, int Tiles, typename... Boxes>
__device__ void wg_channel_scores(wg_channel_smem<K, Tiles> &sm,
                                  const unsigned char *b, int n,
                                  Boxes... boxes) {
  constexpr int kBoxes = sizeof...(Boxes),
                kRld = wg_channel_smem<K, Tiles>::kRld,
                kLld = wg_channel_smem<K, Tiles>::kLld;
  static_assert(Bf16 ? kBoxes * 16 * ld(K) * 2 <= sizeof(sm.left)
                     : kBoxes * 16 * kLld * 4 <= sizeof(sm.left),
                "room for the left operands");
  bf16 *const left16 = (bf16 *)sm.left;
  const unsigned char *const lefts[kBoxes] = {boxes.a...};
  const bool before[kBoxes] = {boxes.before...};
  bool anyBefore = false, anyAt = false;
#pragma unroll
  for (int box = 0; box < kBoxes; ++box) {
    anyBefore |= before[box];
    anyAt |= !before[box];
  }
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4,
            tq = lane % 4;
  const int refused = sm.refused;
  for (int i = 0; i < 4; ++i) {
    // Summed directly where a block so far spans too much (its right
    // operand would overflow) or this row's factors would.
    const bool direct = (refused & ((2 << i) - 1)) ||
                        (refused >> (4 + i) & 1) ||
                        (anyBefore && (refused >> (8 + i) & 1));
    const int cols = 16 * (i + 1); // the columns s <= 16 i + 15
    if (!direct) {
      // Block row i's left operands and the factors 2^((m_i - m_j) / 2).
      for (unsigned j = tid; j < 16 * K / 8; j += kThreads) {
        const int t = 16 * i + j / (K / 8), piece = j % (K / 8);
        // The left rows' gates: G_t, and G_{t-1} (0 at t = 0) for boxes
        // that decay to the row before.
        float ex[8] = {}, exBefore[8] = {}, m[8];
        wg_load8(sm.mids + i * K + 8 * piece, m);
        if (anyAt) {
          wg_load8(sm.gates + t * K + 8 * piece, ex);
#pragma unroll
          for (int e = 0; e < 8; ++e)
            ex[e] = fast_exp2(ex[e] - m[e]);
        }
        if (anyBefore) {
          if (t > 0)
            wg_load8(sm.gates + (t - 1) * K + 8 * piece, exBefore);
#pragma unroll
          for (int e = 0; e < 8; ++e)
            exBefore[e] = fast_exp2(exBefore[e] - m[e]);
        }
#pragma unroll
        for (int box = 0; box < kBoxes; ++box) {
          float y[8];
          wg_tile_piece<K>(lefts[box], t, piece, y);
#pragma unroll
          for (int e = 0; e < 8; ++e)
            y[e] *= before[box] ? exBefore[e] : ex[e];
          if constexpr (Bf16) {
            *(u32x4 *)(left16 + (box * 16 + t % 16) * ld(K) + 8 * piece) =
                pack_bf16x8(y);
          } else {
            float *to = sm.left + (box * 16 + t % 16) * kLld + 8 * piece;
#pragma unroll
            for (int e = 0; e < 8; ++e)
              to[e] = y[e];
          }
        }
      }
      wg_block_bridges<K>(sm.factors, sm.mids, i);
    }
    __syncthreads();
    if (!direct) {
      // Block (i, j) on the tensor cores (m16n8k8 in tf32: the fp32 bits
      // as they are; or m16n8k16 in bf16), a warp an 8-column tile: the
      // right operand's fragment with its factor, twice its square root.
      for (int job = warp; job < cols / 8; job += kThreads / 32) {
        const int n0 = 8 * job, j = job / 2;
        float d[kBoxes][4] = {};
        if constexpr (Bf16) {
#pragma unroll
          for (int kk = 0; kk < K / 16; ++kk) {
            unsigned bf[2];
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int c = 16 * kk + 8 * h + 2 * tq;
              bf[h] = wg_bridged_pair(sm.right + (n0 + g) * kRld + c,
                                      sm.factors + j * K + c);
            }
#pragma unroll
            for (int box = 0; box < kBoxes; ++box) {
              unsigned af[4];
              lhs_fragment<16, K, false>(
                  (const mma_t *)left16 + box * 16 * ld(K), 0, 16 * kk, af);
              mma_bf16_16816(d[box], af, bf);
            }
          }
        } else {
#pragma unroll
          for (int kk = 0; kk < K / 8; ++kk) {
            const int c = 8 * kk + tq;
            const float *r = sm.right + (n0 + g) * kRld + c,
                        *f = sm.factors + j * K + c;
            const unsigned bf[2] = {__float_as_uint(r[0] * f[0] * f[0]),
                                    __float_as_uint(r[4] * f[4] * f[4])};
#pragma unroll
            for (int box = 0; box < kBoxes; ++box) {
              const float *l = sm.left + (box * 16 + g) * kLld + c;
              const unsigned af[4] = {
                  __float_as_uint(l[0]), __float_as_uint(l[8 * kLld]),
                  __float_as_uint(l[4]), __float_as_uint(l[8 * kLld + 4])};
              mma_tf32_1688(d[box], af, bf);
            }
          }
        }
        int box = 0;
        (wg_put_scores(boxes, d[box++], i, n0, n), ...);
      }
    } else {
      // Box by box (each may write where the last one read).
      int box = 0;
      (wg_direct_scores<K>(sm, boxes, b, i, n, box++ == 0), ...);
    }
    __syncthreads();
  }
}

/// P as the scan reads it: x0 and x1 into elements (t, s) and (t, s + 1), s
/// even, of the swizzled 64 x 64 mma_t box `p` (the record's, in global
/// memory: the scores' puts go there directly, so that no 8 KB image costs
/// the kernel its second CTA an SM).
__device__ __forceinline__ void wg_put_box(unsigned char *p, int t, int s,
                                           float x0, float x1) {
  *(unsigned *)(p + wg_offset(t, s)) = pack_mma2(x0, x1);
}

/// Zero the 16 x 16 blocks of a swizzled 64 x 64 mma_t box above its
/// diagonal (its 16-byte pieces of 8 columns in a block past their row's),
/// which the scores leave to their caller. Every thread.
__device__ __forceinline__ void wg_zero_box_above(unsigned char *p) {
  for (int i = threadIdx.x; i < 64 * 8; i += kThreads) {
    const int r = i / 8, c = i % 8 * 8;
    if (c / 16 > r / 16)
      *(u32x4 *)(p + wg_offset(r, c)) = u32x4{0u, 0u, 0u, 0u};
  }
}

/// The per-channel decay of the state S^T's accumulators
/// (wg_each_state_element: key column 8 j + 2 tq (+1) at element 4 j + 2 h
/// (+1)), each key column by decay[column].
template <int K>
__device__ __forceinline__ void wg_decay_key_columns(float (&s)[K / 2],
                                                     const float *decay) {
  const int tq = threadIdx.x % 4;
#pragma unroll
  for (int j = 0; j < K / 8; ++j) {
    const f32x2 d = *(const f32x2 *)(decay + 8 * j + 2 * tq);
    s[4 * j] *= d.x;
    s[4 * j + 1] *= d.y;
    s[4 * j + 2] *= d.x;
    s[4 * j + 3] *= d.y;
  }
}

} // namespace lina
