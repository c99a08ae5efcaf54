//===- WgmmaScan.cuh - The additive scan on Hopper's warpgroup products -*- CUDA -*-===//
//
// Part of lina's device library (appended to Prelude.cuh). The fused scan
// of the additive rules with at most a scalar decay (linear attention,
// RetNet, Mamba-2 / simple GLA) as one kernel a (sequence, head) that walks
// 64-token chunks with wgmma, sm_90a only.
//
// Why (docs/perf-notes.md): the mma.sync scans are
// latency-bound at one CTA an SM (two warps a scheduler, 24-44% of the issue
// slots busy), at C = 16 and more so at C = 64, and the split strategy's
// prepare kernel moves q~, k~ and P through memory (a third of mamba2's
// time). Here each chunk's products are few, large and asynchronous
// (m64nNk16 from shared memory, the state's transpose from registers), the
// decays are applied where the products land, and nothing but q, k, v, g
// and o touches memory (with segments, also each chunk's X and decay, for
// the split strategy's combine and carry kernels: Segments.cuh).
//
// A chunk, for warpgroup w of the two (value columns 64 w .. 64 w + 63),
// G_t the gates' running sum over the chunk (0 without a decay):
//   P[t][s]  = scale q_t . k_s exp(G_t - G_s)   (s <= t < n, else 0)
//   o^T      = exp(G_t) scale S^T q^T  +  V^T P^T
//   S^T      = exp(G_{n-1}) S^T  +  V^T K~,   K~[s] = k_s exp(G_{n-1} - G_s)
// S^T lives in registers as the update's accumulators (64 x 128 a
// warpgroup), and is the register A operand of S^T q^T.
//
// q, k and v arrive by TMA (one thread issues a chunk's six box copies;
// cp.async from every thread spent a third of the step in the load queue),
// each as [64 tokens][64 columns] boxes with the 128-byte swizzle: row r at
// r 128 bytes, its 16-byte piece c at ((c ^ (r % 8)) 16). wgmma reads a box
// K-major (the columns are K: q as A of q k^T and as B of S^T q^T, k as B
// of q k^T, P as B of V^T P^T; a k-step is 32 bytes along the row, SBO 1024
// between 8-row groups) or MN-major (the rows are K: v as A of V^T P^T and
// V^T K~, K~ as B of V^T K~; a k-step is 16 rows, SBO 1024 between 8-row
// groups, LBO 8192 between 64-column boxes). K~ and P are written by the
// threads in the same layouts.
//
//===----------------------------------------------------------------------===//

