//===- Prelude.cuh - The device library of generated kernels ----*- CUDA -*-===//
//
// Part of lina. Every generated kernel starts with this text. It defines, once,
// one device function per lina tile op; the emitted kernel is a sequence of
// calls into it. Tiles live in shared memory as row-major fp32. It needs no
// header at all (NVRTC has none): bf16/f16 conversions are written in PTX.
//
// Conventions: every function is called by all threads of the CTA and reads
// and writes shared memory only (loads and stores excepted); the emitted code
// puts a __syncthreads() between calls. `n` is the number of valid rows of a
// chunk tile; rows at and past n are zero in every result.
//
//===----------------------------------------------------------------------===//

namespace lina {

typedef long long i64;

struct bf16 { unsigned short bits; };
struct f16 { unsigned short bits; };

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(bf16 x) {
  return __uint_as_float(((unsigned)x.bits) << 16);
}
__device__ __forceinline__ float to_float(f16 x) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
}
__device__ __forceinline__ void from_float(float v, float &out) { out = v; }
__device__ __forceinline__ void from_float(float v, bf16 &out) {
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(out.bits) : "f"(v));
}
__device__ __forceinline__ void from_float(float v, f16 &out) {
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(out.bits) : "f"(v));
}

/// Kernel parameters; the host's LaunchParams in ChunkKernel.cpp has the
/// same layout.
struct Params {
  const void *q, *k, *v;
  const float *g, *beta;
  const void *a, *b;
  const float *gate_a_log, *gate_dt_bias;
  void *o;
  const float *initial_state;
  float *final_state;
  const i64 *cu_seqlens;
  float *chunk_states;
  i64 batch, seq_len, num_seqs;
};

/// The tokens [begin, end) of sequence `seq`, flattened over the batch.
__device__ __forceinline__ void sequence_bounds(const Params &p, i64 seq,
                                                i64 &begin, i64 &end) {
  if (p.cu_seqlens) {
    begin = p.cu_seqlens[seq];
    end = p.cu_seqlens[seq + 1];
  } else {
    begin = seq * p.seq_len;
    end = begin + p.seq_len;
  }
}

/// A slot per (sequence, chunk) in the materialized chunk states: sequences
/// starting at token t get slots from t / C + seq on, which never collide.
__device__ __forceinline__ i64 chunk_slot(i64 begin, i64 seq, i64 chunk,
                                          int C) {
  return begin / C + seq + chunk;
}

//===----------------------------------------------------------------------===//
// Global memory <-> shared tiles
//===----------------------------------------------------------------------===//

/// dst[r][c] = src[r * row_stride + c] for r < n, else 0.
template <int R, int CC, typename T>
__device__ void load_tile(float *dst, const T *src, i64 row_stride, int n) {
  for (int i = threadIdx.x; i < R * CC; i += blockDim.x) {
    int r = i / CC, c = i % CC;
    dst[i] = r < n ? to_float(src[r * row_stride + c]) : 0.0f;
  }
}

/// Every valid row holds `value` (a fixed per-head log gate).
template <int R>
__device__ void fill_rows(float *dst, float value, int n) {
  for (int r = threadIdx.x; r < R; r += blockDim.x)
    dst[r] = r < n ? value : 0.0f;
}

template <int R, int CC, typename T>
__device__ void store_tile(T *dst, const float *src, i64 row_stride, int n) {
  for (int i = threadIdx.x; i < n * CC; i += blockDim.x) {
    int r = i / CC, c = i % CC;
    from_float(src[i], dst[r * row_stride + c]);
  }
}

/// A K x VT state tile from [K, V] fp32 rows (column offset applied by the
/// caller); zero when src is null.
template <int K, int VT>
__device__ void load_state(float *dst, const float *src, int row_stride) {
  for (int i = threadIdx.x; i < K * VT; i += blockDim.x)
    dst[i] = src ? src[(i / VT) * row_stride + i % VT] : 0.0f;
}

template <int K, int VT>
__device__ void store_state(float *dst, const float *src, int row_stride) {
  for (int i = threadIdx.x; i < K * VT; i += blockDim.x)
    dst[(i / VT) * row_stride + i % VT] = src[i];
}

template <int N>
__device__ void copy_tile(float *dst, const float *src) {
  for (int i = threadIdx.x; i < N; i += blockDim.x)
    dst[i] = src[i];
}

//===----------------------------------------------------------------------===//
// Elementwise and row-wise ops
//===----------------------------------------------------------------------===//

template <int N> __device__ void zeros(float *dst) {
  for (int i = threadIdx.x; i < N; i += blockDim.x)
    dst[i] = 0.0f;
}

template <int N> __device__ void scale(float *dst, const float *x, float f) {
  for (int i = threadIdx.x; i < N; i += blockDim.x)
    dst[i] = x[i] * f;
}

template <int N> __device__ void neg(float *dst, const float *x) {
  for (int i = threadIdx.x; i < N; i += blockDim.x)
    dst[i] = -x[i];
}

template <int N>
__device__ void add(float *dst, const float *x, const float *y) {
  for (int i = threadIdx.x; i < N; i += blockDim.x)
    dst[i] = x[i] + y[i];
}

