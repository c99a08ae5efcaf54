//===- Backward.cuh - The backward's tile ops -----------------*- CUDA -*-===//
//
// Part of lina's device library (appended to Prelude.cuh). The adjoints of
// the forward's tile ops that lina-chunk-backward writes into a chunked
// backward (LinaGradOps.td), one call each, on shared-memory tiles like the
// forward's: each computes what codegen's float64 executor computes
// (TileGradMath.cpp), over the same valid rows. Gradients leave the kernel
// through the accumulate calls, added atomically to fp32 buffers: a
// key-side gradient is a sum over value tiles and over the value heads that
// share a key head (BackwardKernel.h).
//
//===----------------------------------------------------------------------===//

namespace lina {

/// The backward's own pointers, beside the forward's Params: dL/do in the
/// spec's dtype, dL/d(final state) (null: zero), and the fp32 gradients,
/// each null where the call has no such input.
struct GradParams {
  const void *d_o;
  const float *dht;
  float *dq, *dk, *dv, *dg, *dbeta, *da, *db;
  float *d_gate_a_log, *d_gate_dt_bias, *dh0;
  /// The CTAs' spill regions (BackwardPlan::spillFloats each), or null.
  float *spill;
  /// The state's gradient each chunk starts from (dL/d of the chunk's last
  /// state), in the chunk states' layout: the reverse scan writes it, the
  /// chunk-parallel kernel reads it.
  float *chunk_grads;
};

template <int N>
__device__ void mul(float *dst, const float *x, const float *y) {
  elementwise<N>(dst, x, y, [](float a, float b) { return a * b; });
}

/// dst[r] = the sum over row r's columns c of term(r * L + c), L the tile's
/// row stride: a warp a row.
template <int R, int CC, typename Term>
__device__ __forceinline__ void row_reduce(float *dst, Term term) {
  constexpr int L = ld(CC);
  int lane = threadIdx.x % 32;
  for (int r = threadIdx.x / 32; r < R; r += kThreads / 32) {
    float s = 0.0f;
    for (int c = lane; c < CC; c += 32)
      s += term(r * L + c);
    s = warp_sum(s);
    if (lane == 0)
      dst[r] = s;
  }
}

/// dst[r] = sum over the row's columns.
template <int R, int CC>
__device__ void row_sum(float *dst, const float *x) {
  row_reduce<R, CC>(dst, [x](int i) { return x[i]; });
}

/// dst[r] = the inner product of row r of x and of y; either may be a
/// packed tile (the backward's chunk states kept in bf16).
template <int R, int CC, typename EX, typename EY>
__device__ void row_dot(float *dst, const EX *x, const EY *y) {
  row_reduce<R, CC>(
      dst, [x, y](int i) { return to_float(x[i]) * to_float(y[i]); });
}

/// Tiles in the first `terms` terms of a sum whose tiles at the set bits of
/// `second` are a product's second factor.
__device__ constexpr int tiles_of_terms(unsigned long long second, int terms) {
  int k = 0;
  for (int t = 0; t < terms; ++k)
    if (k + 1 >= 64 || !((second >> (k + 1)) & 1))
      ++t;
  return k;
}

/// dst = the first Added terms' sum minus the rest's, over N floats (16
/// bytes a step where N allows). A term is a tile, or the elementwise
/// product of two where bit k of Second marks tile k as the second factor
/// (lina.sum's `%x * %y`). dst may be any of the tiles. Each tile is read
/// at the unrolled loop's constant index, so the pointers stay in
/// registers.
template <int N, int Added, unsigned long long Second = 0,
          typename... Tiles>
__device__ void sum(float *dst, const Tiles *...x) {
  const float *tiles[] = {x...};
  constexpr int K = sizeof...(Tiles);
  constexpr int kAddedTiles = tiles_of_terms(Second, Added);
  if constexpr (N % 4 == 0) {
    for (int i = threadIdx.x * 4; i < N; i += kThreads * 4) {
      f32x4 s{}, term{};
#pragma unroll
      for (int k = 0; k < K; ++k) {
        f32x4 v = *(const f32x4 *)(tiles[k] + i);
        term = k < 64 && ((Second >> k) & 1)
                   ? f32x4{term.x * v.x, term.y * v.y, term.z * v.z,
                           term.w * v.w}
                   : v;
        if (k + 1 < K && k + 1 < 64 && ((Second >> (k + 1)) & 1))
          continue;
        s = k < kAddedTiles ? f32x4{s.x + term.x, s.y + term.y,
                                    s.z + term.z, s.w + term.w}
                            : f32x4{s.x - term.x, s.y - term.y,
                                    s.z - term.z, s.w - term.w};
      }
      *(f32x4 *)(dst + i) = s;
    }
  } else {
    for (int i = threadIdx.x; i < N; i += kThreads) {
      float s = 0.0f, term = 0.0f;
#pragma unroll
      for (int k = 0; k < K; ++k) {
        float v = tiles[k][i];
        term = k < 64 && ((Second >> k) & 1) ? term * v : v;
        if (k + 1 < K && k + 1 < 64 && ((Second >> (k + 1)) & 1))
          continue;
        s = k < kAddedTiles ? s + term : s - term;
      }
      dst[i] = s;
    }
  }
}

/// dst[c] = sum over all R rows of column c: a thread a column.
template <int R, int CC>
__device__ void col_sum(float *dst, const float *x) {
  constexpr int L = ld(CC);
  for (int c = threadIdx.x; c < CC; c += kThreads) {
    float s = 0.0f;
    for (int r = 0; r < R; ++r)
      s += x[r * L + c];
    dst[c] = s;
  }
}

/// dst (CC x R) = x^T.
template <int R, int CC>
__device__ void transpose(float *dst, const float *x) {
  constexpr int L = ld(CC), LT = ld(R);
  for (int i = threadIdx.x; i < R * CC; i += kThreads) {
    int r = i / CC, c = i % CC;
    dst[c * LT + r] = x[r * L + c];
  }
}

/// dst (R x 1), row t: the sum of m over the pairs (i, j) with i >= t > j,
/// less those with j >= t > i, over the first n rows and columns; zero past
/// n (lina.straddle_sum). A warp a row t, a lane a row (and column) k >= t
/// summing its pairs with the j < t, then the warp's sum: every pair is
/// added once and none cancels another.
template <int R>
__device__ void straddle_sum(float *dst, const float *m, int n) {
  constexpr int L = ld(R);
  const int lane = threadIdx.x % 32;
  for (int t = threadIdx.x / 32; t < R; t += kThreads / 32) {
    float s = 0.0f;
    if (t < n)
      for (int k = t + lane; k < n; k += 32)
        for (int j = 0; j < t; ++j)
          s += m[k * L + j] - m[j * L + k];
#pragma unroll
    for (int o = 16; o > 0; o /= 2)
      s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0)
      dst[t] = s;
  }
}