namespace lina {

/// Gate kinds of wgmma_additive_scan.
enum WgGate { kWgNoGate = 0, kWgHeadGate = 1, kWgTokenGate = 2 };

template <int N> struct wg_dependent_false { static constexpr bool value = false; };
/// Whether the CTA has `n` threads, as a condition of the instantiation of
/// a template with parameter `T` (kThreads is one value for the whole
/// source: a plain assertion on it would stop a host compile of every
/// kernel of another size that includes this library).
template <int T> __host__ __device__ constexpr bool wg_threads_are(int n) {
  return kThreads == n;
}

/// q, k, v as [tokens][heads][128] bf16, boxes of 64 tokens x 64 columns.
struct wg_maps {
  tensor_map q, k, v;
};

/// The chunk's running gate sums, one warp's copy: lane l holds G_l and
/// G_{32 + l} (inclusive); `raw` the chunk's 64 log gates (zero past n).
struct wg_gate_sums {
  float lo, hi;
  __device__ __forceinline__ void scan(const float *raw) {
    int lane = threadIdx.x % 32;
    lo = raw[lane];
    hi = raw[32 + lane];
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      float a = __shfl_up_sync(0xffffffffu, lo, d);
      float b = __shfl_up_sync(0xffffffffu, hi, d);
      if (lane >= d) {
        lo += a;
        hi += b;
      }
    }
    hi += __shfl_sync(0xffffffffu, lo, 31);
  }
  __device__ __forceinline__ float last() const {
    return __shfl_sync(0xffffffffu, hi, 31);
  }
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/// Visits this thread's elements of the state S ([K][V] fp32 in memory) as
/// the scans hold them, S^T's m64nK accumulators: rows (value
/// columns) 64 vh + 16 warp + g (+8), key columns 8 j + 2 tq (+1), element
/// 4 j + 2 h + e; f(element, offset in S). vh is the warpgroup's value half
/// (its index in the CTA, or the CTA's where a CTA takes one half).
template <int K, int V, typename F>
__device__ __forceinline__ void wg_each_state_element(int vh, F f) {
  const int warp = threadIdx.x / 32 % 4, g = threadIdx.x % 32 / 4,
            tq = threadIdx.x % 4;
#pragma unroll
  for (int j = 0; j < K / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        int row = 64 * vh + 16 * warp + g + 8 * h, key = 8 * j + 2 * tq + e;
        f(4 * j + 2 * h + e, key * V + row);
      }
}

/// Value half vh of the state S^T of value head hv of sequence `seq` (K x
/// V fp32 in memory) into this thread's accumulators, from p.initial_state
/// or zero; and back to p.final_state where the call asks for it.
template <int K, int V>
__device__ __forceinline__ void wg_load_state(float (&s)[K / 2],
                                              const Params &p, i64 seq, int hv,
                                              int HV, int vh) {
  const float *init = p.initial_state
                          ? p.initial_state + (seq * HV + hv) * (i64)K * V
                          : nullptr;
  wg_each_state_element<K, V>(
      vh, [&](int i, int offset) { s[i] = init ? init[offset] : 0.0f; });
}
template <int K, int V>
__device__ __forceinline__ void wg_store_state(const float (&s)[K / 2],
                                               const Params &p, i64 seq, int hv,
                                               int HV, int vh) {
  if (p.final_state) {
    float *fin = p.final_state + (seq * HV + hv) * (i64)K * V;
    wg_each_state_element<K, V>(vh,
                                [&](int i, int offset) { fin[offset] = s[i]; });
  }
}

/// The two stages' TMA barriers, set up by one thread before any copy.
__device__ __forceinline__ void wg_init_barriers(u64 *landed) {
  if (threadIdx.x == 0) {
    mbar_init(&landed[0], 1);
    mbar_init(&landed[1], 1);
    mbar_init_fence();
  }
  __syncthreads();
}

/// A chunk's q, k and v tiles by TMA into `at` (64 tokens of K, K and V
/// columns, in 64-column boxes of 8 KB, one tile after the other), counted
/// on `bar`: q and k of key head kh, v of value head hv, tokens t ...
template <int K = 128, int V = 128>
__device__ __forceinline__ void wg_fetch_qkv(unsigned char *at,
                                             const wg_maps &maps, int kh,
                                             int hv, int t, u64 *bar) {
  constexpr int kKeyTile = 64 * K * 2;
#pragma unroll
  for (int box = 0; box < K / 64; ++box) {
    tma_box(at + box * 8192, &maps.q, 64 * box, kh, t, bar);
    tma_box(at + kKeyTile + box * 8192, &maps.k, 64 * box, kh, t, bar);
  }
#pragma unroll
  for (int box = 0; box < V / 64; ++box)
    tma_box(at + 2 * kKeyTile + box * 8192, &maps.v, 64 * box, hv, t, bar);
}

/// A chunk's output o^T (this warpgroup's m64n64 accumulators: value rows
/// 64 vh .., token columns) to o's rows t0 .. t0 + n - 1: transposed into
/// the warpgroup's 64 x 72 staging tile (stmatrix), then 16-byte rows to
/// global (element by element where o is not 16-byte aligned).
template <int HV, int V = 128>
__device__ __forceinline__ void
wg_store_output(const float (&oacc)[32], mma_t *staging, mma_t *o, i64 t0,
                int n, int hv, int vh, bool out_words) {
  constexpr int C = 64, kStagingLd = 72;
  const int tid = threadIdx.x, wg = tid / 128, warp = tid / 32 % 4,
            lane = tid % 32;
  mma_t *mine = staging + wg * C * kStagingLd;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    unsigned r[4];
#pragma unroll
    for (int m = 0; m < 4; ++m) {
      int j = 2 * i + m / 2, h = m % 2;
      r[m] = pack_mma2(oacc[4 * j + 2 * h], oacc[4 * j + 2 * h + 1]);
    }
    int m = lane / 8, j = 2 * i + m / 2, h = m % 2;
    mma_t *row = mine + (8 * j + lane % 8) * kStagingLd + 16 * warp + 8 * h;
    stmatrix_x4_trans(row, r);
  }
  named_sync<128>(1 + wg);
#pragma unroll
  for (int j = 0; j < C * 64 / 8 / 128; ++j) {
    int i = tid % 128 + j * 128, r = i / 8, c = i % 8 * 8;
    if (r < n) {
      u32x4 w = *(const u32x4 *)(mine + r * kStagingLd + c);
      mma_t *to = o + ((t0 + r) * HV + hv) * V + 64 * vh + c;
      if (out_words) {
        store_global_words(to, w);
      } else {
        const unsigned short *e = (const unsigned short *)&w;
#pragma unroll
        for (int x = 0; x < 8; ++x)
          to[x].bits = e[x];
      }
    }
  }
}

