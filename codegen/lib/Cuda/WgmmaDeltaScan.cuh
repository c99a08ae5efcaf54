//===- WgmmaDeltaScan.cuh - The delta rule on Hopper's warpgroup products -*- CUDA -*-===//
//
// Part of lina's device library (appended after WgmmaScan.cuh, whose wgmma,
// TMA and mbarrier helpers it uses). The delta rule with at most a scalar
// decay (DeltaNet, Gated DeltaNet) as two kernels, sm_90a only:
//
//   wgmma_delta_prepare  a CTA a (chunk, value head), chunk-parallel: the
//                        chunk's triangular solve and its scale vectors
//                        into a record of the workspace;
//   wgmma_delta_scan     a CTA a (sequence, value head), like the
//                        printed additive scan: 64-token chunks, q, k, v
//                        and the record by TMA, every product a wgmma.
//
// Why (docs/perf-notes.md): the mma.sync scans of the
// delta rules walk 16-token chunks at one CTA an SM, latency-bound, and
// their prepare kernel moves W and U (two 64 x 128 tiles a chunk) through
// memory. Here the record is the solve alone (9 KB a chunk); W S and the
// solve's product are redone in the scan, where they are two more wgmma
// groups.
//
// A chunk of n <= 64 tokens, G_t the gates' running sum over the chunk, r_t
// = 1 / |k_t| (1 without qk_l2norm), the state S (K x V) at its start:
//   A[t][s] = beta_t r_t r_s (k_t . k_s) exp(G_t - G_s)   (s < t < n)
//   T       = (I + A)^-1,          Tb[t][s] = T[t][s] beta_s
//   R       = V - diag(exp(G) r) K S             (token rows, bf16 k)
//   U       = Tb R                               (the delta rule's new values)
//   o_t     = scale / |q_t| (exp(G_t) S^T q_t + sum_{s<=t} exp(G_t - G_s)
//             r_s (q_t . k_s) u_s)
//   S'      = exp(G_{n-1}) S + sum_s exp(G_{n-1} - G_s) r_s k_s u_s^T
// (the chunk form of S_t = exp(g_t) (I - beta_t k^_t k^_t^T) S_{t-1} +
// beta_t k^_t v_t^T with k^ = r k). In the scan everything is transposed:
// warpgroup w holds S^T's value rows 64 w .. 64 w + 63 as accumulators, and
// R^T, U^T are register A operands (R^T = V^T - S^T K^T diag(exp(G) r)).
//
//===----------------------------------------------------------------------===//

