//===- WarpgroupScan.cuh - Pieces of the generated warpgroup scan -*- CUDA
//-*-===//
//
// Part of lina's device library (appended to Prelude.cuh, after
// WgmmaScan.cuh, whose state, TMA and output helpers it shares). The
// pieces the generated warpgroup scan of the additive rules is printed
// from (codegen/lib/Cuda/WarpgroupScan.cpp prints the kernel from the
// chunk's ops and the roles lina-warpgroup-roles gave them): one product
// issued, one pass over a tile, one column of per-token values. The
// factors each op applies (the query's scale, a write weight, the decays)
// are the printer's, passed in as functions of the row.
//
// Shapes: 64-token chunks, key and value dims K and V of 64 or 128, a
// warpgroup for each 64 value columns (W = V / 64 of them), warpgroup w
// owning value columns 64 w .. 64 w + 63; tiles in shared memory are
// [64][K or V] mma_t (bf16, or f16 for an f16 spec) as 64-column boxes in the
// 128-byte swizzle (Hopper.cuh), 8 KB apart, as TMA lands them.
//
//===----------------------------------------------------------------------===//

namespace lina {

/// A per-token value of the chunk, one warp's copy: lane l holds rows l
/// (lo) and 32 + l (hi). Rows past the chunk's n tokens hold zero.
struct wg_column {
  float lo, hi;
  /// The running sum down the first n rows (inclusive, or exclusive: each
  /// row's sum of the rows before it), zero past n as Prelude.cuh's cumsum.
  __device__ __forceinline__ wg_column cumsum(int n, bool exclusive) const {
    const int lane = threadIdx.x % 32;
    float a = lo, b = hi;
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      float x = __shfl_up_sync(0xffffffffu, a, d);
      float y = __shfl_up_sync(0xffffffffu, b, d);
      if (lane >= d) {
        a += x;
        b += y;
      }
    }
    const float total_a = __shfl_sync(0xffffffffu, a, 31);
    b += total_a;
    if (exclusive) {
      // The row before's inclusive sum, as Prelude.cuh's cumsum takes it
      // (not this row's sum less its value, which can cancel).
      float before_a = __shfl_up_sync(0xffffffffu, a, 1);
      float before_b = __shfl_up_sync(0xffffffffu, b, 1);
      a = lane > 0 ? before_a : 0.0f;
      b = lane > 0 ? before_b : total_a;
    }
    return {lane < n ? a : 0.0f, lane + 32 < n ? b : 0.0f};
  }
  /// Row r's value (the same r in every lane).
  __device__ __forceinline__ float at(int r) const {
    return __shfl_sync(0xffffffffu, r < 32 ? lo : hi, r % 32);
  }
  /// Into this warp's 64-float table, for lookups by row.
  __device__ __forceinline__ void store(float *table) const {
    const int lane = threadIdx.x % 32;
    table[lane] = lo;
    table[32 + lane] = hi;
  }
};

/// The column of a per-token input: `raw` the chunk's 64 values as copied
/// (zero past n).
__device__ __forceinline__ wg_column wg_column_of(const float *raw) {
  const int lane = threadIdx.x % 32;
  return {raw[lane], raw[32 + lane]};
}

/// One value a head for each of the chunk's n tokens (zero past n).
__device__ __forceinline__ wg_column wg_column_fill(float x, int n) {
  const int lane = threadIdx.x % 32;
  return {lane < n ? x : 0.0f, lane + 32 < n ? x : 0.0f};
}

/// f(r) for each of the first n rows r (zero past n): a row factor
/// evaluated once a row, for a table that per-element loops read.
template <typename F>
__device__ __forceinline__ wg_column wg_column_rows(int n, F f) {
  const int lane = threadIdx.x % 32;
  return {lane < n ? f(lane) : 0.0f, lane + 32 < n ? f(lane + 32) : 0.0f};
}

/// f applied to each of the first n rows (zero past n).
template <typename F>
__device__ __forceinline__ wg_column wg_column_map(const wg_column &x, int n,
                                                   F f) {
  const int lane = threadIdx.x % 32;
  return {lane < n ? f(x.lo) : 0.0f, lane + 32 < n ? f(x.hi) : 0.0f};
}

