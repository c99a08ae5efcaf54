//===- Segments.cuh - Sequence-parallel scans: combine and carry -*- CUDA -*-===//
//
// Part of lina's device library (appended to Prelude.cuh). A scan walks its
// sequence's chunks one after another, so a call with few (sequence, value
// head) pairs leaves most multiprocessors idle however long the sequences
// are. For the additive rules with a decay (S' = Diag(d) S + U, o = X S + Y,
// the state used only there), the runtime instead runs each sequence as P
// segments of whole chunks, the last one shorter (ChunkKernel::segmentsFor):
// the prepare and scan kernels see a batch of B P sequences
// (sequence_bounds), each starting from a zero state, and write each
// segment's own final state (`local_states`). Two kernels then make the
// result exact:
//
// - segment_combine, a CTA per (sequence, value head): the decay of each
//   segment, D_p (the product of its chunks' decay factors, which the
//   prepare kernel stored), and the true state each segment starts from,
//   start_0 = the initial state, start_{p+1} = D_p start_p + local_p, and
//   the final state.
// - segment_carry, a CTA per (segment, value head, run of chunks): the part
//   of the output the zero start left out, o += X Diag(prefix) start_p, where
//   prefix is the product of the decay factors of the segment's chunks
//   before this one (the stored X is already decayed within its chunk).
//
// docs/design.md, "Segments".
//
//===----------------------------------------------------------------------===//

