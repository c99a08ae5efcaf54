//===- Prelude.cuh - The device library of generated kernels ----*- CUDA -*-===//
//
// Part of lina. Every generated kernel starts with this text. It defines, once,
// one device function per lina tile op; the emitted kernel is a sequence of
// calls into it. Tiles live in shared memory as row-major fp32 with rows
// padded to ld(cols) elements (see below), except packed tiles: a loaded bf16
// tile that only tensor-core products read keeps its bf16 elements, and the
// products read their fragments with ldmatrix (see "Packed tiles"). It
// needs no header at all (NVRTC has none): bf16/f16 conversions are written
// in PTX.
//
// Conventions: every function is called by all LINA_THREADS threads of the
// CTA and reads and writes shared memory only (loads and stores excepted);
// the emitted code puts a __syncthreads() between two calls when the second
// touches a buffer the first wrote, or writes one the first read. `n` is the
// number of valid rows of a chunk tile; rows at and past n are zero in every
// result. Pad columns hold unspecified values and are never read as data.
//
//===----------------------------------------------------------------------===//

#ifndef LINA_THREADS
#define LINA_THREADS 128
#endif
// A kernel's dynamic shared memory, and the entry the emulated device
// calls it by (the runtime's EmulatedDevice.cuh defines both for a host
// compile; on the GPU the entry is nothing).
#ifdef LINA_HOST_EMULATION
#define LINA_DYNAMIC_SHARED(T, name) T *name = lina_emu::dynamic_shared<T>()
#define LINA_DYNAMIC_SHARED_ALIGNED(T, name, n) LINA_DYNAMIC_SHARED(T, name)
#else
#define LINA_DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#define LINA_DYNAMIC_SHARED_ALIGNED(T, name, n)                                \
  extern __shared__ __align__(n) T name[]
#define LINA_KERNEL_ENTRY(name)
#endif
// 1 where the plan runs sequences in segments (the emitter defines it).
#ifndef LINA_SEGMENTS
#define LINA_SEGMENTS 0
#endif

namespace lina {

typedef long long i64;

/// Threads per CTA, known at compile time so that loops over a tile unroll.
constexpr int kThreads = LINA_THREADS;
/// Whether the kernels may see segments (sequence_bounds' piece arithmetic
/// is compiled only then: it cost gdn's prepare kernel 12 registers).
constexpr bool kSegments = LINA_SEGMENTS;
#if LINA_SEGMENTS && !defined(LINA_CHUNK_SIZE)
#error "segments need the chunk size (LINA_CHUNK_SIZE) for packed sequences"
#endif
#ifndef LINA_CHUNK_SIZE
#define LINA_CHUNK_SIZE 1
#endif
/// The tokens a chunk, where segments may cut packed sequences.
constexpr int kChunkSize = LINA_CHUNK_SIZE;

/// The row stride, in elements, of a tile with `cols` columns. A stride of 8
/// or 24 modulo 32 puts the four rows a half-warp reads for a tensor-core
/// fragment (8-byte loads) in distinct banks; with the bare stride (a
/// multiple of 32) they all fall in the same eight banks.
__host__ __device__ constexpr int ld(int cols) {
  return cols < 8 || cols % 16 == 8 ? cols : cols + 8;
}

struct alignas(16) u32x4 { unsigned x, y, z, w; };
struct alignas(16) f32x4 { float x, y, z, w; };
struct alignas(8) f32x2 { float x, y; };

/// The shared-window address of a pointer into shared memory (what
/// ldmatrix and cp.async take).
__device__ __forceinline__ unsigned shared_address(const void *p) {
  return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ bool aligned16(const void *p) {
  return ((unsigned long long)p & 15) == 0;
}

struct bf16 { unsigned short bits; };
struct f16 { unsigned short bits; };

/// The tensor cores' operand type in the mma.sync products: f16 for an f16
/// spec (LINA_MMA_F16), whose inputs bf16 would cut from 11 significant bits
/// to 8, else bf16 (its fp32 range keeps the scaled operands finite). The
/// Hopper scans take bf16 specs only and use bf16 by name.
#ifdef LINA_MMA_F16
typedef f16 mma_t;
#else
typedef bf16 mma_t;
#endif

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(bf16 x) {
  return __uint_as_float(((unsigned)x.bits) << 16);
}
__device__ __forceinline__ float to_float(f16 x) {
#ifdef LINA_HOST_EMULATION
  return lina_emu::from_f16(x.bits);
#else
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
#endif
}
__device__ __forceinline__ void from_float(float v, float &out) { out = v; }
__device__ __forceinline__ void from_float(float v, bf16 &out) {
#ifdef LINA_HOST_EMULATION
  out.bits = lina_emu::to_bf16(v);
#else
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(out.bits) : "f"(v));
#endif
}
__device__ __forceinline__ void from_float(float v, f16 &out) {
#ifdef LINA_HOST_EMULATION
  out.bits = lina_emu::to_f16(v);
#else
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(out.bits) : "f"(v));
#endif
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
  float *chunk_data;
  i64 batch, seq_len, num_seqs;
  /// The batch's sequence length, and the segments the runtime cuts each
  /// of its sequences into (Segments.cuh; 1: whole), seq_len tokens each
  /// but the last.
  i64 seq_tokens, segments;
};

/// s / n for 0 <= s and 1 <= n <= 16 without an integer division: one by
/// a value unknown at compile time took mamba2's prepare kernel from 32 to
/// 40 registers (eight CTAs an SM to six). A float reciprocal's quotient is
/// off by at most one below s = 2^24 (checked for every s and 1 to 16
/// segments), and the loops put it right (for any s, in more steps).
__device__ __forceinline__ int small_quotient(int s, int n) {
  int b = __float2int_rz(__int2float_rn(s) * __frcp_rn(__int2float_rn(n)));
  while ((b + 1) * n <= s)
    ++b;
  while (b * n > s)
    --b;
  return b;
}

/// The tokens [begin, end) of sequence `seq`, flattened over the batch.
/// The sequences are the batch's or cu_seqlens', or with segments their
/// pieces, `segments` a sequence (sequence b's piece j is b segments + j):
/// the batch's are seq_len tokens each but the last (the runtime's
/// segmentPieces); a packed sequence's are ceil(chunks / segments) whole
/// chunks each, the last what is left and those past its end empty (the
/// same rule, applied to each sequence's own length).
__device__ __forceinline__ void sequence_bounds(const Params &p, i64 seq,
                                                i64 &begin, i64 &end) {
  if (kSegments && p.segments > 1) {
    const int n = (int)p.segments, s = (int)seq;
    const int b = small_quotient(s, n), j = s - b * n;
    if (p.cu_seqlens) {
      const i64 first = p.cu_seqlens[b], last = p.cu_seqlens[b + 1];
      const int chunks = (int)((last - first + kChunkSize - 1) / kChunkSize);
      const i64 length =
          (i64)small_quotient(chunks + n - 1, n) * kChunkSize;
      begin = min(first + j * length, last);
      end = min(begin + length, last);
    } else {
      begin = b * p.seq_tokens + (i64)j * p.seq_len;
      end = min(begin + p.seq_len, (b + 1) * p.seq_tokens);
    }
  } else if (p.cu_seqlens) {
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

/// The elements in a 16-byte word (8 bf16/f16 or 4 fp32), as floats.
__device__ __forceinline__ void unpack(const u32x4 &w, bf16, float (&f)[8]) {
  unsigned u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    f[2 * j] = __uint_as_float(u[j] << 16);
    f[2 * j + 1] = __uint_as_float(u[j] & 0xffff0000u);
  }
}
__device__ __forceinline__ void unpack(const u32x4 &w, f16, float (&f)[8]) {
  unsigned u[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    f16 lo{(unsigned short)(u[j] & 0xffff)}, hi{(unsigned short)(u[j] >> 16)};
    f[2 * j] = to_float(lo);
    f[2 * j + 1] = to_float(hi);
  }
}
__device__ __forceinline__ void unpack(const u32x4 &w, float, float (&f)[4]) {
  f[0] = __uint_as_float(w.x);
  f[1] = __uint_as_float(w.y);
  f[2] = __uint_as_float(w.z);
  f[3] = __uint_as_float(w.w);
}

/// The 16-byte word at `at` read element by element (for an unaligned
/// tensor), with the bits in memory order, as a 16-byte load would give.
template <typename T>
__device__ __forceinline__ u32x4 read_word(const T *at) {
  unsigned u[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if constexpr (sizeof(T) == 2)
      u[k] = at[2 * k].bits | (unsigned(at[2 * k + 1].bits) << 16);
    else
      u[k] = __float_as_uint(at[k]);
  }
  return u32x4{u[0], u[1], u[2], u[3]};
}

/// A tile on its way from global to shared memory, in two steps so that a
/// scan can issue the next chunk's loads (fetch) before this chunk's work
/// and land them (commit) after it. Between the two the tile is in
/// registers, and only there: commit needs nothing but the destination.
/// Rows that are whole 16-byte words move as words, every load issued
/// before the first use (element by element when the tensor is not 16-byte
/// aligned); narrower rows (a gate or beta column) move element by element.
/// load_tile is the same copy in one step.
template <int R, int CC, typename T,
          bool kWordRows = (CC % (16 / sizeof(T)) == 0)>
struct tile_fetch {
  static constexpr int kVec = 16 / sizeof(T), kRowWords = CC / kVec;
  static constexpr int kWords = R * kRowWords;
  static constexpr int kPer = (kWords + kThreads - 1) / kThreads;
  u32x4 raw[kPer];

  /// Loads rows [0, n) of src (row r at src + r * row_stride); rows past n
  /// are zero. kAligned: the caller knows src and row_stride are whole
  /// 16-byte words (lina's own workspace), so the element-by-element path
  /// for unaligned tensors is not compiled in; its predicated loads would
  /// otherwise take issue slots on every call.
  template <bool kAligned = false>
  __device__ __forceinline__ void fetch(const T *src, i64 row_stride, int n) {
    // One branch for the whole tile, taken alike by every thread: per word,
    // the compiler predicates the element-by-element path instead, and its
    // twelve predicated-off instructions still take issue slots.
    if (kAligned || (row_stride % kVec == 0 && aligned16(src)))
      fetch_rows<true>(src, row_stride, n);
    else
      fetch_rows<false>(src, row_stride, n);
  }

  /// kWhole: src and row_stride are whole 16-byte words.
  template <bool kWhole>
  __device__ __forceinline__ void fetch_rows(const T *src, i64 row_stride,
                                             int n) {
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      int i = threadIdx.x + j * kThreads, r = i / kRowWords;
      const T *at = src + r * row_stride + (i % kRowWords) * kVec;
      if (n >= R) {
        // Every chunk but a sequence's last: no row to zero, so no moves of
        // zeros ahead of the loads.
        if (i < kWords)
          raw[j] = kWhole ? *(const u32x4 *)at : read_word(at);
        continue;
      }
      raw[j] = u32x4{0u, 0u, 0u, 0u};
      if (i < kWords && r < n)
        raw[j] = kWhole ? *(const u32x4 *)at : read_word(at);
    }
  }

  /// dst[r][c] = the fetched element (r, c): as float into an fp32 tile,
  /// or as it is into a packed tile (D = T, 16-bit), one 16-byte store a
  /// word.
  template <typename D>
  __device__ __forceinline__ void commit(D *dst) const {
    constexpr int L = ld(CC);
    constexpr bool kPacked = sizeof(D) == 2 && sizeof(T) == 2;
    static_assert(kPacked || sizeof(D) == 4, "tiles are fp32 or packed");
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      int i = threadIdx.x + j * kThreads;
      if (i >= kWords)
        break;
      if constexpr (kPacked) {
        *(u32x4 *)(dst + (i / kRowWords) * L + (i % kRowWords) * kVec) =
            raw[j];
        continue;
      }
      float f[kVec];
      unpack(raw[j], T{}, f);
      f32x4 *d = (f32x4 *)(dst + (i / kRowWords) * L + (i % kRowWords) * kVec);
#pragma unroll
      for (int w = 0; w < kVec / 4; ++w)
        d[w] = f32x4{f[4 * w], f[4 * w + 1], f[4 * w + 2], f[4 * w + 3]};
    }
  }
};