namespace lina {

/// A chunk's record in the workspace (floats): Tb as a 64 x 64 bf16 box in
/// the 128-byte swizzle (wg_offset), then G, r, exp(G_{n-1} - G_s) r_s
/// (K~'s row scales) and exp(G_t) r_t (W S's column scales), 64 each, zero
/// past n (r and G are not).
constexpr int kDeltaRecordFloats = 64 * 64 / 2 + 4 * 64;
constexpr int kDeltaRecordBytes = kDeltaRecordFloats * 4;

/// The per-channel (KDA) record (bytes), everything the scan multiplies
/// already scaled: Q~ = scale / |q_t| exp(G_t) q_t, W = r_t exp(G_t) k_t and
/// K~ = r_s exp(G_{n-1} - G_s) k_s (G_t a vector of K now; each 64 x 128
/// bf16 as two 64-column boxes in the 128-byte swizzle, as TMA lands q and
/// k), Tb, P = scale / |q_t| r_s sum_c q_tc k_sc exp(G_tc - G_sc) (s <= t;
/// 64 x 64 bf16 boxes), exp(G_{n-1}) (K floats), padding to 1 KB. Rows
/// past n are zero.
constexpr int kKdaQ = 0, kKdaW = 16384, kKdaKtilde = 32768, kKdaTb = 49152,
              kKdaP = 57344, kKdaDecay = 65536, kKdaRecordBytes = 66560;
constexpr int kKdaRecordFloats = kKdaRecordBytes / 4;

/// The per-channel additive (GLA) record (bytes): Q~, K~ and P as in the
/// KDA record (scale alone for Q~'s and P's row scale, r = 1), exp(G_{n-1})
/// and padding to 1 KB; no W and no Tb, as the additive rule has no solve.
constexpr int kGlaQ = 0, kGlaKtilde = 16384, kGlaP = 32768,
              kGlaDecay = 40960, kGlaRecordBytes = 41984;
constexpr int kGlaRecordFloats = kGlaRecordBytes / 4;

/// A per-channel record's layout by rule (Delta: KDA's, else GLA's); w and
/// tb are the delta rule's alone.
template <bool Delta> struct per_channel_record {
  static constexpr int q = kKdaQ, w = kKdaW, ktilde = kKdaKtilde, tb = kKdaTb,
                       p = kKdaP, decay = kKdaDecay, bytes = kKdaRecordBytes;
};
template <> struct per_channel_record<false> {
  static constexpr int q = kGlaQ, ktilde = kGlaKtilde, p = kGlaP,
                       decay = kGlaDecay, bytes = kGlaRecordBytes;
};

/// Chunk `chunk` of sequence `seq`'s record for value head hv (Floats a
/// record).
template <int Floats = kDeltaRecordFloats>
__device__ __forceinline__ float *delta_record(const Params &p, i64 begin,
                                               i64 seq, i64 chunk, int hv,
                                               int HV) {
  return p.chunk_data +
         (chunk_slot(begin, seq, chunk, 64) * HV + hv) * (i64)Floats;
}

/// Byte offset of row r, 2-byte column c (< 128) in a 64 x 128 tile held as
/// two swizzled 64-column boxes (TMA's q and k tiles, the KDA record's).
__device__ __forceinline__ unsigned wg_tile_offset(int r, int c) {
  return (c >> 6) * 8192 + wg_offset(r, c & 63);
}

/// The chunk's solve, shared by both prepare kernels: T = (I + A)^-1 for
/// A (64 x 64 fp32, row stride 68, read only below the diagonal) into t_s
/// (same stride) by wg_unit_lower_inverse, then Tb = T diag(beta) in bf16,
/// swizzled as the scan's wgmma reads it, through `tb` (8 KB, also the
/// solve's scratch) to `to`. `side()` runs on threads 64 .. 255 while the
/// first 64 solve the diagonal blocks.
template <typename Side>
__device__ __forceinline__ void delta_solve(const float *a_s, float *t_s,
                                            unsigned char *tb,
                                            const float *beta_s, u32x4 *to,
                                            Side side) {
  constexpr int C = 64, kAld = kWgSolveLd;
  const int tid = threadIdx.x;
  wg_unit_lower_inverse(a_s, t_s, (float *)tb, side);

  // Tb = T diag(beta) in bf16, swizzled as the scan's wgmma reads it, a
  // 16-byte piece (8 columns of a row) at a time; the blocks above the
  // diagonal are zero.
#pragma unroll
  for (int it = 0; it < C * C / 8 / kThreads; ++it) {
    const int q = tid + it * kThreads, t = q / 8, piece = q % 8;
    u32x4 w{0u, 0u, 0u, 0u};
    if (piece / 2 <= t / 16) {
      const float *row = t_s + t * kAld + 8 * piece;
      const f32x4 x0 = *(const f32x4 *)row, x1 = *(const f32x4 *)(row + 4);
      const f32x4 b0 = *(const f32x4 *)(beta_s + 8 * piece),
                  b1 = *(const f32x4 *)(beta_s + 8 * piece + 4);
      w = u32x4{pack_bf16x2(x0.x * b0.x, x0.y * b0.y),
                pack_bf16x2(x0.z * b0.z, x0.w * b0.w),
                pack_bf16x2(x1.x * b1.x, x1.y * b1.y),
                pack_bf16x2(x1.z * b1.z, x1.w * b1.w)};
    }
    *(u32x4 *)(tb + t * 128 + ((piece ^ (t % 8)) << 4)) = w;
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < C * C * 2 / 16 / kThreads; ++j)
    to[tid + j * kThreads] = ((const u32x4 *)tb)[tid + j * kThreads];
}

/// A prepare kernel's chunk (grid x: sequence and value head, y: the
/// chunk): value head hv and its key head kh, the sequence's tokens [begin,
/// end), the chunk's first token t0 and its n <= 64 tokens.
template <int H, int HV> struct delta_chunk {
  int hv, kh, n;
  i64 seq, chunk, begin, end, t0;
  /// False where the chunk starts past its sequence's end (nothing to do).
  __device__ __forceinline__ bool locate(const Params &p) {
    hv = blockIdx.x % HV;
    seq = blockIdx.x / HV;
    chunk = blockIdx.y;
    kh = hv / (HV / H);
    sequence_bounds(p, seq, begin, end);
    t0 = begin + chunk * 64;
    if (t0 >= end)
      return false;
    n = (int)min((i64)64, end - t0);
    return true;
  }
};

/// The prepare kernel's body: 256 threads a (chunk, value head); grid x
/// (sequence, value head), y the chunk. Gate: kWgNoGate or kWgTokenGate
/// (the log gate given, p.g[t HV + hv]); beta given (p.beta[t HV + hv]).
/// A as below, then delta_solve.
template <int H, int HV, int Gate, bool Norm>
__device__ void wgmma_delta_prepare(const Params &p) {
  constexpr int K = 128, C = 64, kLd = K + 8, kAld = C + 4;
  static_assert(wg_threads_are<H>(256), "eight warps");
  static_assert(C * kLd * 2 == C * kAld * 4, "T takes k's place");
  // k's rows (bf16) until A is formed, then T (fp32, row stride kAld).
  __shared__ __align__(16) unsigned char kt_then_t[C * kLd * 2];
  __shared__ __align__(16) float a_s[C * kAld];
  // The blocks' partial sums (a warp's 16 x 16, row stride 20) until Tb
  // is written there.
  __shared__ __align__(1024) unsigned char tb[C * C * 2];
  __shared__ __align__(16) float beta_s[C];
  __shared__ float sums[C], norms[C];
  bf16 *kt = (bf16 *)kt_then_t;
  float *t_s = (float *)kt_then_t;

  delta_chunk<H, HV> at;
  if (!at.locate(p))
    return;
  const int hv = at.hv, kh = at.kh, n = at.n;
  const i64 seq = at.seq, chunk = at.chunk, begin = at.begin, t0 = at.t0;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32,
            g = lane / 4, tq = lane % 4;

  // k's rows (zero past n), and the gates and betas. k is 16-byte aligned:
  // the scan's TMA descriptors, encoded before this kernel's launch, refuse
  // it otherwise.
  const bf16 *k = (const bf16 *)p.k + (t0 * H + kh) * K;
#pragma unroll
  for (int j = 0; j < C * K / 8 / kThreads; ++j) {
    const int i = tid + j * kThreads, r = i / (K / 8), c = i % (K / 8) * 8;
    u32x4 w{0u, 0u, 0u, 0u};
    if (r < n)
      w = *(const u32x4 *)(k + (i64)r * H * K + c);
    *(u32x4 *)(kt + r * kLd + c) = w;
  }
  if (tid < C) {
    const i64 at_t = (t0 + (tid < n ? tid : 0)) * HV + hv;
    beta_s[tid] = tid < n ? p.beta[at_t] : 0.0f;
    sums[tid] = Gate == kWgTokenGate && tid < n ? p.g[at_t] : 0.0f;
  }
  __syncthreads();
  // k's reciprocal norms, four threads a row; the gates' running sums.
  {
    const int r = tid / 4, part = tid % 4;
    float ss = 0.0f;
#pragma unroll
    for (int c = 0; c < K / 4; c += 8) {
      float f[8];
      unpack(*(const u32x4 *)(kt + r * kLd + part * (K / 4) + c), bf16{}, f);
#pragma unroll
      for (int e = 0; e < 8; ++e)
        ss += f[e] * f[e];
    }
    ss += __shfl_xor_sync(0xffffffffu, ss, 1);
    ss += __shfl_xor_sync(0xffffffffu, ss, 2);
    if (part == 0)
      norms[r] = Norm ? rsqrtf(ss + 1e-6f) : 1.0f;
  }
  if (warp == 0 && Gate == kWgTokenGate) {
    wg_gate_sums G;
    G.scan(sums);
    __syncwarp();
    sums[lane] = G.lo;
    sums[32 + lane] = G.hi;
  }
  __syncthreads();

  // A = beta_t r_t r_s (k_t . k_s) exp(G_t - G_s) below the diagonal: warp w
  // takes rows 16 (w % 4) .., columns 32 (w / 4) .. (mma.sync m16n8k16).
  {
    const int m0 = 16 * (warp % 4), n0 = 32 * (warp / 4);
    float d[4][4] = {};
    if (n0 < m0 + 16) {
#pragma unroll
      for (int kk = 0; kk < K / 16; ++kk) {
        unsigned a[4];
        lhs_fragment<C, K, false>(kt, m0, 16 * kk, a);
#pragma unroll
        for (int pair = 0; pair < 2; ++pair) {
          // k's rows s as K^T's columns: two n-tiles a ldmatrix.
          unsigned b[4];
          ldmatrix_x4(b,
                      kt + (n0 + 16 * pair + lane / 16 * 8 + lane % 8) * kLd +
                          16 * kk + lane / 8 % 2 * 8,
                      false);
          const unsigned b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
          mma_bf16_16816(d[2 * pair], a, b0);
          mma_bf16_16816(d[2 * pair + 1], a, b1);
        }
      }
    }
    // Row and column factors once; a select, not a branch, for the mask
    // (exp may overflow above the diagonal, where it is discarded).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int t = m0 + g + 8 * h;
      const float rowf = t < n ? beta_s[t] * norms[t] : 0.0f, gt = sums[t];
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const int s = n0 + 8 * nt + 2 * tq;
        float v[2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float f =
              rowf * norms[s + e] *
              (Gate == kWgNoGate ? 1.0f : __expf(gt - sums[s + e]));
          v[e] = s + e < t ? d[nt][2 * h + e] * f : 0.0f;
        }
        *(f32x2 *)(a_s + t * kAld + s) = f32x2{v[0], v[1]};
      }
    }
  }
  __syncthreads();

  delta_solve(a_s, t_s, tb, beta_s,
              (u32x4 *)delta_record(p, begin, seq, chunk, hv, HV), [&] {
                // The scale vectors, straight to the record.
                const int s = tid - C;
                if (s >= C)
                  return;
                float *rec =
                    delta_record(p, begin, seq, chunk, hv, HV) + C * C / 2;
                const float last = sums[n - 1], rs = norms[s], gs = sums[s];
                rec[s] = gs;
                rec[C + s] = rs;
                rec[2 * C + s] = s < n ? rs * __expf(last - gs) : 0.0f;
                rec[3 * C + s] = s < n ? rs * __expf(gs) : 0.0f;
              });
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/// q's scales for token row i / PerRow of the chunk (PerRow threads a row,
/// each summing 16 / PerRow of its 16-byte pieces from q's swizzled tile):
/// scale / |q_t| (scale alone without Norm) into q_scale, that times
/// exp(G_t) into out_scale. The threads of a row are adjacent lanes.
template <int PerRow, bool Norm>
__device__ __forceinline__ void
delta_q_scales(int i, const unsigned char *qt, const float *sums, float scale,
               float *q_scale, float *out_scale) {
  constexpr int kPieces = 16 / PerRow;
  const int r = i / PerRow, part = i % PerRow;
  float ss = 0.0f;
  if (Norm) {
#pragma unroll
    for (int piece = 0; piece < kPieces; ++piece) {
      const int c = part * kPieces + piece; // 16-byte piece of 16
      float f[8];
      unpack(*(const u32x4 *)(qt + c / 8 * 8192 + r * 128 +
                              (((c % 8) ^ (r % 8)) << 4)),
             bf16{}, f);
#pragma unroll
      for (int e = 0; e < 8; ++e)
        ss += f[e] * f[e];
    }
#pragma unroll
    for (int lanes = 1; lanes < PerRow; lanes *= 2)
      ss += __shfl_xor_sync(0xffffffffu, ss, lanes);
  }
  if (part == 0) {
    const float qs = Norm ? scale * rsqrtf(ss + 1e-6f) : scale;
    q_scale[r] = qs;
    out_scale[r] = qs * __expf(sums[r]);
  }
}