/// dst = x with `row` (1 x CC) added to row n - 1.
template <int R, int CC>
__device__ void add_to_last_row(float *dst, const float *x, const float *row,
                                int n) {
  constexpr int L = ld(CC);
  for (int i = threadIdx.x; i < R * L; i += kThreads) {
    int r = i / L, c = i % L;
    dst[i] = x[i] + (r == n - 1 && c < CC ? row[c] : 0.0f);
  }
}

/// y_i = sum of x_j over valid rows j >= i (j > i when exclusive); zero
/// past n. A thread a column.
template <int R, int GC>
__device__ void reverse_cumsum(float *dst, const float *x, int n,
                               bool exclusive) {
  constexpr int L = ld(GC);
  for (int c = threadIdx.x; c < GC; c += kThreads) {
    float s = 0.0f;
    for (int r = R - 1; r >= 0; --r) {
      float v = r < n ? x[r * L + c] : 0.0f;
      if (exclusive)
        dst[r * L + c] = r < n ? s : 0.0f;
      s += v;
      if (!exclusive)
        dst[r * L + c] = r < n ? s : 0.0f;
    }
  }
}

/// The widest span of a channel's gates over a chunk that
/// factored_decay_product_grad factors: each factor within e^50 (5e21) of
/// one, which leaves the sums (fp32 in every dtype) a margin of 6e16 before
/// they could overflow.
constexpr float kMaxFactoredGradRange = 100.0f;