template <int R, int CC, typename T> struct tile_fetch<R, CC, T, false> {
  static constexpr int kElements = R * CC;
  static constexpr int kPer = (kElements + kThreads - 1) / kThreads;
  float value[kPer];

  /// Element by element, aligned or not.
  template <bool kAligned = false>
  __device__ __forceinline__ void fetch(const T *src, i64 row_stride, int n) {
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      int i = threadIdx.x + j * kThreads, r = i / CC;
      value[j] = i < kElements && r < n
                     ? to_float(src[r * row_stride + i % CC])
                     : 0.0f;
    }
  }

  __device__ __forceinline__ void commit(float *dst) const {
    constexpr int L = ld(CC);
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      int i = threadIdx.x + j * kThreads;
      if (i < kElements)
        dst[(i / CC) * L + i % CC] = value[j];
    }
  }
};

/// dst[r][c] = src[r * row_stride + c] for r < n, else 0: a tile_fetch and
/// its commit at once, so every load of the tile is issued before the first
/// store and their latencies overlap.
template <int R, int CC, typename T, typename D>
__device__ void load_tile(D *dst, const T *src, i64 row_stride, int n) {
  tile_fetch<R, CC, T> tile;
  tile.fetch(src, row_stride, n);
  tile.commit(dst);
}

/// One cp.async of `Bytes` (4 or 16) from global to shared memory, of which
/// the first `source` come from `from` and the rest are zero (0: a row past
/// the end, filled with zeros).
template <int Bytes>
__device__ __forceinline__ void copy_async(void *to, const void *from,
                                           int source) {
  static_assert(Bytes == 4 || Bytes == 16, "cp.async copies 4 or 16 bytes");
#ifdef LINA_HOST_EMULATION
  lina_emu::copy_async(to, from, Bytes, source);
#else
  if constexpr (Bytes == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                     shared_address(to)),
                 "l"(from), "r"(source));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(
                     shared_address(to)),
                 "l"(from), "r"(source));
#endif
}

/// A tile copied from global straight into shared memory by cp.async, for a
/// scan that keeps its fetched tiles in rings of buffers: fetch issues the
/// copies of a chunk ahead into a buffer no warp reads now, and they land
/// at a copies_landed() (before the loop top's barrier). Unlike tile_fetch,
/// nothing waits in registers and nothing is committed: the copy writes
/// the tile itself, and zero-fills rows past n (src-size 0), so a partial
/// chunk takes no branch of its own. Only for tiles that keep the global
/// element type: 16-byte words of a row, or single fp32 elements.
template <int R, int CC, typename T> struct tile_copy {
  static constexpr bool kWordRows = CC % (16 / sizeof(T)) == 0;
  static_assert(kWordRows || sizeof(T) == 4,
                "cp.async moves 4, 8 or 16 bytes: narrow 16-bit rows take "
                "tile_fetch");
  static constexpr int kVec = kWordRows ? 16 / sizeof(T) : 1;
  static constexpr int kRowWords = CC / kVec, kWords = R * kRowWords;
  static constexpr int kPer = (kWords + kThreads - 1) / kThreads;

  template <bool kAligned = false>
  __device__ __forceinline__ static void fetch(T *dst, const T *src,
                                               i64 row_stride, int n) {
    constexpr int L = ld(CC);
    // An unaligned tensor (16-byte words only) is read element by element
    // and stored at once: correct, and rare enough not to hide its latency.
    bool words = kAligned || !kWordRows ||
                 (row_stride % kVec == 0 && aligned16(src));
#pragma unroll
    for (int j = 0; j < kPer; ++j) {
      int i = threadIdx.x + j * kThreads;
      if (i >= kWords)
        break;
      int r = i / kRowWords, c = (i % kRowWords) * kVec;
      T *to = dst + r * L + c;
      // Rows past n copy nothing from row 0 (always a valid address).
      const T *from = src + (r < n ? r : 0) * row_stride + c;
      if (!words) {
        u32x4 w = r < n ? read_word(from) : u32x4{0u, 0u, 0u, 0u};
        *(u32x4 *)to = w;
        continue;
      }
      constexpr int kBytes = kWordRows ? 16 : 4;
      copy_async<kBytes>(to, from, r < n ? kBytes : 0);
    }
  }
};

/// Closes the group of the copies issued since the last call (one group a
/// chunk).
__device__ __forceinline__ void copies_issued() {
#ifndef LINA_HOST_EMULATION // the emulated copies land when issued
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
/// Waits until at most `Pending` groups (the newest) are in flight: the
/// older ones have landed in shared memory (for this thread; the barrier
/// after it makes them visible to the CTA).
template <int Pending> __device__ __forceinline__ void copies_landed() {
#ifndef LINA_HOST_EMULATION
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
#endif
}

/// Every valid row holds `value` (a fixed per-head log gate).
template <int R>
__device__ void fill_rows(float *dst, float value, int n) {
  for (int r = threadIdx.x; r < R; r += kThreads)
    dst[r] = r < n ? value : 0.0f;
}

__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
#ifdef LINA_HOST_EMULATION
  return unsigned(lina_emu::to_bf16(lo)) |
         (unsigned(lina_emu::to_bf16(hi)) << 16);
#else
  unsigned r;
  // The first source lands in the upper half.
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#endif
}

/// Eight floats as one 16-byte word of bf16.
__device__ __forceinline__ u32x4 pack_bf16x8(const float (&f)[8]) {
  return u32x4{pack_bf16x2(f[0], f[1]), pack_bf16x2(f[2], f[3]),
               pack_bf16x2(f[4], f[5]), pack_bf16x2(f[6], f[7])};
}

/// Two floats as an mma_t pair, `lo` in the lower half.
__device__ __forceinline__ unsigned pack_mma2(float lo, float hi) {
#if defined(LINA_MMA_F16) && defined(LINA_HOST_EMULATION)
  return unsigned(lina_emu::to_f16(lo)) |
         (unsigned(lina_emu::to_f16(hi)) << 16);
#elif defined(LINA_MMA_F16)
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
#else
  return pack_bf16x2(lo, hi);
#endif
}

