//===- Decode.cuh - The device library of decode kernels -------*- CUDA -*-===//
//
// Part of lina. Every generated decode kernel starts with this text, then a
// `Config` struct (the spec as constants) and one extern "C" kernel per
// warp-column width. It is the recurrent form, one token at a time:
//
//   S_t = (D_t + b_t a_t^T) S_{t-1} + w_t k_t v_t^T,   o_t = S_t^T (scale q_t)
//
// with the state in registers. A CTA serves one (sequence, value head, value
// tile); each warp of it owns VW value columns and all K key rows of them:
// lane = row_group * (VW / 4) + quad, the quad being 4 adjacent columns (one
// 16-byte load or store of a state row), the row group a run of
// ROWS = ceil(K / (32 / (VW / 4))) adjacent key rows. Adjacent lanes touch
// adjacent 16 bytes of a state row, so loads and stores are whole sectors
// for VW >= 8. Sums over K (a^T S, k^T S, q^T S) are a per-lane sum over its
// rows, then a warp shuffle across row groups: no shared memory and no
// barrier, so warps are independent and the CTA size is a launch choice.
//
// Self-contained on purpose (its own bf16/f16 conversions): the chunk
// kernels' prelude is being rewritten for speed and decode must not depend
// on its internals. On the runtime's emulated device (LINA_HOST_EMULATION,
// runtime/lib/Runtime/EmulatedDevice.cuh) the device branch runs as
// written, its PTX replaced by host code, and each kernel is registered by
// LINA_KERNEL_ENTRY; the CPU emulation test (test/unit/decode) compiles it
// that way into the test itself.
//
//===----------------------------------------------------------------------===//

#ifndef LINA_HOST_EMULATION
#define LINA_KERNEL_ENTRY(name)
#endif

