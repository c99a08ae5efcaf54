//===- WgmmaKdaPrepare.cuh - KDA's chunks for the delta rule's wgmma scan -*- CUDA -*-===//
//
// Part of lina's device library (appended after WgmmaDeltaScan.cuh, whose
// record layout and solve it uses). Kimi Delta Attention, the delta rule
// with a per-channel decay, runs as wgmma_delta_scan<..., PerChannel> behind
// this kernel: a CTA a (chunk, value head), chunk-parallel, that writes each
// chunk's record (kKdaRecordBytes) with every operand of the scan's
// products already scaled, so that the sequential scan does no exponential
// but the state's decay.
//
// G_t is now a vector (the log gates' running sum over the chunk, a value
// a channel), r_t = 1 / |k_t| (1 without qk_l2norm), q_s = scale / |q_t|:
//   A[t][s] = beta_t r_t r_s sum_c k_tc k_sc exp(G_tc - G_sc)   (s < t)
//   P[t][s] = q_s r_s sum_c q_tc k_sc exp(G_tc - G_sc)           (s <= t)
//   Q~_t = q_s exp(G_t) q_t,  W_t = r_t exp(G_t) k_t,  K~_s = r_s
//   exp(G_{n-1} - G_s) k_s (products elementwise over the channels).
// (The chunk form of S_t = (I - beta_t k^_t k^_t^T) Diag(exp(g_t)) S_{t-1}
// + beta_t k^_t v_t^T, k^ = r k: the gdn record's derivation with the
// exponentials moved inside the sums.) The per-channel exponential does
// not factor into a row's and a column's, so A and P are products of
// scaled tiles, block row by block row: for rows 16 i .. 16 i + 15 and m_i
// channel by channel the midpoint of G over those rows,
//   exp(G_tc - G_sc) = exp(G_tc - m_ic) exp(m_ic - G_sc),
// block row i of A and of P is a tensor-core product of its 16 rows (k or
// q, scaled by exp(G_t - m_i)) with the rows s <= 16 i + 15 of k scaled by
// exp(m_i - G_s). Each factor's exponent stays within 75 (e^75 ~ 4e32 is
// still a bf16 with room for |k| up to 1e6, Prelude.cuh's
// kMaxFactoredGateRange) where the gates of a block span at most 150 and
// never grow by more than e^75 from an earlier token to the midpoint: log
// decays (g <= 0) keep the second for any s. A block row where some
// channel breaks either is summed directly (an exponential a pair and
// channel), the CTA agreeing on it. One midpoint over the whole chunk (the
// mma.sync kernels' factored_decay_product at C = 16) would need the gates
// to span at most 150 over 64 tokens: fla's -5 clamp allows 320.
//
//===----------------------------------------------------------------------===//