/// x where `keep`, else zero: x is evaluated either way (an argument), so
/// the table loads it makes are not confined to a branch and neighbouring
/// elements share them. Masks whose other side may be infinite select, never
/// multiply.
__device__ __forceinline__ float wg_kept(bool keep, float x) {
  return keep ? x : 0.0f;
}

/// Rows n .. 63 of a landed [64][Cols] tile set to zero: TMA reads on into
/// the next sequence there, and a product would carry a non-finite value
/// from it. By `Threads` consecutive threads (the CTA's, or a warpgroup's).
template <int Cols, int Threads = kThreads>
__device__ __forceinline__ void wg_zero_rows_past(unsigned char *tile, int n) {
  if (n >= 64)
    return;
  for (int i = threadIdx.x % Threads; i < Cols / 64 * 64 * 8; i += Threads) {
    const int r = i / 8 % 64;
    if (r >= n)
      *(u32x4 *)(tile + i * 16) = u32x4{0u, 0u, 0u, 0u};
  }
}

/// The eight mma_t elements of a 16-byte word times x.
__device__ __forceinline__ u32x4 wg_scaled_word(const u32x4 &w, float x) {
  float f[8];
  unpack(w, mma_t{}, f);
  return u32x4{pack_mma2(f[0] * x, f[1] * x), pack_mma2(f[2] * x, f[3] * x),
               pack_mma2(f[4] * x, f[5] * x), pack_mma2(f[6] * x, f[7] * x)};
}

/// dst = diag(f) src for a [64][Cols] swizzled tile, rows past n zero, by
/// every thread of the CTA, 16 bytes at a time in the tile's own places.
template <int Cols, typename F>
__device__ __forceinline__ void
wg_scale_rows(unsigned char *dst, const unsigned char *src, int n, F f) {
  static_assert(64 * Cols / 8 % kThreads == 0, "whole 16-byte pieces");
#pragma unroll
  for (int j = 0; j < 64 * Cols / 8 / kThreads; ++j) {
    const int offset = (threadIdx.x + j * kThreads) * 16,
              r = offset % 8192 / 128;
    const float x = r < n ? f(r) : 0.0f;
    *(u32x4 *)(dst + offset) =
        wg_scaled_word(*(const u32x4 *)(src + offset), x);
  }
}

/// Rows 0 .. n - 1 of a [64][K] swizzled tile times f(r), as mma_t rows of K
/// unswizzled from `to` (K / 2 floats a row): a segment's X in its chunk
/// record (Segments.cuh).
template <int K, typename F>
__device__ __forceinline__ void
wg_store_rows(float *to, const unsigned char *tile, int n, F f) {
  static_assert(64 * K / 8 % kThreads == 0, "whole 16-byte pieces");
#pragma unroll
  for (int j = 0; j < 64 * K / 8 / kThreads; ++j) {
    const int i = threadIdx.x + j * kThreads, r = i / (K / 8),
              piece = i % (K / 8);
    if (r < n) {
      const float x = f(r);
      const u32x4 w = *(const u32x4 *)(tile + piece / 8 * 8192 + r * 128 +
                                       (((piece % 8) ^ (r % 8)) << 4));
      *(u32x4 *)(to + r * (K / 2) + piece * 4) = wg_scaled_word(w, x);
    }
  }
}

/// 1 / sqrt(|x_r|^2 + 1e-6) of each of the 64 rows x_r of a [64][Cols]
/// swizzled tile into `out` (Prelude.cuh's l2norm, fla's epsilon), by
/// `Threads` consecutive threads (the CTA's, or a warpgroup's): Threads / 64
/// a row, their sums met by shuffles. The caller's barrier publishes `out`.
template <int Cols, int Threads = kThreads>
__device__ __forceinline__ void wg_row_norms(float *out,
                                             const unsigned char *tile) {
  constexpr int kThreadsPerRow = Threads / 64,
                kPieces = Cols / 8 / kThreadsPerRow;
  static_assert(Threads % 64 == 0 && Cols / 8 % kThreadsPerRow == 0,
                "whole 16-byte pieces a thread");
  const int r = threadIdx.x % Threads / kThreadsPerRow,
            first = threadIdx.x % kThreadsPerRow * kPieces;
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kPieces; ++i) {
    const int piece = first + i;
    float f[8];
    unpack(*(const u32x4 *)(tile + piece / 8 * 8192 + r * 128 +
                            (((piece % 8) ^ (r % 8)) << 4)),
           mma_t{}, f);
#pragma unroll
    for (int e = 0; e < 8; ++e)
      sum += f[e] * f[e];
  }