namespace lina_decode {

typedef long long i64;

struct bf16 {
  unsigned short bits;
};
struct f16 {
  unsigned short bits;
};

#define LD_INLINE __device__ __forceinline__
LD_INLINE float to_float(float x) { return x; }
LD_INLINE float to_float(bf16 x) {
  return __uint_as_float(((unsigned)x.bits) << 16);
}
#ifdef LINA_HOST_EMULATION
LD_INLINE float to_float(f16 x) { return lina_emu::from_f16(x.bits); }
LD_INLINE unsigned short bf16_bits(float v) { return lina_emu::to_bf16(v); }
LD_INLINE unsigned short f16_bits(float v) { return lina_emu::to_f16(v); }
#else
LD_INLINE float to_float(f16 x) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
}
LD_INLINE unsigned short bf16_bits(float v) {
  unsigned short h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(v));
  return h;
}
LD_INLINE unsigned short f16_bits(float v) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(v));
  return h;
}
#endif
/// exp of a log decay, once per state row and token with per-channel gates:
/// the hardware ex2 (two instructions) rather than expf's range-reduced
/// sequence, as the chunk kernels do. Its error, a few ulps for the log
/// gates' range, is far inside every tolerance.
LD_INLINE float decay_exp(float x) { return __expf(x); }
/// One butterfly step of sum_rows.
LD_INLINE float shfl_xor(float x, int offset) {
  return __shfl_xor_sync(0xffffffffu, x, offset);
}
// 16- and 8-byte accesses, written out: a struct copy is split into scalar
// accesses by the front end. volatile keeps them in program order, which
// the in-place update of a state slot relies on (read, then write).
#ifdef LINA_HOST_EMULATION
// The emulated device's vector accesses trap where the GPU's would fault.
using lina_emu::vector_copy;
LD_INLINE void ld_f32x4(const float *p, float (&v)[4]) {
  vector_copy(v, p, 16, p);
}
LD_INLINE void ld_u16x4(const void *p, unsigned short (&v)[4]) {
  vector_copy(v, p, 8, p);
}
LD_INLINE void st_f32x4(float *p, const float (&v)[4]) {
  vector_copy(p, v, 16, p);
}
LD_INLINE void st_u16x4(void *p, unsigned short x, unsigned short y,
                        unsigned short z, unsigned short w) {
  const unsigned short v[4] = {x, y, z, w};
  vector_copy(p, v, 8, p);
}
/// How many 16- and 8-byte runs of read-only inputs the emulated kernels
/// read: tests tell the chunked reads from the element reads by them.
inline long chunked_reads16 = 0, chunked_reads8 = 0;
LD_INLINE void ld_words16(const void *p, unsigned *w) {
  ++chunked_reads16;
  vector_copy(w, p, 16, p);
}
LD_INLINE void ld_words8(const void *p, unsigned *w) {
  ++chunked_reads8;
  vector_copy(w, p, 8, p);
}
#else
LD_INLINE void ld_f32x4(const float *p, float (&v)[4]) {
  asm volatile("ld.global.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v[0]), "=f"(v[1]), "=f"(v[2]), "=f"(v[3])
               : "l"(p));
}
LD_INLINE void ld_u16x4(const void *p, unsigned short (&v)[4]) {
  asm volatile("ld.global.v4.u16 {%0, %1, %2, %3}, [%4];"
               : "=h"(v[0]), "=h"(v[1]), "=h"(v[2]), "=h"(v[3])
               : "l"(p));
}
LD_INLINE void st_f32x4(float *p, const float (&v)[4]) {
  asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v[0]),
               "f"(v[1]), "f"(v[2]), "f"(v[3])
               : "memory");
}
LD_INLINE void st_u16x4(void *p, unsigned short x, unsigned short y,
                        unsigned short z, unsigned short w) {
  asm volatile("st.global.v4.u16 [%0], {%1, %2, %3, %4};" ::"l"(p), "h"(x),
               "h"(y), "h"(z), "h"(w)
               : "memory");
}
// Runs of read-only inputs (q, k, gates, a, b): never written by the
// kernel, so no ordering is needed.
LD_INLINE void ld_words16(const void *p, unsigned *w) {
  asm("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(w[0]), "=r"(w[1]), "=r"(w[2]), "=r"(w[3])
      : "l"(p));
}
LD_INLINE void ld_words8(const void *p, unsigned *w) {
  asm("ld.global.v2.u32 {%0, %1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(p));
}
#endif
LD_INLINE float word_as_float(unsigned w) { return __uint_as_float(w); }
LD_INLINE int lane_id() { return threadIdx.x % 32; }
LD_INLINE int warp_id() { return threadIdx.x / 32; }
LD_INLINE int warps_per_cta() { return blockDim.x / 32; }
LD_INLINE i64 cta_id() { return blockIdx.x; }

enum { DECAY_NONE, DECAY_FIXED, DECAY_SCALAR, DECAY_PER_CHANNEL };
enum { UPDATE_ADDITIVE, UPDATE_DELTA, UPDATE_DPLR };
enum { GATE_GIVEN, GATE_SOFTPLUS, GATE_LOWER_BOUND };
enum { BETA_NONE, BETA_GIVEN, BETA_SIGMOID, BETA_TWO_SIGMOID };
enum {
  LOW_RANK_INPUT,
  LOW_RANK_ZERO,
  LOW_RANK_BETA_KEY,
  LOW_RANK_NEG_DECAYED_KEY
};
enum { WRITE_ONE, WRITE_BETA };

/// Kernel parameters; DecodeLaunchParams in DecodeKernel.cpp has the same
/// layout. Slot semantics are in docs/decode.md.
struct DecodeParams {
  const void *q, *k, *v;
  const float *g, *beta;
  const void *a, *b;
  const float *gate_a_log, *gate_dt_bias;
  void *o;
  const float *state_in;   ///< read: the pool, or fla's initial_state
  float *state_out;        ///< written: the pool, or fla's final_state
  const int *slots;        ///< null: sequence n is slot n; [B] or [B, T]
  const int *num_accepted; ///< [B], with per-token slots only; may be null
  /// Packed tokens: null, or [B + 1] offsets of each sequence's tokens
  /// (int32, or int64 with cu_seqlens_i64); q is then [1, tokens, H, K].
  const void *cu_seqlens;
  /// null, or [num_intermediate, intermediate_steps, HV, K, V] (V, K in
  /// the [V, K] kernels): the state after token t of sequence n goes to
  /// [row of n, t].
  float *intermediate;
  const int *intermediate_rows; ///< [B] rows of `intermediate`; may be null
  /// seq_len: T of [B, T] batches; packed, the row width of [B, seq_len]
  /// per-token slots.
  i64 batch, seq_len, num_slots;
  i64 slots_per_token; ///< 1: slots is [B, T] and every token's state is kept
  i64 cu_seqlens_i64;
  i64 num_intermediate, intermediate_steps;
  /// 1: the final state is not written (verification with intermediates)
  i64 disable_state_update;
};

template <typename T> LD_INLINE void load4(const T *p, float (&out)[4]) {
  unsigned short h[4];
  ld_u16x4(p, h);
  for (int c = 0; c < 4; ++c)
    out[c] = to_float(T{h[c]});
}
template <> LD_INLINE void load4<float>(const float *p, float (&out)[4]) {
  ld_f32x4(p, out);
}

/// Element j of a run of 32-bit words holding floats, bf16s or f16s.
LD_INLINE float element(const unsigned *w, int j, const float *) {
  return word_as_float(w[j]);
}
LD_INLINE float element(const unsigned *w, int j, const bf16 *) {
  return to_float(bf16{(unsigned short)(w[j / 2] >> (16 * (j % 2)))});
}
LD_INLINE float element(const unsigned *w, int j, const f16 *) {
  return to_float(f16{(unsigned short)(w[j / 2] >> (16 * (j % 2)))});
}

/// The chunk a lane's run of ROWS elements of T is read in: 16 or 8 bytes,
/// or 0 (one element at a time).
template <typename T, int ROWS> struct RowChunk {
  static constexpr int BYTES = ROWS * int(sizeof(T));
  static constexpr int value = BYTES % 16 == 0 ? 16 : BYTES % 8 == 0 ? 8 : 0;
};

/// Whether runs of ROWS elements of [.., K] rows from `base` can be read in
/// chunks: every run then starts at a multiple of the chunk (the caller
/// checks that no run crosses K).
template <typename T, int ROWS, int K>
LD_INLINE bool rows_vectorizable(const void *base) {
  constexpr int CHUNK = RowChunk<T, ROWS>::value;
  constexpr int DIVISOR = CHUNK ? CHUNK : 1;
  return CHUNK != 0 && (K * int(sizeof(T))) % DIVISOR == 0 &&
         reinterpret_cast<unsigned long long>(base) % DIVISOR == 0;
}

/// out[i] = src[i] for a lane's ROWS key rows, zero at and past `valid`;
/// in 16- or 8-byte chunks when `vector` (rows_vectorizable, all valid).
template <typename T, int ROWS>
LD_INLINE void load_rows(const T *src, int valid, bool vector,
                         float (&out)[ROWS]) {
  constexpr int CHUNK = RowChunk<T, ROWS>::value;
  if constexpr (CHUNK != 0) {
    constexpr int PER = CHUNK / int(sizeof(T));
    if (vector) {
#pragma unroll
      for (int c = 0; c < ROWS / PER; ++c) {
        unsigned w[CHUNK / 4];
        if (CHUNK == 16)
          ld_words16(src + c * PER, w);
        else
          ld_words8(src + c * PER, w);
#pragma unroll
        for (int j = 0; j < PER; ++j)
          out[c * PER + j] = element(w, j, src);
      }
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < ROWS; ++i)
    out[i] = i < valid ? to_float(src[i]) : 0.0f;
}

LD_INLINE void store4(float *p, const float (&v)[4]) { st_f32x4(p, v); }
LD_INLINE void store4(bf16 *p, const float (&v)[4]) {
  st_u16x4(p, bf16_bits(v[0]), bf16_bits(v[1]), bf16_bits(v[2]),
           bf16_bits(v[3]));
}
LD_INLINE void store4(f16 *p, const float (&v)[4]) {
  st_u16x4(p, f16_bits(v[0]), f16_bits(v[1]), f16_bits(v[2]), f16_bits(v[3]));
}

/// The same expressions as the chunk kernels and reference/Activations.h.
LD_INLINE float softplus(float x) {
  return fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x)));
}
LD_INLINE float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

