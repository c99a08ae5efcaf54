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
// a channel), r_t = 1 / |k_t| (1 without qk_l2norm), qs_t = scale / |q_t|:
//   A[t][s] = beta_t r_t r_s sum_c k_tc k_sc exp(G_tc - G_sc)   (s < t)
//   P[t][s] = qs_t r_s sum_c q_tc k_sc exp(G_tc - G_sc)           (s <= t)
//   Q~_t = qs_t exp(G_t) q_t,  W_t = r_t exp(G_t) k_t,  K~_s = r_s
//   exp(G_{n-1} - G_s) k_s (products elementwise over the channels).
// (The chunk form of S_t = (I - beta_t k^_t k^_t^T) Diag(exp(g_t)) S_{t-1}
// + beta_t k^_t v_t^T, k^ = r k: the gdn record's derivation with the
// exponentials moved inside the sums.) The per-channel exponential does
// not factor into a row's and a column's, so A and P are products of
// scaled tiles, block by block: for rows 16 i .. 16 i + 15 and m_i, channel
// by channel, the midpoint of G over those rows,
//   exp(G_tc - G_sc) = exp(G_tc - m_ic) exp(m_ic - m_jc) exp(m_jc - G_sc)
// for t in block i, s in block j <= i: block (i, j) of A and of P is a
// tensor-core product of block i's rows (k or q, scaled by exp(G_t - m_i):
// the left operands) with block j's rows of k scaled by exp(m_j - G_s) (the
// right operand, fp32, each row's exponential taken once) times the
// channels' exp(m_i - m_j), applied as the right operand's fragments are
// rounded to bf16. Four exponentials an element in all (Q~, W, K~, and
// the two operands' factors); summing each block row against its own
// midpoint took 7.5 and spent 957 us at 1x8192x96. Each factor's exponent
// stays within 75 (e^75 ~ 4e32 is still a bf16 with room for |k| up to
// 1e6, Prelude.cuh's kMaxFactoredGateRange) where no block's gates span more
// than 150 and none grows by more than e^75 from an earlier token or
// midpoint to a later midpoint: log decays (g <= 0) keep the second for any
// s. A block row where some channel breaks either is summed directly (an
// exponential a pair and channel), the CTA agreeing on it. One midpoint over
// the whole chunk (the mma.sync kernels' factored_decay_product at C = 16)
// would need the gates to span at most 150 over 64 tokens: fla's -5 clamp
// allows 320. The exponentials are ex2 of gates scaled by log2(e) as they
// are summed.
//
//===----------------------------------------------------------------------===//