/// The first n rows of a tile to global memory, 16 bytes per store where
/// the rows are aligned.
template <int R, int CC, typename T>
__device__ void store_tile(T *dst, const float *src, i64 row_stride, int n) {
  constexpr int L = ld(CC), kVec = 16 / sizeof(T);
  if constexpr (CC % kVec == 0) {
    if (row_stride % kVec == 0 && aligned16(dst)) {
      constexpr int kWords = R * CC / kVec;
      for (int i = threadIdx.x; i < kWords; i += kThreads) {
        int r = i / (CC / kVec), c = (i % (CC / kVec)) * kVec;
        if (r >= n)
          continue;
        const f32x4 *s = (const f32x4 *)(src + r * L + c);
        u32x4 word;
        if constexpr (sizeof(T) == 4) {
          f32x4 a = s[0];
          word = u32x4{__float_as_uint(a.x), __float_as_uint(a.y),
                       __float_as_uint(a.z), __float_as_uint(a.w)};
        } else {
          f32x4 a = s[0], b = s[1];
          float f[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
          unsigned u[4];
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            T lo, hi;
            from_float(f[2 * j], lo);
            from_float(f[2 * j + 1], hi);
            u[j] = (unsigned)lo.bits | ((unsigned)hi.bits << 16);
          }
          word = u32x4{u[0], u[1], u[2], u[3]};
        }
        *(u32x4 *)(dst + r * row_stride + c) = word;
      }
      return;
    }
  }
  for (int i = threadIdx.x; i < n * CC; i += kThreads) {
    int r = i / CC, c = i % CC;
    from_float(src[r * L + c], dst[r * row_stride + c]);
  }
}

/// A K x VT state tile from [K, V] rows of fp32 (a call's states) or bf16
/// (the backward's chunk states of a bf16 spec), column offset applied by
/// the caller; zero when src is null.
template <int K, int VT, typename E>
__device__ void load_state(float *dst, const E *src, int row_stride) {
  for (int i = threadIdx.x; i < K * VT; i += kThreads)
    dst[(i / VT) * ld(VT) + i % VT] =
        src ? to_float(src[(i / VT) * row_stride + i % VT]) : 0.0f;
}

/// The same tile kept packed: the backward's bf16 chunk states, where only
/// tensor-core products (through ldmatrix) and row dots read them, stay
/// the stored bf16 elements, 16 bytes a step, in rows of ld(VT) elements:
/// half the shared memory of an fp32 tile holding the same values. Aligned
/// rows go by cp.async, every word in flight at once: a load and its store
/// a word at a time took a round trip to global memory each (four a thread
/// for a 128 x 128 state on 512 threads, once a chunk in the gradients
/// kernel). kWait: the call returns once its copies have landed; without
/// it the caller issues more loads first and then ends the group and waits
/// (copies_issued, copies_landed<0>), so that both of a chunk's states and
/// its tiles are in flight together.
template <int K, int VT, bool kWait = true>
__device__ void load_state(mma_t *dst, const mma_t *src, int row_stride) {
  static_assert(VT % 8 == 0, "a packed row is whole 16-byte words");
  constexpr int kRowWords = VT / 8;
  const bool aligned =
      ((unsigned long long)src | (unsigned long long)row_stride * 2) % 16 == 0;
  if (src && aligned) {
    for (int i = threadIdx.x; i < K * kRowWords; i += kThreads) {
      int r = i / kRowWords, c = i % kRowWords * 8;
      copy_async<16>(dst + r * ld(VT) + c, src + (i64)r * row_stride + c, 16);
    }
    // A group of its own, waited for at once: a ring's older groups may
    // wait with it, and none of its counting changes.
    if constexpr (kWait) {
      copies_issued();
      copies_landed<0>();
    }
    return;
  }
  for (int i = threadIdx.x; i < K * kRowWords; i += kThreads) {
    int r = i / kRowWords, c = i % kRowWords * 8;
    const mma_t *at = src + (i64)r * row_stride + c;
    u32x4 w = !src ? u32x4{0u, 0u, 0u, 0u} : read_word(at);
    *(u32x4 *)(dst + r * ld(VT) + c) = w;
  }
}

template <int K, int VT, typename E>
__device__ void store_state(E *dst, const float *src, int row_stride) {
  for (int i = threadIdx.x; i < K * VT; i += kThreads)
    from_float(src[(i / VT) * ld(VT) + i % VT],
               dst[(i / VT) * row_stride + i % VT]);
}

//===----------------------------------------------------------------------===//
// Elementwise and row-wise ops. The flat ones run over padded tiles of N
// floats, pad columns included: operands of one op share a shape, so their
// pads line up and no real element mixes with a pad.
//===----------------------------------------------------------------------===//

/// dst = f(x, y) over N floats, 16 bytes per step when N allows (tiles are
/// 16-byte aligned and padded tiles hold a multiple of 4 floats).
template <int N, typename F>
__device__ __forceinline__ void elementwise(float *dst, const float *x,
                                            const float *y, F f) {
  if constexpr (N % 4 == 0) {
    for (int i = threadIdx.x * 4; i < N; i += kThreads * 4) {
      f32x4 a = *(const f32x4 *)(x + i), b = a;
      if (y)
        b = *(const f32x4 *)(y + i);
      *(f32x4 *)(dst + i) =
          f32x4{f(a.x, b.x), f(a.y, b.y), f(a.z, b.z), f(a.w, b.w)};
    }
  } else {
    for (int i = threadIdx.x; i < N; i += kThreads)
      dst[i] = f(x[i], y ? y[i] : 0.0f);
  }
}

/// Flat copy of a whole (padded) tile of N floats.
template <int N>
__device__ void copy_tile(float *dst, const float *src) {
  elementwise<N>(dst, src, nullptr, [](float a, float) { return a; });
}

template <int N> __device__ void zeros(float *dst) {
  for (int i = threadIdx.x; i < N; i += kThreads)
    dst[i] = 0.0f;
}

template <int N> __device__ void scale(float *dst, const float *x, float f) {
  elementwise<N>(dst, x, nullptr, [f](float a, float) { return a * f; });
}

template <int N> __device__ void neg(float *dst, const float *x) {
  elementwise<N>(dst, x, nullptr, [](float a, float) { return -a; });
}

template <int N>
__device__ void add(float *dst, const float *x, const float *y) {
  elementwise<N>(dst, x, y, [](float a, float b) { return a + b; });
}

template <int N>
__device__ void sub(float *dst, const float *x, const float *y) {
  elementwise<N>(dst, x, y, [](float a, float b) { return a - b; });
}

__device__ __forceinline__ float warp_sum(float s) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2)
    s += __shfl_xor_sync(0xffffffffu, s, o);
  return s;
}