template <class C> LD_INLINE float log_gate(float x, float a_log) {
  if (C::GATE == GATE_SOFTPLUS)
    return -expf(a_log) * softplus(x);
  if (C::GATE == GATE_LOWER_BOUND)
    return C::GATE_LOWER_BOUND * sigmoid(expf(a_log) * x);
  return x;
}

template <class C> LD_INLINE float beta_of(float x) {
  if (C::BETA == BETA_SIGMOID)
    return sigmoid(x);
  if (C::BETA == BETA_TWO_SIGMOID)
    return 2.0f * sigmoid(x);
  return x;
}

/// Adds x over the lanes holding the same columns (the row groups).
template <int QW> LD_INLINE float sum_rows(float x) {
  for (int offset = QW; offset < 32; offset <<= 1)
    x += shfl_xor(x, offset);
  return x;
}

/// a low-rank vector's row from its source (reference/Reference.cpp).
template <int SOURCE>
LD_INLINE float low_rank(float input, float beta, float k, float decay) {
  if (SOURCE == LOW_RANK_INPUT)
    return input;
  if (SOURCE == LOW_RANK_BETA_KEY)
    return beta * k;
  if (SOURCE == LOW_RANK_NEG_DECAYED_KEY)
    return -decay * k;
  return 0.0f;
}

