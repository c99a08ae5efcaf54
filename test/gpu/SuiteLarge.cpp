//===- SuiteLarge.cpp - --large: tensors past 2^31 elements -------------===//
//
// Part of lina. One gdn problem, fused, bf16, 1 x 1,048,576 x 32 x 128: q, k,
// v and o hold 2^32 elements each (8 GiB), so a 32-bit element offset would
// wrap halfway through. The regular path (a float64 Problem of everything)
// would need ~100 GiB of host memory, so this case draws every input from a
// counter-based hash: the device tensors are filled block by block, and the
// float64 reference is run only for a few value heads, rebuilt from the same
// function. It compares those heads' final states and their outputs over
// the first and the last tokens (the last lie past 2^32 - 2^19 elements).
//
//===----------------------------------------------------------------------===//
#include "SuiteLarge.h"
#include "Suite.h"

#include "lina/Runtime/ForwardChecks.h"

namespace lina::gpusuite {

namespace {

enum Tensor : uint64_t { TQ = 1, TK, TV, TG, TBeta, TState };

/// Uniform in [0, 1) from (tensor, index): splitmix64.
double uniform(Tensor t, int64_t index) {
  uint64_t z = (uint64_t(t) << 56) ^ uint64_t(index);
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return double(z >> 11) * 0x1.0p-53;
}

/// An input as the kernel reads it (bf16 for q, k, v; fp32 otherwise), as a
/// double. Gates as fla draws them: log gates logsigmoid(x), beta sigmoid(x).
double inputValue(Tensor t, int64_t index) {
  double u = uniform(t, index);
  switch (t) {
  case TQ:
  case TK:
  case TV:
    return reference::bf16ToFloat(reference::floatToBf16(float(2 * u - 1)));
  case TG:
    return float(-std::log1p(std::exp(-(4 * u - 2))));
  case TBeta:
    return float(1 / (1 + std::exp(-(4 * u - 2))));
  case TState:
    return float(2 * u - 1);
  }
  return 0;
}

/// Runs body(begin, end) over [0, n) on \p threads threads.
void parallelFor(int64_t n, unsigned threads,
                 const std::function<void(int64_t, int64_t)> &body) {
  std::vector<std::thread> pool;
  int64_t step = (n + threads - 1) / threads;
  for (int64_t begin = 0; begin < n; begin += step)
    pool.emplace_back(body, begin, std::min(n, begin + step));
  for (std::thread &t : pool)
    t.join();
}

Status copyToDevice(cuda::CUdeviceptr dst, const void *src, size_t bytes) {
  return LINA_CU(cuMemcpyHtoD_v2(dst, src, bytes));
}
Status copyToHost(void *dst, cuda::CUdeviceptr src, size_t bytes) {
  return LINA_CU(cuMemcpyDtoH_v2(dst, src, bytes));
}

/// Fills \p count elements of tensor \p t on the device, block by block,
/// with inputValue (or with a NaN pattern when \p poison).
Status fillDevice(cuda::CUdeviceptr dst, Tensor t, int64_t count, bool bf16,
                  bool poison, unsigned threads) {
  constexpr int64_t kBlock = int64_t(1) << 26;
  std::vector<uint16_t> half(bf16 ? size_t(std::min(count, kBlock)) : 0);
  std::vector<float> full(bf16 ? 0 : size_t(std::min(count, kBlock)));
  size_t elementSize = bf16 ? 2 : 4;
  for (int64_t start = 0; start < count; start += kBlock) {
    int64_t n = std::min(kBlock, count - start);
    parallelFor(n, threads, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        if (bf16)
          half[i] =
              poison ? 0x7FC0
                     : reference::floatToBf16(float(inputValue(t, start + i)));
        else
          full[i] = poison ? std::numeric_limits<float>::quiet_NaN()
                           : float(inputValue(t, start + i));
      }
    });
    const void *src = bf16 ? static_cast<const void *>(half.data())
                           : static_cast<const void *>(full.data());
    LINA_RETURN_IF_ERROR(copyToDevice(dst + uint64_t(start) * elementSize, src,
                                      size_t(n) * elementSize));
  }
  return Status();
}

} // namespace