/// m64nN accumulators (64 a warpgroup's rows, N / 2 floats a thread) as the
/// bf16 register A operands of the next products' k-steps: k-step kk is
/// accumulator columns 16 kk .. 16 kk + 15.
template <int Steps>
__device__ __forceinline__ void wg_as_operands(unsigned (&a)[Steps][4],
                                               const float (&acc)[8 * Steps]) {
#pragma unroll
  for (int kk = 0; kk < Steps; ++kk)
#pragma unroll
    for (int x = 0; x < 4; ++x)
      a[kk][x] = pack_bf16x2(acc[8 * kk + 2 * x], acc[8 * kk + 2 * x + 1]);
}

/// acc = S^T X^T for X a 64 x 128 bf16 tile held K-major as two swizzled
/// 64-column boxes (desc: the first), with S^T's fragments `a` as the
/// register A operand: eight k-steps, issued (commit and wait are the
/// caller's).
__device__ __forceinline__ void wg_state_times(float (&acc)[32],
                                               const unsigned (&a)[8][4],
                                               u64 desc) {
#pragma unroll
  for (int kk = 0; kk < 8; ++kk)
    wgmma_m64n64k16_rs<0>(acc, a[kk],
                          wg_advance(desc, kk / 4 * 8192 + kk % 4 * 32),
                          kk > 0);
}