/// x_i / sqrt(|x_i|^2 + 1e-6), fla's epsilon: a zero row stays zero. One
/// warp per row.
template <int R, int CC>
__device__ void l2norm(float *dst, const float *x) {
  constexpr int L = ld(CC);
  int lane = threadIdx.x % 32;
  for (int r = threadIdx.x / 32; r < R; r += kThreads / 32) {
    float s = 0.0f;
    for (int c = lane; c < CC; c += 32)
      s += x[r * L + c] * x[r * L + c];
    float inv = rsqrtf(warp_sum(s) + 1e-6f);
    for (int c = lane; c < CC; c += 32)
      dst[r * L + c] = x[r * L + c] * inv;
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
  for (int i = threadIdx.x; i < R * GC; i += kThreads) {
    int r = i / GC, c = i % GC, at = r * ld(GC) + c;
    float bias = dt_bias ? dt_bias[c] : 0.0f;
    dst[at] = r < n ? -a * softplus(x[at] + bias) : 0.0f;
  }
}

/// g = lower_bound * sigmoid(exp(A_log) (x + dt_bias)).
template <int R, int GC>
__device__ void gate_lower_bound(float *dst, const float *x, float a_log,
                                 const float *dt_bias, float lower_bound,
                                 int n) {
  float a = expf(a_log);
  for (int i = threadIdx.x; i < R * GC; i += kThreads) {
    int r = i / GC, c = i % GC, at = r * ld(GC) + c;
    float bias = dt_bias ? dt_bias[c] : 0.0f;
    dst[at] = r < n ? lower_bound * sigmoid(a * (x[at] + bias)) : 0.0f;
  }
}

template <int R>
__device__ void beta_sigmoid(float *dst, const float *x, float factor, int n) {
  for (int r = threadIdx.x; r < R; r += kThreads)
    dst[r] = r < n ? factor * sigmoid(x[r]) : 0.0f;
}

/// Cumulative sum down the first n rows, per column; zero past n. One gate
/// column is a warp scan; per-channel gates take a thread per column.
template <int R, int GC>
__device__ void cumsum(float *dst, const float *g, int n, bool exclusive) {
  if (GC == 1) {
    if (threadIdx.x >= 32)
      return;
    int lane = threadIdx.x;
    float carry = 0.0f;
    for (int r0 = 0; r0 < R; r0 += 32) {
      int r = r0 + lane;
      float s = r < R ? g[r] : 0.0f;
#pragma unroll
      for (int o = 1; o < 32; o *= 2) {
        float up = __shfl_up_sync(0xffffffffu, s, o);
        if (lane >= o)
          s += up;
      }
      // Exclusive: the lane before's inclusive sum, not s less this row's
      // value, which cancels where this row outweighs the rows before it
      // (the backward's exclusive sums of decayed terms).
      float before = __shfl_up_sync(0xffffffffu, s, 1);
      if (r < R)
        dst[r] =
            r < n ? carry + (exclusive ? (lane > 0 ? before : 0.0f) : s) : 0.0f;
      carry += __shfl_sync(0xffffffffu, s, 31);
    }
    return;
  }
  constexpr int L = ld(GC);
  for (int c = threadIdx.x; c < GC; c += kThreads) {
    float s = 0.0f;
    for (int r = 0; r < R; ++r) {
      float v = g[r * L + c];
      if (exclusive)
        dst[r * L + c] = r < n ? s : 0.0f;
      s += v;
      if (!exclusive)
        dst[r * L + c] = r < n ? s : 0.0f;
    }
  }
}

template <int R, int CC>
__device__ void scale_rows(float *dst, const float *x, const float *w) {
  constexpr int L = ld(CC);
  if constexpr (L % 4 == 0) {
    for (int i = threadIdx.x * 4; i < R * L; i += kThreads * 4) {
      float f = w[i / L];
      f32x4 v = *(const f32x4 *)(x + i);
      *(f32x4 *)(dst + i) = f32x4{v.x * f, v.y * f, v.z * f, v.w * f};
    }
  } else {
    for (int i = threadIdx.x; i < R * L; i += kThreads)
      dst[i] = x[i] * w[i / L];
  }
}

__device__ __forceinline__ float gate_at(const float *g, int gc, int r,
                                         int c) {
  return gc == 1 ? g[r] : g[r * ld(gc) + c];
}

/// x_i . exp(G_i), or x_i . exp(G_{n-1} - G_i) with to_end (never > 1). A
/// warp per row; with one gate column each lane takes the row's exp once and
/// scales four columns per step.
template <int R, int CC, int GC>
__device__ void decay_rows(float *dst, const float *x, const float *g, int n,
                           bool to_end) {
  constexpr int L = ld(CC);
  int lane = threadIdx.x % 32;
  for (int r = threadIdx.x / 32; r < R; r += kThreads / 32) {
    if (GC == 1 && CC % 4 == 0) {
      float f = r < n ? __expf(to_end ? g[n - 1] - g[r] : g[r]) : 0.0f;
      for (int c = lane * 4; c < CC; c += 128) {
        f32x4 v = *(const f32x4 *)(x + r * L + c);
        *(f32x4 *)(dst + r * L + c) =
            f32x4{v.x * f, v.y * f, v.z * f, v.w * f};
      }
      continue;
    }
    for (int c = lane; c < CC; c += 32) {
      float e = to_end ? gate_at(g, GC, n - 1, c) - gate_at(g, GC, r, c)
                       : gate_at(g, GC, r, c);
      dst[r * L + c] = r < n ? x[r * L + c] * __expf(e) : 0.0f;
    }
  }
}

/// The decay factor of gate column c from the chunk's last row of gate
/// sums: exp(G_{n-1, c}), or the row itself when it already holds the
/// factors (Factors: a split scan's record, store_decay_factors).
template <bool Factors>
__device__ __forceinline__ float decay_factor(const float *last, int c) {
  return Factors ? last[c] : __expf(last[c]);
}

/// A split scan's decay factors, exp of the chunk's last row of gate sums,
/// computed once in the prepare kernel: the scan's serial step then takes
/// no exponential (K of them a thread-step where a warp holds whole key
/// rows of per-channel gates).
template <int GC>
__device__ void store_decay_factors(float *dst, const float *last) {
  for (int c = threadIdx.x; c < GC; c += kThreads)
    dst[c] = __expf(last[c]);
}

/// Row c of the state times exp(G_{n-1, c}): one factor for the whole tile
/// with one gate column, one per row with per-channel gates. `last` is the
/// gate sums' row n - 1 (the chunk's last valid row), or its factors.
/// A K x 1 tile (a row dot of the state, which lina-fuse-sums decays
/// instead of the state) goes element by element.
template <int K, int VT, int GC, bool Factors = false>
__device__ void decay_state(float *dst, const float *s, const float *last) {
  constexpr int L = ld(VT);
  float shared_factor = GC == 1 ? decay_factor<Factors>(last, 0) : 0.0f;
  if constexpr (VT == 1) {
    for (int i = threadIdx.x; i < K; i += kThreads)
      dst[i] = s[i] * (GC == 1 ? shared_factor : decay_factor<Factors>(last, i));
    return;
  }
  static_assert(VT == 1 || L % 4 == 0, "state rows are whole 16-byte words");
  for (int i = threadIdx.x * 4; i < K * L; i += kThreads * 4) {
    float f = GC == 1 ? shared_factor : decay_factor<Factors>(last, i / L);
    f32x4 v = *(const f32x4 *)(s + i);
    *(f32x4 *)(dst + i) = f32x4{v.x * f, v.y * f, v.z * f, v.w * f};
  }
}

//===----------------------------------------------------------------------===//
// Row passes
//===----------------------------------------------------------------------===//
//
// A chain of the row-wise ops above done in registers (the emitter's
// RowPass.h): a warp per row, lane l holding the row's columns
// [l E, l E + E), E = CC / 32, so that a warp reads or writes a row as one
// contiguous run. A warp takes rows row_of_warp(i), i < rows_per_warp(R).
// Each op computes what its tile call computes, element for element (only
// l2norm's sum of squares adds in another order), so a pass writes the same
// tiles the calls would, and rows at and past n come out zero the same way.
//===----------------------------------------------------------------------===//

constexpr int kWarps = kThreads / 32;
__host__ __device__ constexpr int rows_per_warp(int rows) {
  return (rows + kWarps - 1) / kWarps;
}
__device__ __forceinline__ int row_of_warp(int i) {
  return threadIdx.x / 32 + i * kWarps;
}

struct alignas(8) u32x2 { unsigned x, y; };

__device__ __forceinline__ unsigned bits_of(float x) {
  return __float_as_uint(x);
}
__device__ __forceinline__ unsigned bits_of(bf16 x) { return x.bits; }
__device__ __forceinline__ unsigned bits_of(f16 x) { return x.bits; }
template <typename T> __device__ __forceinline__ T element_of(unsigned bits);
template <> __device__ __forceinline__ float element_of<float>(unsigned bits) {
  return __uint_as_float(bits);
}
template <> __device__ __forceinline__ bf16 element_of<bf16>(unsigned bits) {
  return bf16{(unsigned short)bits};
}
template <> __device__ __forceinline__ f16 element_of<f16>(unsigned bits) {
  return f16{(unsigned short)bits};
}

/// E elements of T as they lie in memory, in 32-bit words (16-bit elements
/// two to a word, the first in the low half). Moved as 16-, 8- or 4-byte
/// words where the address allows, element by element otherwise (an
/// unaligned tensor).
template <int E, typename T> struct row_words {
  static constexpr int kPerWord = 4 / sizeof(T);
  static constexpr int kBytes = E * sizeof(T), kWords = (kBytes + 3) / 4;
  unsigned w[kWords];

  __device__ __forceinline__ unsigned bits(int j) const {
    return kPerWord == 1 ? w[j] : (w[j / 2] >> (16 * (j % 2))) & 0xffffu;
  }
  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int k = 0; k < kWords; ++k)
      w[k] = 0u;
  }
  __device__ __forceinline__ void load(const T *at) {
    unsigned long long address = (unsigned long long)at;
    if constexpr (kBytes % 16 == 0) {
      if (address % 16 == 0) {
#pragma unroll
        for (int k = 0; k < kWords / 4; ++k) {
          u32x4 v = ((const u32x4 *)at)[k];
          w[4 * k] = v.x, w[4 * k + 1] = v.y, w[4 * k + 2] = v.z,
                w[4 * k + 3] = v.w;
        }
        return;
      }
    } else if constexpr (kBytes == 8) {
      if (address % 8 == 0) {
        u32x2 v = *(const u32x2 *)at;
        w[0] = v.x, w[1] = v.y;
        return;
      }
    } else if constexpr (kBytes == 4) {
      if (address % 4 == 0) {
        w[0] = *(const unsigned *)at;
        return;
      }
    }
    clear();
#pragma unroll
    for (int j = 0; j < E; ++j)
      w[j / kPerWord] |= bits_of(at[j]) << (32 / kPerWord * (j % kPerWord));
  }
  __device__ __forceinline__ void store(T *at) const {
    unsigned long long address = (unsigned long long)at;
    if constexpr (kBytes % 16 == 0) {
      if (address % 16 == 0) {
#pragma unroll
        for (int k = 0; k < kWords / 4; ++k)
          ((u32x4 *)at)[k] =
              u32x4{w[4 * k], w[4 * k + 1], w[4 * k + 2], w[4 * k + 3]};
        return;
      }
    } else if constexpr (kBytes == 8) {
      if (address % 8 == 0) {
        *(u32x2 *)at = u32x2{w[0], w[1]};
        return;
      }
    } else if constexpr (kBytes == 4) {
      if (address % 4 == 0) {
        *(unsigned *)at = w[0];
        return;
      }
    }
#pragma unroll
    for (int j = 0; j < E; ++j)
      at[j] = element_of<T>(bits(j));
  }
  /// E floats converted to T as store_tile converts, packed in memory order.
  static __device__ __forceinline__ row_words of(const float *x) {
    row_words out;
    out.clear();
#pragma unroll
    for (int j = 0; j < E; ++j) {
      T e;
      from_float(x[j], e);
      out.w[j / kPerWord] |= bits_of(e) << (32 / kPerWord * (j % kPerWord));
    }
    return out;
  }
};

