/*===- lina_c.h - The C API of lina ----------------------------*- C -*-===//
 *
 * Part of lina. Opaque handles, status codes and a per-thread message; no C++
 * exception crosses this boundary. Every function is thread-safe. The
 * chunk-parallel forward (the materialize and split strategies, segments)
 * and the backward keep per-chunk records between their kernels, in a
 * workspace: lina_kernel_forward and lina_backward_run use one per kernel,
 * owned by lina and reallocated for a larger call, so calls on one kernel
 * that overlap in time must use the same stream, and a CUDA graph that
 * captured such a call may be left pointing at freed memory. The
 * *_with_workspace entry points take the workspace from the caller for each
 * call instead (sized by lina_kernel_workspace_size and
 * lina_backward_workspace_size): with memory from a stream-ordered
 * allocator (a framework's caching allocator, cudaMallocAsync) they may run
 * on any number of streams at once and be captured in CUDA graphs.
 *
 * Tensors are device pointers with fla's layouts ([B, T, H, D], contiguous):
 * q, k [B, T, H, K]; v, o [B, T, HV, V]; a, b [B, T, HV, K] in the spec's
 * dtype; g (log gates or their pre-activation) and beta fp32; A_log [HV] and
 * dt_bias [HV] or [HV K] fp32; states [N, HV, K, V] fp32; cu_seqlens int64
 * [N + 1] with B = 1.
 *
 *===----------------------------------------------------------------------===*/
#ifndef LINA_LINA_C_H
#define LINA_LINA_C_H

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum lina_status {
  LINA_OK = 0,
  LINA_INVALID_ARGUMENT = 1, /* a bad spec, shape, pointer or option */
  LINA_NO_DRIVER = 2,        /* no NVIDIA driver / GPU on this machine */
  LINA_DRIVER_ERROR = 3,     /* a CUDA driver call failed */
  LINA_NO_COMPILER = 4,      /* NVRTC could not be loaded */
  LINA_COMPILE_ERROR = 5,    /* NVRTC rejected the generated source */
  LINA_INTERNAL_ERROR = 6,
} lina_status;

/* The message of the last failed call on this thread ("" after success). */
const char *lina_last_error(void);
const char *lina_status_name(lina_status status);
const char *lina_version(void);

typedef enum lina_strategy {
  LINA_STRATEGY_DEFAULT = 0,
  LINA_STRATEGY_FUSED = 1,
  LINA_STRATEGY_MATERIALIZE = 2,
  LINA_STRATEGY_SPLIT = 3,
} lina_strategy;

/* Whether the chunk scan loads the next chunk's tiles while it computes this
 * one (docs/perf-notes.md). */
typedef enum lina_prefetch {
  LINA_PREFETCH_DEFAULT = 0,
  LINA_PREFETCH_OFF = 1,
  LINA_PREFETCH_ON = 2,
} lina_prefetch;

/* Marks a name kept for one more release. */
#if defined(__GNUC__) || defined(__clang__)
#define LINA_DEPRECATED(message) __attribute__((deprecated(message)))
#elif defined(_MSC_VER)
#define LINA_DEPRECATED(message) __declspec(deprecated(message))
#else
#define LINA_DEPRECATED(message)
#endif
/* The same for an enumerator, which MSVC marks in C++ only. */
#if defined(__GNUC__) || defined(__clang__)
#define LINA_DEPRECATED_ENUMERATOR(message) __attribute__((deprecated(message)))
#elif defined(_MSC_VER) && defined(__cplusplus)
#define LINA_DEPRECATED_ENUMERATOR(message) [[deprecated(message)]]
#else
#define LINA_DEPRECATED_ENUMERATOR(message)
#endif

/* The matrix products of the chunk scan (lina_schedule's `mma`). The names
 * of the knob's first release (lina_wgmma, LINA_WGMMA_*, the field `wgmma`)
 * are deprecated and go in the next release. */