#pragma unroll
  for (int d = 1; d < kThreadsPerRow; d *= 2)
    sum += __shfl_xor_sync(0xffffffffu, sum, d);
  if (threadIdx.x % kThreadsPerRow == 0)
    out[r] = rsqrtf(sum + 1e-6f);
}

/// The chunk's n rows of a [tokens][heads][Cols] tensor (`rows` at the
/// chunk's first row, `stride` elements between rows) into a [64][Cols]
/// swizzled tile, 16 bytes at a time; rows past n zero. Every thread.
template <int Cols>
__device__ __forceinline__ void
wg_load_rows(unsigned char *tile, const mma_t *rows, i64 stride, int n) {
  for (int i = threadIdx.x; i < 64 * Cols / 8; i += kThreads) {
    const int r = i / (Cols / 8), piece = i % (Cols / 8);
    u32x4 w = u32x4{0u, 0u, 0u, 0u};
    if (r < n)
      w = *(const u32x4 *)(rows + r * stride + piece * 8);
    *(u32x4 *)(tile + piece / 8 * 8192 + r * 128 +
               (((piece % 8) ^ (r % 8)) << 4)) = w;
  }
}

/// wg_load_rows by cp.async: the copies are issued and nothing waits for
/// them (copies_issued, copies_landed and a barrier publish the tile), so
/// the tiles and gates a prepare kernel fetches are in flight together
/// rather than one round trip each. The rows must be 16-byte aligned (the
/// scan's TMA descriptors refuse them otherwise).
template <int Cols>
__device__ __forceinline__ void
wg_copy_rows(unsigned char *tile, const mma_t *rows, i64 stride, int n) {
#pragma unroll
  for (int j = 0; j < 64 * Cols / 8 / kThreads; ++j) {
    const int i = threadIdx.x + j * kThreads;
    const int r = i / (Cols / 8), piece = i % (Cols / 8);
    // Rows past n copy nothing from row 0 (always a valid address).
    copy_async<16>(tile + piece / 8 * 8192 + r * 128 +
                       (((piece % 8) ^ (r % 8)) << 4),
                   rows + (r < n ? r : 0) * stride + piece * 8, r < n ? 16 : 0);
  }
}

/// A per-token input's column read from global memory (`at` the chunk's
/// first token's value, `stride` floats between tokens), zero past n.
__device__ __forceinline__ wg_column wg_column_load(const float *at, i64 stride,
                                                    int n) {
  const int lane = threadIdx.x % 32;
  return {lane < n ? at[lane * stride] : 0.0f,
          lane + 32 < n ? at[(lane + 32) * stride] : 0.0f};
}

/// acc += X Y for 16 x 16 fp32 tiles in shared memory (row strides lx,
/// ly), one warp, on the tensor cores in tf32 (the fp32 bits as they are:
/// the tensor core reads their top 19; a cvt.rna a value took ptxas four
/// instructions); acc is the product's two 16 x 8 halves as m16n8
/// accumulators.
__device__ __forceinline__ void tile16_product(float (&acc)[2][4],
                                               const float *X, int lx,
                                               const float *Y, int ly) {
  const int g = threadIdx.x % 32 / 4, tq = threadIdx.x % 4;
#pragma unroll
  for (int kk = 0; kk < 2; ++kk) {
    const float *x = X + g * lx + 8 * kk + tq;
    unsigned a[4] = {__float_as_uint(x[0]), __float_as_uint(x[8 * lx]),
                     __float_as_uint(x[4]), __float_as_uint(x[8 * lx + 4])};
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const float *y = Y + (8 * kk + tq) * ly + 8 * nt + g;
      unsigned b[2] = {__float_as_uint(y[0]), __float_as_uint(y[4 * ly])};
      mma_tf32_1688(acc[nt], a, b);
    }
  }
}

