/*===- lina_c.h - The C API of lina ----------------------------*- C -*-===//
 *
 * Part of lina. Opaque handles, status codes and a per-thread message; no C++
 * exception crosses this boundary. Every function is thread-safe; a kernel may
 * be used from several threads as long as calls that overlap in time use the
 * same stream (the materialize strategy shares one workspace per kernel).
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
} lina_strategy;

/* Schedule knobs; zero means "choose for me". */
typedef struct lina_schedule {
  int64_t chunk_size;
  int64_t tile_v;
  int64_t warps;
  lina_strategy strategy;
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

void lina_kernel_destroy(lina_kernel *kernel);

#ifdef __cplusplus
}
#endif

#endif /* LINA_LINA_C_H */
