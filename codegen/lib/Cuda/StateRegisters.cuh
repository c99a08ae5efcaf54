//===- StateRegisters.cuh - The scan's state in registers -------*- CUDA -*-===//
//
// Part of lina's device library (appended to Prelude.cuh). A scan that walks
// the chunks keeps its K x VT fp32 state here instead of in shared memory
// when the emitter finds that the state is only decayed, added to and used
// as the right operand of products (docs/perf-notes.md: the shared-memory
// scan spent its time on the L1 pipe, 93% busy, moving the state through
// shared memory five times per chunk).
//
//===----------------------------------------------------------------------===//

namespace lina {

/// Two (four) adjacent elements of a product epilogue's base tile as
/// floats: an fp32 tile, or a packed one, whose 16-bit values the scan
/// loaded as they are (a backward's record holds the delta rule's solved
/// values U so; StateSplit.h's roundedInRecord).
__device__ __forceinline__ void base_elements(const float *p, float (&x)[2]) {
  f32x2 b = *(const f32x2 *)p;
  x[0] = b.x;
  x[1] = b.y;
}
__device__ __forceinline__ void base_elements(const float *p, float (&x)[4]) {
  f32x4 b = *(const f32x4 *)p;
  x[0] = b.x;
  x[1] = b.y;
  x[2] = b.z;
  x[3] = b.w;
}
template <int N>
__device__ __forceinline__ void base_elements(const mma_t *p, float (&x)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    x[i] = to_float(p[i]);
}

/// The state S (K x VT) as the fp32 accumulators of mma.sync m16n8k16 tiles
/// of its transpose S^T (VT x K). The CTA's warps split S^T into VT / 16
/// row tiles of 16 value rows; the kSplit warps of one row tile split the
/// key columns, kKeys each, so a thread keeps kKeys / 2 floats.
///
/// Why S^T: in a thread's accumulators of two adjacent key tiles, the pair
/// for value row v packed to bf16x2 is exactly the B fragment of X S for
/// the value column v (X: rows x K), so the products that read the state
/// take it from registers; and S += Y^T Z is S^T += Z^T Y, an mma into the
/// accumulators.
///
/// acc[j][e] holds S[key(j, e)][value(e)].
template <int K, int VT> struct reg_state {
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kRowTiles = VT / 16;
  static constexpr int kSplit = kWarps / kRowTiles;
  static constexpr int kKeys = K / kSplit;
  static constexpr int kTiles = kKeys / 8;
  static_assert(VT % 16 == 0 && kWarps % kRowTiles == 0 && kSplit >= 1 &&
                    K % kSplit == 0 && kKeys % 16 == 0,
                "the emitter keeps the state in registers only for a layout "
                "that tiles it");
  float acc[kTiles][4];

  __device__ __forceinline__ static int lane() { return threadIdx.x % 32; }
  __device__ __forceinline__ static int v0() {
    return threadIdx.x / 32 / kSplit * 16;
  }
  __device__ __forceinline__ static int k0() {
    return threadIdx.x / 32 % kSplit * kKeys;
  }
  __device__ __forceinline__ static int key(int j, int e) {
    return k0() + 8 * j + 2 * (lane() % 4) + (e & 1);
  }
  __device__ __forceinline__ static int value(int e) {
    return v0() + lane() / 4 + 8 * (e >> 1);
  }

  /// From [K, V] fp32 rows (column offset applied by the caller); zero when
  /// src is null.
  __device__ void load(const float *src, int row_stride) {
#pragma unroll
    for (int j = 0; j < kTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        acc[j][e] = src ? src[key(j, e) * row_stride + value(e)] : 0.0f;
  }

  /// To [K, V] rows of fp32, or of bf16 or f16 (the backward's chunk
  /// states where they are kept packed).
  template <typename E> __device__ void store(E *dst, int row_stride) const {
#pragma unroll
    for (int j = 0; j < kTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        from_float(acc[j][e], dst[key(j, e) * row_stride + value(e)]);
  }

  /// decay_state in place: row k of S times exp(G_{n-1, k}), or all of S
  /// times exp(G_{n-1}) with one gate column; `last` is the gate sums' row
  /// n - 1, or its factors (Factors).
  template <int GC, bool Factors = false>
  __device__ void decay(const float *last) {
    float shared_factor = GC == 1 ? decay_factor<Factors>(last, 0) : 0.0f;
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      // e = 0, 2 share a key, as do e = 1, 3; key(j, 0) is even, so the
      // two keys are one 8-byte load.
      float f0 = shared_factor, f1 = shared_factor;
      if (GC != 1) {
        f32x2 g = *(const f32x2 *)(last + key(j, 0));
        f0 = Factors ? g.x : __expf(g.x);
        f1 = Factors ? g.y : __expf(g.y);
      }
      acc[j][0] *= f0;
      acc[j][2] *= f0;
      acc[j][1] *= f1;
      acc[j][3] *= f1;
    }
  }

  /// S += T (S -= T with Sign -1) for a K x VT tile in shared memory.
  template <int Sign = 1> __device__ void add_tile(const float *t) {
#pragma unroll
    for (int j = 0; j < kTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        acc[j][e] += Sign * t[key(j, e) * ld(VT) + value(e)];
  }

  /// S += Y^T Z for Y (R x K) and Z (R x VT) in shared memory: S^T += Z^T Y
  /// into the accumulators (A = Z^T, B = Y as a column-major K-column
  /// operand), so the product never exists as a tile.
  /// Y and Z are fp32 or packed tiles. With Sign -1, S -= Y^T Z: Z^T's
  /// fragment negated (each 16-bit half's sign bit), which is exact.
  template <int R, int Sign = 1, typename EY, typename EZ>
  __device__ void update(const EY *Y, const EZ *Z) {
    static_assert(R % 16 == 0, "tensor-core tiles are 16 rows");
    static_assert(Sign == 1 || Sign == -1, "added or subtracted");
#pragma unroll
    for (int r0 = 0; r0 < R; r0 += 16) {
      unsigned a[4];
      lhs_fragment<VT, R, true>(Z, v0(), r0, a);
      if constexpr (Sign < 0)
#pragma unroll
        for (int i = 0; i < 4; ++i)
          a[i] ^= 0x80008000u;
          // Two key tiles a load (kTiles is even: whole 16-column steps).
#pragma unroll
      for (int j = 0; j < kTiles; j += 2) {
        unsigned b0[2], b1[2];
        rhs_fragment_pair<R, K>(Y, r0, k0() + 8 * j, b0, b1);
        mma_16816(acc[j], a, b0);
        mma_16816(acc[j + 1], a, b1);
      }
    }
  }

  /// dst (M x VT) = X S for X (M x K) in shared memory, S from registers.
  /// Each warp contracts its own key columns; with kSplit > 1 the partial
  /// products meet in `scratch` (kSplit x M x ld(VT) floats) and are summed
  /// after a barrier, so the call synchronizes the CTA. With Sign +1 or -1
  /// that sum also takes an epilogue: dst = base + X S or base - X S (base
  /// may be dst), saving the elementwise pass and its barriers. With
  /// kSplit == 1 each warp writes its own value columns, epilogue
  /// included, and nothing synchronizes.
  /// X is an fp32 or a packed tile, and so is base.
  template <int M, int Sign = 0, typename EX, typename EB = float>
  __device__ void product(float *dst, const EX *X, float *scratch,
                          const EB *base = nullptr) const {
    product_into<M, Sign>(tile_rows<VT>{dst}, X, scratch, base);
  }

  /// Each warp's X S over its key columns, for 16 rows of X at a time:
  /// f(m0, d), d[h] the C fragment of rows m0 .. m0 + 15 and value columns
  /// v0() + 8h .. + 7. The contraction runs as two chains of mma (even and
  /// odd key steps) summed at the end, so that a chain waits on half as
  /// many tensor-core round trips.
  template <int M, typename EX, typename F>
  __device__ __forceinline__ void contract(const EX *X, F &&f) const {
    static_assert(M % 16 == 0, "tensor-core tiles are 16 rows");
    constexpr int kSteps = kKeys / 16, kChains = kSteps >= 4 ? 2 : 1;
#pragma unroll
    for (int m0 = 0; m0 < M; m0 += 16) {
      float d[kChains][2][4] = {};
#pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        unsigned a[4];
        lhs_fragment<M, K, false>(X, m0, k0() + 16 * s, a);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          unsigned b[2] = {
              pack_mma2(acc[2 * s][2 * h], acc[2 * s][2 * h + 1]),
              pack_mma2(acc[2 * s + 1][2 * h], acc[2 * s + 1][2 * h + 1])};
          mma_16816(d[s % kChains][h], a, b);
        }
      }
      if constexpr (kChains == 2)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            d[0][h][e] += d[1][h][e];
      f(m0, d[0]);
    }
  }

  /// The mma half of product: each warp's partial X S over its key columns
  /// into its M x ld(VT) slice of `out` (dst itself when kSplit is 1). No
  /// barrier: a second product of the same state can have its partials
  /// computed ahead, before the first product's barrier, and only its
  /// reduce later (the emitter's hoisted products).
  template <int M, typename EX>
  __device__ void partials(float *out, const EX *X) const {
    if (kSplit > 1)
      out += (threadIdx.x / 32 % kSplit) * M * ld(VT);
    contract<M>(X, [&](int m0, const float(&d)[2][4]) {
      put_own<0>(tile_rows<VT>{out}, m0, d, (const float *)nullptr);
    });
  }

  /// Writes a warp's C fragments (rows m0 .., its value columns) to the
  /// sink, as base + d or base - d with Sign +1 or -1 (base an M x VT fp32
  /// or packed tile, read at the same elements; it may be the sink's tile).
  template <int Sign, typename Sink, typename EB>
  __device__ __forceinline__ void put_own(const Sink &sink, int m0,
                                          const float (&d)[2][4],
                                          const EB *base) const {
    int grp = lane() / 4, tig = lane() % 4;
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        int r = m0 + grp + 8 * half, col = v0() + 8 * h + 2 * tig;
        float x[2] = {d[h][2 * half], d[h][2 * half + 1]};
        if (Sign != 0) {
          float b[2];
          base_elements(base + r * ld(VT) + col, b);
          x[0] = b[0] + Sign * x[0];
          x[1] = b[1] + Sign * x[1];
        }
        sink.template put<2>(r, col, x);
      }
  }