/// decay_product_grad's per-channel sums for channel c, rows r of the
/// result from `first` in steps of `Step`: with m the midpoint of the
/// channel's gates over the chunk's valid rows, E_ij = e^(gx_i - m)
/// e^(m - gy_j), so
///   dx_rc = e^(gx_rc - m) sum_j dP_rj (y_jc e^(m - gy_jc))    (Lhs)
///   dy_rc = e^(m - gy_rc) sum_i dP_ir (x_ic e^(gx_ic - m))    (rhs)
/// with the other factor's R scaled entries held in registers: R + 1
/// exponentials for the column instead of one a term, and each term one
/// fused multiply-add (dP read as a broadcast: a warp's threads take
/// neighbouring channels of the same rows). Returns false, having written
/// nothing, where the channel's gates span more than
/// kMaxFactoredGradRange: a factor could then overflow.
template <int R, int D, int GC, bool Lhs, int Step>
__device__ bool factored_decay_product_grad(float *dst, const float *dp,
                                            const float *other, const float *gx,
                                            const float *gy, int n, bool strict,
                                            int c, int first) {
  constexpr int LR = ld(R), LD = ld(D), LG = ld(GC);
  const GateSpan span = channel_gate_span<LG>(gx, gy, c, n);
  if (!span.within(kMaxFactoredGradRange))
    return false;
  const float m = span.mid();
  float f[R];
#pragma unroll
  for (int k = 0; k < R; ++k)
    f[k] = k < n ? other[k * LD + c] *
                       __expf(Lhs ? m - gy[k * LG + c] : gx[k * LG + c] - m)
                 : 0.0f;
  const int inclusive = strict ? 0 : 1;
  // The thread's rows unrolled: their sums are independent chains.
#pragma unroll
  for (int rr = 0; rr < (R + Step - 1) / Step; ++rr) {
    const int r = first + rr * Step;
    if (r >= R)
      break;
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < R; ++k) {
      // Lhs: the terms k <= r (k < r when strict) of row r < n; rhs: the
      // rows k >= r (k > r when strict) below n.
      bool term = Lhs ? k < r + inclusive && r < n : k > r - inclusive && k < n;
      if (term)
        s += (Lhs ? dp[r * LR + k] : dp[k * LR + r]) * f[k];
    }
    dst[r * LD + c] =
        r < n ? s * __expf(Lhs ? gx[r * LG + c] - m : m - gy[r * LG + c])
              : 0.0f;
  }
  return true;
}

/// Element (row, ch) of decay_product_grad's per-channel sums, a term an
/// exponential.
template <int R, int D, int GC, bool Lhs>
__device__ __forceinline__ void
direct_decay_product_grad(float *dst, const float *dp, const float *other,
                          const float *gx, const float *gy, int n, bool strict,
                          int row, int ch) {
  constexpr int LR = ld(R), LD = ld(D), LG = ld(GC);
  float s = 0.0f;
  if (Lhs) {
    for (int j = 0; j <= row && row < n; ++j)
      if (kept(row, j, n, strict))
        s += dp[row * LR + j] * other[j * LD + ch] *
             __expf(gx[row * LG + ch] - gy[j * LG + ch]);
  } else {
    for (int r = row; r < n; ++r)
      if (kept(r, row, n, strict))
        s += dp[r * LR + row] * other[r * LD + ch] *
             __expf(gx[r * LG + ch] - gy[row * LG + ch]);
  }
  dst[row * LD + ch] = s;
}