/// A chunk as wgmma_delta_scan's stage holds it: its first token and
/// length, the record, v's and q's (or Q~'s) tiles, the record's vectors
/// (not PerChannel) and the products' operand descriptors.
struct scan_chunk {
  i64 t0;
  int n;
  unsigned char *rec_bytes, *vt, *qt;
  const float *sums, *knorm, *kscale, *wscale;
  u64 q_desc, w_desc, k_desc, k_mn_desc, tb_desc, p_desc;
};

/// Walks the 64-token chunks of [begin, end) through the scan's two stages:
/// body(landed(t0, stage, parity), stage) for each. In halves each
/// warpgroup of wgmma_delta_scan walks in a loop of its own, so that the
/// register allocation of the state's path sees nothing of the other's.
template <typename Landed, typename Body>
__device__ __forceinline__ void walk_chunks(i64 begin, i64 end,
                                            const Landed &landed, Body body) {
  int stage = 0;
  unsigned parity = 0;
  for (i64 t0 = begin; t0 < end; t0 += 64, stage ^= 1, parity ^= stage ^ 1)
    body(landed(t0, stage, parity), stage);
}

/// The scan's body: one CTA of 256 threads (two warpgroups) a (sequence,
/// value head), K = V = 128, bf16 inputs and output; the records written
/// by wgmma_delta_prepare or, PerChannel (KDA's per-channel decay),
/// wgmma_kda_prepare.
///
/// Whole heads (not Halves): warpgroup w holds the state's value rows 64 w
/// .. 64 w + 63 and computes P's key tokens 32 w .. 32 w + 31. Halves (a
/// kernel of its own, launched with gridDim.y = 2 for few heads:
/// ChunkKernel's scanValueHalvesFor): a CTA a (sequence, value head, value
/// half blockIdx.y), twice the CTAs;
/// warpgroup 0 holds that half's state rows, a chunk's chain of products
/// on a multiprocessor's tensor cores alone, and warpgroup 1 computes all
/// of P beside it (not PerChannel: there the record brings P and it only
/// keeps the barriers). PerChannel, the record brings the chunk's operands
/// already scaled (Q~, W, K~, P: kKdaRecordBytes) and TMA only v: R^T =
/// V^T - S^T W^T, o^T = S^T Q~^T + U^T P^T, S^T = S^T diag(exp(G_{n-1})) +
/// U^T K~, nothing scaled here but the state's key columns.
///
/// Not Delta (PerChannel only: GLA, the additive rule with a per-channel
/// decay, behind wgmma_kda_prepare<..., false>): the same chain without
/// the solve, U = V: o^T = S^T Q~^T + V^T P^T, S^T = S^T
/// diag(exp(G_{n-1})) + V^T K~ (kGlaRecordBytes).
template <int H, int HV, bool Norm, bool PerChannel, bool Halves,
          bool Delta = true>