/// Rows [0, n) of an output tile in global memory (row r at
/// out + r * row_stride), written a few columns at a time by the threads
/// that computed them: the epilogue of a product whose result is only
/// stored (a scan's output), which then needs no tile, no barrier and no
/// store pass of its own (docs/perf-notes.md). Rows at and
/// past n are not written.
template <typename T> struct global_rows {
  T *out;
  i64 row_stride;
  int n;

  /// Columns c .. c + E - 1 of row r.
  template <int E>
  __device__ __forceinline__ void put(int r, int c, const float *x) const {
    if (r < n)
      row_words<E, T>::of(x).store(out + r * row_stride + c);
  }
};

/// This lane's columns of one row, as floats.
template <int CC> struct row {
  static_assert(CC == 32 || CC == 64 || CC == 128 || CC == 256,
                "a lane takes 1, 2, 4 or 8 columns (RowPass.cpp's isRowWise)");
  static constexpr int E = CC / 32;
  float x[E];

  static __device__ __forceinline__ int col() { return threadIdx.x % 32 * E; }

  /// Row r of an fp32 tile.
  static __device__ __forceinline__ row from_tile(const float *tile, int r) {
    row a;
    const float *at = tile + r * ld(CC) + col();
    if constexpr (E % 4 == 0) {
#pragma unroll
      for (int k = 0; k < E / 4; ++k) {
        f32x4 v = ((const f32x4 *)at)[k];
        a.x[4 * k] = v.x, a.x[4 * k + 1] = v.y, a.x[4 * k + 2] = v.z,
                a.x[4 * k + 3] = v.w;
      }
    } else if constexpr (E == 2) {
      f32x2 v = *(const f32x2 *)at;
      a.x[0] = v.x, a.x[1] = v.y;
    } else {
      a.x[0] = at[0];
    }
    return a;
  }
  __device__ __forceinline__ void to_tile(float *tile, int r) const {
    float *at = tile + r * ld(CC) + col();
    if constexpr (E % 4 == 0) {
#pragma unroll
      for (int k = 0; k < E / 4; ++k)
        ((f32x4 *)at)[k] =
            f32x4{x[4 * k], x[4 * k + 1], x[4 * k + 2], x[4 * k + 3]};
    } else if constexpr (E == 2) {
      *(f32x2 *)at = f32x2{x[0], x[1]};
    } else {
      at[0] = x[0];
    }
  }
  /// Row r of a global tensor of T (rows at and past n are not written), as
  /// store_tile converts.
  template <typename T>
  __device__ __forceinline__ void to_global(T *dst, i64 row_stride, int r,
                                            int n) const {
    if (r >= n)
      return;
    row_words<E, T>::of(x).store(dst + r * row_stride + col());
  }
};

/// This warp's rows of an R x CC tile of T in global memory, fetched into
/// registers at the top of a kernel (every load issued before the first
/// use, as load_tile issues them) and converted to floats when a pass reads
/// them. Rows past n are zero.
template <int R, int CC, typename T> struct row_fetch {
  static constexpr int E = CC / 32, kRows = rows_per_warp(R);
  row_words<E, T> raw[kRows];

  __device__ __forceinline__ void fetch(const T *src, i64 row_stride, int n) {
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      int r = row_of_warp(i);
      if (r < R && r < n)
        raw[i].load(src + r * row_stride + row<CC>::col());
      else
        raw[i].clear();
    }
  }
  __device__ __forceinline__ row<CC> at(int i) const {
    row<CC> a;
#pragma unroll
    for (int j = 0; j < E; ++j)
      a.x[j] = to_float(element_of<T>(raw[i].bits(j)));
    return a;
  }
};

template <int CC>
__device__ __forceinline__ row<CC> scaled(const row<CC> &a, float f) {
  row<CC> d;
#pragma unroll
  for (int j = 0; j < row<CC>::E; ++j)
    d.x[j] = a.x[j] * f;
  return d;
}
/// exp of each element: a row pass's stored decay factors
/// (store_decay_factors).
template <int CC>
__device__ __forceinline__ row<CC> exponentials(const row<CC> &a) {
  row<CC> d;
#pragma unroll
  for (int j = 0; j < row<CC>::E; ++j)
    d.x[j] = __expf(a.x[j]);
  return d;
}
template <int CC> __device__ __forceinline__ row<CC> negated(const row<CC> &a) {
  row<CC> d;
#pragma unroll
  for (int j = 0; j < row<CC>::E; ++j)
    d.x[j] = -a.x[j];
  return d;
}
template <int CC>
__device__ __forceinline__ row<CC> sum(const row<CC> &a, const row<CC> &b) {
  row<CC> d;
#pragma unroll
  for (int j = 0; j < row<CC>::E; ++j)
    d.x[j] = a.x[j] + b.x[j];
  return d;
}
template <int CC>
__device__ __forceinline__ row<CC> difference(const row<CC> &a,
                                              const row<CC> &b) {
  row<CC> d;
#pragma unroll
  for (int j = 0; j < row<CC>::E; ++j)
    d.x[j] = a.x[j] - b.x[j];
  return d;
}
/// l2norm's row: every lane of the warp calls it (the row is warp-uniform).
template <int CC>
__device__ __forceinline__ row<CC> normalized(const row<CC> &a) {
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < row<CC>::E; ++j)
    s += a.x[j] * a.x[j];
  return scaled(a, rsqrtf(warp_sum(s) + 1e-6f));
}
/// decay_rows's row r: one gate column, or one per channel (GC == CC).
template <int GC, int CC>
__device__ __forceinline__ row<CC> decayed(const row<CC> &a, const float *g,
                                           int r, int n, bool to_end) {
  if constexpr (GC == 1) {
    return scaled(a, r < n ? __expf(to_end ? g[n - 1] - g[r] : g[r]) : 0.0f);
  } else {
    static_assert(GC == CC, "per-channel gates have one column per channel");
    row<CC> d, here = row<CC>::from_tile(g, r), last = here;
    if (to_end)
      last = row<CC>::from_tile(g, n - 1);
#pragma unroll
    for (int j = 0; j < row<CC>::E; ++j)
      d.x[j] = r < n ? a.x[j] * __expf(to_end ? last.x[j] - here.x[j]
                                              : here.x[j])
                     : 0.0f;
    return d;
  }
}

//===----------------------------------------------------------------------===//
// Products: tensor cores (mma.sync m16n8k16, bf16 in, fp32 accumulate) or
// fp32 FMA for f32 specs.
//===----------------------------------------------------------------------===//

__device__ __forceinline__ void mma_bf16_16816(float (&d)[4],
                                               const unsigned (&a)[4],
                                               const unsigned (&b)[2]) {
#ifdef LINA_HOST_EMULATION
  lina_emu::mma_m16n8k16(d, a, b, false);
#else
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                 "r"(b[1]));
#endif
}

/// mma.sync m16n8k8 in tf32: fp32 operands, of which the tensor core reads
/// the top 19 bits.
__device__ __forceinline__ void
mma_tf32_1688(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#ifdef LINA_HOST_EMULATION
  lina_emu::mma_m16n8k8_tf32(d, a, b);
#else
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                 "r"(b[1]));
#endif
}

/// x as two tf32 operands whose sum is x exactly: `big` its top 19 bits (all
/// the tensor core reads of it), `small` the rest, of which the tensor core
/// reads x to about 2^-21 of its size.
__device__ __forceinline__ void tf32_split(float x, unsigned &big,
                                           unsigned &small) {
  big = __float_as_uint(x) & 0xffffe000u;
  small = __float_as_uint(x - __uint_as_float(big));
}

/// d += A B in tf32 to about fp32's precision (3xTF32): the operands split
/// by tf32_split, the products of big and small parts summed, the small
/// parts' product (below the result's last fp32 bits) left out.
__device__ __forceinline__ void mma_tf32x3_1688(float (&d)[4],
                                                const unsigned (&a_big)[4],
                                                const unsigned (&a_small)[4],
                                                const unsigned (&b_big)[2],
                                                const unsigned (&b_small)[2]) {
  mma_tf32_1688(d, a_small, b_big);
  mma_tf32_1688(d, a_big, b_small);
  mma_tf32_1688(d, a_big, b_big);
}

/// The m16n8k16 product on mma_t operands.
__device__ __forceinline__ void mma_16816(float (&d)[4],
                                          const unsigned (&a)[4],
                                          const unsigned (&b)[2]) {
#if defined(LINA_MMA_F16) && defined(LINA_HOST_EMULATION)
  lina_emu::mma_m16n8k16(d, a, b, true);
#elif defined(LINA_MMA_F16)
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
               "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                 "r"(b[1]));
#else
  mma_bf16_16816(d, a, b);
#endif
}

/// Element (m, k) of an M x KD operand stored row-major, or of its transpose
/// stored KD x M when TA.
template <int M, int KD, bool TA>
__device__ __forceinline__ float lhs_at(const float *A, int m, int k) {
  return TA ? A[k * ld(M) + m] : A[m * ld(KD) + k];
}
/// Element (k, n) of a KD x N operand, or of the transpose of an N x KD one.
template <int KD, int N, bool TB>
__device__ __forceinline__ float rhs_at(const float *B, int k, int n) {
  return TB ? B[n * ld(KD) + k] : B[k * ld(N) + n];
}