/// A chunk's segment record (floats): X = scale exp(G_t) q_t as 64 rows of
/// 128 bf16, then the chunk's decay exp(G_{n-1}) and three floats of
/// padding; the combine and carry kernels' (Segments.cuh) X and factors.
constexpr int kWgSegmentRecordFloats = 64 * 128 / 2 + 4;

#ifndef LINA_MMA_F16
/// The kernel body: one CTA of 256 threads (two warpgroups) a (sequence,
/// value head), K = V = 128, bf16 inputs and output. Gate: none, a fixed
/// log gate a head (p.g[hv]) or one a token (p.g[t HV + hv]). Records:
/// the sequences are pieces of longer ones (segments), and each chunk's
/// segment record goes to p.chunk_data.
template <int H, int HV, int Gate, bool Records>
__device__ void wgmma_additive_scan(const Params &p, const wg_maps &maps,
                                    float scale) {
  constexpr int K = 128, V = 128, C = 64;
  static_assert(wg_threads_are<H>(256), "two warpgroups");
  static_assert(!Records || Gate != kWgNoGate,
                "segments need a decay (Segments.cuh)");
  LINA_DYNAMIC_SHARED_ALIGNED(unsigned char, wg_dynamic, 1024);
  // The swizzle's pattern follows address bits 7-9: boxes 1024-aligned (the
  // host asks for 1024 bytes more).
  unsigned char *wg_smem =
      wg_dynamic + ((1024 - (shared_address(wg_dynamic) & 1023)) & 1023);
  // Two stages of q, k, v (16 KB each), K~, P, the output's staging (a
  // warpgroup's 64 x 64, rows padded to 72), the warps' gate tables, the
  // stages' raw gates and TMA barriers (WgmmaScan.cpp adds it up).
  constexpr int kTile = C * K * 2, kStage = 3 * kTile;
  unsigned char *stages = wg_smem;
  unsigned char *ktilde = wg_smem + 2 * kStage;
  unsigned char *ptile = ktilde + kTile;
  bf16 *staging = (bf16 *)(ptile + C * C * 2);
  constexpr int kStagingLd = 72;
  // A warp's gate sums and output scales (64 floats each).
  float *gate_tables = (float *)(staging + 2 * C * kStagingLd);
  float *raw_gates = gate_tables + 8 * 128;    // a stage's 64
  u64 *landed = (u64 *)(raw_gates + 2 * C);     // a stage's TMA barrier

  const int hv = blockIdx.x % HV;
  const i64 seq = blockIdx.x / HV;
  const int kh = hv / (HV / H);
  i64 begin, end;
  sequence_bounds(p, seq, begin, end);
  const int tid = threadIdx.x, wg = tid / 128, warp = tid / 32 % 4,
            warp_in_cta = tid / 32, lane = tid % 32, g = lane / 4,
            tq = lane % 4;
  bf16 *o = (bf16 *)p.o;
  const bool out_words = aligned16(o);

  wg_init_barriers(landed);
  auto fetch = [&](i64 t0, int stage) {
    const int n = (int)min((i64)C, end - t0);
    unsigned char *at = stages + stage * kStage;
    if (tid == 0) {
      // The stage's last readers passed the loop top's barrier; their
      // generic writes (zeroed v rows) go before the async proxy's.
      async_proxy_fence();
      mbar_expect_bytes(&landed[stage], 3 * kTile);
      wg_fetch_qkv(at, maps, kh, hv, (int)t0, &landed[stage]);
    }
    if (Gate == kWgTokenGate && tid < C) {
      float *raw = raw_gates + stage * C;
      const float *from = p.g + (t0 + (tid < n ? tid : 0)) * HV + hv;
      copy_async<4>(raw + tid, from, tid < n ? 4 : 0);
    }
    copies_issued();
  };

  // S^T as the update's m64n128 accumulators (wg_each_state_element).
  float s[64];
  wg_load_state<K, V>(s, p, seq, hv, HV, wg);

  const float head_gate = Gate == kWgHeadGate ? p.g[hv] : 0.0f;
  if (begin < end)
    fetch(begin, 0);
  int stage = 0;
  unsigned parity = 0; // of the stage's barrier: flips every second chunk
  for (i64 t0 = begin; t0 < end;
       t0 += C, stage ^= 1, parity ^= stage ^ 1) {
    const int n = (int)min((i64)C, end - t0);
    copies_landed<0>();
    mbar_wait(&landed[stage], parity);
    __syncthreads();
    unsigned char *qt = stages + stage * kStage, *kt = qt + kTile,
                  *vt = kt + kTile;

    // The products that need only the landed tiles go first: P's half
    // (this warpgroup's 32 key tokens s) and S^T q^T.
    float pacc[16], oacc[32];
    // S^T's A fragments are packed before the fence, so that no register
    // the products read is written after it.
    unsigned a[8][4];
#pragma unroll
    for (int kk = 0; kk < 8; ++kk)
#pragma unroll
      for (int x = 0; x < 4; ++x)
        a[kk][x] = pack_bf16x2(s[8 * kk + 2 * x], s[8 * kk + 2 * x + 1]);
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < K / 16; ++kk)
      wgmma_m64n32k16_ss<0, 0>(
          pacc, wg_descriptor(qt + kk / 4 * 8192 + kk % 4 * 32, 16, 1024),
          wg_descriptor(kt + kk / 4 * 8192 + 32 * wg * 128 + kk % 4 * 32, 16,
                        1024),
          kk > 0);
    wg_commit();
#pragma unroll
    for (int kk = 0; kk < K / 16; ++kk)
      wgmma_m64n64k16_rs<0>(
          oacc, a[kk],
          wg_descriptor(qt + kk / 4 * 8192 + kk % 4 * 32, 16, 1024), kk > 0);
    wg_commit();

    // The next chunk's copies (its TMA boxes and raw gates) issue while the
    // products run: the stage they fill was last read by the previous
    // chunk's products, finished before the loop top's barrier.
    if (t0 + C < end)
      fetch(t0 + C, stage ^ 1);

    // The gates' running sums, and scale exp(G_t) for the output's first
    // product, into this warp's table: a lookup is then one shared load.
    wg_gate_sums G{0.0f, 0.0f};
    if (Gate == kWgTokenGate) {
      G.scan(raw_gates + stage * C);
    } else if (Gate == kWgHeadGate) {
      // Rows past n add nothing (as zero-filled token gates would not).
      G.lo = head_gate * (float)min(lane + 1, n);
      G.hi = head_gate * (float)min(lane + 33, n);
    }
    const float g_last = Gate == kWgNoGate ? 0.0f : G.last();
    float *sums = gate_tables + warp_in_cta * 128, *out_scale = sums + 64;
    if (Gate != kWgNoGate) {
      sums[lane] = G.lo;
      sums[32 + lane] = G.hi;
      out_scale[lane] = scale * __expf(G.lo);
      out_scale[32 + lane] = scale * __expf(G.hi);
      __syncwarp();
    }

    // K~ while the products run, piece by piece in k's own (swizzled)
    // places; rows past n are zero, whatever the tile holds there (TMA
    // reads on into the next sequence).
#pragma unroll
    for (int j = 0; j < C * K / 8 / kThreads; ++j) {
      const int offset = (tid + j * kThreads) * 16, r = offset % 8192 / 128;
      const float f = r >= n             ? 0.0f
                      : Gate == kWgNoGate ? 1.0f
                                          : __expf(g_last - sums[r]);
      u32x4 w = *(const u32x4 *)(kt + offset);
      unsigned *x = &w.x;
#pragma unroll
      for (int e = 0; e < 4; ++e)
        x[e] = pack_bf16x2(__uint_as_float(x[e] << 16) * f,
                           __uint_as_float(x[e] & 0xffff0000u) * f);
      *(u32x4 *)(ktilde + offset) = w;
    }
    // So are v's: the products would carry a non-finite value from there.
    if (n < C)
      for (int i = tid; i < 2 * C * 8; i += kThreads) {
        const int r = i / 8 % C;
        if (r >= n)
          *(u32x4 *)(vt + i * 16) = u32x4{0u, 0u, 0u, 0u};
      }

    // With segments, the chunk's record: X from q's tile and this warp's
    // output scales (rows past n are never read), and the chunk's decay.
    if constexpr (Records) {
      float *rec = p.chunk_data +
                   (chunk_slot(begin, seq, (t0 - begin) / C, C) * HV + hv) *
                       (i64)kWgSegmentRecordFloats;
#pragma unroll
      for (int j = 0; j < C * K / 8 / kThreads; ++j) {
        const int i = tid + j * kThreads, r = i / 16, piece = i % 16;
        if (r < n) {
          const float f = out_scale[r];
          u32x4 w = *(const u32x4 *)(qt + piece / 8 * 8192 + r * 128 +
                                     (((piece % 8) ^ (r % 8)) << 4));
          unsigned *x = &w.x;
#pragma unroll
          for (int e = 0; e < 4; ++e)
            x[e] = pack_bf16x2(__uint_as_float(x[e] << 16) * f,
                               __uint_as_float(x[e] & 0xffff0000u) * f);
          *(u32x4 *)(rec + r * (K / 2) + piece * 4) = w;
        }
      }
      if (tid == 0)
        rec[C * K / 2] = __expf(g_last);
    }

    // P: the causal mask and the decays, written as bf16.
    wg_wait<1>();
    {
      float gt[2];
#pragma unroll
      for (int h = 0; h < 2; ++h)
        gt[h] = Gate == kWgNoGate ? 0.0f : sums[16 * warp + g + 8 * h];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        int col = 32 * wg + 8 * j + 2 * tq;
        float gs0 = Gate == kWgNoGate ? 0.0f : sums[col];
        float gs1 = Gate == kWgNoGate ? 0.0f : sums[col + 1];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          int row = 16 * warp + g + 8 * h;
          float x0 = 0.0f, x1 = 0.0f;
          if (row < n) {
            if (col <= row)
              x0 = pacc[4 * j + 2 * h] * scale *
                   (Gate == kWgNoGate ? 1.0f : __expf(gt[h] - gs0));
            if (col + 1 <= row)
              x1 = pacc[4 * j + 2 * h + 1] * scale *
                   (Gate == kWgNoGate ? 1.0f : __expf(gt[h] - gs1));
          }
          *(unsigned *)(ptile + wg_offset(row, col)) = pack_bf16x2(x0, x1);
        }
      }
    }
    // S^T q^T, scaled by exp(G_t) scale a token column.
    wg_wait<0>();
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        int t = 8 * j + 2 * tq + e;
        float f = Gate == kWgNoGate ? scale : out_scale[t];
        oacc[4 * j + e] *= f;
        oacc[4 * j + 2 + e] *= f;
      }
    async_proxy_fence();
    __syncthreads();

    // o^T += V^T P^T, then S^T = exp(G_last) S^T + V^T K~.
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < C / 16; ++kk)
      wgmma_m64n64k16_ss<1, 0>(
          oacc, wg_descriptor(vt + wg * 8192 + kk * 2048, 8192, 1024),
          wg_descriptor(ptile + kk * 32, 16, 1024), 1);
    wg_commit();
    if (Gate != kWgNoGate) {
      const float f = __expf(g_last);
#pragma unroll
      for (int i = 0; i < 64; ++i)
        s[i] *= f;
    }
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < C / 16; ++kk)
      wgmma_m64n128k16_ss<1, 1>(
          s, wg_descriptor(vt + wg * 8192 + kk * 2048, 8192, 1024),
          wg_descriptor(ktilde + kk * 2048, 8192, 1024), 1);
    wg_commit();

    // The output: o^T's fragments to global through the staging tile.
    wg_wait<1>();
    wg_store_output<HV>(oacc, staging, o, t0, n, hv, wg, out_words);
    wg_wait<0>();
  }

  wg_store_state<K, V>(s, p, seq, hv, HV, wg);
}

#else

template <int H, int HV, int Gate, bool Records>
__device__ void wgmma_additive_scan(const Params &, const wg_maps &, float) {
  static_assert(wg_dependent_false<Gate>::value,
                "lina: this kernel uses wgmma, which needs sm_90a (a Hopper "
                "GPU); compile for sm_90a or plan it without --wgmma");
}

#endif
#endif // LINA_MMA_F16

} // namespace lina