Spec largeSpec(const LargeShape &shape) {
  Spec spec = findPreset("gdn")->spec;
  spec.keyDim = spec.valueDim = shape.dim;
  spec.heads = spec.valueHeads = shape.heads;
  spec.dtype = DType::BF16;
  spec.initialState = true;
  spec.finalState = true;
  return spec;
}

std::string largeName(const LargeShape &shape) {
  return "gdn/fused/bf16/d" + std::to_string(shape.dim) + "/B1.T" +
         std::to_string(shape.seqLen) + ".H" + std::to_string(shape.heads) +
         ".HV" + std::to_string(shape.heads) + "/init/large";
}

reference::Problem largeHeadProblem(const LargeShape &shape, int64_t hv) {
  const int64_t T = shape.seqLen, H = shape.heads, D = shape.dim;
  reference::Problem p;
  p.spec = largeSpec(shape);
  p.spec.heads = p.spec.valueHeads = 1;
  p.batch = 1;
  p.seqLen = T;
  p.q.resize(size_t(T * D));
  p.k.resize(size_t(T * D));
  p.v.resize(size_t(T * D));
  p.g.resize(size_t(T));
  p.beta.resize(size_t(T));
  for (int64_t t = 0; t < T; ++t) {
    // H == HV: value head hv reads q/k head hv. Device layout [1, T, H, D].
    for (int64_t d = 0; d < D; ++d) {
      int64_t at = (t * H + hv) * D + d;
      p.q[size_t(t * D + d)] = inputValue(TQ, at);
      p.k[size_t(t * D + d)] = inputValue(TK, at);
      p.v[size_t(t * D + d)] = inputValue(TV, at);
    }
    p.g[size_t(t)] = inputValue(TG, t * H + hv);
    p.beta[size_t(t)] = inputValue(TBeta, t * H + hv);
  }
  p.initialState.resize(size_t(D * D));
  for (int64_t i = 0; i < D * D; ++i)
    p.initialState[size_t(i)] = inputValue(TState, hv * D * D + i);
  return p;
}

std::vector<double> largeDeviceLayout(const LargeShape &shape, int tensor) {
  const int64_t T = shape.seqLen, H = shape.heads, D = shape.dim;
  Tensor t = Tensor(tensor);
  int64_t count = t == TState               ? H * D * D
                  : (t == TG || t == TBeta) ? T * H
                                            : T * H * D;
  std::vector<double> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    out[size_t(i)] = inputValue(t, i);
  return out;
}

std::string largeSelfTest() {
  LargeShape big;
  KernelPlan plan;
  plan.spec = largeSpec(big);
  plan.chunkSize = defaultSchedule(plan.spec).chunkSize;
  plan.tileV = defaultSchedule(plan.spec).tileV;
  if (!validate(plan.spec).empty())
    return "invalid spec: " + validate(plan.spec).front();
  if (!needs64BitIndex(plan, 1, big.seqLen, 0))
    return "the case does not need 64-bit indexing";

  LargeShape small;
  small.seqLen = 5;
  small.heads = 3;
  small.dim = 4;
  const int64_t T = small.seqLen, H = small.heads, D = small.dim;
  std::vector<std::vector<double>> device;
  for (int t = TQ; t <= int(TState); ++t)
    device.push_back(largeDeviceLayout(small, t));
  for (int64_t hv = 0; hv < H; ++hv) {
    reference::Problem p = largeHeadProblem(small, hv);
    if (std::string e = reference::checkShapes(p); !e.empty())
      return "head problem: " + e;
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t d = 0; d < D; ++d) {
        size_t at = size_t((t * H + hv) * D + d), mine = size_t(t * D + d);
        if (p.q[mine] != device[0][at] || p.k[mine] != device[1][at] ||
            p.v[mine] != device[2][at])
          return "q, k or v of head " + std::to_string(hv) + " differ";
      }
      if (p.g[size_t(t)] != device[3][size_t(t * H + hv)] ||
          p.beta[size_t(t)] != device[4][size_t(t * H + hv)])
        return "g or beta of head " + std::to_string(hv) + " differ";
    }
    for (int64_t i = 0; i < D * D; ++i)
      if (p.initialState[size_t(i)] != device[5][size_t(hv * D * D + i)])
        return "the initial state of head " + std::to_string(hv) + " differs";
  }
  // The draws are what the kernel can take: bf16-exact, gates in range.
  for (double x : device[0])
    if (x != reference::bf16ToFloat(reference::floatToBf16(float(x))))
      return "q is not bf16-exact";
  for (double x : device[3])
    if (!(x < 0 && x > -3))
      return "a log gate is out of (-3, 0)";
  for (double x : device[4])
    if (!(x > 0 && x < 1))
      return "a beta is out of (0, 1)";
  return "";
}