/// Elements (m, k) and (m, k + 1) packed as bf16x2; one 8-byte load when
/// they are adjacent in memory (k is even and rows are 8-byte aligned).
template <int M, int KD, bool TA>
__device__ __forceinline__ unsigned lhs_pair(const float *A, int m, int k) {
  if (!TA) {
    f32x2 p = *(const f32x2 *)(A + m * ld(KD) + k);
    return pack_mma2(p.x, p.y);
  }
  return pack_mma2(lhs_at<M, KD, TA>(A, m, k), lhs_at<M, KD, TA>(A, m, k + 1));
}
template <int KD, int N, bool TB>
__device__ __forceinline__ unsigned rhs_pair(const float *B, int k, int n) {
  if (TB) {
    f32x2 p = *(const f32x2 *)(B + n * ld(KD) + k);
    return pack_mma2(p.x, p.y);
  }
  return pack_mma2(rhs_at<KD, N, TB>(B, k, n), rhs_at<KD, N, TB>(B, k + 1, n));
}

/// The A fragment of an m16n8k16 mma: rows m0..m0+15 and contraction
/// columns k0..k0+15 of op(A), from an fp32 tile (packed to bf16 pairs).
template <int M, int KD, bool TA>
__device__ __forceinline__ void lhs_fragment(const float *A, int m0, int k0,
                                             unsigned (&a)[4]) {
  int grp = threadIdx.x % 32 / 4, c = k0 + 2 * (threadIdx.x % 4);
  a[0] = lhs_pair<M, KD, TA>(A, m0 + grp, c);
  a[1] = lhs_pair<M, KD, TA>(A, m0 + grp + 8, c);
  a[2] = lhs_pair<M, KD, TA>(A, m0 + grp, c + 8);
  a[3] = lhs_pair<M, KD, TA>(A, m0 + grp + 8, c + 8);
}
/// The B fragment: contraction rows k0..k0+15, columns n0..n0+7 of op(B).
template <int KD, int N, bool TB>
__device__ __forceinline__ void rhs_fragment(const float *B, int k0, int n0,
                                             unsigned (&b)[2]) {
  int grp = threadIdx.x % 32 / 4, c = k0 + 2 * (threadIdx.x % 4);
  b[0] = rhs_pair<KD, N, TB>(B, c, n0 + grp);
  b[1] = rhs_pair<KD, N, TB>(B, c + 8, n0 + grp);
}

//===----------------------------------------------------------------------===//
// Packed tiles
//===----------------------------------------------------------------------===//
//
// A packed tile holds bf16 elements, rows of ld(cols) elements (the emitter
// packs only tiles whose cols are a multiple of 8, so every row starts on a
// 16-byte boundary, as ldmatrix needs). ldmatrix gives a warp four (x4) or
// two (x2) 8 x 8 matrices, lane l naming row l % 8 of matrix l / 8; .trans
// transposes each. The padded stride puts the eight rows of a matrix in
// distinct banks (272 bytes for 128 columns: 4 banks apart). One ldmatrix
// replaces the four to eight loads and conversions of a fragment from an
// fp32 tile.

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const mma_t *p,
                                            bool trans) {
#ifdef LINA_HOST_EMULATION
  lina_emu::ldmatrix(r, 4, p, trans);
#else
  if (trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
                 "{%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(p)));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
                 "{%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(p)));
#endif
}
__device__ __forceinline__ void ldmatrix_x2(unsigned (&r)[2], const mma_t *p,
                                            bool trans) {
#ifdef LINA_HOST_EMULATION
  lina_emu::ldmatrix(r, 2, p, trans);
#else
  if (trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(shared_address(p)));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(shared_address(p)));
#endif
}

/// lhs_fragment from a packed tile. The four matrices are (rows, columns of
/// op(A)) 0-7 x 0-7, 8-15 x 0-7, 0-7 x 8-15 and 8-15 x 8-15; a transposed
/// operand (stored KD x M) reads them as stored rows k, transposed.
template <int M, int KD, bool TA>
__device__ __forceinline__ void lhs_fragment(const mma_t *A, int m0, int k0,
                                             unsigned (&a)[4]) {
  int lane = threadIdx.x % 32, r = lane % 8, mat = lane / 8;
  int m = m0 + (mat & 1) * 8, k = k0 + (mat >> 1) * 8;
  if (TA)
    ldmatrix_x4(a, A + (k + r) * ld(M) + m, true);
  else
    ldmatrix_x4(a, A + (m + r) * ld(KD) + k, false);
}
/// rhs_fragment from a packed tile: contraction rows 0-7 and 8-15 of
/// op(B)'s columns n0..n0+7; op(B) stored KD x N is read transposed.
template <int KD, int N, bool TB>
__device__ __forceinline__ void rhs_fragment(const mma_t *B, int k0, int n0,
                                             unsigned (&b)[2]) {
  int lane = threadIdx.x % 32, r = lane % 8, k = k0 + (lane / 8 % 2) * 8;
  if (TB)
    ldmatrix_x2(b, B + (n0 + r) * ld(KD) + k, false);
  else
    ldmatrix_x2(b, B + (k + r) * ld(N) + n0, true);
}

/// rhs_fragment of two adjacent column blocks, n0 and n0 + 8, of a packed
/// tile in one ldmatrix (b0: columns n0.., b1: n0 + 8..); op(B) stored
/// KD x N is read transposed, as rhs_fragment reads it.
template <int KD, int N, bool TB = false>
__device__ __forceinline__ void rhs_fragment_pair(const mma_t *B, int k0,
                                                  int n0, unsigned (&b0)[2],
                                                  unsigned (&b1)[2]) {
  int lane = threadIdx.x % 32, r = lane % 8, mat = lane / 8;
  unsigned x[4];
  if (TB)
    ldmatrix_x4(x, B + (n0 + (mat >> 1) * 8 + r) * ld(KD) + k0 + (mat & 1) * 8,
                false);
  else
    ldmatrix_x4(x, B + (k0 + (mat & 1) * 8 + r) * ld(N) + n0 + (mat >> 1) * 8,
                true);
  b0[0] = x[0];
  b0[1] = x[1];
  b1[0] = x[2];
  b1[1] = x[3];
}
/// The same from an fp32 tile: two rhs_fragments.
template <int KD, int N, bool TB = false>
__device__ __forceinline__ void rhs_fragment_pair(const float *B, int k0,
                                                  int n0, unsigned (&b0)[2],
                                                  unsigned (&b1)[2]) {
  rhs_fragment<KD, N, TB>(B, k0, n0, b0);
  rhs_fragment<KD, N, TB>(B, k0, n0 + 8, b1);
}

/// The product as it is: the epilogue of most products.
struct unchanged {
  __device__ __forceinline__ float operator()(int, int, float v) const {
    return v;
  }
};

/// Where a product's sums go: an M x N fp32 tile in shared memory.
template <int N> struct tile_rows {
  float *dst;
  template <int E>
  __device__ __forceinline__ void put(int r, int c, const float *x) const {
    float *at = dst + r * ld(N) + c;
    if constexpr (E == 4)
      *(f32x4 *)at = f32x4{x[0], x[1], x[2], x[3]};
    else if constexpr (E == 2)
      *(f32x2 *)at = f32x2{x[0], x[1]};
    else
#pragma unroll
      for (int e = 0; e < E; ++e)
        at[e] = x[e];
  }
};

/// product_into's tensor-core sums a block a warp: each warp sums one
/// 16 x 8 block of the result at a time.
template <int M, int N, int KD, bool TA, bool TB, typename EA, typename EB,
          typename Epilogue, typename Sink>
__device__ void product_blocks_into(const Sink &sink, const EA *A, const EB *B,
                                    Epilogue epilogue) {
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int grp = lane / 4, tig = lane % 4;
  for (int tile = warp; tile < (M / 16) * (N / 8); tile += kThreads / 32) {
    int m0 = (tile / (N / 8)) * 16, n0 = (tile % (N / 8)) * 8;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 4
    for (int k0 = 0; k0 < KD; k0 += 16) {
      unsigned a[4], b[2];
      lhs_fragment<M, KD, TA>(A, m0, k0, a);
      rhs_fragment<KD, N, TB>(B, k0, n0, b);
      mma_16816(acc, a, b);
    }
    int col = n0 + 2 * tig, top = m0 + grp, bottom = top + 8;
    float t[2] = {epilogue(top, col, acc[0]), epilogue(top, col + 1, acc[1])};
    float b[2] = {epilogue(bottom, col, acc[2]),
                  epilogue(bottom, col + 1, acc[3])};
    sink.template put<2>(top, col, t);
    sink.template put<2>(bottom, col, b);
  }
}

/// product_into's tensor-core sums where a warp takes a 16-row strip of NB
/// (2 or 4) adjacent 8-column blocks, reusing each A fragment NB times: A
/// is read from shared memory N / (8 NB) times instead of N / 8 (a 32 x 128
/// x 128 product on eight warps: 128 KB of reads instead of 640 KB). Each
/// element's sum runs the same mma chain over k as one block a warp would,
/// so the results are the same.
template <int M, int N, int KD, bool TA, bool TB, int NB, typename EA,
          typename EB, typename Epilogue, typename Sink>