typedef enum lina_mma {
  LINA_MMA_DEFAULT = 0,
  LINA_MMA_WARP = 1,
  LINA_MMA_WARPGROUP = 2,
  LINA_WGMMA_DEFAULT LINA_DEPRECATED_ENUMERATOR("use LINA_MMA_DEFAULT") = 0,
  LINA_WGMMA_OFF LINA_DEPRECATED_ENUMERATOR("use LINA_MMA_WARP") = 1,
  LINA_WGMMA_ON LINA_DEPRECATED_ENUMERATOR("use LINA_MMA_WARPGROUP") = 2,
} lina_mma;
LINA_DEPRECATED("use lina_mma") typedef lina_mma lina_wgmma;

/* Schedule knobs; zero means "choose for me": with some knobs set, the
 * others are the default for the kernel's shape (batch, length, GPU) when
 * known. `segments`: run each sequence as up to this many pieces scanned at
 * once (1: whole sequences; the additive rules with a decay only;
 * docs/design.md, "Segments"). `mma`: the matrix products the scan runs
 * on. LINA_MMA_WARPGROUP: Hopper's warpgroup products, the kernels printed
 * from the chunk's ops (sm_90 only; docs/design.md, "The wgmma scan": the
 * additive and delta rules, and DPLR (not a b decayed by its own
 * per-channel gate), in bf16 or f16 at key and value dims 64 or 128); it
 * starts from its layout (chunk size 64, fused, tile-v the head's value dim
 * on a warpgroup for each 64 value columns; tile-v 64 for DPLR at key dim
 * 128), so other knobs set with it must agree (segments may be added; the
 * scans also take tile-v 64 on 4 warps at d128). LINA_MMA_WARP, or
 * LINA_MMA_DEFAULT with any other knob set: the warp-level mma.sync
 * products. With every knob zero the tuned or default schedule is used,
 * which on an sm_90 GPU is the warpgroup scan wherever it covers a d128
 * spec. */
typedef struct lina_schedule {
  int64_t chunk_size;
  int64_t tile_v;
  int64_t warps;
  lina_strategy strategy;
  lina_prefetch prefetch;
  int64_t segments;
  union {
    lina_mma mma;
    LINA_DEPRECATED("use mma") lina_mma wgmma;
  };
} lina_schedule;

typedef struct lina_kernel lina_kernel;

/* A kernel for `spec_text`, a module holding one lina.recurrence (see
 * docs/spec.md), for GPU `device`. `schedule` may be NULL (the default
 * schedule). Compiled once per process; its cubin is kept in lina's cache,
 * so a later process loads it without generating or compiling code. */
lina_status lina_kernel_create(const char *spec_text,
                               const lina_schedule *schedule, int device,
                               lina_kernel **out);

/* As lina_kernel_create, for B = `batch` sequences of up to `seq_len` tokens
 * (varlen: the number of sequences and the longest). When `schedule` is NULL
 * or sets no knob, the schedule `lina tune` found fastest for this spec, GPU
 * and shape bucket is used if the cache holds one, else the default; the
 * call never tunes. The cache is $LINA_CACHE_DIR/lina.db (else
 * ~/.cache/lina/lina.db); LINA_CACHE=off turns it off. */
lina_status lina_kernel_create_for_shape(const char *spec_text,
                                         const lina_schedule *schedule,
                                         int64_t batch, int64_t seq_len,
                                         int device, lina_kernel **out);

/* The schedule `kernel` was built with (every knob set: the caller's, the
 * tuned one or the default), e.g. to see whether a tuned result was used.
 * Passed back to lina_kernel_create it asks for the same kernel (a warpgroup
 * plan of the delta rules, whose chunks are solved first, still reads
 * strategy fused here: the schedule's, not the plan's kernels). */
lina_status lina_kernel_schedule(const lina_kernel *kernel,
                                 lina_schedule *out);