__device__ void wgmma_delta_scan(const Params &p, const wg_maps &maps,
                                 float scale) {
  static_assert(Delta || PerChannel, "the additive rule's scan here is GLA's");
  using pc_record = per_channel_record<Delta>;
  constexpr int K = 128, V = 128, C = 64;
  static_assert(wg_threads_are<H>(256), "two warpgroups");
  LINA_DYNAMIC_SHARED_ALIGNED(unsigned char, wg_dynamic, 1024);
  unsigned char *wg_smem =
      wg_dynamic + ((1024 - (shared_address(wg_dynamic) & 1023)) & 1023);
  // Two stages of q, k, v (16 KB each) and the record (9 KB: a multiple of
  // 1024, so every stage's tiles stay 1024-aligned), P, the output's
  // staging, q's scale a token and the TMA barriers (WgmmaScan.cpp). No K~
  // tile: the update's B operand is k's own tile, its row scales applied
  // to U^T's columns in registers. PerChannel: two stages of v and the
  // record (65 KB), the staging and the barriers.
  constexpr int kTile = C * K * 2,
                kRecordBytes = PerChannel ? pc_record::bytes : kDeltaRecordBytes,
                kStage = (PerChannel ? 1 : 3) * kTile + kRecordBytes;
  static_assert(kRecordBytes % 1024 == 0, "stages stay 1024-aligned");
  unsigned char *stages = wg_smem;
  unsigned char *ptile = wg_smem + 2 * kStage; // not PerChannel
  bf16 *staging =
      (bf16 *)(PerChannel ? wg_smem + 2 * kStage : ptile + C * C * 2);
  constexpr int kStagingLd = 72;
  float *q_scale = (float *)(staging + 2 * C * kStagingLd); // scale / |q_t|
  float *out_scale = q_scale + C;                           // and exp(G_t)
  u64 *landed = (u64 *)(PerChannel ? q_scale : out_scale + C);

  const int hv = blockIdx.x % HV;
  const i64 seq = blockIdx.x / HV;
  const int kh = hv / (HV / H);
  i64 begin, end;
  sequence_bounds(p, seq, begin, end);
  const int tid = threadIdx.x, wg = tid / 128, warp = tid / 32 % 4,
            lane = tid % 32, g = lane / 4, tq = lane % 4;
  // The state's value half this warpgroup holds, if any (uniform a
  // warpgroup: the branch on it keeps the warpgroup's wgmma together).
  // Halves is a template parameter so that the whole-head kernel keeps
  // its registers (249 of 255): runtime tests of it in the state's path
  // cost ptxas 150 bytes of spills.
  const bool holds_state = !Halves || wg == 0;
  const int vh = Halves ? (int)blockIdx.y : wg;
  bf16 *o = (bf16 *)p.o;
  const bool out_words = aligned16(o);

  wg_init_barriers(landed);
  auto fetch = [&](i64 t0, int stage) {
    if (tid == 0) {
      unsigned char *at = stages + stage * kStage;
      // Generic writes to the stage (k's rows past a sequence's end) go
      // before the async proxy's.
      async_proxy_fence();
      mbar_expect_bytes(&landed[stage], kStage);
      const int t = (int)t0;
      if constexpr (PerChannel) {
        tma_box(at, &maps.v, 0, hv, t, &landed[stage]);
        tma_box(at + 8192, &maps.v, 64, hv, t, &landed[stage]);
      } else {
        wg_fetch_qkv(at, maps, kh, hv, t, &landed[stage]);
      }
      bulk_copy(at + (kStage - kRecordBytes),
                delta_record<kRecordBytes / 4>(p, begin, seq, (t0 - begin) / C,
                                               hv, HV),
                kRecordBytes, &landed[stage]);
    }
  };

  // Halves: named barriers between the warpgroups, each a signal one
  // arrives at and the other waits at (bar.arrive, bar.sync: synccheck
  // wants a barrier's waiting threads at one instruction, and the two walk
  // loops of their own). Warpgroup 0 signals kChunkLanded once a chunk's
  // stage is ready (k's rows past it zeroed), which also says it is done
  // with the chunk before (its scales and P); warpgroup 1 signals
  // kScalesReady and kPReady, the latter also saying it is done reading
  // the chunk's stage, which warpgroup 0 refills at the next chunk.
  // kStateGroup is warpgroup 0's own; 1 and 2 are wg_store_output's.
  constexpr int kChunkLanded = 3, kScalesReady = 4, kPReady = 5,
                kStateGroup = 6;
  // A chunk's stage once it has landed: waits for it, zeroes k's rows
  // past the chunk, meets the warps that use it and returns the chunk (t0,
  // n and its stage's operands).
  auto landed_chunk = [&](i64 t0, int stage, unsigned parity) {
    const int n = (int)min((i64)C, end - t0);
    unsigned char *at = stages + stage * kStage;
    unsigned char *rec_bytes = at + (kStage - kRecordBytes);
    // The stage's operands: the products' K-major A and B (q or Q~ for
    // the output, k or W for R, Tb, P) and k or K~ MN-major (the
    // update).
    unsigned char *qt = PerChannel ? rec_bytes + pc_record::q : at;
    unsigned char *kt = PerChannel ? rec_bytes + pc_record::ktilde : at + kTile;
    unsigned char *wt = kt, *tb = rec_bytes; // read only by the delta rule
    if constexpr (PerChannel && Delta) {
      wt = rec_bytes + pc_record::w;
      tb = rec_bytes + pc_record::tb;
    }
    mbar_wait(&landed[stage], parity);
    // k's rows past n are zero, whatever TMA read there (the next
    // sequence's rows): the update multiplies them by U^T's zero
    // columns, and a non-finite value would carry through 0 x inf. (The
    // KDA record's rows past n are zero as written.)
    if (!PerChannel && n < C && holds_state) {
      constexpr int kZeroing = Halves ? 128 : kThreads;
      for (int i = tid; i < 2 * C * 8; i += kZeroing)
        if (i / 8 % C >= n)
          *(u32x4 *)(kt + i * 16) = u32x4{0u, 0u, 0u, 0u};
      async_proxy_fence();
    }
    if constexpr (!Halves) {
      __syncthreads();
    } else if (holds_state) {
      cta_sync_at<kStateGroup, 128>();
      if constexpr (!PerChannel)
        cta_arrive_at<kChunkLanded>();
    } else {
      cta_sync_at<kChunkLanded>();
    }
    const float *rec = (const float *)(tb + C * C * 2);
    scan_chunk c;
    c.t0 = t0;
    c.n = n;
    c.rec_bytes = rec_bytes;
    c.vt = PerChannel ? at : at + 2 * kTile;
    c.qt = qt;
    c.sums = rec;
    c.knorm = rec + C;
    c.kscale = rec + 2 * C;
    c.wscale = rec + 3 * C;
    c.q_desc = wg_descriptor(qt, 16, 1024);
    c.w_desc = wg_descriptor(wt, 16, 1024);
    c.k_desc = wg_descriptor(kt, 16, 1024);
    c.k_mn_desc = wg_descriptor(kt, 8192, 1024);
    c.tb_desc = wg_descriptor(tb, 16, 1024);
    c.p_desc =
        wg_descriptor(PerChannel ? rec_bytes + pc_record::p : ptile, 16, 1024);
    return c;
  };

  // P's key tokens 32 half .. 32 half + 31 (q k^T; the scales, the causal
  // mask and the decays as it is written to P's tile in bf16).
  auto p_products = [&](const scan_chunk &c, float(&pacc)[16], int half) {
#pragma unroll
    for (int kk = 0; kk < K / 16; ++kk)
      wgmma_m64n32k16_ss<0, 0>(
          pacc, wg_advance(c.q_desc, kk / 4 * 8192 + kk % 4 * 32),
          wg_advance(c.k_desc, kk / 4 * 8192 + 32 * half * 128 + kk % 4 * 32),
          kk > 0);
    wg_commit();
  };
  auto p_store = [&](const scan_chunk &c, const float(&pacc)[16], int half) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = 16 * warp + g + 8 * h;
      const float gt = c.sums[row], qs = q_scale[row];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int col = 32 * half + 8 * j + 2 * tq;
        // Selects, not branches: exp may overflow above the diagonal,
        // where the value is discarded.
        const f32x2 kn = *(const f32x2 *)(c.knorm + col),
                    gs = *(const f32x2 *)(c.sums + col);
        float x0 = pacc[4 * j + 2 * h] * qs * kn.x * __expf(gt - gs.x);
        float x1 = pacc[4 * j + 2 * h + 1] * qs * kn.y * __expf(gt - gs.y);
        x0 = row < c.n && col <= row ? x0 : 0.0f;
        x1 = row < c.n && col + 1 <= row ? x1 : 0.0f;
        *(unsigned *)(ptile + wg_offset(row, col)) = pack_bf16x2(x0, x1);
      }
    }
  };

  // Halves: warpgroup 1 computes q's scales and all of P beside warpgroup
  // 0's products with the state, signalling each as it is ready
  // (it waits for warpgroup 0 only at kChunkLanded, which keeps it from
  // overwriting the scales and P before warpgroup 0 is done with them).
  if (Halves && !holds_state) {
    // PerChannel, the record brings P and q's scales: nothing to do.
    if constexpr (!PerChannel)
      walk_chunks(begin, end, landed_chunk, [&](const scan_chunk &c, int) {
        // Two threads a row: warp w's rows 16 w .., the rows its P
        // stores read.
        delta_q_scales<2, Norm>(tid - 128, c.qt, c.sums, scale, q_scale,
                                out_scale);
        __syncwarp();
        cta_arrive_at<kScalesReady>();
        float pacc[16];
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          wg_fence();
          p_products(c, pacc, half);
          wg_wait<0>();
          p_store(c, pacc, half);
        }
        async_proxy_fence();
        cta_arrive_at<kPReady>();
      });
    return;
  }

  float s[64];
  wg_load_state<K, V>(s, p, seq, hv, HV, vh);
  if (begin < end)
    fetch(begin, 0);
  walk_chunks(begin, end, landed_chunk, [&](const scan_chunk &c, int stage) {
    const int n = c.n;
    const i64 t0 = c.t0;
    // S^T W^T (for R) and S^T q^T (the output's first term), both with
    // S^T's fragments as the register A operand.
    float yacc[32], oacc[32];
    {
      unsigned a[8][4];
      wg_as_operands<8>(a, s);
      wg_fence();
      if constexpr (Delta) {
        wg_state_times(yacc, a, c.w_desc);
        wg_commit();
      }
      wg_state_times(oacc, a, c.q_desc);
      wg_commit();
      // Off the products' path: the next chunk's copies (its stage was
      // last read before the loop top's barrier), q's norms.
      if (t0 + C < end)
        fetch(t0 + C, stage ^ 1);
      if constexpr (!PerChannel && !Halves)
        delta_q_scales<4, Norm>(tid, c.qt, c.sums, scale, q_scale, out_scale);

      // R^T = V^T - S^T W^T diag(exp(G) r) (PerChannel: W's rows came
      // scaled), zero past n: V^T's fragments by ldmatrix.trans from v's
      // swizzled box. Not Delta, R^T = U^T = V^T.
      if constexpr (Delta)
        wg_wait<1>();
      float racc[32];
      // W S's column scales for this thread's token columns 8 j + 2 tq (+1).
      f32x2 w[8];
#pragma unroll
      for (int j = 0; j < 8; ++j)
        w[j] = PerChannel ? f32x2{1.0f, 1.0f}
                          : *(const f32x2 *)(c.wscale + 8 * j + 2 * tq);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int m = lane / 8, j = 2 * i + m / 2, h = m % 2;
        const int t = 8 * j + lane % 8, piece = 2 * warp + h;
        unsigned v4[4];
        ldmatrix_x4(v4,
                    (const bf16 *)(c.vt + vh * 8192 + t * 128 +
                                   ((piece ^ (t % 8)) << 4)),
                    true);
#pragma unroll
        for (int mm = 0; mm < 4; ++mm) {
          const int jj = 2 * i + mm / 2, hh = mm % 2;
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int col = 8 * jj + 2 * tq + e, x = 4 * jj + 2 * hh + e;
            const float vv =
                __uint_as_float(e == 0 ? v4[mm] << 16 : v4[mm] & 0xffff0000u);
            const float y = Delta ? (e ? w[jj].y : w[jj].x) * yacc[x] : 0.0f;
            racc[x] = col < n ? vv - y : 0.0f;
          }
        }
      }
      unsigned rf[4][4];
      wg_as_operands<4>(rf, racc);
      wg_wait<0>();
      // U^T = R^T Tb^T (Tb is K-major as stored: rows t, columns s), and,
      // whole heads, P's half (this warpgroup's 32 key tokens s) behind it.
      float uacc[32], pacc[16];
      if constexpr (Delta) {
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < C / 16; ++kk)
          wgmma_m64n64k16_rs<0>(uacc, rf[kk], wg_advance(c.tb_desc, kk * 32),
                                kk > 0);
        wg_commit();
      }
      if constexpr (!PerChannel) {
        if constexpr (Halves) {
          cta_sync_at<kScalesReady>();
        } else {
          p_products(c, pacc, wg);
          __syncthreads(); // q's scales
        }
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const f32x2 f = *(const f32x2 *)(out_scale + 8 * j + 2 * tq);
          oacc[4 * j] *= f.x;
          oacc[4 * j + 1] *= f.y;
          oacc[4 * j + 2] *= f.x;
          oacc[4 * j + 3] *= f.y;
        }
      }

      wg_wait<0>();
      if constexpr (!PerChannel && !Halves)
        p_store(c, pacc, wg);
      // rf is free now (uacc landed): U^T as the output's A operand, and
      // U^T diag(exp(G_{n-1} - G_s) r_s) as the update's (K~ = that
      // diag k, so k's tile is the B operand as it landed; PerChannel,
      // K~ came scaled and U^T is both).
      unsigned uf[4][4], ukf[4][4];
      if constexpr (Delta)
        wg_as_operands<4>(uf, uacc);
      else
        wg_as_operands<4>(uf, racc);