__device__ void product_strips_into(const Sink &sink, const EA *A, const EB *B,
                                    Epilogue epilogue) {
  static_assert(NB % 2 == 0 && N % (8 * NB) == 0, "strips of block pairs");
  constexpr int kStrips = (M / 16) * (N / (8 * NB));
  int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int grp = lane / 4, tig = lane % 4;
  for (int strip = warp; strip < kStrips; strip += kThreads / 32) {
    int m0 = (strip / (N / (8 * NB))) * 16;
    int n0 = (strip % (N / (8 * NB))) * 8 * NB;
    float acc[NB][4] = {};
#pragma unroll 2
    for (int k0 = 0; k0 < KD; k0 += 16) {
      unsigned a[4];
      lhs_fragment<M, KD, TA>(A, m0, k0, a);
#pragma unroll
      for (int j = 0; j < NB; j += 2) {
        unsigned b0[2], b1[2];
        rhs_fragment_pair<KD, N, TB>(B, k0, n0 + 8 * j, b0, b1);
        mma_16816(acc[j], a, b0);
        mma_16816(acc[j + 1], a, b1);
      }
    }
#pragma unroll
    for (int j = 0; j < NB; ++j) {
      int col = n0 + 8 * j + 2 * tig, top = m0 + grp, bottom = top + 8;
      float t[2] = {epilogue(top, col, acc[j][0]),
                    epilogue(top, col + 1, acc[j][1])};
      float b[2] = {epilogue(bottom, col, acc[j][2]),
                    epilogue(bottom, col + 1, acc[j][3])};
      sink.template put<2>(top, col, t);
      sink.template put<2>(bottom, col, b);
    }
  }
}

/// sink (M x N) = epilogue(m, n, (op(A) op(B))_mn), contraction KD. A and B
/// are fp32 tiles, or packed ones (MMA only); the sink is a tile
/// (tile_rows) or the output (global_rows). The thread that sums an element
/// applies the epilogue to it, so an epilogue that reads other tiles needs
/// no barrier of its own.
template <int M, int N, int KD, bool TA, bool TB, bool MMA, typename EA,
          typename EB, typename Epilogue = unchanged, typename Sink>
__device__ void product_into(const Sink &sink, const EA *A, const EB *B,
                             Epilogue epilogue = Epilogue()) {
  if constexpr (!MMA) {
    for (int i = threadIdx.x; i < M * N; i += kThreads) {
      int m = i / N, n = i % N;
      float s = 0.0f;
      for (int k = 0; k < KD; ++k)
        s += lhs_at<M, KD, TA>(A, m, k) * rhs_at<KD, N, TB>(B, k, n);
      float x[1] = {epilogue(m, n, s)};
      sink.template put<1>(m, n, x);
    }
    return;
  }
  static_assert(M % 16 == 0 && N % 8 == 0 && KD % 16 == 0,
                "tensor-core tiles are 16x8x16");
  // Strips of four or two column blocks a warp: the widest that leaves a
  // strip for every warp, or for half of them where the product has 64
  // columns or more. Timed alone on an H200 (a CTA an SM, shared-memory
  // operands): 16 x 128 x 128 on eight warps 1025 ns a block a warp, 669 in
  // strips of two, 539 of four; on sixteen warps 907, 655, 760; 32 x 128 x
  // 128 on eight 1903, 1228, 798; but 32 x 32 x 128 613, 694, 803. A
  // product of one k-step (KD 16) keeps a block a warp: alone it gains too
  // (16 x 128 x 16 on eight warps 253 ns, 142 in strips of two), but the
  // strips' accumulators spilled rwkv7's register-capped forward prepare
  // kernel, whose products are all of one k-step.
  constexpr int kWarps = kThreads / 32, NT = N / 8, MT = M / 16;
  constexpr int kBusy = NT >= 8 ? (kWarps + 1) / 2 : kWarps;
  constexpr int NB = KD < 32                                 ? 1
                     : NT % 4 == 0 && MT * (NT / 4) >= kBusy ? 4
                     : NT % 2 == 0 && MT * (NT / 2) >= kBusy ? 2
                                                             : 1;
  if constexpr (NB > 1)
    product_strips_into<M, N, KD, TA, TB, NB>(sink, A, B, epilogue);
  else
    product_blocks_into<M, N, KD, TA, TB>(sink, A, B, epilogue);
}

/// dst (M x N, a tile) = epilogue(m, n, (op(A) op(B))_mn).
template <int M, int N, int KD, bool TA, bool TB, bool MMA, typename EA,
          typename EB, typename Epilogue = unchanged>
__device__ void product(float *dst, const EA *A, const EB *B,
                        Epilogue epilogue = Epilogue()) {
  product_into<M, N, KD, TA, TB, MMA>(tile_rows<N>{dst}, A, B, epilogue);
}

template <int M, int N, int KD, bool TA, bool MMA, typename EA, typename EB>
__device__ void matmul(float *dst, const EA *A, const EB *B) {
  product<M, N, KD, TA, false, MMA>(dst, A, B);
}

/// sink = op(A) B + the sum of kParts M x N partial products in `partials`
/// (a register-state product's, reg_state::partials, made before a barrier
/// that precedes this call): the product's reduction pass done in this
/// product's epilogue. The sink is the output (global_rows) when the sum is
/// only stored; matmul_add_partials puts it in a tile.
template <int M, int N, int KD, bool TA, bool MMA, int kParts, typename EA,
          typename EB, typename Sink>
__device__ void matmul_add_partials_into(const Sink &sink, const EA *A,
                                         const EB *B, const float *partials) {
  product_into<M, N, KD, TA, false, MMA>(
      sink, A, B, [partials](int m, int n, float v) {
        float s = 0.0f;
#pragma unroll
        for (int w = 0; w < kParts; ++w)
          s += partials[(w * M + m) * ld(N) + n];
        return v + s;
      });
}

template <int M, int N, int KD, bool TA, bool MMA, int kParts, typename EA,
          typename EB>
__device__ void matmul_add_partials(float *dst, const EA *A, const EB *B,
                                    const float *partials) {
  matmul_add_partials_into<M, N, KD, TA, MMA, kParts>(tile_rows<N>{dst}, A, B,
                                                      partials);
}

/// Channels whose gates span more than this over a chunk's rows are not
/// factored (factored_decay_product): each factor's exponent stays within
/// half of it, and e^75 ~ 4e32 leaves a factor of 1e6 for |x| below fp32's
/// and bf16's 3.4e38 (e^-75 ~ 3e-33 is still a normal number). A kept
/// entry's two factors multiply to e^(gx_i - gy_j) <= 1; a masked entry may
/// overflow, and is overwritten with zero. (60 before; gates computed in the
/// kernel, -exp(A_log) softplus(x) with A up to 16, can span more than that
/// over 16 tokens.)
/// In f16 (LINA_MMA_F16), whose largest value is 65504 ~ e^11, half the
/// range, e^7 ~ 1100, leaves room for |x| up to 59.
#ifdef LINA_MMA_F16
constexpr float kMaxFactoredGateRange = 14.0f;
#else
constexpr float kMaxFactoredGateRange = 150.0f;
#endif

/// Whether row r, column c of a chunk's decay product is kept: r < n and
/// c <= r (c < r when strict).
__device__ __forceinline__ bool kept(int r, int c, int n, bool strict) {
  return r < n && (strict ? c < r : c <= r);
}

/// The span of channel c's gates over a chunk's first n rows, both sides
/// (gx and gy) together. A channel factors through the midpoint of its span
/// where the span is narrow enough that neither factor can overflow.
struct GateSpan {
  float lo = 3.0e38f, hi = -3.0e38f;
  __device__ float mid() const { return 0.5f * (lo + hi); }
  /// False also where a gate is NaN, so such a channel is summed directly.
  __device__ bool within(float range) const { return hi - lo <= range; }
};

/// Of the rows first, first + step, ... below n only, where the threads of
/// a channel share its rows and merge their spans.
template <int LG>
__device__ GateSpan channel_gate_span(const float *gx, const float *gy, int c,
                                      int n, int first = 0, int step = 1) {
  GateSpan s;
  for (int r = first; r < n; r += step) {
    float a = gx[r * LG + c], b = gy[r * LG + c];
    s.lo = fminf(s.lo, fminf(a, b));
    s.hi = fmaxf(s.hi, fmaxf(a, b));
  }
  return s;
}

/// The per-channel decay product on the tensor cores: with m_c the midpoint
/// of channel c's gates over the chunk's rows,
///   P_ij = sum_c (x_ic e^(gx_ic - m_c)) (y_jc e^(m_c - gy_jc)),
/// one product of two scaled tiles instead of R x R x D exponentials. The
/// scaled tiles go to `scratch` packed (bf16, read with ldmatrix; the
/// tensor cores would round them to bf16 anyway), every thread taking a
/// channel and a share of the rows. Returns false, having written only
/// scratch, when some channel's gates span more than kMaxFactoredGateRange
/// (the caller then sums directly, as without scratch). The CTA agrees on
/// the answer, so the branch is uniform.
template <int R, int D, int GC>
__device__ bool factored_decay_product(float *dst, const float *x,
                                       const float *y, const float *gx,
                                       const float *gy, int n, bool strict,
                                       float *scratch) {
  static_assert(GC == D, "per-channel gates have one column per channel");
  constexpr int LD = ld(D), LG = ld(GC);
  constexpr int kGroups = kThreads >= D ? kThreads / D : 1;
  mma_t *xs = (mma_t *)scratch, *ys = xs + R * LD;
  bool wide = false;
  for (int i = threadIdx.x; i < D * kGroups; i += kThreads) {
    int c = i % D;
    const GateSpan span = channel_gate_span<LG>(gx, gy, c, n);
    wide = wide || !span.within(kMaxFactoredGateRange);
    const float m = span.mid();
#pragma unroll
    for (int r = i / D; r < R; r += kGroups) {
      bool valid = r < n;
      from_float(valid ? x[r * LD + c] * __expf(gx[r * LG + c] - m) : 0.0f,
                 xs[r * LD + c]);
      from_float(valid ? y[r * LD + c] * __expf(m - gy[r * LG + c]) : 0.0f,
                 ys[r * LD + c]);
    }
  }
  if (__syncthreads_or(wide))
    return false;
  product<R, R, D, false, true, true>(
      dst, xs, ys, [n, strict](int r, int c, float v) {
        return kept(r, c, n, strict) ? v : 0.0f;
      });
  return true;
}