/* The tuning shape bucket of B = `batch` sequences of up to `seq_len`
 * tokens with `value_heads` value heads, e.g. "bh=9..16,t=257..1024"
 * (docs/autotune.md): two shapes in one bucket get the same kernel from
 * lina_kernel_create_for_shape. Written to `buf` (`size` bytes, NUL
 * included); LINA_INVALID_ARGUMENT when it does not fit. */
lina_status lina_shape_bucket(int64_t batch, int64_t seq_len,
                              int64_t value_heads, char *buf, size_t size);

/* The spec of a preset as MLIR text, with dims/heads/dtype set; free the
 * result with lina_free_string. dtype is "bf16", "f16" or "f32". */
lina_status lina_preset_spec(const char *preset, int64_t key_dim,
                             int64_t value_dim, int64_t heads,
                             int64_t value_heads, const char *dtype,
                             char **out);
void lina_free_string(char *text);

typedef struct lina_forward_args {
  const void *q, *k, *v;
  const float *g, *beta;
  const void *a, *b;
  const float *gate_a_log, *gate_dt_bias;
  void *o;
  const float *initial_state;
  float *final_state;
  const int64_t *cu_seqlens;
  int64_t batch, seq_len, num_sequences;
  void *stream; /* a CUstream / cudaStream_t; NULL is the default stream */
} lina_forward_args;

/* Checks the arguments against the kernel's spec and launches on the stream.
 * Asynchronous: faults inside the kernel show up at the next synchronizing
 * call. Nothing is written when an error is returned. */
lina_status lina_kernel_forward(const lina_kernel *kernel,
                                const lina_forward_args *args);

/* The bytes of workspace lina_kernel_forward_with_workspace needs for a
 * call of B = `batch` sequences of `seq_len` tokens (varlen: batch 1,
 * `seq_len` packed tokens of `num_sequences` sequences; num_sequences is
 * read only when the spec is varlen), in `*bytes`: 0 for the fused
 * strategy, which keeps nothing between its kernels. The same shape always
 * needs the same size. LINA_INVALID_ARGUMENT for NULLs and for a shape no
 * call can have. */
lina_status lina_kernel_workspace_size(const lina_kernel *kernel,
                                       int64_t batch, int64_t seq_len,
                                       int64_t num_sequences, size_t *bytes);

/* As lina_kernel_forward, with the call's scratch in `workspace`: device
 * memory on the kernel's GPU of `workspace_bytes` bytes, at least what
 * lina_kernel_workspace_size says for the call's shape, starting at a
 * multiple of 256 bytes (NULL and 0 are fine where that size is 0). lina
 * keeps nothing of it: it must stay allocated until the stream has run the
 * call, and may be reused by anything ordered after the call on that
 * stream. A workspace that is too small (or misaligned, or NULL where one
 * is needed) is refused with LINA_INVALID_ARGUMENT, naming the size the
 * call needs, and one that overlaps a tensor of the call is refused naming
 * the tensor, before anything is written. */
lina_status lina_kernel_forward_with_workspace(const lina_kernel *kernel,
                                               const lina_forward_args *args,
                                               void *workspace,
                                               size_t workspace_bytes);

/* What lina_kernel_forward checks before it launches, without a GPU or a
 * compile: required and stray pointers, alignment, batch/varlen, sizes, and
 * outputs that overlap any other tensor (extents from the shapes; tensors
 * are contiguous, there are no strides). LINA_OK or LINA_INVALID_ARGUMENT
 * with the message in lina_last_error(). The values of device tensors
 * (cu_seqlens, NaN/Inf in gates) are checked only by lina_kernel_forward
 * when the environment has LINA_CHECK_INPUTS=1: that copies them to the
 * host and waits for the stream. */
lina_status lina_check_forward_args(const char *spec_text,
                                    const lina_schedule *schedule,
                                    const lina_forward_args *args);

void lina_kernel_destroy(lina_kernel *kernel);