template <int N>
__device__ void sub(float *dst, const float *x, const float *y) {
  for (int i = threadIdx.x; i < N; i += blockDim.x)
    dst[i] = x[i] - y[i];
}

/// x_i / sqrt(|x_i|^2 + 1e-6), fla's epsilon: a zero row stays zero.
template <int R, int CC>
__device__ void l2norm(float *dst, const float *x) {
  for (int r = threadIdx.x; r < R; r += blockDim.x) {
    float s = 0.0f;
    for (int c = 0; c < CC; ++c)
      s += x[r * CC + c] * x[r * CC + c];
    float inv = rsqrtf(s + 1e-6f);
    for (int c = 0; c < CC; ++c)
      dst[r * CC + c] = x[r * CC + c] * inv;
  }
}

__device__ __forceinline__ float softplus(float x) {
  return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x)));
}
__device__ __forceinline__ float sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}

/// g = -exp(A_log) softplus(x + dt_bias); dt_bias may be null.
template <int R, int GC>
__device__ void gate_softplus(float *dst, const float *x, float a_log,
                              const float *dt_bias, int n) {
  float a = expf(a_log);
  for (int i = threadIdx.x; i < R * GC; i += blockDim.x) {
    float bias = dt_bias ? dt_bias[i % GC] : 0.0f;
    dst[i] = i / GC < n ? -a * softplus(x[i] + bias) : 0.0f;
  }
}

/// g = lower_bound * sigmoid(exp(A_log) (x + dt_bias)).
template <int R, int GC>
__device__ void gate_lower_bound(float *dst, const float *x, float a_log,
                                 const float *dt_bias, float lower_bound,
                                 int n) {
  float a = expf(a_log);
  for (int i = threadIdx.x; i < R * GC; i += blockDim.x) {
    float bias = dt_bias ? dt_bias[i % GC] : 0.0f;
    dst[i] = i / GC < n ? lower_bound * sigmoid(a * (x[i] + bias)) : 0.0f;
  }
}

template <int R>
__device__ void beta_sigmoid(float *dst, const float *x, float factor, int n) {
  for (int r = threadIdx.x; r < R; r += blockDim.x)
    dst[r] = r < n ? factor * sigmoid(x[r]) : 0.0f;
}

/// Cumulative sum down the first n rows, per column; zero past n.
template <int R, int GC>
__device__ void cumsum(float *dst, const float *g, int n, bool exclusive) {
  for (int c = threadIdx.x; c < GC; c += blockDim.x) {
    float s = 0.0f;
    for (int r = 0; r < R; ++r) {
      float v = g[r * GC + c];
      if (exclusive)
        dst[r * GC + c] = r < n ? s : 0.0f;
      s += v;
      if (!exclusive)
        dst[r * GC + c] = r < n ? s : 0.0f;
    }
  }
}

template <int R, int CC>
__device__ void scale_rows(float *dst, const float *x, const float *w) {
  for (int i = threadIdx.x; i < R * CC; i += blockDim.x)
    dst[i] = x[i] * w[i / CC];
}

__device__ __forceinline__ float gate_at(const float *g, int gc, int r,
                                         int c) {
  return gc == 1 ? g[r] : g[r * gc + c];
}

/// x_i . exp(G_i), or x_i . exp(G_{n-1} - G_i) with to_end (never > 1).
template <int R, int CC, int GC>
__device__ void decay_rows(float *dst, const float *x, const float *g, int n,
                           bool to_end) {
  for (int i = threadIdx.x; i < R * CC; i += blockDim.x) {
    int r = i / CC, c = i % CC;
    if (r >= n) {
      dst[i] = 0.0f;
      continue;
    }
    float e = to_end ? gate_at(g, GC, n - 1, c) - gate_at(g, GC, r, c)
                     : gate_at(g, GC, r, c);
    dst[i] = x[i] * expf(e);
  }
}

/// Row c of the state times exp(G_{n-1, c}).
template <int K, int VT, int GC>
__device__ void decay_state(float *dst, const float *s, const float *g,
                            int n) {
  for (int i = threadIdx.x; i < K * VT; i += blockDim.x)
    dst[i] = s[i] * expf(gate_at(g, GC, n - 1, i / VT));
}

//===----------------------------------------------------------------------===//
// Products: tensor cores (mma.sync m16n8k16, bf16 in, fp32 accumulate) or
// fp32 FMA for f32 specs.
//===----------------------------------------------------------------------===//

__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
  unsigned r;
  // The first source lands in the upper half.
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

__device__ __forceinline__ void mma_bf16_16816(float (&d)[4],
                                               const unsigned (&a)[4],
                                               const unsigned (&b)[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                 "r"(b[1]));
}

/// Element (m, k) of an M x KD operand stored row-major, or of its transpose
/// stored KD x M when TA.
template <int M, int KD, bool TA>
__device__ __forceinline__ float lhs_at(const float *A, int m, int k) {
  return TA ? A[k * M + m] : A[m * KD + k];
}
/// Element (k, n) of a KD x N operand, or of the transpose of an N x KD one.
template <int KD, int N, bool TB>
__device__ __forceinline__ float rhs_at(const float *B, int k, int n) {
  return TB ? B[n * KD + k] : B[k * N + n];
}