/// decay_product_grad's per-channel sums on the tensor cores, a warp an
/// 8-channel column block: with m_c the midpoint of channel c's gates over
/// the chunk's valid rows,
///   dx = e^(gx - m) . (dP~ (y . e^(m - gy)))       (Lhs)
///   dy = e^(m - gy) . (dP~^T (x . e^(gx - m)))     (rhs)
/// dP~ being dP where the forward's product keeps it: 2 R exponentials a
/// channel where the sums take one a term. The masked dP and the scaled
/// factor are made in registers as the product's fragments, so the call
/// needs no scratch and no barrier. Each operand is split in two tf32 parts
/// (3xTF32, about 2^-21 of each term): a gate's gradient is a difference of
/// such sums, and one 16-bit rounding of the operands lost it (bf16
/// operands missed the float64 gradient of A_log by 0.26 in a random KDA
/// draw, against 2e-2). A block with a channel whose gates span more than
/// kMaxFactoredGradRange, or are NaN, is summed directly by its warp.
/// Returns how many of the warp's blocks were summed so.
template <int R, int D, int GC, bool Lhs>
__device__ int mma_channel_decay_product_grad(float *dst, const float *dp,
                                              const float *other,
                                              const float *gx, const float *gy,
                                              int n, bool strict) {
  static_assert(GC == D, "per-channel gates have one column per channel");
  static_assert(R % 16 == 0 && D % 8 == 0, "whole m16n8k8 tiles");
  constexpr int LR = ld(R), LD = ld(D), LG = ld(GC);
  constexpr unsigned kAll = 0xffffffffu;
  const int lane = threadIdx.x % 32, grp = lane / 4, quad = lane % 4;
  int summed = 0;
  for (int block = threadIdx.x / 32; block < D / 8; block += kThreads / 32) {
    // Channel c's span: its four lanes take every fourth row.
    const int c0 = 8 * block, c = c0 + grp;
    GateSpan span = channel_gate_span<LG>(gx, gy, c, n, quad, 4);
#pragma unroll
    for (int o = 1; o < 4; o *= 2) {
      span.lo = fminf(span.lo, __shfl_xor_sync(kAll, span.lo, o));
      span.hi = fmaxf(span.hi, __shfl_xor_sync(kAll, span.hi, o));
    }
    if (__any_sync(kAll, !span.within(kMaxFactoredGradRange))) {
      ++summed;
      for (int i = lane; i < R * 8; i += 32)
        direct_decay_product_grad<R, D, GC, Lhs>(dst, dp, other, gx, gy, n,
                                                 strict, i / 8, c0 + i % 8);
      continue;
    }
    const float m = span.mid();
    // B: rows k of the scaled factor, channel c (row quad, quad + 4 of
    // each k-step).
    unsigned b_big[R / 8][2], b_small[R / 8][2];
#pragma unroll
    for (int kk = 0; kk < R / 8; ++kk)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int k = 8 * kk + quad + 4 * h;
        const float v =
            k < n ? other[k * LD + c] *
                        __expf(Lhs ? m - gy[k * LG + c] : gx[k * LG + c] - m)
                  : 0.0f;
        tf32_split(v, b_big[kk][h], b_small[kk][h]);
      }
    // The result's channels on this lane: c0 + 2 quad and the next, whose
    // midpoints lanes 8 quad and 8 quad + 4 hold.
    const float mid[2] = {__shfl_sync(kAll, m, 8 * quad),
                          __shfl_sync(kAll, m, 8 * quad + 4)};
#pragma unroll
    for (int mt = 0; mt < R / 16; ++mt) {
      float d[4] = {};
#pragma unroll
      for (int kk = 0; kk < R / 8; ++kk) {
        // Only terms k <= r (Lhs) or k >= r (rhs) are kept: a k-step wholly
        // past or before the tile's rows adds nothing.
        if (Lhs ? 8 * kk > 16 * mt + 15 : 8 * kk + 7 < 16 * mt)
          continue;
        // A: rows 16 mt + grp (+ 8), columns 8 kk + quad (+ 4).
        unsigned a_big[4], a_small[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const int r = 16 * mt + grp + 8 * (q & 1),
                    k = 8 * kk + quad + 4 * (q >> 1);
          const float v = Lhs ? (kept(r, k, n, strict) ? dp[r * LR + k] : 0.0f)
                              : (kept(k, r, n, strict) ? dp[k * LR + r] : 0.0f);
          tf32_split(v, a_big[q], a_small[q]);
        }
        mma_tf32x3_1688(d, a_big, a_small, b_big[kk], b_small[kk]);
      }
      // C: rows 16 mt + grp (+ 8), channels c0 + 2 quad (+ 1).
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int r = 16 * mt + grp + 8 * (q >> 1),
                  ch = c0 + 2 * quad + (q & 1);
        const float mc = mid[q & 1];
        dst[r * LD + ch] = r < n ? d[q] * __expf(Lhs ? gx[r * LG + ch] - mc
                                                     : mc - gy[r * LG + ch])
                                 : 0.0f;
      }
    }
  }
  return summed;
}