namespace lina {

/// The kernel's shared memory (dynamic: ~106 KB, two CTAs an SM).
struct kda_prepare_smem {
  static constexpr int C = 64, K = 128, kLd = K + 8, kAld = C + 4,
                       kRld = K + 8;
  /// The gates, then their running sums G scaled by log2(e) (fp32, row
  /// stride K).
  alignas(16) float gates[C * K];
  /// The right operand: r_s exp(m_j - G_s) k_s for s in block j (fp32,
  /// row stride kRld: a half-warp's 8-byte loads of a fragment meet no
  /// bank twice); then T (row stride kAld) and the solve's scratch.
  alignas(16) float right[C * kRld];
  /// A below the diagonal (fp32, row stride kAld).
  alignas(16) float a[C * kAld];
  /// The block row's left operands: q and k scaled, beta and norms in.
  alignas(16) bf16 left_q[16 * kLd], left_k[16 * kLd];
  /// P's image as the scan reads it (64 x 64 bf16, swizzled).
  alignas(16) unsigned char p[C * C * 2];
  /// The block rows' midpoints (log2 units) and the current block row's
  /// exp((m_i - m_j) / 2) for j < i (1 at j = i).
  alignas(16) float mids[4 * K], factors[4 * K];
  alignas(16) float beta[C], rnorm[C];
  float half_last[K], half_min[K], half_mid_min[K];
  /// Bits 0-3: block j's gates span too much to factor; bits 4-7: block
  /// row i's factors would leave e^75.
  int refused;
};
static_assert(sizeof(kda_prepare_smem::right) >= 64 * 68 * 4 + 64 * 64 * 2,
              "T and the solve's scratch take the right operand's place");

/// P[t][s] into the scan's image (zero where s > t or t >= n).
__device__ __forceinline__ void kda_store_p(unsigned char *image, int t, int s,
                                            int n, float x0, float x1) {
  x0 = t < n && s <= t ? x0 : 0.0f;
  x1 = t < n && s + 1 <= t ? x1 : 0.0f;
  *(unsigned *)(image + wg_offset(t, s)) = pack_bf16x2(x0, x1);
}

/// The midpoints of channel c's gate sums x[16 bb ..] over blocks 2 half +
/// bb, and whether they factor (kda_prepare_smem::refused); prefix_min and
/// mid_min carry the minimum of the earlier sums and midpoints.
__device__ __forceinline__ void kda_block_midpoints(kda_prepare_smem &sm,
                                                    const float (&x)[32],
                                                    int c, int half,
                                                    float &prefix_min,
                                                    float &mid_min) {
  constexpr int K = 128;
  constexpr float kBound = 0.5f * kMaxFactoredGateRange * 1.44269504f;
#pragma unroll
  for (int bb = 0; bb < 2; ++bb) {
    float hi = -3.0e38f, lo = 3.0e38f;
#pragma unroll
    for (int r = 16 * bb; r < 16 * bb + 16; ++r) {
      hi = fmaxf(hi, x[r]);
      lo = fminf(lo, x[r]);
    }
    prefix_min = fminf(prefix_min, lo);
    const float mid = 0.5f * (hi + lo);
    mid_min = fminf(mid_min, mid);
    const int b = 2 * half + bb;
    sm.mids[b * K + c] = mid;
    // Written to fail on NaN too (the direct sums then carry it).
    if (!(hi - mid <= kBound))
      atomicOr(&sm.refused, 1 << b);
    if (!(mid - prefix_min <= kBound && mid - mid_min <= kBound))
      atomicOr(&sm.refused, 16 << b);
  }
}

/// The body: 256 threads a (chunk, value head); grid x (sequence, value
/// head), y the chunk. Per-channel log gates given (p.g[(t HV + hv) K +
/// c]), beta given (p.beta[t HV + hv]).
///
/// Not Delta: GLA's chunks, the additive rule with a per-channel decay
/// (no beta, no norms): Q~, K~, P and the decay as above into
/// kGlaRecordBytes, no A, W or solve. P's blocks are the same products of
/// q's left operand with k's right one.
template <int H, int HV, bool Norm, bool Delta = true>
__device__ void wgmma_kda_prepare(const Params &p, float scale) {
  using record_at = per_channel_record<Delta>;
  constexpr int K = 128, C = 64, kLd = K + 8, kAld = C + 4,
                kRld = kda_prepare_smem::kRld;
  constexpr float kLog2e = 1.44269504f;
  static_assert(wg_threads_are<H>(256), "eight warps");
  LINA_DYNAMIC_SHARED_ALIGNED(unsigned char, kda_dynamic, 16);
  kda_prepare_smem &sm = *(kda_prepare_smem *)kda_dynamic;

  delta_chunk<H, HV> at;
  if (!at.locate(p))
    return;
  const int hv = at.hv, kh = at.kh, n = at.n;
  const i64 t0 = at.t0;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32,
            g = lane / 4, tq = lane % 4;
  unsigned char *record =
      (unsigned char *)delta_record<record_at::bytes / 4>(p, at.begin, at.seq,
                                                          at.chunk, hv, HV);

  // Every global load first: this thread's 8 channels of q and k in rows
  // 16 i + tid / 16 (the block rows' own rows, below; q and k are 16-byte
  // aligned: the scan's TMA descriptors, encoded before this kernel's
  // launch, refuse them otherwise), the gates (zero past n: G stays at
  // G_{n-1}) and beta. P's image is zeroed: the block rows write only
  // their columns s <= 16 i + 15.
  const bf16 *q = (const bf16 *)p.q + (t0 * H + kh) * K;
  const bf16 *k = (const bf16 *)p.k + (t0 * H + kh) * K;
  const int own_c = tid % 16 * 8;
  u32x4 qw[4], kw[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int t = 16 * i + tid / 16;
    qw[i] = kw[i] = u32x4{0u, 0u, 0u, 0u};
    if (t < n) {
      qw[i] = *(const u32x4 *)(q + (i64)t * H * K + own_c);
      kw[i] = *(const u32x4 *)(k + (i64)t * H * K + own_c);
    }
  }
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
      *(f32x4 *)(sm.gates + r * K + c) =
          f32x4{x.x * kLog2e, x.y * kLog2e, x.z * kLog2e, x.w * kLog2e};
    }
    if (tid < C)
      sm.beta[tid] = Delta && tid < n ? p.beta[(t0 + tid) * HV + hv] : 0.0f;
    if (tid == 0)
      sm.refused = 0;
#pragma unroll
    for (int j = 0; j < C * C * 2 / 16 / kThreads; ++j)
      ((u32x4 *)sm.p)[tid + j * kThreads] = u32x4{0u, 0u, 0u, 0u};
  }
  __syncthreads();

  // G by channel, two threads a channel (32 rows each; the second half's
  // midpoints after the first's sums); the chunk's decay.
  {
    const int c = tid % K, half = tid / K;
    float x[32], run = 0.0f, low = 3.0e38f;
#pragma unroll
    for (int r = 0; r < 32; ++r) {
      run += sm.gates[(32 * half + r) * K + c];
      x[r] = run;
      low = fminf(low, run);
    }
    float prefix_min = 3.0e38f, mid_min = 3.0e38f;
    if (half == 0) {
      kda_block_midpoints(sm, x, c, 0, prefix_min, mid_min);
      sm.half_last[c] = run;
      sm.half_min[c] = low;
      sm.half_mid_min[c] = mid_min;
    }
    __syncthreads();
    if (half == 1) {
      const float offset = sm.half_last[c];
#pragma unroll
      for (int r = 0; r < 32; ++r)
        x[r] += offset;
      prefix_min = sm.half_min[c];
      mid_min = sm.half_mid_min[c];
      kda_block_midpoints(sm, x, c, 1, prefix_min, mid_min);
    }
#pragma unroll
    for (int r = 0; r < 32; ++r)
      sm.gates[(32 * half + r) * K + c] = x[r];
    float *decay = (float *)(record + record_at::decay);
    decay[half ? c : K + c] = half ? fast_exp2(x[31]) : 0.0f; // and padding
  }
  __syncthreads();
  const int refused = sm.refused;

  for (int i = 0; i < 4; ++i) {
    // Summed directly where a block so far spans too much (its right
    // operand would overflow) or this row's factors would.
    const bool direct = (refused & ((2 << i) - 1)) || (refused >> (4 + i) & 1);
    // The block row's own 16 rows, 16 threads a row and 8 channels a
    // thread: the norms, the record's Q~, W and K~, the left operands and
    // the right operand's rows of block i; the factors exp(m_i - m_j).
    {
      const int t = 16 * i + tid / 16, c = own_c;
      float qf[8], kf[8];
      unpack(qw[i], bf16{}, qf);
      unpack(kw[i], bf16{}, kf);
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
      float oq[8], ow[8], okt[8], lq[8], lk[8], rt[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float G = sm.gates[t * K + c + e],
                    m = sm.mids[i * K + c + e], e1 = fast_exp2(G),
                    f = direct ? 1.0f : fast_exp2(G - m);
        oq[e] = qs * qf[e] * e1;
        ow[e] = r * kf[e] * e1;
        okt[e] = r * kf[e] * fast_exp2(sm.gates[(C - 1) * K + c + e] - G);
        lq[e] = qs * qf[e] * f;
        lk[e] = rb * kf[e] * f;
        rt[e] = r * kf[e] * fast_exp2(m - G);
      }
      const unsigned at = wg_tile_offset(t, c);
      *(u32x4 *)(record + record_at::q + at) = pack_bf16x8(oq);
      *(u32x4 *)(record + record_at::ktilde + at) = pack_bf16x8(okt);
      *(u32x4 *)(sm.left_q + t % 16 * kLd + c) = pack_bf16x8(lq);
      if constexpr (Delta) {
        *(u32x4 *)(record + record_at::w + at) = pack_bf16x8(ow);
        *(u32x4 *)(sm.left_k + t % 16 * kLd + c) = pack_bf16x8(lk);
      }
      float *right = sm.right + t * kRld + c;
      *(f32x4 *)right = f32x4{rt[0], rt[1], rt[2], rt[3]};
      *(f32x4 *)(right + 4) = f32x4{rt[4], rt[5], rt[6], rt[7]};
      wg_block_bridges<K>(sm.factors, sm.mids, i);
    }
    __syncthreads();
    const int cols = 16 * (i + 1); // the columns s <= 16 i + 15
    if (!direct) {
      // A's and P's blocks (i, j) on the tensor cores (m16n8k16), a warp an
      // 8-column tile of both: the right operand's fragment, rounded to
      // bf16 once with its factors, serves the two products.
      for (int job = warp; job < 2 * (i + 1); job += 8) {
        const int n0 = 8 * job, j = job / 2;
        float da[4] = {}, dp[4] = {};
#pragma unroll
        for (int kk = 0; kk < K / 16; ++kk) {
          unsigned aq[4], ak[4], b[2];
          lhs_fragment<16, K, false>(sm.left_q, 0, 16 * kk, aq);
          if constexpr (Delta)
            lhs_fragment<16, K, false>(sm.left_k, 0, 16 * kk, ak);
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int c = 16 * kk + 8 * h + 2 * tq;
            b[h] = wg_bridged_pair(sm.right + (n0 + g) * kRld + c,
                                   sm.factors + j * K + c);
          }
          if constexpr (Delta)
            mma_bf16_16816(da, ak, b);
          mma_bf16_16816(dp, aq, b);
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int t = 16 * i + g + 8 * h, s = n0 + 2 * tq;
          kda_store_p(sm.p, t, s, n, dp[2 * h], dp[2 * h + 1]);
          if constexpr (Delta)
            *(f32x2 *)(sm.a + t * kAld + s) =
              f32x2{t < n && s < t ? da[2 * h] : 0.0f,
                    t < n && s + 1 < t ? da[2 * h + 1] : 0.0f};
        }
      }
    } else {
      // Summed directly, a (t, s) pair a thread at a time: the left
      // operands hold q and k with their scales but no exponential, k's
      // rows s come from global memory (L2: this CTA read them above).
      for (int j = tid; j < 16 * cols; j += kThreads) {
        const int t = 16 * i + j / cols, s = j % cols;
        float sa = 0.0f, sp = 0.0f;
        if (t < n && s <= t)
          for (int c = 0; c < K; c += 8) {
            float kf[8], lqf[8], lkf[8];
            unpack(*(const u32x4 *)(k + (i64)s * H * K + c), bf16{}, kf);
            unpack(*(const u32x4 *)(sm.left_q + t % 16 * kLd + c), bf16{},
                   lqf);
            if constexpr (Delta) // GLA writes no left_k
              unpack(*(const u32x4 *)(sm.left_k + t % 16 * kLd + c), bf16{},
                     lkf);
#pragma unroll
            for (int e = 0; e < 8; ++e) {
              const float x =
                  kf[e] * fast_exp2(sm.gates[t * K + c + e] -
                                    sm.gates[s * K + c + e]);
              if constexpr (Delta)
                sa += lkf[e] * x;
              sp += lqf[e] * x;
            }
          }
        const float rs = sm.rnorm[s];
        if constexpr (Delta)
          sm.a[t * kAld + s] = s < t ? sa * rs : 0.0f;
        from_float(t < n && s <= t ? sp * rs : 0.0f,
                   *(bf16 *)(sm.p + wg_offset(t, s)));
      }
    }
    __syncthreads();
  }

  if constexpr (Delta) {
    // T and Tb (in the right operand's place); P's image goes to the
    // record meanwhile.
    delta_solve(sm.a, sm.right, (unsigned char *)(sm.right + C * kAld),
                sm.beta, (u32x4 *)(record + record_at::tb), [&] {
                  for (int j = tid - C; j < C * C * 2 / 16; j += kThreads - C)
                    ((u32x4 *)(record + record_at::p))[j] =
                        ((const u32x4 *)sm.p)[j];
                });
  } else {
#pragma unroll
    for (int j = 0; j < C * C * 2 / 16 / kThreads; ++j)
      ((u32x4 *)(record + record_at::p))[tid + j * kThreads] =
          ((const u32x4 *)sm.p)[tid + j * kThreads];
  }
}

} // namespace lina