int runLarge(const Options &options, const std::string &whyNoGpu,
             std::atomic<const char *> &running) {
  LargeShape shape;
  const int64_t T = shape.seqLen, H = shape.heads, D = shape.dim;
  std::string name = largeName(shape);
  if (options.largeWgmma)
    name.replace(name.find("/fused/"), 7, "/fused+tv128w8+wgmma/");
  if (!whyNoGpu.empty()) {
    std::printf("SKIP: no GPU to run on: %s\n", whyNoGpu.c_str());
    return kExitSkip;
  }
  std::printf("lina-gpu-suite --large: %s (q, k, v, o: %" PRId64
              " elements each)\n",
              name.c_str(), T * H * D);
  std::fflush(stdout);
  auto failed = [&](const std::string &why) {
    std::printf("[1/1] FAIL %s\n  %s\ncases   0 passed, 1 failed, 1 total\n"
                "result  FAIL\n",
                name.c_str(), why.c_str());
    return kExitFail;
  };

  double start = now();
  Spec spec = largeSpec(shape);
  ScheduleOptions schedule = defaultSchedule(spec);
  schedule.strategy = Strategy::FusedScan;
  // The delta rule's wgmma pair: its prepare kernel's and scan's offsets
  // (k's rows, the records, the output) past 2^32 elements.
  if (options.largeWgmma)
    schedule = withWarpgroup(schedule);
  Expected<KernelPlan> plan = planChunkKernel(spec, schedule);
  if (!plan.ok())
    return failed("planChunkKernel: " + plan.message());
  if (!needs64BitIndex(*plan, 1, T, 0))
    return failed("internal: the large case does not need 64-bit indexing");
  Expected<ChunkKernel> kernel = ChunkKernel::load(*plan, options.device);
  if (!kernel.ok())
    return failed("ChunkKernel::load: " + kernel.message());

  // Reference threads start at once: they take longest.
  std::vector<std::future<reference::Result>> references;
  for (int64_t hv : shape.sampledHeads)
    references.push_back(std::async(std::launch::async, [shape, hv] {
      return reference::runRecurrent(largeHeadProblem(shape, hv));
    }));

  const size_t bf16Bytes = size_t(T * H * D) * 2;
  const size_t gateBytes = size_t(T * H) * 4,
               stateBytes = size_t(H * D * D) * 4;
  std::vector<cuda::DeviceBuffer> buffers;
  auto allocate = [&](size_t bytes, cuda::CUdeviceptr &out) -> Status {
    Expected<cuda::DeviceBuffer> b =
        cuda::DeviceBuffer::allocate(options.device, bytes);
    if (!b.ok())
      return b.status();
    out = b->pointer();
    buffers.push_back(std::move(*b));
    return Status();
  };
  cuda::CUdeviceptr q, k, v, o, g, beta, s0, s1;
  unsigned threads = options.threads;
  for (auto [ptr, bytes] : {std::pair{&q, bf16Bytes},
                            {&k, bf16Bytes},
                            {&v, bf16Bytes},
                            {&o, bf16Bytes},
                            {&g, gateBytes},
                            {&beta, gateBytes},
                            {&s0, stateBytes},
                            {&s1, stateBytes}})
    if (Status s = allocate(bytes, *ptr); !s.ok())
      return failed("allocating " + std::to_string(bytes) +
                    " bytes: " + s.message());
  Status filled = fillDevice(q, TQ, T * H * D, true, false, threads);
  if (filled.ok())
    filled = fillDevice(k, TK, T * H * D, true, false, threads);
  if (filled.ok())
    filled = fillDevice(v, TV, T * H * D, true, false, threads);
  if (filled.ok())
    filled = fillDevice(o, TV, T * H * D, true, /*poison=*/true, threads);
  if (filled.ok())
    filled = fillDevice(g, TG, T * H, false, false, threads);
  if (filled.ok())
    filled = fillDevice(beta, TBeta, T * H, false, false, threads);
  if (filled.ok())
    filled = fillDevice(s0, TState, H * D * D, false, false, threads);
  if (filled.ok())
    filled = fillDevice(s1, TState, H * D * D, false, /*poison=*/true, threads);
  if (!filled.ok())
    return failed("uploading the inputs: " + filled.message());
  double uploaded = now();

  auto host = [](cuda::CUdeviceptr p) {
    return reinterpret_cast<void *>(static_cast<uintptr_t>(p));
  };
  ForwardArgs args;
  args.q = host(q);
  args.k = host(k);
  args.v = host(v);
  args.o = host(o);
  args.g = static_cast<const float *>(host(g));
  args.beta = static_cast<const float *>(host(beta));
  args.initialState = static_cast<const float *>(host(s0));
  args.finalState = static_cast<float *>(host(s1));
  args.batch = 1;
  args.seqLen = T;
  running = name.c_str();
  Status launched = kernel->forward(args);
  if (launched.ok())
    launched = cuda::synchronizeDevice(options.device);
  running = nullptr;
  double gpuMs = (now() - uploaded) * 1e3;
  if (!launched.ok())
    return failed("the kernel: " + launched.message());

  // Outputs: the final states, and every head's output over the windows.
  std::vector<float> state(size_t(H * D * D));
  std::vector<uint16_t> headOut(size_t(shape.headWindow * H * D)),
      tailOut(size_t(shape.tailWindow * H * D));
  const int64_t tailStart = T - shape.tailWindow;
  Status read = copyToHost(state.data(), s1, stateBytes);
  if (read.ok())
    read = copyToHost(headOut.data(), o, headOut.size() * 2);
  if (read.ok())
    read = copyToHost(tailOut.data(), o + uint64_t(tailStart * H * D) * 2,
                      tailOut.size() * 2);
  if (!read.ok())
    return failed("downloading the outputs: " + read.message());

  size_t passedHeads = 0;
  double tol = tolerance(DType::BF16);
  for (size_t i = 0; i < shape.sampledHeads.size(); ++i) {
    int64_t hv = shape.sampledHeads[i];
    reference::Result ref = references[i].get();
    std::vector<double> gotOut, refOut, gotState, refState;
    auto window = [&](const std::vector<uint16_t> &got, int64_t first,
                      int64_t tokens) {
      for (int64_t t = 0; t < tokens; ++t)
        for (int64_t d = 0; d < D; ++d) {
          gotOut.push_back(
              reference::bf16ToFloat(got[size_t((t * H + hv) * D + d)]));
          refOut.push_back(ref.o[size_t((first + t) * D + d)]);
        }
    };
    window(headOut, 0, shape.headWindow);
    window(tailOut, tailStart, shape.tailWindow);
    for (int64_t j = 0; j < D * D; ++j) {
      gotState.push_back(state[size_t(hv * D * D + j)]);
      refState.push_back(ref.finalState[size_t(j)]);
    }
    double outError = reference::relativeError(gotOut, refOut);
    double stateError = reference::relativeError(gotState, refState);
    bool passed = outError <= tol && stateError <= tol;
    passedHeads += passed;
    std::printf("[%zu/%zu] %s  %s/hv%" PRId64 "  out %-8s  state %-8s  gpu "
                "%8.1f ms  ref %6.0f s\n",
                i + 1, shape.sampledHeads.size(), passed ? "PASS" : "FAIL",
                name.c_str(), hv, formatError(outError).c_str(),
                formatError(stateError).c_str(), gpuMs, now() - start);
    std::fflush(stdout);
  }
  size_t n = shape.sampledHeads.size();
  bool allPassed = passedHeads == n;
  std::printf("\ncases   %zu passed, %zu failed, %zu total in %.1f s "
              "(sampled value heads of one launch; tolerance %g)\n",
              passedHeads, n - passedHeads, n, now() - start, tol);
  std::printf("result  %s\n", allPassed ? "PASS" : "FAIL");
  return allPassed ? kExitPass : kExitFail;
}

} // namespace lina::gpusuite