/// decay_product_grad with per-channel gates: on the tensor cores in 16-bit
/// specs (mma_channel_decay_product_grad); in fp32 specs at 32-row chunks
/// each channel factored through its midpoint (factored_decay_product_grad,
/// a thread a channel and a share of its rows), or summed directly, a term
/// an exponential, where its gates span too much for that; other chunk
/// sizes summed directly.
template <int R, int D, int GC, bool Lhs, bool MMA>
__device__ void channel_decay_product_grad(float *dst, const float *dp,
                                           const float *other, const float *gx,
                                           const float *gy, int n,
                                           bool strict) {
  static_assert(GC == D, "per-channel gates have one column per channel");
  auto direct = [&](int row, int ch) {
    direct_decay_product_grad<R, D, GC, Lhs>(dst, dp, other, gx, gy, n, strict,
                                             row, ch);
  };
  if constexpr (MMA && R % 16 == 0 && D % 8 == 0) {
    mma_channel_decay_product_grad<R, D, GC, Lhs>(dst, dp, other, gx, gy, n,
                                                  strict);
    return;
  }
  // At 32 rows the scaled column fits in registers and factoring pays:
  // gla's backward (C32) 2.77 -> 2.64 ms at 4 x 2048 x 16 x 128 (H100). At
  // 16 rows the threads of a channel's row groups each scan its gates and
  // scale its column for four rows apiece, and it cost: kda 4.76 -> 4.99
  // ms, rwkv7 10.6 -> 10.9. (Past 32 the column would spill.) A channel
  // whose gates span too much to factor is summed directly by the same
  // threads.
  if constexpr (R == 32) {
    constexpr int kGroups = kThreads >= D ? kThreads / D : 1;
    for (int i = threadIdx.x; i < D * kGroups; i += kThreads) {
      const int c = i % D, first = i / D;
      if (!factored_decay_product_grad<R, D, GC, Lhs, kGroups>(
              dst, dp, other, gx, gy, n, strict, c, first))
        for (int r = first; r < R; r += kGroups)
          direct(r, c);
    }
    return;
  }
  for (int i = threadIdx.x; i < R * D; i += kThreads)
    direct(i / D, i % D);
}

/// The gradient of one factor of decay_product's P = (x y^T) . E, E_ij =
/// exp(gx_i - gy_j) kept for j <= i (j < i when strict) and i < n, from
/// dP: the lhs side dx = (dP . E) y, the rhs side dy = (dP . E)^T x
/// (`other` is the factor not differentiated). With one gate column the
/// masked dP . E goes to `scratch` (R x R) and one product follows, on the
/// tensor cores where MMA; per-channel gates as channel_decay_product_grad
/// says.
template <int R, int D, int GC, bool Lhs, bool MMA>
__device__ void decay_product_grad(float *dst, const float *dp,
                                   const float *other, const float *gx,
                                   const float *gy, int n, bool strict,
                                   float *scratch) {
  constexpr int LR = ld(R);
  if constexpr (GC == 1) {
    for (int i = threadIdx.x; i < R * R; i += kThreads) {
      int r = i / R, c = i % R;
      scratch[r * LR + c] =
          kept(r, c, n, strict) ? dp[r * LR + c] * __expf(gx[r] - gy[c]) : 0.0f;
    }
    __syncthreads();
    product<R, D, R, !Lhs, false, MMA>(dst, scratch, other);
  } else {
    channel_decay_product_grad<R, D, GC, Lhs, MMA>(dst, dp, other, gx, gy, n,
                                                   strict);
  }
}

/// (I + A)^-T X for strictly lower-triangular A: back substitution, a
/// thread a column, y_i = x_i - sum_{j > i} A_ji y_j, column c on thread
/// First + c (mod the CTA's threads; see tri_solve). Up to 32 rows the
/// column lives in registers and each solved y_j is taken out of the rows
/// above it at once, reading A's row j as 16-byte broadcasts: the rows'
/// updates are independent, where the sum over j of one row would be a
/// chain of dependent steps through shared memory. (At 64 rows the unrolled
/// column took gdn's gradients kernel from 216 bytes of spills to 12,732.)
template <int R, int CC, int First = 0>
__device__ void tri_solve_transposed(float *dst, const float *A,
                                     const float *X) {
  constexpr int LR = ld(R), LC = ld(CC);
  if constexpr (R <= 32 && R % 4 == 0) {
    for (int c = column_of_thread<First>(); c < CC; c += kThreads) {
      float x[R];
#pragma unroll
      for (int i = 0; i < R; ++i)
        x[i] = X[i * LC + c];
#pragma unroll
      for (int j = R - 1; j > 0; --j) {
        const f32x4 *row = (const f32x4 *)(A + j * LR);
        float y = x[j];
#pragma unroll
        for (int i = 0; i < j; i += 4) {
          f32x4 a = row[i / 4];
          x[i] -= a.x * y;
          if (i + 1 < j)
            x[i + 1] -= a.y * y;
          if (i + 2 < j)
            x[i + 2] -= a.z * y;
          if (i + 3 < j)
            x[i + 3] -= a.w * y;
        }
      }
#pragma unroll
      for (int i = 0; i < R; ++i)
        dst[i * LC + c] = x[i];
    }
    return;
  }
  for (int c = column_of_thread<First>(); c < CC; c += kThreads)
    for (int i = R - 1; i >= 0; --i) {
      float v = X[i * LC + c];
      for (int j = i + 1; j < R; ++j)
        v -= A[j * LR + i] * dst[j * LC + c];
      dst[i * LC + c] = v;
    }
}