LD_INLINE bool valid_slot(i64 slot, i64 num_slots) {
  return slot >= 0 && slot < num_slots;
}

/// Offset n of a cu_seqlens of either integer width.
LD_INLINE i64 token_offset(const DecodeParams &p, i64 n) {
  return p.cu_seqlens_i64 ? ((const i64 *)p.cu_seqlens)[n]
                          : i64(((const int *)p.cu_seqlens)[n]);
}

/// A lane's share of one head's state: rows row0.. (ROWS of them, `valid`
/// inside K) of the 4 columns from col. [K, V] rows are one 16-byte access
/// per row. [V, K] (V_FIRST, vLLM's pool) holds a column's rows
/// contiguously, so each column is read in 16-byte runs of rows where the
/// lane's run is whole and aligned, element by element otherwise.
template <int K, int V, int ROWS, bool V_FIRST>
LD_INLINE void load_state(const float *head, int row0, int col,
                          float (&s)[ROWS][4]) {
  const int valid = K - row0;
  if constexpr (!V_FIRST) {
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
      if (i < valid)
        load4(head + i64(row0 + i) * V + col, s[i]);
      else
        s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
    }
    return;
  }
  constexpr bool RUNS = ROWS % 4 == 0 && K % 4 == 0;
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const float *src = head + i64(col + c) * K + row0;
    if (RUNS && valid >= ROWS) {
#pragma unroll
      for (int i = 0; i < ROWS; i += 4) {
        float w[4];
        ld_f32x4(src + i, w);
#pragma unroll
        for (int j = 0; j < 4; ++j)
          s[i + j][c] = w[j];
      }
    } else {
#pragma unroll
      for (int i = 0; i < ROWS; ++i)
        s[i][c] = i < valid ? src[i] : 0.0f;
    }
  }
}