/// Writes f * acc (tile16_product's layout) to a 16 x 16 tile, row stride ld.
__device__ __forceinline__ void
tile16_store(float *to, int ld, const float (&acc)[2][4], float f) {
  const int g = threadIdx.x % 32 / 4, tq = threadIdx.x % 4;
#pragma unroll
  for (int nt = 0; nt < 2; ++nt)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      *(f32x2 *)(to + (g + 8 * h) * ld + 8 * nt + 2 * tq) =
          f32x2{f * acc[nt][2 * h], f * acc[nt][2 * h + 1]};
}

/// Row stride of a chunk's 64 x 64 fp32 solve matrices (A, T): 16-byte
/// rows for the 16 x 16 blocks' paired stores, banks spread by 4.
constexpr int kWgSolveLd = 68;

/// A's row stride where it lies in the rows of a [64][128] mma_t tile, its
/// block row i in the tile's rows 16 i .. 16 i + 15: columns 0-31 in the
/// tile's first 8 KB, 32-63 in its second, rows of 32 floats
/// (wg_halves_at), so that A's block rows can be written as the tile's
/// rows are read for the last time.
constexpr int kWgHalvesLd = 32;

/// Element (t, u) of a 64 x 64 fp32 matrix at kWgHalvesLd.
__device__ __forceinline__ int wg_halves_at(int t, int u) {
  return u / 32 * 2048 + t * 32 + u % 32;
}

/// Block (i, j) of a 64 x 64 fp32 matrix of 16 x 16 blocks with rows ALd
/// floats apart (kWgHalvesLd: in a tile's halves).
template <int ALd>
__device__ __forceinline__ const float *wg_solve_block(const float *a, int i,
                                                       int j) {
  if constexpr (ALd == kWgHalvesLd)
    return a + j / 2 * 2048 + 16 * i * 32 + j % 2 * 16;
  else
    return a + 16 * i * ALd + 16 * j;
}

/// T = (I + A)^-1 for a chunk's A (64 x 64 fp32, row stride ALd, read only
/// below the diagonal) into t (row stride kWgSolveLd; the blocks above the
/// diagonal are left as they were), by every thread of the CTA (at least
/// 96), ending at a barrier. (kWgHalvesLd fits A in the rows of a 16 KB
/// tile as it is freed, at the price of its fragments' bank conflicts.)
/// `scratch` takes three warps' 16 x 20 partial products (3840 bytes);
/// side() runs on threads 64 .. while the first 64 solve the diagonal
/// blocks.
///
/// By 16 x 16 blocks: the four diagonal blocks by forward substitution (a
/// column a thread, fp32), then the blocks below them a diagonal at a time,
/// T_ij = -T_ii sum_{j <= k < i} A_ik T_kj, as tf32 tensor-core products (a
/// warp a block). A column-by-column substitution over all 64 rows spent
/// 393 us of gdn's 896 at 1x8192x96 (its chain of 63 dependent steps, and
/// three times the FMAs the triangle needs).
template <int ALd = kWgSolveLd, typename Side>
__device__ __forceinline__ void
wg_unit_lower_inverse(const float *a, float *t, float *scratch, Side side) {
  constexpr int kLd = kWgSolveLd;
  const int tid = threadIdx.x, warp = tid / 32;
  if (tid < 64) {
    // T's diagonal blocks: thread (b, c) solves column c of block b,
    // walking A's columns j in order (x_j is final once column j - 1 is
    // applied).
    const int b = tid / 16, c = tid % 16;
    const float *blk = wg_solve_block<ALd>(a, b, b);
    float x[16];
#pragma unroll
    for (int i = 0; i < 16; ++i)
      x[i] = i == c ? 1.0f : 0.0f;
#pragma unroll
    for (int j = 0; j < 15; ++j)
#pragma unroll
      for (int i = j + 1; i < 16; ++i)
        x[i] -= blk[i * ALd + j] * x[j];
#pragma unroll
    for (int i = 0; i < 16; ++i)
      t[(16 * b + i) * kLd + 16 * b + c] = x[i];
  } else {
    side();
  }
  __syncthreads();
  // The blocks below the diagonal, a diagonal at a time: warp w takes
  // block (d + w, w).
  for (int d = 1; d < 4; ++d) {
    if (warp <= 3 - d) {
      const int i = d + warp, j = warp;
      float m[2][4] = {};
      for (int kb = j; kb < i; ++kb)
        tile16_product(m, wg_solve_block<ALd>(a, i, kb), ALd,
                       t + 16 * kb * kLd + 16 * j, kLd);
      float *partial = scratch + warp * 16 * 20;
      tile16_store(partial, 20, m, 1.0f);
      __syncwarp();
      float x[2][4] = {};
      tile16_product(x, t + 16 * i * (kLd + 1), kLd, partial, 20);
      tile16_store(t + 16 * i * kLd + 16 * j, kLd, x, -1.0f);
    }
    __syncthreads();
  }
}