#pragma unroll
      for (int kk = 0; kk < C / 16; ++kk)
#pragma unroll
        for (int x = 0; x < 4; ++x) {
          const f32x2 f =
              PerChannel
                  ? f32x2{1.0f, 1.0f}
                  : *(const f32x2 *)(c.kscale + 16 * kk + 8 * (x / 2) + 2 * tq);
          ukf[kk][x] = PerChannel ? uf[kk][x]
                                  : pack_bf16x2(uacc[8 * kk + 2 * x] * f.x,
                                                uacc[8 * kk + 2 * x + 1] * f.y);
        }
      if constexpr (Halves && !PerChannel) {
        cta_sync_at<kPReady>(); // P's tile
      } else if constexpr (!PerChannel) {
        async_proxy_fence();
        __syncthreads(); // P's tile
      }

      // o^T += U^T P^T, then S^T = exp(G_last) S^T + U^T K~.
      wg_fence();
#pragma unroll
      for (int kk = 0; kk < C / 16; ++kk)
        wgmma_m64n64k16_rs<0>(oacc, uf[kk], wg_advance(c.p_desc, kk * 32), 1);
      wg_commit();
      if constexpr (PerChannel) {
        // The state's key columns 8 j + 2 tq (+1), each by its channel's
        // decay over the chunk.
        const float *decay = (const float *)(c.rec_bytes + pc_record::decay);
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          const f32x2 d = *(const f32x2 *)(decay + 8 * j + 2 * tq);
          s[4 * j] *= d.x;
          s[4 * j + 1] *= d.y;
          s[4 * j + 2] *= d.x;
          s[4 * j + 3] *= d.y;
        }
      } else {
        const float decay = __expf(c.sums[n - 1]);
#pragma unroll
        for (int i = 0; i < 64; ++i)
          s[i] *= decay;
      }
      wg_fence();
#pragma unroll
      for (int kk = 0; kk < C / 16; ++kk)
        wgmma_m64n128k16_rs<1>(s, ukf[kk], wg_advance(c.k_mn_desc, kk * 2048),
                               1);
      wg_commit();

      // The output, as the printed scans store it.
      wg_wait<1>();
      wg_store_output<HV>(oacc, staging, o, t0, n, hv, vh, out_words);
      wg_wait<0>();
    }
  });
  wg_store_state<K, V>(s, p, seq, hv, HV, vh);
}

#else

template <int H, int HV, bool Norm, bool PerChannel, bool Halves,
          bool Delta = true>
__device__ void wgmma_delta_scan(const Params &, const wg_maps &, float) {
  static_assert(wg_dependent_false<H>::value,
                "lina: this kernel uses wgmma, which needs sm_90a (a Hopper "
                "GPU); compile for sm_90a or plan it without --wgmma");
}

#endif

} // namespace lina