namespace lina {

/// The kernel's shared memory (dynamic: ~103 KB, two CTAs an SM).
struct kda_prepare_smem {
  static constexpr int C = 64, K = 128, kLd = K + 8, kAld = C + 4;
  /// k's rows as given (bf16, row stride kLd); T once A is formed.
  alignas(16) bf16 k[C * kLd];
  /// The gates, then their running sums G (fp32, row stride K).
  alignas(16) float gates[C * K];
  /// A below the diagonal (fp32, row stride kAld).
  alignas(16) float a[C * kAld];
  /// A block row's right operand (k scaled, rows s); then the solve's
  /// scratch and Tb's image.
  alignas(16) bf16 right[C * kLd];
  /// The block row's left operands: q and k scaled, beta and norms in.
  alignas(16) bf16 left_q[16 * kLd], left_k[16 * kLd];
  /// P's image as the scan reads it (64 x 64 bf16, swizzled).
  alignas(16) unsigned char p[C * C * 2];
  alignas(16) float beta[C], rnorm[C], mids[4 * K];
  float half_last[K], half_min[K];
  /// Bit i: block row i is summed directly.
  int direct;
};
static_assert(sizeof(kda_prepare_smem::k) == 64 * 68 * 4, "T takes k's place");

/// Eight floats as one 16-byte word of bf16.
__device__ __forceinline__ u32x4 pack_bf16x8(const float (&f)[8]) {
  return u32x4{pack_bf16x2(f[0], f[1]), pack_bf16x2(f[2], f[3]),
               pack_bf16x2(f[4], f[5]), pack_bf16x2(f[6], f[7])};
}

/// P[t][s] into the scan's image (zero where s > t or t >= n).
__device__ __forceinline__ void kda_store_p(unsigned char *image, int t, int s,
                                            int n, float x0, float x1) {
  x0 = t < n && s <= t ? x0 : 0.0f;
  x1 = t < n && s + 1 <= t ? x1 : 0.0f;
  *(unsigned *)(image + wg_offset(t, s)) = pack_bf16x2(x0, x1);
}

/// The body: 256 threads a (chunk, value head); grid x (sequence, value
/// head), y the chunk. Per-channel log gates given (p.g[(t HV + hv) K +
/// c]), beta given (p.beta[t HV + hv]).
template <int H, int HV, bool Norm>
__device__ void wgmma_kda_prepare(const Params &p, float scale) {
  constexpr int K = 128, C = 64, kLd = K + 8, kAld = C + 4;
  static_assert(kThreads == 256, "eight warps");
  extern __shared__ __align__(16) unsigned char kda_dynamic[];
  kda_prepare_smem &sm = *(kda_prepare_smem *)kda_dynamic;

  const int hv = blockIdx.x % HV;
  const i64 seq = blockIdx.x / HV, chunk = blockIdx.y;
  const int kh = hv / (HV / H);
  i64 begin, end;
  sequence_bounds(p, seq, begin, end);
  const i64 t0 = begin + chunk * C;
  if (t0 >= end)
    return;
  const int n = (int)min((i64)C, end - t0);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32,
            g = lane / 4, tq = lane % 4;
  unsigned char *record =
      (unsigned char *)delta_record<kKdaRecordFloats>(p, begin, seq, chunk,
                                                      hv, HV);

  // The gates (zero past n: G stays at G_{n-1}), beta, P's image zeroed
  // (the block rows write only their columns s <= 16 i + 15).
  {
    const float *gin = p.g + (t0 * HV + hv) * (i64)K;
    const bool words = aligned16(p.g);
#pragma unroll
    for (int j = 0; j < C * K / 4 / kThreads; ++j) {
      const int i = tid + j * kThreads, r = i / (K / 4), c = i % (K / 4) * 4;
      const float *from = gin + (i64)r * HV * K + c;
      f32x4 x{0.0f, 0.0f, 0.0f, 0.0f};
      if (r < n)
        x = words ? *(const f32x4 *)from
                  : f32x4{from[0], from[1], from[2], from[3]};
      *(f32x4 *)(sm.gates + r * K + c) = x;
    }
    if (tid < C)
      sm.beta[tid] = tid < n ? p.beta[(t0 + tid) * HV + hv] : 0.0f;
    if (tid == 0)
      sm.direct = 0;
#pragma unroll
    for (int j = 0; j < C * C * 2 / 16 / kThreads; ++j)
      ((u32x4 *)sm.p)[tid + j * kThreads] = u32x4{0u, 0u, 0u, 0u};
  }
  __syncthreads();

  // G by channel, two threads a channel (32 rows each); each block row's
  // midpoints and whether its factors stay within e^75; the chunk's decay.
  {
    const int c = tid % K, half = tid / K;
    float x[32], run = 0.0f, low = 3.0e38f;
#pragma unroll
    for (int r = 0; r < 32; ++r) {
      run += sm.gates[(32 * half + r) * K + c];
      x[r] = run;
      low = fminf(low, run);
    }
    if (half == 0) {
      sm.half_last[c] = run;
      sm.half_min[c] = low;
    }
    __syncthreads();
    const float offset = half ? sm.half_last[c] : 0.0f;
    float prefix_min = half ? sm.half_min[c] : 3.0e38f;
#pragma unroll
    for (int bb = 0; bb < 2; ++bb) {
      float hi = -3.0e38f, lo = 3.0e38f;
#pragma unroll
      for (int r = 16 * bb; r < 16 * bb + 16; ++r) {
        x[r] += offset;
        hi = fmaxf(hi, x[r]);
        lo = fminf(lo, x[r]);
      }
      prefix_min = fminf(prefix_min, lo);
      const float mid = 0.5f * (hi + lo);
      const int b = 2 * half + bb;
      sm.mids[b * K + c] = mid;
      // Written to fail on NaN too (the direct sums then carry it).
      if (!(hi - mid <= 0.5f * kMaxFactoredGateRange &&
            mid - prefix_min <= 0.5f * kMaxFactoredGateRange))
        atomicOr(&sm.direct, 1 << b);
    }
#pragma unroll
    for (int r = 0; r < 32; ++r)
      sm.gates[(32 * half + r) * K + c] = x[r];
    float *decay = (float *)(record + kKdaDecay);
    decay[half ? c : K + c] = half ? __expf(x[31]) : 0.0f; // and padding
  }
  __syncthreads();

  const bf16 *q = (const bf16 *)p.q + (t0 * H + kh) * K;
  const bf16 *k = (const bf16 *)p.k + (t0 * H + kh) * K;
  for (int i = 0; i < 4; ++i) {
    const bool direct = sm.direct >> i & 1;
    // The block row's own 16 rows, 16 threads a row and 8 channels a
    // thread: the norms, the record's Q~, W and K~, the left operands,
    // and k's rows as given (the right operands of this and later rows).
    // q and k are 16-byte aligned: the scan's TMA descriptors, encoded
    // before this kernel's launch, refuse them otherwise.
    {
      const int t = 16 * i + tid / 16, c = tid % 16 * 8;
      u32x4 qw{0u, 0u, 0u, 0u}, kw{0u, 0u, 0u, 0u};
      if (t < n) {
        qw = *(const u32x4 *)(q + (i64)t * H * K + c);
        kw = *(const u32x4 *)(k + (i64)t * H * K + c);
      }
      float qf[8], kf[8];
      unpack(qw, bf16{}, qf);
      unpack(kw, bf16{}, kf);
      float sq = 0.0f, sk = 0.0f;
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        sq += qf[e] * qf[e];
        sk += kf[e] * kf[e];
      }
#pragma unroll
      for (int d = 1; d < 16; d *= 2) {
        sq += __shfl_xor_sync(0xffffffffu, sq, d);
        sk += __shfl_xor_sync(0xffffffffu, sk, d);
      }
      const float qs = Norm ? scale * rsqrtf(sq + 1e-6f) : scale,
                  r = Norm ? rsqrtf(sk + 1e-6f) : 1.0f, rb = r * sm.beta[t];
      if (tid % 16 == 0)
        sm.rnorm[t] = r;
      float oq[8], ow[8], okt[8], lq[8], lk[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float G = sm.gates[t * K + c + e],
                    e1 = __expf(G),
                    f = direct ? 1.0f : __expf(G - sm.mids[i * K + c + e]);
        oq[e] = qs * qf[e] * e1;
        ow[e] = r * kf[e] * e1;
        okt[e] = r * kf[e] * __expf(sm.gates[(C - 1) * K + c + e] - G);
        lq[e] = qs * qf[e] * f;
        lk[e] = rb * kf[e] * f;
      }
      const unsigned at = wg_tile_offset(t, c);
      *(u32x4 *)(record + kKdaQ + at) = pack_bf16x8(oq);
      *(u32x4 *)(record + kKdaW + at) = pack_bf16x8(ow);
      *(u32x4 *)(record + kKdaKtilde + at) = pack_bf16x8(okt);
      *(u32x4 *)(sm.left_q + t % 16 * kLd + c) = pack_bf16x8(lq);
      *(u32x4 *)(sm.left_k + t % 16 * kLd + c) = pack_bf16x8(lk);
      *(u32x4 *)(sm.k + t * kLd + c) = kw;
    }
    __syncthreads();
    const int cols = 16 * (i + 1); // the columns s <= 16 i + 15
    if (!direct) {
      // The right operand: r_s exp(m_i - G_s) k_s for s < cols.
      for (int j = tid; j < cols * 16; j += kThreads) {
        const int s = j / 16, c = j % 16 * 8;
        float kf[8], x[8];
        unpack(*(const u32x4 *)(sm.k + s * kLd + c), bf16{}, kf);
        const float rs = sm.rnorm[s];
#pragma unroll
        for (int e = 0; e < 8; ++e)
          x[e] = rs * kf[e] *
                 __expf(sm.mids[i * K + c + e] - sm.gates[s * K + c + e]);
        *(u32x4 *)(sm.right + s * kLd + c) = pack_bf16x8(x);
      }
      __syncthreads();
      // A's and P's block row on the tensor cores (m16n8k16), a job an
      // 8-column tile of one of them: 4 (i + 1) jobs on eight warps.
      for (int job = warp; job < 4 * (i + 1); job += 8) {
        const bool is_p = job & 1;
        const int n0 = 8 * (job / 2);
        float d[4] = {};
#pragma unroll
        for (int kk = 0; kk < K / 16; ++kk) {
          unsigned a[4], b[2];
          lhs_fragment<16, K, false>(is_p ? sm.left_q : sm.left_k, 0, 16 * kk,
                                     a);
          rhs_fragment<K, C, true>(sm.right, 16 * kk, n0, b);
          mma_bf16_16816(d, a, b);
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int t = 16 * i + g + 8 * h, s = n0 + 2 * tq;
          if (is_p) {
            kda_store_p(sm.p, t, s, n, d[2 * h], d[2 * h + 1]);
          } else {
            *(f32x2 *)(sm.a + t * kAld + s) =
                f32x2{t < n && s < t ? d[2 * h] : 0.0f,
                      t < n && s + 1 < t ? d[2 * h + 1] : 0.0f};
          }
        }
      }
    } else {
      // Summed directly, a (t, s) pair a thread at a time: the left
      // operands hold q and k with their scales but no exponential.
      for (int j = tid; j < 16 * cols; j += kThreads) {
        const int t = 16 * i + j / cols, s = j % cols;
        float sa = 0.0f, sp = 0.0f;
        if (t < n && s <= t)
          for (int c = 0; c < K; c += 8) {
            float kf[8], lqf[8], lkf[8];
            unpack(*(const u32x4 *)(sm.k + s * kLd + c), bf16{}, kf);
            unpack(*(const u32x4 *)(sm.left_q + t % 16 * kLd + c), bf16{},
                   lqf);
            unpack(*(const u32x4 *)(sm.left_k + t % 16 * kLd + c), bf16{},
                   lkf);
#pragma unroll
            for (int e = 0; e < 8; ++e) {
              const float x =
                  kf[e] * __expf(sm.gates[t * K + c + e] -
                                 sm.gates[s * K + c + e]);
              sa += lkf[e] * x;
              sp += lqf[e] * x;
            }
          }
        const float rs = sm.rnorm[s];
        sm.a[t * kAld + s] = s < t ? sa * rs : 0.0f;
        from_float(t < n && s <= t ? sp * rs : 0.0f,
                   *(bf16 *)(sm.p + wg_offset(t, s)));
      }
    }
    __syncthreads();
  }

  // T and Tb (T takes k's place, the right operand's tile is the solve's
  // scratch); P's image goes to the record meanwhile.
  delta_solve(sm.a, (float *)sm.k, (unsigned char *)sm.right, sm.beta,
              (u32x4 *)(record + kKdaTb), [&] {
                for (int j = tid - C; j < C * C * 2 / 16; j += kThreads - C)
                  ((u32x4 *)(record + kKdaP))[j] = ((const u32x4 *)sm.p)[j];
              });
}

} // namespace lina