/*===--------------------------------------------------------------------===*
 * Backward (docs/training.md): the gradients of a forward call, derived by
 * the compiler from the spec (lina-chunk-backward) and printed as two
 * kernels: the forward's scan again, keeping the state before every chunk,
 * then a walk from the last chunk to the first.
 *===--------------------------------------------------------------------===*/

typedef struct lina_backward_kernel lina_backward_kernel;

/* The backward of `spec_text` for GPU `device`. Of `schedule` (may be NULL)
 * only chunk_size, tile_v and warps are read (zero: the default); the other
 * knobs must be zero. Compiled with NVRTC once per kernel. */
lina_status lina_backward_create(const char *spec_text,
                                 const lina_schedule *schedule, int device,
                                 lina_backward_kernel **out);

/* One backward call. `forward` holds the forward call's inputs (its o and
 * final_state must be NULL). `d_o` is dL/do in the spec's dtype with o's
 * layout; `d_final_state` fp32 [N, HV, K, V] or NULL (zero; it is refused
 * when the spec has no final state). The gradients
 * are fp32 in their inputs' layouts, each required exactly where its input
 * is given (dg where g is, d_gate_dt_bias where gate_dt_bias is, ...), and
 * overwritten whole: dq, dk [B, T, H, K]; dv [B, T, HV, V]; dg as g; dbeta
 * as beta; da, db [B, T, HV, K]; d_gate_a_log [HV]; d_gate_dt_bias as
 * gate_dt_bias; d_initial_state [N, HV, K, V] where initial_state is given.
 * Asynchronous on forward.stream; nothing is written on error. */
typedef struct lina_backward_args {
  lina_forward_args forward;
  const void *d_o;
  const float *d_final_state;
  float *dq, *dk, *dv;
  float *dg, *dbeta;
  float *da, *db;
  float *d_gate_a_log, *d_gate_dt_bias;
  float *d_initial_state;
} lina_backward_args;

/* As lina_backward_create, for calls of B = `batch` sequences of up to
 * `seq_len` tokens (varlen: the number of sequences and the longest). When
 * `schedule` is NULL or sets no knob, the backward schedule a tune
 * (lina_tune with LINA_TUNE_BACKWARD, `lina tune --backward`) found fastest
 * for this spec, GPU and shape bucket is used if lina's cache holds one,
 * else the default; the call never tunes. batch or seq_len 0: the shape is
 * not known (the default). */
lina_status lina_backward_create_for_shape(const char *spec_text,
                                           const lina_schedule *schedule,
                                           int64_t batch, int64_t seq_len,
                                           int device,
                                           lina_backward_kernel **out);

/* The schedule `kernel` was built with (chunk_size, tile_v and warps, every
 * one set; the forward's knobs 0), e.g. to see whether a tuned result was
 * used. Passed back to lina_backward_create it asks for the same kernel. */
lina_status lina_backward_schedule(const lina_backward_kernel *kernel,
                                   lina_schedule *out);

lina_status lina_backward_run(const lina_backward_kernel *kernel,
                              const lina_backward_args *args);

/* The bytes of workspace lina_backward_run_with_workspace needs for a
 * call of this shape (as lina_kernel_workspace_size: `num_sequences` is
 * read only when the spec is varlen): every chunk's starting state and
 * the state's gradient there, and scratch for tiles that do not fit on
 * chip. Never 0. */
lina_status lina_backward_workspace_size(const lina_backward_kernel *kernel,
                                         int64_t batch, int64_t seq_len,
                                         int64_t num_sequences,
                                         size_t *bytes);

/* As lina_backward_run, with that scratch in `workspace` (device memory
 * of `workspace_bytes` bytes, at least lina_backward_workspace_size's,
 * starting at a multiple of 256 bytes), under the rules of
 * lina_kernel_forward_with_workspace. */