  /// kSplit == 1: sink = base + X S or base - X S (Sign), or X S, each
  /// warp its own value columns; no barrier, no scratch.
  template <int M, int Sign, typename EX, typename Sink, typename EB>
  __device__ void own_columns_into(const Sink &sink, const EX *X,
                                   const EB *base) const {
    static_assert(kSplit == 1, "a warp holds all key columns of its rows");
    contract<M>(X, [&](int m0, const float(&d)[2][4]) {
      put_own<Sign>(sink, m0, d, base);
    });
  }

  /// kSplit == 1: sink (M x VT) = op(A) B + X S, each warp its own value
  /// columns, in registers: B's columns are the warp's, so when a warp of
  /// this scan wrote them (the delta rule's u - W S) no barrier precedes
  /// the call. A is M x KD (KD x M stored when TA), B KD x VT; fp32 or
  /// packed tiles.
  template <int M, int KD, bool TA, typename EX, typename EA, typename EB,
            typename Sink>
  __device__ void product_add_mma_into(const Sink &sink, const EX *X,
                                       const EA *A, const EB *B) const {
    static_assert(kSplit == 1, "a warp holds all key columns of its rows");
    static_assert(KD % 16 == 0, "tensor-core tiles are 16x8x16");
    contract<M>(X, [&](int m0, float(&d)[2][4]) {
#pragma unroll
      for (int k = 0; k < KD; k += 16) {
        unsigned a[4];
        lhs_fragment<M, KD, TA>(A, m0, k, a);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          unsigned b[2];
          rhs_fragment<KD, VT, false>(B, k, v0() + 8 * h, b);
          mma_16816(d[h], a, b);
        }
      }
      put_own<0>(sink, m0, d, (const float *)nullptr);
    });
  }

  /// product with the result going to a sink instead of a tile: the
  /// output (global_rows) when the sum is only stored, which then needs no
  /// tile, barrier or store pass. With an epilogue (Sign != 0): written in
  /// the reduction pass, or by each warp when kSplit is 1.
  template <int M, int Sign, typename EX, typename Sink, typename EB>
  __device__ void product_into(const Sink &sink, const EX *X, float *scratch,
                               const EB *base) const {
    if constexpr (kSplit == 1) {
      own_columns_into<M, Sign>(sink, X, base);
    } else {
      partials<M>(scratch, X);
      __syncthreads();
      reduce_into<M, Sign>(sink, scratch, base);
    }
  }

  /// The reduction half (kSplit > 1), after a barrier that follows the
  /// partials: dst = the sum of the kSplit partials in `scratch`, or base
  /// plus or minus it (Sign).
  template <int M, int Sign = 0>
  __device__ void reduce(float *dst, const float *scratch,
                         const float *base = nullptr) const {
    reduce_into<M, Sign>(tile_rows<VT>{dst}, scratch, base);
  }
  template <int M, int Sign, typename EB>
  __device__ void reduce(float *dst, const float *scratch,
                         const EB *base) const {
    reduce_into<M, Sign>(tile_rows<VT>{dst}, scratch, base);
  }

  /// reduce into a sink (a tile or the output), four columns at a time.
  template <int M, int Sign = 0, typename Sink, typename EB = float>
  __device__ void reduce_into(const Sink &sink, const float *scratch,
                              const EB *base = nullptr) const {
    constexpr int LV = ld(VT), kQuads = VT / 4;
    static_assert(VT % 4 == 0, "four columns at a time");
    // Over the M x VT elements, not the padded M x LV: no padding column is
    // visited, and a quad's row and column are a shift and a mask away.
    constexpr int kPer = (M * kQuads + kThreads - 1) / kThreads;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      int q = threadIdx.x + k * kThreads;
      if (q >= M * kQuads)
        break;
      int r = q / kQuads, c = q % kQuads * 4, i = r * LV + c;
      f32x4 s = *(const f32x4 *)(scratch + i);
#pragma unroll
      for (int w = 1; w < kSplit; ++w) {
        f32x4 p = *(const f32x4 *)(scratch + w * M * LV + i);
        s = f32x4{s.x + p.x, s.y + p.y, s.z + p.z, s.w + p.w};
      }
      if (Sign != 0) {
        float b[4];
        base_elements(base + i, b);
        s = f32x4{b[0] + Sign * s.x, b[1] + Sign * s.y, b[2] + Sign * s.z,
                  b[3] + Sign * s.w};
      }
      float x[4] = {s.x, s.y, s.z, s.w};
      sink.template put<4>(r, c, x);
    }
  }
};

} // namespace lina