/// dst (M x N) = op(A) op(B), contraction KD.
template <int M, int N, int KD, bool TA, bool TB, bool MMA>
__device__ void product(float *dst, const float *A, const float *B) {
  if (!MMA) {
    for (int i = threadIdx.x; i < M * N; i += blockDim.x) {
      int m = i / N, n = i % N;
      float s = 0.0f;
      for (int k = 0; k < KD; ++k)
        s += lhs_at<M, KD, TA>(A, m, k) * rhs_at<KD, N, TB>(B, k, n);
      dst[i] = s;
    }
    return;
  }
  static_assert(M % 16 == 0 && N % 8 == 0 && KD % 16 == 0,
                "tensor-core tiles are 16x8x16");
  int warp = threadIdx.x / 32, warps = blockDim.x / 32, lane = threadIdx.x % 32;
  int grp = lane / 4, tig = lane % 4;
  for (int tile = warp; tile < (M / 16) * (N / 8); tile += warps) {
    int m0 = (tile / (N / 8)) * 16, n0 = (tile % (N / 8)) * 8;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int k0 = 0; k0 < KD; k0 += 16) {
      unsigned a[4], b[2];
      int r0 = m0 + grp, r1 = m0 + grp + 8, c0 = k0 + 2 * tig;
      a[0] = pack_bf16x2(lhs_at<M, KD, TA>(A, r0, c0),
                         lhs_at<M, KD, TA>(A, r0, c0 + 1));
      a[1] = pack_bf16x2(lhs_at<M, KD, TA>(A, r1, c0),
                         lhs_at<M, KD, TA>(A, r1, c0 + 1));
      a[2] = pack_bf16x2(lhs_at<M, KD, TA>(A, r0, c0 + 8),
                         lhs_at<M, KD, TA>(A, r0, c0 + 9));
      a[3] = pack_bf16x2(lhs_at<M, KD, TA>(A, r1, c0 + 8),
                         lhs_at<M, KD, TA>(A, r1, c0 + 9));
      int n = n0 + grp;
      b[0] = pack_bf16x2(rhs_at<KD, N, TB>(B, c0, n),
                         rhs_at<KD, N, TB>(B, c0 + 1, n));
      b[1] = pack_bf16x2(rhs_at<KD, N, TB>(B, c0 + 8, n),
                         rhs_at<KD, N, TB>(B, c0 + 9, n));
      mma_bf16_16816(acc, a, b);
    }
    int col = n0 + 2 * tig;
    dst[(m0 + grp) * N + col] = acc[0];
    dst[(m0 + grp) * N + col + 1] = acc[1];
    dst[(m0 + grp + 8) * N + col] = acc[2];
    dst[(m0 + grp + 8) * N + col + 1] = acc[3];
  }
}

template <int M, int N, int KD, bool TA, bool MMA>
__device__ void matmul(float *dst, const float *A, const float *B) {
  product<M, N, KD, TA, false, MMA>(dst, A, B);
}

/// P_ij = sum_c x_ic y_jc exp(gx_ic - gy_jc), kept for j <= i (j < i when
/// strict) and i < n. With one gate column the ratio factors out of the sum:
/// a tensor-core product, then exp of the pairwise difference (never
/// positive where kept). Per-channel gates are summed directly, so no
/// exponent ever leaves the chunk's range.
template <int R, int D, int GC, bool MMA>
__device__ void decay_product(float *dst, const float *x, const float *y,
                              const float *gx, const float *gy, int n,
                              bool strict) {
  if (GC == 1) {
    product<R, R, D, false, true, MMA>(dst, x, y);
    __syncthreads();
    for (int i = threadIdx.x; i < R * R; i += blockDim.x) {
      int r = i / R, c = i % R;
      bool keep = r < n && (strict ? c < r : c <= r);
      dst[i] = keep ? dst[i] * expf(gx[r] - gy[c]) : 0.0f;
    }
    return;
  }
  for (int i = threadIdx.x; i < R * R; i += blockDim.x) {
    int r = i / R, c = i % R;
    bool keep = r < n && (strict ? c < r : c <= r);
    float s = 0.0f;
    if (keep)
      for (int ch = 0; ch < D; ++ch)
        s += x[r * D + ch] * y[c * D + ch] *
             expf(gx[r * GC + ch] - gy[c * GC + ch]);
    dst[i] = s;
  }
}

/// (I + A)^-1 X for strictly lower-triangular A: forward substitution, one
/// thread per column (columns are independent).
template <int R, int CC>
__device__ void tri_solve(float *dst, const float *A, const float *X) {
  for (int c = threadIdx.x; c < CC; c += blockDim.x)
    for (int i = 0; i < R; ++i) {
      float v = X[i * CC + c];
      for (int j = 0; j < i; ++j)
        v -= A[i * R + j] * dst[j * CC + c];
      dst[i * CC + c] = v;
    }
}

} // namespace lina