lina_status lina_backward_run_with_workspace(
    const lina_backward_kernel *kernel, const lina_backward_args *args,
    void *workspace, size_t workspace_bytes);

void lina_backward_destroy(lina_backward_kernel *kernel);

/*===--------------------------------------------------------------------===*
 * Tuning (docs/autotune.md): what `lina tune` does, from a program.
 *===--------------------------------------------------------------------===*/

typedef enum lina_tune_mode {
  /* Coordinate descent from the default schedule, one knob at a time: at
   * most 12 candidates (seconds to a minute). */
  LINA_TUNE_FAST = 0,
  /* Every viable candidate (minutes; an hour at large shapes). */
  LINA_TUNE_FULL = 1,
  /* Or'ed into either mode: tune the backward's kernels (training) instead
   * of the forward's. Their schedule has chunk_size, tile_v and warps only
   * (the result's other knobs are 0); candidates are checked against the
   * float64 backward and timed as backward calls on random inputs, and the
   * winner is what lina_backward_create_for_shape uses for the bucket. */
  LINA_TUNE_BACKWARD = 16,
} lina_tune_mode;

typedef struct lina_tune_result {
  /* The winner: the fastest schedule recorded for the spec, this GPU and
   * the shape's bucket (by this tune or an earlier one), which
   * lina_kernel_create_for_shape uses from now on. */
  lina_schedule schedule;
  /* Its median time for one forward call (one backward call with
   * LINA_TUNE_BACKWARD) at the tuned shape (with simulate, the cost
   * model's estimate). */
  double time_ms;
  /* The search space, and how many of it were pruned before any trial
   * (they cannot run on this GPU; `lina tune --dry-run` says why). */
  int64_t candidates;
  int64_t pruned;
  /* Candidates this call looked at: compiled, checked and timed now, or read
   * back from the cache (an earlier tune timed them). */
  int64_t tried;
  int64_t recorded;
  /* 1 when the results are in the cache file, where later processes find
   * them; 0 with the reason otherwise (the cache cannot be written, or
   * LINA_CACHE is off). A cache that cannot be written still serves this
   * process's kernels. */
  int saved;
  char not_saved_reason[512];
} lina_tune_result;

/* Finds the fastest schedule for `spec_text` at B = `batch` sequences of
 * `seq_len` tokens on GPU `device`, and records every candidate in lina's
 * cache: lina_kernel_create_for_shape (and the C++ and Python APIs) then
 * build kernels of every shape in the same bucket (lina_shape_bucket) with
 * the winner, in this process and later ones. Each candidate is compiled,
 * checked against the float64 reference and timed with CUDA events; those
 * an earlier tune recorded are read back, not timed again. Blocking; the
 * timings are only as good as the GPU is idle. With `simulate` != 0 the
 * cost model times the candidates instead, without a GPU, and the results
 * are recorded under a GPU named "simulated", which no device matches (for
 * tests and previews). `out` holds what was found; when the tune ran but
 * failed (no candidate ran and matched the reference, or a fault broke the
 * GPU context) it holds the counts and the status says why.
 * LINA_NO_DRIVER without a GPU (unless simulate), LINA_NO_COMPILER without
 * NVRTC. `mode` is a lina_tune_mode passed as an int, so that any value a
 * caller passes is well defined, and refused when it is neither. */
lina_status lina_tune(const char *spec_text, int64_t batch, int64_t seq_len,
                      int mode, int device, int simulate,
                      lina_tune_result *out);

/*===--------------------------------------------------------------------===*
 * Decode (docs/decode.md): 1 to 16 new tokens per sequence against a state
 * kept between calls, one kernel launch per call (no allocation, copy or
 * synchronisation: CUDA-graph friendly). Tensors as above with T = seq_len;
 * the state is fp32 [slots, HV, K, V].
 *===--------------------------------------------------------------------===*/