/// A chunk's T (wg_unit_lower_inverse's, row stride kWgSolveLd) as mma_t
/// into the swizzled 64 x 64 box `to` (8 KB, global or shared), 16 bytes
/// at a time, by every thread; the blocks above the diagonal, which the
/// solve leaves unwritten, are zero.
__device__ __forceinline__ void wg_store_box(unsigned char *to,
                                             const float *t) {
  for (int i = threadIdx.x; i < 64 * 8; i += kThreads) {
    const int r = i / 8, c = i % 8 * 8;
    u32x4 w{0u, 0u, 0u, 0u};
    if (c / 16 <= r / 16) {
      const float *x = t + r * kWgSolveLd + c;
      w = u32x4{pack_mma2(x[0], x[1]), pack_mma2(x[2], x[3]),
                pack_mma2(x[4], x[5]), pack_mma2(x[6], x[7])};
    }
    *(u32x4 *)(to + wg_offset(r, c)) = w;
  }
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/// Visits this warpgroup's scores (wg_issue_scores' accumulators, W
/// warpgroups) two neighbouring columns at a time: put(row, col, x0, x1)
/// with x = acc f(row, col), zero in rows past n.
template <int W, typename F, typename Put>
__device__ __forceinline__ void
wg_each_score_pair(const float (&acc)[32 / W], int wg, int n, F f, Put put) {
  const int warp = threadIdx.x / 32 % 4, g = threadIdx.x % 32 / 4,
            tq = threadIdx.x % 4;
  // Every value before any put, f evaluated in every row: f's loads (a
  // row's and a column's table entries) are then shared across the pairs,
  // not reloaded after each store that might alias them or confined to a
  // branch.
  float x[32 / W];
#pragma unroll
  for (int j = 0; j < 8 / W; ++j) {
    const int col = 64 / W * wg + 8 * j + 2 * tq;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = 16 * warp + g + 8 * h, i = 4 * j + 2 * h;
      const float f0 = f(row, col), f1 = f(row, col + 1);
      x[i] = row < n ? acc[i] * f0 : 0.0f;
      x[i + 1] = row < n ? acc[i + 1] * f1 : 0.0f;
    }
  }
#pragma unroll
  for (int j = 0; j < 8 / W; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = 4 * j + 2 * h;
      put(16 * warp + g + 8 * h, 64 / W * wg + 8 * j + 2 * tq, x[i], x[i + 1]);
    }
}

/// The scores times f(t, s) into the fp32 64 x 64 matrix `a` (row stride
/// kWgSolveLd); f gives the mask's zeros, and rows past n are zero.
template <int W, typename F>
__device__ __forceinline__ void
wg_store_matrix(float *a, const float (&acc)[32 / W], int wg, int n, F f) {
  wg_each_score_pair<W>(
      acc, wg, n, f, [&](int row, int col, float x0, float x1) {
        *(f32x2 *)(a + row * kWgSolveLd + col) = f32x2{x0, x1};
      });
}