/// The inverse of load_state: writes the lane's rows inside K.
template <int K, int V, int ROWS, bool V_FIRST>
LD_INLINE void store_state(float *head, int row0, int col,
                           const float (&s)[ROWS][4]) {
  const int valid = K - row0;
  if constexpr (!V_FIRST) {
#pragma unroll
    for (int i = 0; i < ROWS; ++i)
      if (i < valid)
        store4(head + i64(row0 + i) * V + col, s[i]);
    return;
  }
  constexpr bool RUNS = ROWS % 4 == 0 && K % 4 == 0;
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    float *dst = head + i64(col + c) * K + row0;
    if (RUNS && valid >= ROWS) {
#pragma unroll
      for (int i = 0; i < ROWS; i += 4) {
        const float w[4] = {s[i][c], s[i + 1][c], s[i + 2][c], s[i + 3][c]};
        st_f32x4(dst + i, w);
      }
    } else {
#pragma unroll
      for (int i = 0; i < ROWS; ++i)
        if (i < valid)
          dst[i] = s[i][c];
    }
  }
}

/// One warp's share of one (sequence, value head, value tile): VW columns,
/// all K rows, all T tokens of the call; every state in [V, K] order with
/// V_FIRST. The order is a template argument, not a flag, because a
/// run-time choice between the two kept both paths' registers live: gdn's
/// 4-column kernel went from 40 to 62 registers (ptxas, sm_90).
template <class C, int VW, bool V_FIRST>
LD_INLINE void decode_warp(const DecodeParams &p) {
  typedef typename C::T T;
  constexpr int K = C::K, V = C::V, H = C::H, HV = C::HV;
  constexpr int QW = VW / 4;              // lanes across the columns
  constexpr int RG = 32 / QW;             // row groups down the rows
  constexpr int ROWS = (K + RG - 1) / RG; // rows per lane
  constexpr bool LOW_RANK_A_INPUT =
      C::UPDATE == UPDATE_DPLR && C::LOW_RANK_A == LOW_RANK_INPUT;
  constexpr bool LOW_RANK_B_INPUT =
      C::UPDATE == UPDATE_DPLR && C::LOW_RANK_B == LOW_RANK_INPUT;

  const int lane = lane_id(), warps = warps_per_cta();
  const i64 tiles = (V + warps * VW - 1) / (warps * VW);
  i64 cta = cta_id();
  const i64 tile = cta % tiles;
  cta /= tiles;
  const int hv = int(cta % HV);
  const i64 seq = cta / HV;
  // V % VW == 0, so a warp is wholly inside or wholly past the last column.
  const int col = int((tile * warps + warp_id()) * VW) + (lane % QW) * 4;
  if (col >= V)
    return;
  const int row0 = (lane / QW) * ROWS;
  const int valid = K - row0; // rows of this lane inside [0, K)
  // Row runs are read in 16- or 8-byte chunks where every lane's run is
  // whole and the tensor is aligned for it (uniform over the grid).
  constexpr bool WHOLE_RUNS = K % RG == 0;
  const bool qk_vector = WHOLE_RUNS && rows_vectorizable<T, ROWS, K>(p.q) &&
                         rows_vectorizable<T, ROWS, K>(p.k);
  const bool g_vector = WHOLE_RUNS && rows_vectorizable<float, ROWS, K>(p.g);
  const bool ab_vector = WHOLE_RUNS && rows_vectorizable<T, ROWS, K>(p.a) &&
                         rows_vectorizable<T, ROWS, K>(p.b);
  const int h = hv / (HV / H);
  // Per-token slots and accepted counts index rows of this width.
  const i64 row_width = p.seq_len;

  // The sequence's tokens: [bos, bos + len) of the token dimension.
  i64 bos = seq * p.seq_len, len = p.seq_len;
  if (p.cu_seqlens) {
    bos = token_offset(p, seq);
    len = token_offset(p, seq + 1) - bos;
    // An empty sequence (an engine's padding) leaves the pool alone, as
    // fla's and vLLM's kernels do; fla's form still copies h0 to ht.
    if (len <= 0 && p.slots)
      return;
    len = len < 0 ? 0 : len;
  }

  // Where the state comes from and goes to (docs/decode.md).
  i64 read_slot = -1, final_slot = -1;
  if (!p.slots) {
    read_slot = p.state_in ? seq : -1;
    final_slot = p.state_out ? seq : -1;
  } else if (!p.slots_per_token) {
    read_slot = final_slot = p.slots[seq];
  } else {
    i64 accepted = p.num_accepted ? p.num_accepted[seq] : 1;
    read_slot = accepted >= 1 && accepted <= row_width
                    ? p.slots[seq * row_width + accepted - 1]
                    : -1;
  }
  // Intermediate states go to the sequence's own row, or to its slot's.
  const i64 inter_row = !p.intermediate       ? -1
                        : p.intermediate_rows ? i64(p.intermediate_rows[seq])
                        : p.slots && !p.slots_per_token ? final_slot
                                                        : seq;
  const i64 head_stride = i64(K) * V;
  float s[ROWS][4];
  if (p.state_in && valid_slot(read_slot, p.num_slots)) {
    load_state<K, V, ROWS, V_FIRST>(
        p.state_in + (read_slot * HV + hv) * head_stride, row0, col, s);
  } else {
#pragma unroll
    for (int i = 0; i < ROWS; ++i)
      s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
  }

  for (i64 t = 0; t < len; ++t) {
    const i64 token = bos + t;
    const i64 qk_row = (token * H + h) * K + row0;
    const i64 head_row = token * HV + hv;
    float kr[ROWS], qr[ROWS], decay[ROWS];
    load_rows((const T *)p.k + qk_row, valid, qk_vector, kr);
    load_rows((const T *)p.q + qk_row, valid, qk_vector, qr);
    float k2 = 0.0f, q2 = 0.0f;
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
      k2 += kr[i] * kr[i];
      q2 += qr[i] * qr[i];
    }
    // fla's l2norm: x / sqrt(|x|^2 + 1e-6); the scale comes after it.
    float k_scale = 1.0f, q_scale = C::SCALE;
    if (C::QK_L2NORM) {
      k_scale = rsqrtf(sum_rows<QW>(k2) + 1e-6f);
      q_scale *= rsqrtf(sum_rows<QW>(q2) + 1e-6f);
    }
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
      kr[i] *= k_scale;
      qr[i] *= q_scale;
    }

    // D_t as one factor per row (1 without decay).
    if (C::DECAY == DECAY_PER_CHANNEL) {
      const float a_log = C::GATE != GATE_GIVEN ? p.gate_a_log[hv] : 0.0f;
      float x[ROWS];
      load_rows(p.g + head_row * K + row0, valid, g_vector, x);
#pragma unroll
      for (int i = 0; i < ROWS; ++i) {
        if (C::GATE != GATE_GIVEN && p.gate_dt_bias && i < valid)
          x[i] += p.gate_dt_bias[i64(hv) * K + row0 + i];
        decay[i] = decay_exp(log_gate<C>(x[i], a_log));
      }
    } else {
      float d = 1.0f;
      if (C::DECAY == DECAY_FIXED)
        d = decay_exp(p.g[hv]);
      if (C::DECAY == DECAY_SCALAR) {
        float x = p.g[head_row];
        float a_log = 0.0f;
        if (C::GATE != GATE_GIVEN) {
          a_log = p.gate_a_log[hv];
          if (p.gate_dt_bias)
            x += p.gate_dt_bias[hv];
        }
        d = decay_exp(log_gate<C>(x, a_log));
      }
#pragma unroll
      for (int i = 0; i < ROWS; ++i)
        decay[i] = d;
    }
    const float beta =
        C::BETA != BETA_NONE ? beta_of<C>(p.beta[head_row]) : 0.0f;

    float v[4];
    load4((const T *)p.v + head_row * V + col, v);

    if (C::UPDATE == UPDATE_DPLR) {
      // u = a^T S_{t-1}: the low-rank read sees the state before the decay.
      float ar[ROWS], br[ROWS], u[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      float a_in[ROWS] = {}, b_in[ROWS] = {};
      if (LOW_RANK_A_INPUT)
        load_rows((const T *)p.a + head_row * K + row0, valid, ab_vector, a_in);
      if (LOW_RANK_B_INPUT)
        load_rows((const T *)p.b + head_row * K + row0, valid, ab_vector, b_in);
#pragma unroll
      for (int i = 0; i < ROWS; ++i) {
        ar[i] = low_rank<C::LOW_RANK_A>(a_in[i], beta, kr[i], decay[i]);
        br[i] = low_rank<C::LOW_RANK_B>(b_in[i], beta, kr[i], decay[i]);
#pragma unroll
        for (int c = 0; c < 4; ++c)
          u[c] += ar[i] * s[i][c];
      }
#pragma unroll
      for (int c = 0; c < 4; ++c)
        u[c] = sum_rows<QW>(u[c]);
      const float w = C::WRITE == WRITE_BETA ? beta : 1.0f;
#pragma unroll
      for (int i = 0; i < ROWS; ++i)
#pragma unroll
        for (int c = 0; c < 4; ++c)
          s[i][c] = decay[i] * s[i][c] + br[i] * u[c] + w * kr[i] * v[c];
    } else {
#pragma unroll
      for (int i = 0; i < ROWS; ++i)
#pragma unroll
        for (int c = 0; c < 4; ++c)
          s[i][c] *= decay[i];
      if (C::UPDATE == UPDATE_DELTA) {
        // (I - beta k k^T) D S + beta k v^T = D S + k (beta (v - k^T D S))^T.
        float u[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int i = 0; i < ROWS; ++i)
#pragma unroll
          for (int c = 0; c < 4; ++c)
            u[c] += kr[i] * s[i][c];
#pragma unroll
        for (int c = 0; c < 4; ++c)
          v[c] = beta * (v[c] - sum_rows<QW>(u[c]));
      } else if (C::WRITE == WRITE_BETA) {
        // The additive rule's weighted write: D S + beta k v^T.
#pragma unroll
        for (int c = 0; c < 4; ++c)
          v[c] *= beta;
      }
#pragma unroll
      for (int i = 0; i < ROWS; ++i)
#pragma unroll
        for (int c = 0; c < 4; ++c)
          s[i][c] += kr[i] * v[c];
    }

    // o_t = S_t^T q_t: the output reads the state after the update.
    float o[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < ROWS; ++i)
#pragma unroll
      for (int c = 0; c < 4; ++c)
        o[c] += qr[i] * s[i][c];
#pragma unroll
    for (int c = 0; c < 4; ++c)
      o[c] = sum_rows<QW>(o[c]);
    if (lane < QW)
      store4((T *)p.o + head_row * V + col, o);

    if (p.slots_per_token && t < row_width) {
      // Speculative decoding keeps every token's state in its own slot.
      const i64 slot = p.slots[seq * row_width + t];
      if (valid_slot(slot, p.num_slots))
        store_state<K, V, ROWS, V_FIRST>(
            p.state_out + (slot * HV + hv) * head_stride, row0, col, s);
    }
    if (valid_slot(inter_row, p.num_intermediate) && t < p.intermediate_steps) {
      // Verification's per-token states, kept apart from the pool.
      const i64 step = inter_row * p.intermediate_steps + t;
      store_state<K, V, ROWS, V_FIRST>(
          p.intermediate + (step * HV + hv) * head_stride, row0, col, s);
    }
  }

  if (!p.slots_per_token && !p.disable_state_update && p.state_out &&
      valid_slot(final_slot, p.num_slots))
    store_state<K, V, ROWS, V_FIRST>(
        p.state_out + (final_slot * HV + hv) * head_stride, row0, col, s);
}

} // namespace lina_decode
