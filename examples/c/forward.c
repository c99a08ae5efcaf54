/* forward.c - Gated DeltaNet through lina's C API, on the GPU.
 *
 * Build: cc examples/c/forward.c -Iapi/include -Lbuild/lib -llina -lcuda \
 *           -Wl,-rpath,$PWD/build/lib -o forward
 * The tensors live on the GPU; this example allocates them with the driver API
 * and leaves them unfilled (cuMemsetD8 to a small pattern) to stay short.
 * Real callers pass their framework's device pointers and stream. */
#include "lina/lina_c.h"
#include <stdio.h>
#include <stdlib.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemsetD8_v2(CUdeviceptr, unsigned char, size_t);
CUresult cuCtxSynchronize(void);

#define CHECK(call)                                                            \
  do {                                                                         \
    lina_status s = (call);                                                    \
    if (s != LINA_OK) {                                                        \
      fprintf(stderr, "%s: %s\n", lina_status_name(s), lina_last_error());     \
      return 1;                                                                \
    }                                                                          \
  } while (0)

int main(void) {
  const int64_t B = 2, T = 1024, H = 8, K = 64, V = 64;
  char *spec = NULL;
  CHECK(lina_preset_spec("gdn", K, V, H, H, "bf16", &spec));
  lina_kernel *kernel = NULL;
  CHECK(lina_kernel_create(spec, NULL, 0, &kernel)); /* NVRTC, ~1 s */
  lina_free_string(spec);

  CUdeviceptr q, k, v, o, g, beta, s0, s1;
  size_t tok = (size_t)(B * T * H);
  cuMemAlloc_v2(&q, tok * K * 2), cuMemAlloc_v2(&k, tok * K * 2);
  cuMemAlloc_v2(&v, tok * V * 2), cuMemAlloc_v2(&o, tok * V * 2);
  cuMemAlloc_v2(&g, tok * 4), cuMemAlloc_v2(&beta, tok * 4);
  cuMemAlloc_v2(&s0, B * H * K * V * 4), cuMemAlloc_v2(&s1, B * H * K * V * 4);
  cuMemsetD8_v2(q, 0x3c, tok * K * 2), cuMemsetD8_v2(k, 0x3c, tok * K * 2);
  cuMemsetD8_v2(v, 0x3c, tok * V * 2), cuMemsetD8_v2(g, 0, tok * 4);
  cuMemsetD8_v2(beta, 0, tok * 4), cuMemsetD8_v2(s0, 0, B * H * K * V * 4);

  lina_forward_args args = {0};
  args.q = (void *)q, args.k = (void *)k, args.v = (void *)v, args.o = (void *)o;
  args.g = (const float *)g, args.beta = (const float *)beta;
  args.initial_state = (const float *)s0, args.final_state = (float *)s1;
  args.batch = B, args.seq_len = T;
  CHECK(lina_kernel_forward(kernel, &args));
  cuCtxSynchronize();
  printf("gdn forward on %lldx%lldx%lldx%lld: ok\n", (long long)B,
         (long long)T, (long long)H, (long long)K);
  lina_kernel_destroy(kernel);
  return 0;
}
