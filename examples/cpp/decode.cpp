// decode.cpp - serving steps of Gated DeltaNet through lina's C++ API:
// prefill each prompt with the chunk kernel into a state pool, then decode
// one token per sequence per step against that pool, updated in place.
//
// Build: c++ -std=c++17 examples/cpp/decode.cpp -Iapi/include -Lbuild/lib \
//          -llina -lcuda -Wl,-rpath,$PWD/build/lib -o decode
// As in forward.cpp, buffers come from the driver API and hold constants;
// a framework passes its own device pointers and stream. The decode step
// is one launch with no allocation or synchronisation, so a serving loop
// can capture it in a CUDA graph.
#include "lina/lina.h"

#include <cstdio>
#include <vector>

extern "C" {
typedef unsigned long long CUdeviceptr;
int cuMemAlloc_v2(CUdeviceptr *, size_t);
int cuMemsetD32_v2(CUdeviceptr, unsigned, size_t);
int cuMemcpyHtoD_v2(CUdeviceptr, const void *, size_t);
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
  const int64_t B = 3, prompt = 500, H = 4, HV = 8, K = 128, V = 128;
  const int64_t slots = 8; // the pool holds more requests than this batch
  lina::Kernel prefill = lina::Kernel::fromPreset("gdn", K, V, H, HV, "f32");
  lina::DecodeKernel decode =
      lina::DecodeKernel::fromPreset("gdn", K, V, H, HV, "f32");

  // Prefill: the prompts' final states, [B, HV, K, V], written straight
  // into slots 0..B-1 of the pool (slot b is batch row b here).
  float *pool = static_cast<float *>(deviceFloats(slots * HV * K * V, 0.f));
  size_t tokens = size_t(B * prompt);
  lina::Inputs in = {};
  in.q = deviceFloats(tokens * H * K, 0.01f);
  in.k = deviceFloats(tokens * H * K, 0.02f);
  in.v = deviceFloats(tokens * HV * V, 0.5f);
  in.g = static_cast<float *>(deviceFloats(tokens * HV, -0.05f));
  in.beta = static_cast<float *>(deviceFloats(tokens * HV, 0.5f));
  in.o = deviceFloats(tokens * HV * V, 0.f);
  in.final_state = pool;
  in.batch = B;
  in.seq_len = prompt;
  // gdn's preset reads an initial state: start from zero.
  in.initial_state = static_cast<float *>(deviceFloats(B * HV * K * V, 0.f));
  prefill.forward(in);

  // Decode: sequence b lives in slot idx[b]; -1 would mean "no state".
  std::vector<int32_t> idx = {0, 1, 2};
  CUdeviceptr indices = 0;
  cuMemAlloc_v2(&indices, idx.size() * 4);
  cuMemcpyHtoD_v2(indices, idx.data(), idx.size() * 4);
  lina::DecodeInputs step = {};
  step.q = deviceFloats(B * H * K, 0.01f);
  step.k = deviceFloats(B * H * K, 0.02f);
  step.v = deviceFloats(B * HV * V, 0.5f);
  step.g = static_cast<float *>(deviceFloats(B * HV, -0.05f));
  step.beta = static_cast<float *>(deviceFloats(B * HV, 0.5f));
  step.o = deviceFloats(B * HV * V, 0.f);
  step.state = pool;
  step.state_indices = reinterpret_cast<const int32_t *>(indices);
  step.num_slots = slots;
  step.batch = B;
  step.seq_len = 1;
  for (int i = 0; i < 16; ++i)
    decode.forward(step); // a real loop writes the next token's q, k, v first
  cuCtxSynchronize();
  std::printf("gdn: prefilled %lld tokens, decoded 16 steps of %lld sequences "
              "(%lld value columns per warp)\n",
              (long long)prompt, (long long)B,
              (long long)decode.warpColumns(B));
  return 0;
} catch (const lina::Error &e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 1;
}