template <int R, int CC>
__device__ void strict_lower(float *dst, const float *x) {
  constexpr int L = ld(CC);
  for (int i = threadIdx.x; i < R * L; i += kThreads) {
    int r = i / L, c = i % L;
    dst[i] = c < r && c < CC ? x[i] : 0.0f;
  }
}

/// The gradient through l2norm (y = x / sqrt(|x|^2 + 1e-6)):
/// dx = (dy - y (y . dy)) / norm. A warp a row.
template <int R, int CC>
__device__ void l2norm_grad(float *dst, const float *x, const float *dy) {
  constexpr int L = ld(CC);
  int lane = threadIdx.x % 32;
  for (int r = threadIdx.x / 32; r < R; r += kThreads / 32) {
    float sq = 0.0f;
    for (int c = lane; c < CC; c += 32)
      sq += x[r * L + c] * x[r * L + c];
    float inv = rsqrtf(warp_sum(sq) + 1e-6f);
    float dot = 0.0f;
    for (int c = lane; c < CC; c += 32)
      dot += x[r * L + c] * inv * dy[r * L + c];
    dot = warp_sum(dot);
    for (int c = lane; c < CC; c += 32)
      dst[r * L + c] = (dy[r * L + c] - x[r * L + c] * inv * dot) * inv;
  }
}

/// sigmoid'(x) = sigmoid(x) sigmoid(-x), precise where sigmoid(x) nears 1.
__device__ __forceinline__ float sigmoid_derivative(float x) {
  return sigmoid(x) * sigmoid(-x);
}

/// The gradient through beta_sigmoid to the logit: factor sigmoid'(x).
template <int R>
__device__ void beta_grad(float *dst, const float *x, const float *dbeta,
                          float factor, int n) {
  for (int r = threadIdx.x; r < R; r += kThreads)
    dst[r] = r < n ? dbeta[r] * factor * sigmoid_derivative(x[r]) : 0.0f;
}

/// The gradient through gate_softplus (LowerBound false) or
/// gate_lower_bound to its input x (and dt_bias, which enters as x does),
/// or to A_log (WrtALog), element by element; zero past n.
template <int R, int GC, bool LowerBound, bool WrtALog>
__device__ void gate_grad(float *dst, const float *x, const float *dg,
                          float a_log, const float *dt_bias, float lower_bound,
                          int n) {
  float a = expf(a_log);
  for (int i = threadIdx.x; i < R * GC; i += kThreads) {
    int r = i / GC, c = i % GC, at = r * ld(GC) + c;
    float u = x[at] + (dt_bias ? dt_bias[c] : 0.0f), d;
    if constexpr (LowerBound) {
      float dx = lower_bound * sigmoid_derivative(a * u) * a;
      d = WrtALog ? dx * u : dx;
    } else {
      d = WrtALog ? -a * softplus(u) : -a * sigmoid(u);
    }
    dst[at] = r < n ? dg[at] * d : 0.0f;
  }
}

/// dst[r * row_stride + c] += x[r][c] for the valid rows, atomically.
template <int R, int CC>
__device__ void accumulate_rows(float *dst, i64 row_stride, const float *x,
                                int n) {
  constexpr int L = ld(CC);
  for (int i = threadIdx.x; i < R * CC; i += kThreads) {
    int r = i / CC, c = i % CC;
    if (r < n)
      atomicAdd(dst + r * row_stride + c, x[r * L + c]);
  }
}

/// dst[c] += the valid rows' sum of column c: a per-head parameter with a
/// value a column (dt_bias of per-channel gates), or one (A_log, a fixed
/// decay) with Whole, which adds every column into dst[0].
template <int R, int CC, bool Whole>
__device__ void accumulate_columns(float *dst, const float *x, int n) {
  constexpr int L = ld(CC);
  float s = 0.0f;
  for (int c = threadIdx.x; c < CC; c += kThreads) {
    float column = 0.0f;
    for (int r = 0; r < n; ++r)
      column += x[r * L + c];
    if (Whole)
      s += column;
    else
      atomicAdd(dst + c, column);
  }
  if (Whole) {
    s = warp_sum(s);
    if (threadIdx.x % 32 == 0 && s != 0.0f)
      atomicAdd(dst, s);
  }
}

} // namespace lina
