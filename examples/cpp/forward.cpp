// forward.cpp - KDA through lina's C++ API (lina/lina.h), on the GPU.
//
// Build: c++ -std=c++17 examples/cpp/forward.cpp -Iapi/include -Lbuild/lib \
//          -llina -lcuda -Wl,-rpath,$PWD/build/lib -o forward
// Real callers pass their framework's device pointers and stream; this
// example allocates with the driver API and fills with a constant to stay
// short (a real check against the reference is `lina run kda --device gpu
// --check`).
#include "lina/lina.h"

#include <cstdio>

extern "C" {
typedef unsigned long long CUdeviceptr;
int cuMemAlloc_v2(CUdeviceptr *, size_t);
int cuMemsetD32_v2(CUdeviceptr, unsigned, size_t);
int cuCtxSynchronize();
}

static void *deviceFloats(size_t count, float value) {
  CUdeviceptr p = 0;
  unsigned bits;
  __builtin_memcpy(&bits, &value, 4);
  cuMemAlloc_v2(&p, count * 4);
  cuMemsetD32_v2(p, bits, count);
  return reinterpret_cast<void *>(p);
}

int main() try {
  const int64_t B = 2, T = 1024, H = 4, K = 128, V = 128;
  // With the shape given, the kernel uses the schedule `lina tune` recorded
  // for this shape's bucket on this GPU, if any; the cubin comes from lina's
  // cache when an earlier process compiled it.
  lina::KernelOptions options;
  options.batch = B;
  options.seqLen = T;
  lina::Kernel kda = lina::Kernel::fromPreset("kda", K, V, H, H, "f32", options);
  const size_t tokens = size_t(B * T * H);
  lina::Inputs in = {};
  in.q = deviceFloats(tokens * K, 0.01f);
  in.k = deviceFloats(tokens * K, 0.02f);
  in.v = deviceFloats(tokens * V, 0.5f);
  in.g = static_cast<float *>(deviceFloats(tokens * K, -0.05f));
  in.beta = static_cast<float *>(deviceFloats(tokens, 0.5f));
  in.initial_state = static_cast<float *>(deviceFloats(B * H * K * V, 0.f));
  in.final_state = static_cast<float *>(deviceFloats(B * H * K * V, 0.f));
  in.o = deviceFloats(tokens * V, 0.f);
  in.batch = B;
  in.seq_len = T;
  kda.forward(in);
  cuCtxSynchronize();
  std::printf("kda forward %lldx%lldx%lldx%lld: ok\n", (long long)B,
              (long long)T, (long long)H, (long long)K);
  return 0;
} catch (const lina::Error &e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