namespace lina {

/// The most segments a sequence is cut into (the combine kernel's shared
/// decays).
constexpr int kMaxSegments = 16;

/// The segment buffers of one call, laid out by the runtime after the
/// workspace records. States are [sequences, HV, K, V] fp32, segments
/// numbered within their sequence (segment p of sequence b is b P + p).
struct SegmentParams {
  const float *initial_state; ///< [B, HV, K, V] or null (zeros)
  float *final_state;         ///< [B, HV, K, V] or null (not wanted)
  const float *local_states;  ///< [B P, ...]: each segment from a zero state
  /// [B P, ...] mma_t: the state each segment starts from, as the carry's
  /// product reads it.
  mma_t *start_states;
  float *run_prefix;          ///< [B P, HV, runs, GC]: decay before each run
  i64 segments;   ///< P
  i64 run_chunks; ///< chunks a carry CTA walks
  i64 runs;       ///< carry CTAs a (segment, value head)
};

/// The chunks of segment `seq` (of the batch of B P the scan saw).
template <int C>
__device__ __forceinline__ i64 segment_chunks(const Params &p, i64 seq,
                                              i64 &begin, i64 &end) {
  sequence_bounds(p, seq, begin, end);
  return (end - begin + C - 1) / C;
}

/// The carry's sink: row r of the output is the scan's row (`local`, a
/// packed C x V tile of T copied from the output) plus the carried part.
template <int V, typename T> struct carried_rows {
  T *out;
  i64 row_stride;
  int n;
  const T *local;

  template <int E>
  __device__ __forceinline__ void put(int r, int c, const float *x) const {
    if (r >= n)
      return;
    float sum[E];
#pragma unroll
    for (int j = 0; j < E; ++j)
      sum[j] = to_float(local[r * ld(V) + c + j]) + x[j];
    row_words<E, T>::of(sum).store(out + r * row_stride + c);
  }
};

/// The most run products a combine CTA keeps in shared memory (segments x
/// runs x GC); the runtime's run length keeps within it (carryRunChunks).
constexpr int kMaxRunProducts = 4096;

/// The combine kernel's body. p is the scan's view (B P sequences);
/// `kRecord` floats a workspace record, its decay factors (GC floats) at
/// `kFactors`. grid.x = B HV; grid.y splits the state's elements, and each
/// CTA finds the decays itself (the y == 0 CTA also writes the runs').
template <int C, int K, int V, int GC, int HV, int kRecord, int kFactors>
__device__ void segment_combine(const Params &p, const SegmentParams &s) {
  __shared__ float decay[kMaxSegments][GC];
  __shared__ float products[kMaxRunProducts];
  const int hv = blockIdx.x % HV;
  const i64 b = blockIdx.x / HV;
  const int segments = (int)s.segments;
  const int runs = (int)s.runs;
  if (segments * runs * GC > kMaxRunProducts)
    __trap(); // the runtime's run length keeps within it
  // Each run's product of decay factors: W channels a thread (16-byte
  // loads where the gates are per channel), eight chunks' loads in flight
  // at a time (the records are in global memory, a latency apart).
  constexpr int W = GC % 4 == 0 ? 4 : 1;
  for (int item = threadIdx.x; item < segments * runs * (GC / W);
       item += kThreads) {
    const int c = item % (GC / W) * W, run = item / (GC / W) % runs;
    const i64 seq = b * segments + item / (GC / W) / runs;
    i64 begin, end;
    const i64 chunks = segment_chunks<C>(p, seq, begin, end);
    const i64 first = min(run * s.run_chunks, chunks);
    const i64 count = min(first + s.run_chunks, chunks) - first;
    // A sequence's consecutive chunks have consecutive records.
    const float *factor =
        p.chunk_data + (chunk_slot(begin, seq, first, C) * HV + hv) * kRecord +
        kFactors + c;
    float product[W];
#pragma unroll
    for (int w = 0; w < W; ++w)
      product[w] = 1.0f;
    for (i64 j = 0; j < count; j += 8) {
      float f[8][W];
#pragma unroll
      for (int u = 0; u < 8; ++u) {
        const float *at = factor + (j + u) * HV * kRecord;
        if constexpr (W == 4) {
          const f32x4 v = j + u < count ? *(const f32x4 *)at
                                        : f32x4{1.0f, 1.0f, 1.0f, 1.0f};
          f[u][0] = v.x, f[u][1] = v.y, f[u][2] = v.z, f[u][3] = v.w;
        } else {
          f[u][0] = j + u < count ? *at : 1.0f;
        }
      }
#pragma unroll
      for (int u = 0; u < 8; ++u)
#pragma unroll
        for (int w = 0; w < W; ++w)
          product[w] *= f[u][w];
    }
#pragma unroll
    for (int w = 0; w < W; ++w)
      products[(item / (GC / W)) * GC + c + w] = product[w];
  }
  __syncthreads();
  // Each run's product becomes the product before it; the last running
  // product is the segment's decay.
  for (int item = threadIdx.x; item < segments * GC; item += kThreads) {
    const int c = item % GC, seg = item / GC;
    float before = 1.0f;
    for (int run = 0; run < runs; ++run) {
      const int at = (seg * runs + run) * GC + c;
      const float own = products[at];
      if (blockIdx.y == 0)
        s.run_prefix[(((b * segments + seg) * HV + hv) * runs + run) * GC + c] =
            before;
      before *= own;
    }
    decay[seg][c] = before;
  }
  __syncthreads();
  // start_0 = the initial state, start_{p+1} = D_p start_p + local_p, four
  // columns a thread, every segment's local state loaded before the sums.
  constexpr int KV = K * V;
  const i64 stride = (i64)HV * KV;
  const i64 own = (b * HV + hv) * KV;
  const float *local = s.local_states + b * segments * stride + hv * (i64)KV;
  mma_t *start = s.start_states + b * segments * stride + hv * (i64)KV;
  for (int e = (blockIdx.y * kThreads + threadIdx.x) * 4; e < KV;
       e += gridDim.y * kThreads * 4) {
    f32x4 in[kMaxSegments];
#pragma unroll
    for (int seg = 0; seg < kMaxSegments; ++seg)
      if (seg < segments)
        in[seg] = *(const f32x4 *)(local + seg * stride + e);
    f32x4 state = s.initial_state ? *(const f32x4 *)(s.initial_state + own + e)
                                  : f32x4{0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int seg = 0; seg < kMaxSegments; ++seg)
      if (seg < segments) {
        *(u32x2 *)(start + seg * stride + e) =
            u32x2{pack_mma2(state.x, state.y), pack_mma2(state.z, state.w)};
        const float d = decay[seg][GC == 1 ? 0 : e / V];
        state = f32x4{d * state.x + in[seg].x, d * state.y + in[seg].y,
                      d * state.z + in[seg].z, d * state.w + in[seg].w};
      }
    if (s.final_state)
      *(f32x4 *)(s.final_state + own + e) = state;
  }
}

/// Buffers of the carry's ring: the copies of three chunks ahead in flight.
constexpr int kCarryBuffers = 4;

/// The carry's shared memory, in floats (each part a whole number of
/// 16-byte words): the decay prefix, the start state (a packed mma_t K x V
/// tile, read once into the warps' fragments), and a ring of (X, the scan's
/// output rows, decay factors). The state has room of its own so that its
/// copy and the first chunks' are in flight together.
__host__ __device__ constexpr int carry_buffer_floats(int C, int K, int V,
                                                      int GC) {
  return (C * ld(K) / 2 + 3) / 4 * 4 + (C * ld(V) / 2 + 3) / 4 * 4 +
         (GC + 3) / 4 * 4;
}
__host__ __device__ constexpr int carry_state_floats(int K, int V) {
  return (K * ld(V) / 2 + 3) / 4 * 4;
}
__host__ __device__ constexpr int segment_carry_bytes(int C, int K, int V,
                                                      int GC) {
  return 4 * ((GC + 3) / 4 * 4 + carry_state_floats(K, V) +
              kCarryBuffers * carry_buffer_floats(C, K, V, GC));
}

/// The carry kernel's body: o += X Diag(prefix) start for the chunks of one
/// run, X (C x K, mma_t) stored at `kX` of each record. The start state stays
/// in registers as the mma's B fragments (read from shared memory once: the
/// L1 pipe was 89% busy re-reading it every chunk); each chunk's X, output
/// rows and decay factors are copied three chunks ahead. grid.x = B P HV
/// runs.
template <int C, int K, int V, int GC, int HV, int kRecord, int kX,
          int kFactors, typename T>
__device__ void segment_carry(const Params &p, const SegmentParams &s,
                              float *smem) {
  const i64 run = blockIdx.x % s.runs;
  const int hv = (blockIdx.x / s.runs) % HV;
  const i64 seq = blockIdx.x / (s.runs * HV);
  // The first segment starts from the initial state: zero when there is
  // none, and then nothing was left out.
  if (seq % s.segments == 0 && !s.initial_state)
    return;
  i64 begin, end;
  const i64 chunks = segment_chunks<C>(p, seq, begin, end);
  const i64 first = run * s.run_chunks;
  const i64 last = min(first + s.run_chunks, chunks);
  if (first >= last)
    return;
  float *prefix = smem;
  mma_t *state = (mma_t *)(prefix + (GC + 3) / 4 * 4);
  float *ring = (float *)state + carry_state_floats(K, V);
  constexpr int kBuffer = carry_buffer_floats(C, K, V, GC);
  constexpr int kOutAt = (C * ld(K) / 2 + 3) / 4 * 4;
  constexpr int kFactorsAt = kOutAt + (C * ld(V) / 2 + 3) / 4 * 4;
  const float *record0 =
      p.chunk_data + (chunk_slot(begin, seq, 0, C) * HV + hv) * kRecord;
  auto fetch = [&](i64 j) {
    float *at = ring + (int)(j % kCarryBuffers) * kBuffer;
    const i64 t0 = begin + j * C;
    const int n = (int)min((i64)C, end - t0);
    const float *record = record0 + j * HV * kRecord;
    tile_copy<C, K, mma_t>::template fetch<true>(
        (mma_t *)at, (const mma_t *)(record + kX), K, n);
    tile_copy<C, V, T>::fetch((T *)(at + kOutAt),
                              (const T *)p.o + (t0 * HV + hv) * V,
                              (i64)HV * V, n);
    tile_copy<1, GC, float>::template fetch<true>(at + kFactorsAt,
                                                  record + kFactors, GC, 1);
  };
  tile_copy<K, V, mma_t>::template fetch<true>(
      state, s.start_states + (seq * HV + hv) * (i64)(K * V), V, K);
  copies_issued();
  for (int u = 0; u < kCarryBuffers - 1; ++u) {
    if (first + u < last)
      fetch(first + u);
    copies_issued();
  }

  // Warp w takes the value columns' 8-wide tiles w, w + warps, ...
  constexpr int kWarpsHere = kThreads / 32, kNTiles = V / 8;
  constexpr int kMine = (kNTiles + kWarpsHere - 1) / kWarpsHere;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  unsigned frag[kMine][K / 16][2];
  copies_landed<kCarryBuffers - 1>(); // the state's group, not the chunks'
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kMine; ++i) {
    const int n0 = (warp + i * kWarpsHere) * 8;
#pragma unroll
    for (int k = 0; k < K / 16; ++k)
      if (n0 < V)
        rhs_fragment<K, V, false>(state, 16 * k, n0, frag[i][k]);
  }
  const float *before = s.run_prefix + ((seq * HV + hv) * s.runs + run) * GC;
  // One gate a token: every thread keeps the prefix; per channel: shared.
  float scalar = GC == 1 ? before[0] : 0.0f;
  for (int c = threadIdx.x; c < GC; c += kThreads)
    prefix[c] = before[c];
  for (i64 j = first; j < last; ++j) {
    copies_landed<kCarryBuffers - 2>();
    // Chunk j's copies are visible, and every warp is done with chunk
    // j - 1, whose buffer the next copy refills.
    __syncthreads();
    if (j + kCarryBuffers - 1 < last)
      fetch(j + kCarryBuffers - 1);
    copies_issued();
    float *at = ring + (int)(j % kCarryBuffers) * kBuffer;
    const mma_t *x = (const mma_t *)at;
    if constexpr (GC > 1) {
      // Per-channel decay: scale X's columns (rows past n are zeros).
      for (int i = threadIdx.x; i < C * K / 2; i += kThreads) {
        const int r = 2 * i / K, c = 2 * i % K;
        unsigned *word = (unsigned *)(at) + (r * ld(K) + c) / 2;
        const unsigned w = *word;
        *word = pack_mma2(to_float(element_of<mma_t>(w & 0xffffu)) * prefix[c],
                          to_float(element_of<mma_t>(w >> 16)) * prefix[c + 1]);
      }
      __syncthreads();
      // The next chunk's scaling reads these after its first barrier.
      for (int c = threadIdx.x; c < GC; c += kThreads)
        prefix[c] *= at[kFactorsAt + c];
    }
    const i64 t0 = begin + j * C;
    const carried_rows<V, T> rows{(T *)p.o + (t0 * HV + hv) * V, (i64)HV * V,
                                  (int)min((i64)C, end - t0),
                                  (const T *)(at + kOutAt)};
#pragma unroll
    for (int m0 = 0; m0 < C; m0 += 16) {
      float acc[kMine][4] = {};
#pragma unroll
      for (int k = 0; k < K / 16; ++k) {
        unsigned a[4];
        lhs_fragment<C, K, false>(x, m0, 16 * k, a);
#pragma unroll
        for (int i = 0; i < kMine; ++i)
          if ((warp + i * kWarpsHere) * 8 < V)
            mma_16816(acc[i], a, frag[i][k]);
      }
      const float f = GC == 1 ? scalar : 1.0f;
#pragma unroll
      for (int i = 0; i < kMine; ++i) {
        const int col = (warp + i * kWarpsHere) * 8 + 2 * (lane % 4);
        const int top = m0 + lane / 4;
        if (col >= V)
          continue;
        const float t[2] = {acc[i][0] * f, acc[i][1] * f};
        const float b[2] = {acc[i][2] * f, acc[i][3] * f};
        rows.template put<2>(top, col, t);
        rows.template put<2>(top + 8, col, b);
      }
    }
    if constexpr (GC == 1)
      scalar *= at[kFactorsAt];
  }
}

} // namespace lina
