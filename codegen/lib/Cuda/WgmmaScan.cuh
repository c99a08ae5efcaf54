//===- WgmmaScan.cuh - The Hopper scans' common pieces ---------*- CUDA -*-===//
//
// Part of lina's device library (appended to Prelude.cuh). What every
// Hopper scan shares, sm_90a only: the q, k, v tiles by TMA, the state as
// a warpgroup's accumulators (loaded, stored), and the output's store
// through a staging tile. Every rule's scan is printed from its ops from
// these and the pieces of WarpgroupScan.cuh and WarpgroupChannels.cuh
// (WarpgroupScan.cpp). The additive scan, as printed, walks 64-token
// chunks in one kernel a (sequence, head).
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

/// q, k, v as [tokens][heads][128] bf16, boxes of 64 tokens x 64 columns.
struct wg_maps {
  tensor_map q, k, v;
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/// Visits this thread's elements of the state S ([K][V] fp32 in memory) as
/// the scans hold them, S^T's m64nK accumulators: rows (value
/// columns) 64 vh + 16 warp + g (+8), key columns 8 j + 2 tq (+1), element
/// 4 j + 2 h + e; f(element, offset in S). vh is the warpgroup's 64 value
/// columns of the head (its index in the CTA, past the CTA's value tile's
/// where a CTA takes a tile of the head).
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

/// Value columns 64 vh .. 64 vh + 63 of the state S^T of value head hv of
/// sequence `seq` (K x V fp32 in memory) into this thread's accumulators,
/// from p.initial_state or zero; and back to p.final_state where the call
/// asks for it.
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
/// on `bar`: q and k of key head kh, v's columns v0 .. v0 + V - 1 of value
/// head hv, tokens t ...
template <int K = 128, int V = 128>
__device__ __forceinline__ void
wg_fetch_qkv(unsigned char *at, const wg_maps &maps, int kh, int hv, int t,
             u64 *bar, int v0 = 0) {
  constexpr int kKeyTile = 64 * K * 2;
#pragma unroll
  for (int box = 0; box < K / 64; ++box) {
    tma_box(at + box * 8192, &maps.q, 64 * box, kh, t, bar);
    tma_box(at + kKeyTile + box * 8192, &maps.k, 64 * box, kh, t, bar);
  }
#pragma unroll
  for (int box = 0; box < V / 64; ++box)
    tma_box(at + 2 * kKeyTile + box * 8192, &maps.v, v0 + 64 * box, hv, t, bar);
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

#endif // __CUDA_ARCH_FEAT_SM90_ALL

} // namespace lina