/* Decode knobs; zero means "choose for me" (the width by batch size). */
typedef struct lina_decode_schedule {
  int64_t warp_columns; /* value columns per warp: 4, 8 or 16 */
  int64_t warps;        /* warps per CTA, 1 to 8 */
} lina_decode_schedule;

typedef struct lina_decode_kernel lina_decode_kernel;

/* A decode kernel for `spec_text` (a lina.recurrence; varlen must be false,
 * initial_state / final_state are ignored: the call says where the state
 * is). `schedule` may be NULL. */
lina_status lina_decode_create(const char *spec_text,
                               const lina_decode_schedule *schedule, int device,
                               lina_decode_kernel **out);

/* One decode call. The state is either
 *  - the pool: `state` [num_slots, HV, K, V], read and updated in place,
 *    with `state_indices` int32 [batch] (slot per sequence), or with
 *    `indices_per_token` != 0 int32 [batch, seq_len] (the state after token
 *    t goes to state_indices[n, t]; the call starts from
 *    state_indices[n, num_accepted_tokens[n] - 1], num_accepted_tokens int32
 *    [batch] or NULL for 1). A negative (or >= num_slots) index is "no
 *    slot": start from zero, keep nothing. Slots written in one call must
 *    be distinct.
 *  - or fla's: `initial_state` [batch, HV, K, V] (NULL: zero) and
 *    `final_state` [batch, HV, K, V] (NULL: not kept); then state,
 *    state_indices and num_accepted_tokens are NULL and num_slots 0. */
typedef struct lina_decode_args {
  const void *q, *k, *v;
  const float *g, *beta;
  const void *a, *b;
  const float *gate_a_log, *gate_dt_bias;
  void *o;
  float *state;
  const int32_t *state_indices;
  const int32_t *num_accepted_tokens;
  int64_t num_slots;
  int64_t indices_per_token;
  const float *initial_state;
  float *final_state;
  int64_t batch, seq_len;
  void *stream;
  /* The serving layouts; zero-initialised arguments (`lina_decode_args a = {0}`)
   * keep the behaviour above.
   *  - packed tokens: `cu_seqlens` [batch + 1] int32 (int64 when
   *    `cu_seqlens_int64` != 0); q is [1, tokens, H, K] and sequence n's
   *    tokens are [cu_seqlens[n], cu_seqlens[n + 1]). seq_len is then the
   *    most tokens a sequence has (1 to 16) and the row width of per-token
   *    state_indices [batch, seq_len]. A sequence with no tokens leaves the
   *    pool alone.
   *  - `state_v_first` != 0: every state (pool, initial, final,
   *    intermediate) is [V, K] per head, vLLM's layout, instead of [K, V].
   *  - `intermediate_states` fp32 [num_intermediate, intermediate_steps,
   *    HV, K, V]: the state after token t of sequence n goes to row r, step
   *    t, r = intermediate_indices[n] (int32 [batch]) when given, else the
   *    sequence's slot (state_indices [batch]), else n. Rows outside
   *    [0, num_intermediate) and steps past intermediate_steps are skipped.
   *  - `disable_state_update` != 0 (pool with state_indices [batch] only):
   *    the slots are read and not written. */
  const void *cu_seqlens;
  int64_t cu_seqlens_int64;
  int64_t state_v_first;
  float *intermediate_states;
  const int32_t *intermediate_indices;
  int64_t num_intermediate, intermediate_steps;
  int64_t disable_state_update;
} lina_decode_args;

/* Checks the arguments against the spec and launches on the stream;
 * nothing is written when an error is returned. */
lina_status lina_decode_forward(const lina_decode_kernel *kernel,
                                const lina_decode_args *args);

/* The warp-column width a call with `batch` sequences uses (0 on NULL). */
int64_t lina_decode_warp_columns(const lina_decode_kernel *kernel,
                                 int64_t batch);

void lina_decode_destroy(lina_decode_kernel *kernel);

#ifdef __cplusplus
}
#endif

#endif /* LINA_LINA_C_H */