/// R^T = V^T diag(fx) - Y diag(fy) for this warpgroup's 64 value columns:
/// V^T's fragments by ldmatrix.trans from v's swizzled tile (its box wg),
/// Y the accumulators of S^T y^T (wg_issue_state_product); token columns
/// past n zero. R^T lands in the accumulator layout, ready to pack as an A
/// operand over the chunk's tokens.
template <typename FX, typename FY>
__device__ __forceinline__ void
wg_residual(float (&r)[32], const float (&y)[32], const unsigned char *v,
            int wg, int n, FX fx, FY fy) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32 % 4, tq = lane % 4;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int m = lane / 8, j = 2 * i + m / 2, h = m % 2;
    const int t = 8 * j + lane % 8, piece = 2 * warp + h;
    unsigned v4[4];
    ldmatrix_x4(
        v4, (const mma_t *)(v + wg * 8192 + t * 128 + ((piece ^ (t % 8)) << 4)),
        true);
#pragma unroll
    for (int mm = 0; mm < 4; ++mm) {
      const int jj = 2 * i + mm / 2, hh = mm % 2;
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int col = 8 * jj + 2 * tq + e, x = 4 * jj + 2 * hh + e;
        mma_t element;
        element.bits = (unsigned short)(e == 0 ? v4[mm] : v4[mm] >> 16);
        r[x] = col < n ? to_float(element) * fx(col) - y[x] * fy(col) : 0.0f;
      }
    }
  }
}

/// Token-column accumulators (m64n64: this warpgroup's value rows by the
/// chunk's 64 tokens) times f(t) per token column, packed as the A
/// fragments of a product over the tokens.
template <typename F>
__device__ __forceinline__ void wg_pack_columns(unsigned (&a)[4][4],
                                                const float (&acc)[32], F f) {
  const int tq = threadIdx.x % 4;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int x = 0; x < 4; ++x) {
      // Element 8 kk + 2 x of the accumulators is token column
      // 16 kk + 8 (x / 2) + 2 tq.
      const int col = 16 * kk + 8 * (x / 2) + 2 * tq;
      a[kk][x] = pack_mma2(acc[8 * kk + 2 * x] * f(col),
                           acc[8 * kk + 2 * x + 1] * f(col + 1));
    }
}

/// Issues U^T = R^T T^T (T the chunk's prepared 64 x 64 box, K-major: its
/// rows are U's tokens).
__device__ __forceinline__ void wg_issue_solve(float (&u)[32],
                                               const unsigned (&r)[4][4],
                                               const unsigned char *t) {
  wg_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    wgmma_m64n64k16_rs<0>(u, r[kk], wg_descriptor(t + kk * 32, 16, 1024),
                          kk > 0);
  wg_commit();
}

/// Issues acc += U^T P^T, U^T from registers (wg_pack_columns).
__device__ __forceinline__ void wg_issue_values_intra(float (&acc)[32],
                                                      const unsigned (&u)[4][4],
                                                      const unsigned char *p) {
  wg_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    wgmma_m64n64k16_rs<0>(acc, u[kk], wg_descriptor(p + kk * 32, 16, 1024), 1);
  wg_commit();
}

/// Issues S^T += U~^T K over the K key columns, U~^T from registers (U^T
/// with the update's factors on its token columns) and k's tile MN-major.
template <int K>
__device__ __forceinline__ void
wg_issue_values_update(float (&s)[K / 2], const unsigned (&u)[4][4],
                       const unsigned char *kt) {
  static_assert(K == 64 || K == 128, "key dims 64 or 128");
  wg_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const u64 b = wg_descriptor(kt + kk * 2048, 8192, 1024);
    if constexpr (K == 128)
      wgmma_m64n128k16_rs<1>(s, u[kk], b, 1);
    else
      wgmma_m64n64k16_rs<1>(s, u[kk], b, 1);
  }
  wg_commit();
}

/// S^T's accumulators (wg_each_state_element) packed as the mma_t A
/// fragments of a product over the K key columns; before the fence, so that
/// no register a product reads is written after it.
template <int K>
__device__ __forceinline__ void wg_pack_state(unsigned (&a)[K / 16][4],
                                              const float (&s)[K / 2]) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
