//===- WgmmaDeltaScan.cuh - KDA's and GLA's Hopper scan -----*- CUDA -*-===//
//
// Part of lina's device library (appended after WgmmaScan.cuh, whose wgmma,
// TMA and mbarrier helpers it uses). KDA's and GLA's scan as the presets
// spell them, sm_90a only, behind wgmma_kda_prepare (WgmmaKdaPrepare.cuh),
// which stores each chunk's operands already scaled in a record of the
// workspace:
//
//   wgmma_delta_scan     a CTA a (sequence, value head), like the
//                        printed scans: 64-token chunks, v by TMA and the
//                        record by bulk copy, every product a wgmma.
//
// A template kept only as the performance reference of the kernels printed
// from the ops (WarpgroupScan.h), which take its place once they match it
// (docs/benchmarks.md). The delta rule with at most a scalar decay
// (DeltaNet, Gated DeltaNet) is printed from its ops.
//
// A chunk of n <= 64 tokens, G_t the gates' running sum over the chunk (a
// vector of K), r_t = 1 / |k_t|, the state S (K x V) at its start; the
// record holds Q~, W, K~, Tb and P (docs/design.md), and the scan forms
//   R^T = V^T - S^T W^T,   U^T = R^T Tb^T             (KDA's new values)
//   o^T = S^T Q~^T + U^T P^T
//   S^T = S^T diag(exp(G_{n-1})) + U^T K~
// with warpgroup w holding S^T's value rows 64 w .. 64 w + 63 as
// accumulators and R^T, U^T as register A operands.
//
//===----------------------------------------------------------------------===//