/// decay_product's per-channel sums, an exponential a term, a warp a row:
/// the lanes take every 32nd channel, holding the row's x and gates, and
/// each kept element of the row is a warp sum, four at a time. A thread an
/// element instead ran one D-long chain a thread on the R R / 2 threads of
/// the kept elements (at 16 rows, 136 of 512); here every warp works and
/// each chain is D / 32 terms. Rows pair up by warp (r with the row as far
/// from the end), so each warp's rounds sum about R + 1 elements. AtOnce
/// elements are summed side by side (their shuffles interleaved).
template <int R, int D, int GC, int AtOnce>
__device__ void channel_decay_product(float *dst, const float *x,
                                      const float *y, const float *gx,
                                      const float *gy, int n, bool strict) {
  static_assert(GC == D, "per-channel gates have one column per channel");
  constexpr int LR = ld(R), LD = ld(D), LG = ld(GC), kWarps = kThreads / 32;
  constexpr int kLaneChannels = (D + 31) / 32, kAtOnce = AtOnce;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int round = 0; round * kWarps < R; ++round) {
    const int r = round % 2 == 0 ? round * kWarps + warp
                                 : (round + 1) * kWarps - 1 - warp;
    if (r >= R)
      continue;
    // The kept columns 0 .. end - 1 of the row; zeros past them.
    const int end = r < n ? (strict ? r : r + 1) : 0;
    for (int c = end + lane; c < R; c += 32)
      dst[r * LR + c] = 0.0f;
    float xr[kLaneChannels], gr[kLaneChannels];
#pragma unroll
    for (int j = 0; j < kLaneChannels; ++j) {
      const int ch = lane + 32 * j;
      xr[j] = ch < D && end > 0 ? x[r * LD + ch] : 0.0f;
      gr[j] = ch < D && end > 0 ? gx[r * LG + ch] : 0.0f;
    }
    for (int c0 = 0; c0 < end; c0 += kAtOnce) {
      float s[kAtOnce];
#pragma unroll
      for (int q = 0; q < kAtOnce; ++q) {
        const int c = c0 + q < end ? c0 + q : c0;
        s[q] = 0.0f;
#pragma unroll
        for (int j = 0; j < kLaneChannels; ++j) {
          const int ch = lane + 32 * j;
          if (ch < D)
            s[q] += xr[j] * y[c * LD + ch] * __expf(gr[j] - gy[c * LG + ch]);
        }
      }
#pragma unroll
      for (int o = 16; o > 0; o /= 2)
#pragma unroll
        for (int q = 0; q < kAtOnce; ++q)
          s[q] += __shfl_xor_sync(0xffffffffu, s[q], o);
#pragma unroll
      for (int q = 0; q < kAtOnce; ++q)
        if (lane == q && c0 + q < end)
          dst[r * LR + c0 + q] = s[q];
    }
  }
}

/// P_ij = sum_c x_ic y_jc exp(gx_ic - gy_jc), kept for j <= i (j < i when
/// strict) and i < n. With one gate column the ratio factors out of the sum:
/// a tensor-core product whose epilogue takes exp of the pairwise
/// difference (never positive where kept). Per-channel gates factor through each channel's
/// midpoint when given `scratch` and the chunk's gates allow (above);
/// otherwise they are summed directly, so no exponent ever leaves the
/// chunk's range.
template <int R, int D, int GC, bool MMA>
__device__ void decay_product(float *dst, const float *x, const float *y,
                              const float *gx, const float *gy, int n,
                              bool strict, float *scratch = nullptr) {
  constexpr int LR = ld(R), LD = ld(D);
  if constexpr (GC == 1) {
    product<R, R, D, false, true, MMA>(
        dst, x, y, [gx, gy, n, strict](int r, int c, float v) {
          return kept(r, c, n, strict) ? v * __expf(gx[r] - gy[c]) : 0.0f;
        });
    return;
  }
  if constexpr (MMA && GC == D)
    if (scratch && factored_decay_product<R, D, GC>(dst, x, y, gx, gy, n,
                                                    strict, scratch))
      return;
  if constexpr (GC == D) {
    // Four elements side by side where the backward's gradients kernel
    // was timed (16-bit specs); two in fp32 specs, whose kernels hold more
    // registers: rwkv7's f32 forward prepare kernel, capped at 64, spilled
    // 28 bytes with four.
    channel_decay_product<R, D, GC, MMA ? 4 : 2>(dst, x, y, gx, gy, n, strict);
    return;
  }
  for (int i = threadIdx.x; i < R * R; i += kThreads) {
    int r = i / R, c = i % R;
    float s = 0.0f;
    if (kept(r, c, n, strict))
      for (int ch = 0; ch < D; ++ch)
        s += x[r * LD + ch] * y[c * LD + ch] *
             __expf(gx[r * ld(GC) + ch] - gy[c * ld(GC) + ch]);
    dst[r * LR + c] = s;
  }
}

/// Column c of (I + A)^-1 X for strictly lower-triangular A, by forward
/// substitution in registers (R <= 64): A's rows are read as 16-byte
/// broadcasts, so no step waits on a shared-memory round trip of the
/// previous one. (Four partial sums a row, a chain a quarter as long,
/// took gdn's forward prepare kernel from 48 registers and five CTAs an SM
/// to 50 and four.) Row i of the column goes to store(i, value) as soon as
/// it is solved.
template <int R, int CC, typename Store>
__device__ __forceinline__ void solve_column(const float *A, const float *X,
                                             int c, Store store) {
  static_assert(R <= 64 && R % 4 == 0, "the column lives in registers");
  constexpr int LR = ld(R), LC = ld(CC);
  float x[R];
#pragma unroll
  for (int i = 0; i < R; ++i) {
    float v = X[i * LC + c];
    const f32x4 *row = (const f32x4 *)(A + i * LR);
#pragma unroll
    for (int j = 0; j < i; j += 4) {
      f32x4 a = row[j / 4];
      v -= a.x * x[j];
      if (j + 1 < i)
        v -= a.y * x[j + 1];
      if (j + 2 < i)
        v -= a.z * x[j + 2];
      if (j + 3 < i)
        v -= a.w * x[j + 3];
    }
    x[i] = v;
    // Each row is stored as soon as it is solved. Stored after the loop to
    // global memory (which cannot alias A), the rows let the compiler keep
    // all of A's lower triangle in registers: 174 registers a thread in
    // kda's prepare kernel, one CTA per multiprocessor (ResourceUsageTest).
    // The fence also keeps the next rows' loads after the store.
    store(i, v);
    asm volatile("" ::: "memory");
  }
}

/// The first column a thread takes in an op that gives each thread a
/// column, when the op's columns start at thread First: two such ops
/// between the same barriers, each narrower than the CTA, then run on
/// different threads side by side instead of on the same ones in turn.
template <int First> __device__ __forceinline__ int column_of_thread() {
  static_assert(First >= 0 && First < kThreads, "a thread of the CTA");
  int t = (int)threadIdx.x - First;
  return t < 0 ? t + kThreads : t;
}

/// (I + A)^-1 X for strictly lower-triangular A: one thread per column
/// (columns are independent), column c on thread First + c (mod the CTA's
/// threads); past 64 rows the column lives in dst.
template <int R, int CC, int First = 0>
__device__ void tri_solve(float *dst, const float *A, const float *X) {
  constexpr int LR = ld(R), LC = ld(CC);
  if constexpr (R <= 64 && R % 4 == 0) {
    for (int c = column_of_thread<First>(); c < CC; c += kThreads)
      solve_column<R, CC>(A, X, c,
                          [&](int i, float v) { dst[i * LC + c] = v; });
    return;
  }
  for (int c = column_of_thread<First>(); c < CC; c += kThreads)
    for (int i = 0; i < R; ++i) {
      float v = X[i * LC + c];
      for (int j = 0; j < i; ++j)
        v -= A[i * LR + j] * dst[j * LC + c];
      dst[i * LC + c] = v;
    }
}

/// tri_solve whose result only goes to global memory (a prepare kernel's
/// stored value that no other op reads): rows [0, n) of the solution
/// straight from registers to dst, no tile in between.
template <int R, int CC, typename T>
__device__ void tri_solve_to_global(T *dst, i64 row_stride, const float *A,
                                    const float *X, int n) {
  for (int c = threadIdx.x; c < CC; c += kThreads)
    solve_column<R, CC>(A, X, c, [&](int i, float v) {
      if (i < n)
        from_float(v, dst[i * row_stride + c]);
    });
}

} // namespace lina