#pragma unroll
    for (int x = 0; x < 4; ++x)
      a[kk][x] = pack_mma2(s[8 * kk + 2 * x], s[8 * kk + 2 * x + 1]);
}

/// Issues this warpgroup's share of a b^T over K columns (rows t: the 64
/// tokens of a; columns s: b's tokens 64 / W w .. 64 / W (w + 1) - 1, of W
/// warpgroups) into `acc`, both K-major.
template <int K, int W>
__device__ __forceinline__ void
wg_issue_scores(float (&acc)[32 / W], const unsigned char *a,
                const unsigned char *b, int wg) {
  static_assert(W == 1 || W == 2, "one or two warpgroups");
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    const u64 da = wg_descriptor(a + kk / 4 * 8192 + kk % 4 * 32, 16, 1024),
              db = wg_descriptor(b + kk / 4 * 8192 + 64 / W * wg * 128 +
                                     kk % 4 * 32,
                                 16, 1024);
    if constexpr (W == 2)
      wgmma_m64n32k16_ss<0, 0>(acc, da, db, kk > 0);
    else
      wgmma_m64n64k16_ss<0, 0>(acc, da, db, kk > 0);
  }
  wg_commit();
}

/// Issues S^T x^T (x's 64 rows as the columns) into `acc` from the packed
/// state.
template <int K>
__device__ __forceinline__ void
wg_issue_state_product(float (&acc)[32], const unsigned (&a)[K / 16][4],
                       const unsigned char *x) {
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk)
    wgmma_m64n64k16_rs<0>(
        acc, a[kk], wg_descriptor(x + kk / 4 * 8192 + kk % 4 * 32, 16, 1024),
        kk > 0);
  wg_commit();
}

/// Issues acc += V^T P^T: v's rows (this warpgroup's 64 value columns) by
/// the chunk's 64 x 64 scores P (written by wg_store_scores).
__device__ __forceinline__ void wg_issue_intra(float (&acc)[32],
                                               const unsigned char *v,
                                               const unsigned char *p, int wg) {
  wg_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    wgmma_m64n64k16_ss<1, 0>(
        acc, wg_descriptor(v + wg * 8192 + kk * 2048, 8192, 1024),
        wg_descriptor(p + kk * 32, 16, 1024), 1);
  wg_commit();
}

/// Issues S^T += V^T K~ over the K key columns (both tiles MN-major: their
/// rows are the tokens).
template <int K>
__device__ __forceinline__ void
wg_issue_update(float (&s)[K / 2], const unsigned char *v,
                const unsigned char *kt, int wg) {
  static_assert(K == 64 || K == 128, "key dims 64 or 128");
  wg_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const u64 da = wg_descriptor(v + wg * 8192 + kk * 2048, 8192, 1024),
              db = wg_descriptor(kt + kk * 2048, 8192, 1024);
    if constexpr (K == 128)
      wgmma_m64n128k16_ss<1, 1>(s, da, db, 1);
    else
      wgmma_m64n64k16_ss<1, 1>(s, da, db, 1);
  }
  wg_commit();
}

/// The scores times f(t, s) as mma_t into the 64 x 64 swizzled tile P; f
/// gives the mask's zeros, and rows past n are zero.
template <int W, typename F>
__device__ __forceinline__ void wg_store_scores(unsigned char *p,
                                                const float (&acc)[32 / W],
                                                int wg, int n, F f) {
  wg_each_score_pair<W>(
      acc, wg, n, f, [&](int row, int col, float x0, float x1) {
        *(unsigned *)(p + wg_offset(row, col)) = pack_mma2(x0, x1);
      });
}

/// Each token column t of o^T's accumulators (wg_issue_state_product)
/// times f(t).
template <typename F>
__device__ __forceinline__ void wg_scale_columns(float (&acc)[32], F f) {
  const int tq = threadIdx.x % 4;
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const float x = f(8 * j + 2 * tq + e);
      acc[4 * j + e] *= x;
      acc[4 * j + 2 + e] *= x;
    }
}

#endif // __CUDA_ARCH_FEAT_SM90_ALL

} // namespace lina