namespace lina {

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
template <int Floats>
__device__ __forceinline__ float *
delta_record(const Params &p, i64 begin, i64 seq, i64 chunk, int hv, int HV) {
  return p.chunk_data +
         (chunk_slot(begin, seq, chunk, 64) * HV + hv) * (i64)Floats;
}

/// Byte offset of row r, 2-byte column c (< 128) in a 64 x 128 tile held as
/// two swizzled 64-column boxes (TMA's q and k tiles, the KDA record's).
__device__ __forceinline__ unsigned wg_tile_offset(int r, int c) {
  return (c >> 6) * 8192 + wg_offset(r, c & 63);
}

/// The chunk's solve (KDA's prepare kernel's): T = (I + A)^-1 for
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

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

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
/// length, the record, v's tile and the products' operand descriptors.
struct scan_chunk {
  i64 t0;
  int n;
  unsigned char *rec_bytes, *vt;
  u64 q_desc, w_desc, k_mn_desc, tb_desc, p_desc;
};

/// Walks the 64-token chunks of [begin, end) through the scan's two stages:
/// body(landed(t0, stage, parity), stage) for each.
template <typename Landed, typename Body>
__device__ __forceinline__ void walk_chunks(i64 begin, i64 end,
                                            const Landed &landed, Body body) {
  int stage = 0;
  unsigned parity = 0;
  for (i64 t0 = begin; t0 < end; t0 += 64, stage ^= 1, parity ^= stage ^ 1)
    body(landed(t0, stage, parity), stage);
}

/// The scan's body: one CTA of 256 threads (two warpgroups) a (sequence,
/// value head), K = V = 128, bf16 inputs and output, behind
/// wgmma_kda_prepare (WgmmaKdaPrepare.cuh), whose record brings the chunk's
/// operands already scaled (Q~, W, K~, P, Tb: kKdaRecordBytes) while TMA
/// brings v: R^T = V^T - S^T W^T, U^T = R^T Tb^T, o^T = S^T Q~^T + U^T P^T,
/// S^T = S^T diag(exp(G_{n-1})) + U^T K~, nothing scaled here but the
/// state's key columns.
///
/// Whole heads (not Halves): warpgroup w holds the state's value rows 64 w
/// .. 64 w + 63. Halves (a kernel of its own, launched with gridDim.y = 2
/// for few heads: ChunkKernel's scanValueHalvesFor): a CTA a (sequence,
/// value head, value half blockIdx.y), twice the CTAs; warpgroup 0 holds
/// that half's state rows and warpgroup 1, there only for the prepare
/// kernel's eight warps, leaves at once.
///
/// Not Delta (GLA, the additive rule with a per-channel decay, behind
/// wgmma_kda_prepare<..., false>): the same chain without the solve, U =
/// V: o^T = S^T Q~^T + V^T P^T, S^T = S^T diag(exp(G_{n-1})) + V^T K~
/// (kGlaRecordBytes).
template <int H, int HV, bool Halves, bool Delta = true>
__device__ void wgmma_delta_scan(const Params &p, const wg_maps &maps) {
  using pc_record = per_channel_record<Delta>;
  constexpr int K = 128, V = 128, C = 64;
  static_assert(wg_threads_are<H>(256), "two warpgroups");
  LINA_DYNAMIC_SHARED_ALIGNED(unsigned char, wg_dynamic, 1024);
  unsigned char *wg_smem =
      wg_dynamic + ((1024 - (shared_address(wg_dynamic) & 1023)) & 1023);
  // Two stages of v (16 KB) and the record (a multiple of 1024, so every
  // stage's tiles stay 1024-aligned), the output's staging and the TMA
  // barriers (WgmmaScan.cpp).
  constexpr int kTile = C * K * 2, kRecordBytes = pc_record::bytes,
                kStage = kTile + kRecordBytes;
  static_assert(kRecordBytes % 1024 == 0, "stages stay 1024-aligned");
  unsigned char *stages = wg_smem;
  bf16 *staging = (bf16 *)(wg_smem + 2 * kStage);
  constexpr int kStagingLd = 72;
  u64 *landed = (u64 *)(staging + 2 * C * kStagingLd);

  const int hv = blockIdx.x % HV;
  const i64 seq = blockIdx.x / HV;
  i64 begin, end;
  sequence_bounds(p, seq, begin, end);
  const int tid = threadIdx.x, wg = tid / 128, warp = tid / 32 % 4,
            lane = tid % 32, tq = lane % 4;
  // The state's value half this warpgroup holds (uniform a warpgroup).
  // Halves is a template parameter so that the whole-head kernel keeps
  // its registers.
  const int vh = Halves ? (int)blockIdx.y : wg;
  bf16 *o = (bf16 *)p.o;
  const bool out_words = aligned16(o);

  wg_init_barriers(landed);
  // Halves: warpgroup 1 is the prepare kernel's; the scan needs one.
  if (Halves && wg == 1)
    return;
  auto fetch = [&](i64 t0, int stage) {
    if (tid == 0) {
      unsigned char *at = stages + stage * kStage;
      async_proxy_fence();
      mbar_expect_bytes(&landed[stage], kStage);
      const int t = (int)t0;
      tma_box(at, &maps.v, 0, hv, t, &landed[stage]);
      tma_box(at + 8192, &maps.v, 64, hv, t, &landed[stage]);
      bulk_copy(at + kTile,
                delta_record<kRecordBytes / 4>(p, begin, seq, (t0 - begin) / C,
                                               hv, HV),
                kRecordBytes, &landed[stage]);
    }
  };

  // kStateGroup: warpgroup 0's own barrier in halves (1 and 2 are
  // wg_store_output's).
  constexpr int kStateGroup = 6;
  // A chunk's stage once it has landed: waits for it, meets the warps that
  // use it and returns the chunk (t0, n and its stage's operands). The
  // record's rows past n are zero as written.
  auto landed_chunk = [&](i64 t0, int stage, unsigned parity) {
    const int n = (int)min((i64)C, end - t0);
    unsigned char *at = stages + stage * kStage;
    unsigned char *rec_bytes = at + kTile;
    mbar_wait(&landed[stage], parity);
    if constexpr (!Halves)
      __syncthreads();
    else
      cta_sync_at<kStateGroup, 128>();
    scan_chunk c;
    c.t0 = t0;
    c.n = n;
    c.rec_bytes = rec_bytes;
    c.vt = at;
    c.q_desc = wg_descriptor(rec_bytes + pc_record::q, 16, 1024);
    if constexpr (Delta) {
      c.w_desc = wg_descriptor(rec_bytes + pc_record::w, 16, 1024);
      c.tb_desc = wg_descriptor(rec_bytes + pc_record::tb, 16, 1024);
    }
    c.k_mn_desc = wg_descriptor(rec_bytes + pc_record::ktilde, 8192, 1024);
    c.p_desc = wg_descriptor(rec_bytes + pc_record::p, 16, 1024);
    return c;
  };

  float s[64];
  wg_load_state<K, V>(s, p, seq, hv, HV, vh);
  if (begin < end)
    fetch(begin, 0);
  walk_chunks(begin, end, landed_chunk, [&](const scan_chunk &c, int stage) {
    const int n = c.n;
    const i64 t0 = c.t0;
    // S^T W^T (for R) and S^T Q~^T (the output's first term), both with
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
      // last read before the loop top's barrier).
      if (t0 + C < end)
        fetch(t0 + C, stage ^ 1);

      // R^T = V^T - S^T W^T (W's rows came scaled), zero past n: V^T's
      // fragments by ldmatrix.trans from v's swizzled box. Not Delta, R^T
      // = U^T = V^T.
      if constexpr (Delta)
        wg_wait<1>();
      float racc[32];
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
            const float y = Delta ? yacc[x] : 0.0f;
            racc[x] = col < n ? vv - y : 0.0f;
          }
        }
      }
      unsigned rf[4][4];
      wg_as_operands<4>(rf, racc);
      wg_wait<0>();
      // U^T = R^T Tb^T (Tb is K-major as stored: rows t, columns s).
      float uacc[32];
      if constexpr (Delta) {
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < C / 16; ++kk)
          wgmma_m64n64k16_rs<0>(uacc, rf[kk], wg_advance(c.tb_desc, kk * 32),
                                kk > 0);
        wg_commit();
        wg_wait<0>();
      }
      // U^T as the output's A operand and the update's (K~ came scaled).
      unsigned uf[4][4];
      if constexpr (Delta)
        wg_as_operands<4>(uf, uacc);
      else
        wg_as_operands<4>(uf, racc);

      // o^T += U^T P^T, then S^T = exp(G_last) S^T + U^T K~.
      wg_fence();
#pragma unroll
      for (int kk = 0; kk < C / 16; ++kk)
        wgmma_m64n64k16_rs<0>(oacc, uf[kk], wg_advance(c.p_desc, kk * 32), 1);
      wg_commit();
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
      wg_fence();
#pragma unroll
      for (int kk = 0; kk < C / 16; ++kk)
        wgmma_m64n128k16_rs<1>(s, uf[kk], wg_advance(c.k_mn_desc, kk * 2048),
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

template <int H, int HV, bool Halves, bool Delta = true>
__device__ void wgmma_delta_scan(const Params &, const wg_maps &) {
  static_assert(wg_dependent_false<H>::value,
                "lina: this kernel uses wgmma, which needs sm_90a (a Hopper "
                "GPU); compile for sm_90a or plan it without --wgmma");
}

#endif

} // namespace lina
