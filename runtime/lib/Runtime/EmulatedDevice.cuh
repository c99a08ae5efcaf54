//===- EmulatedDevice.cuh - A CUDA device as host C++ -------------*- C++
//-*-===//
//
// Part of lina. With LINA_EMULATE_GPU set, the runtime compiles a kernel's
// CUDA source with the host C++ compiler instead of NVRTC, with this text in
// front of it, and runs the kernels on the CPU (EmulatedDriver.cpp). It gives
// the source what NVRTC would: the CUDA keywords, threadIdx and blockIdx,
// barriers, warp shuffles, atomics and the math intrinsics, and the device
// library (Prelude.cuh) takes its LINA_HOST_EMULATION branches for what it
// writes in PTX (tensor-core products, ldmatrix, cp.async, conversions).
//
// A CTA's threads are fibers on one host thread, run in turn until each
// reaches a barrier: __syncthreads waits for the CTA, a warp collective (a
// shuffle, mma.sync, ldmatrix) for the warp, so every thread runs exactly the
// code the GPU runs, in an order the GPU could choose. CTAs run one after the
// other. Dynamic shared memory starts each CTA as NaN bytes with an
// inaccessible page after it, so a read before a write shows up in the
// results and a write past the end stops the process where it happens.
// Slow (a context switch a thread a barrier): tests keep problems small.
// On x86-64 a switch saves and restores only the stack pointer and what
// the ABI says a callee keeps (fiber_switch); glibc's swapcontext also
// saves the signal mask, two system calls a switch, which were 90 % of the
// emulated backward suite's time. Elsewhere, and under AddressSanitizer
// (which must see every stack switch: the decode tests build this file
// into their sanitized binaries), the threads are ucontext fibers.
//
// Hopper's machinery (wgmma, TMA, mbarriers, named barriers) follows in
// EmulatedHopper.cuh; the state it keeps is the CTA's, here.
//
//===----------------------------------------------------------------------===//

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__)
#if defined(__has_feature)
#if !__has_feature(address_sanitizer)
#define LINA_EMU_FAST_SWITCH 1
#endif
#else
#define LINA_EMU_FAST_SWITCH 1
#endif
#endif

#include <algorithm>
#include <functional>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <utility>

#define LINA_HOST_EMULATION 1

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __grid_constant__
// GNU's attribute, which may stand among the specifiers as CUDA's does.
#define __align__(n) __attribute__((aligned(n)))
// Static shared arrays are function-local statics: one copy, which the
// CTAs (run one at a time) take in turn, as they would an SM's.
#define __shared__ static

namespace lina_emu {

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
};

#ifdef LINA_EMU_FAST_SWITCH
/// Saves where this stack stands in *save and resumes the stack `to`
/// saved (or a new one, fiber_stack). The compiler keeps every register
/// it needs across the call (all but rsp and rbp are clobbered, the
/// operands' rdi and rsi as outputs; rbp is pushed), so the switch moves
/// two words. The red zone below rsp, which the caller's code may use
/// without moving rsp, is stepped over first.
inline void fiber_switch(void **save, void *to) {
  asm volatile("subq $128, %%rsp\n\t"
               "pushq %%rbp\n\t"
               "leaq lina_emu_resume%=(%%rip), %%rax\n\t"
               "pushq %%rax\n\t"
               "movq %%rsp, (%0)\n\t"
               "movq %1, %%rsp\n\t"
               "retq\n"
               "lina_emu_resume%=:\n\t"
               "popq %%rbp\n\t"
               "addq $128, %%rsp"
               : "+D"(save), "+S"(to)
               :
               : "rax", "rbx", "rcx", "rdx", "r8", "r9", "r10",
                 "r11", "r12", "r13", "r14", "r15", "xmm0", "xmm1", "xmm2",
                 "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9",
                 "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15",
                 "memory", "cc");
}

/// A stack pointer that fiber_switch resumes at `start` on the stack of
/// `bytes` at `base`: the first switch's retq pops `start`, leaving rsp as
/// a call would (8 below a 16-byte boundary, a return address that is
/// never used above it).
inline void *fiber_stack(char *base, size_t bytes, void (*start)()) {
  uintptr_t top = (uintptr_t)(base + bytes) & ~uintptr_t(15);
  void **sp = (void **)top;
  *--sp = nullptr;
  *--sp = (void *)start;
  return sp;
}
#endif

/// One emulated thread.
struct Fiber {
#ifdef LINA_EMU_FAST_SWITCH
  void *sp = nullptr;
#else
  ucontext_t context;
#endif
  char *stack = nullptr;
  bool done = false;
  dim3 index;
};

/// A barrier's state: arrivals, the threads still running, a generation
/// that changes when it opens, and the OR of the arrivals' predicates
/// (__syncthreads_or), which it gives when it opens.
struct Barrier {
  int arrived = 0;
  int alive = 0;
  unsigned long long generation = 0;
  int orPending = 0, orResult = 0;
};

/// A named barrier (bar.sync / bar.arrive id, count): the count comes with
/// each arrival, so it opens when that many have arrived.
struct NamedBarrier {
  int arrived = 0;
  unsigned long long generation = 0;
};

/// A copy issued to shared memory that completes its bytes on an mbarrier
/// (TMA, bulk): it lands when a thread next waits on that barrier, and its
/// destination holds NaN bytes until then.
struct CopyInFlight {
  std::function<void()> land;
  unsigned bytes = 0;
};

/// An mbarrier's state (the PTX ISA's: the arrivals a phase expects, those
/// still pending, the transaction bytes still owed, the phase's parity),
/// kept beside the shared-memory word that names it, and its copies in
/// flight.
struct Mbarrier {
  int expected = 0, pending = 0;
  long long bytes = 0;
  unsigned phase = 0;
  std::vector<CopyInFlight> inFlight;
};

/// A warpgroup product issued and not yet retired: wgmma.mma_async runs
/// asynchronously, and its accumulators are its results only after the
/// wgmma.wait_group that retires its group. Its shared-memory operands are
/// read when it retires (the latest the GPU may read them), its register
/// operand when issued; each thread's accumulators hold NaN in between.
struct PendingProduct {
  int n = 0, accumulate = 0;
  unsigned long long a = 0, b = 0;
  bool aInRegisters = false, transA = false, transB = false, f16 = false;
  float *d[128] = {};
  unsigned aWords[128][4] = {};
  /// An earlier pending product writes the same accumulators: D's input is
  /// its result; else the accumulators' values when issued (`input`).
  bool chained = false;
  std::vector<float> input;
};

/// A warpgroup's products: those issued since its last commit, and the
/// committed groups, oldest first.
struct ProductQueue {
  std::vector<PendingProduct> open;
  std::vector<std::vector<PendingProduct>> committed;
};

/// The CTA being run and everything its threads share.
struct Cta {
  dim3 block, grid, blockIndex;
  Fiber *fibers = nullptr;
  int running = 0;
#ifdef LINA_EMU_FAST_SWITCH
  void *scheduler = nullptr;
#else
  ucontext_t scheduler;
#endif
  Barrier cta;
  Barrier warps[32];
  Barrier warpgroups[8];
  NamedBarrier named[16];
  std::unordered_map<const void *, Mbarrier> mbarriers;
  ProductQueue products[8];
  /// Each lane's words for a warp collective.
  unsigned long long slots[32][32][8];
  unsigned char *shared = nullptr;
  bool trapped = false;
  unsigned long long progress = 0;
  void (*entry)(void **) = nullptr;
  void **args = nullptr;
};

inline thread_local Cta *current = nullptr;

inline Fiber &self() { return current->fibers[current->running]; }
inline int lane() { return current->running % 32; }
inline int warp() { return current->running / 32; }

/// Back to the scheduler, which resumes the next thread.
inline void yield() {
  Fiber &f = self();
#ifdef LINA_EMU_FAST_SWITCH
  fiber_switch(&f.sp, current->scheduler);
#else
  swapcontext(&f.context, &current->scheduler);
#endif
}

/// Opens \p b: whoever completes it, the last arrival or a thread
/// exiting.
inline void open(Barrier &b) {
  b.arrived = 0;
  b.orResult = b.orPending;
  b.orPending = 0;
  ++b.generation;
}

/// Waits until every running thread of \p b has arrived; the arrival that
/// completes it first runs \p last (a collective's work over every
/// thread's deposit).
template <typename F> inline void gather(Barrier &b, F &&last) {
  unsigned long long mine = b.generation;
  ++current->progress;
  if (++b.arrived == b.alive) {
    last();
    open(b);
    return;
  }
  while (b.generation == mine && !current->trapped)
    yield();
}
/// Waits until every running thread of \p b has arrived.
inline void wait(Barrier &b) {
  gather(b, [] {});
}

inline void syncthreads() { wait(current->cta); }
inline int syncthreads_or(int predicate) {
  current->cta.orPending |= predicate != 0;
  wait(current->cta);
  return current->cta.orResult;
}
inline void syncwarp() { wait(current->warps[warp()]); }

inline unsigned long long *my_slot() { return current->slots[warp()][lane()]; }
inline const unsigned long long *slot_of(int l) {
  return current->slots[warp()][l];
}

/// The value \p v of lane \p src (its own where src is out of the warp).
template <typename T> inline T shuffle(T v, int src) {
  static_assert(sizeof(T) <= 8, "a shuffle moves one register");
  memcpy(my_slot(), &v, sizeof(T));
  syncwarp();
  T out = v;
  if (src >= 0 && src < 32)
    memcpy(&out, slot_of(src), sizeof(T));
  syncwarp();
  return out;
}

[[noreturn]] inline void trap() {
  current->trapped = true;
  for (;;)
    yield();
}

inline float bits_to_float(unsigned u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
inline unsigned float_to_bits(float f) {
  unsigned u;
  memcpy(&u, &f, 4);
  return u;
}

/// cvt.rn.bf16.f32: round to nearest even, NaN kept quiet.
inline unsigned short to_bf16(float f) {
  unsigned u = float_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return (unsigned short)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
inline float from_bf16(unsigned short h) {
  return bits_to_float(unsigned(h) << 16);
}

/// cvt.rn.f16.f32: round to nearest even, overflow to infinity,
/// subnormals kept.
inline unsigned short to_f16(float f) {
  unsigned u = float_to_bits(f);
  unsigned sign = (u >> 16) & 0x8000u;
  unsigned abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u)
    return (unsigned short)(sign | 0x7e00u);
  if (abs >= 0x477ff000u) // rounds to 65520 or more
    return (unsigned short)(sign | 0x7c00u);
  if (abs < 0x38800000u) { // below the smallest normal half, 2^-14
    // The value in units of 2^-24, rounded to nearest even.
    float scaled = bits_to_float(abs) * 16777216.0f;
    float r = nearbyintf(scaled);
    return (unsigned short)(sign | (unsigned)r);
  }
  unsigned mantissa = abs & 0x7fffffu;
  unsigned exponent = (abs >> 23) - 127 + 15;
  unsigned h = (exponent << 10) | (mantissa >> 13);
  unsigned rest = mantissa & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u)))
    ++h;
  return (unsigned short)(sign | h);
}
inline float from_f16(unsigned short h) {
  unsigned sign = (unsigned(h) & 0x8000u) << 16;
  unsigned exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
  if (exponent == 0)
    return (sign ? -1.0f : 1.0f) * float(mantissa) * (1.0f / 16777216.0f);
  if (exponent == 31)
    return bits_to_float(sign | 0x7f800000u | (mantissa << 13));
  return bits_to_float(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

inline float half_of(unsigned word, int high, bool f16) {
  unsigned short h = (unsigned short)(high ? word >> 16 : word & 0xffffu);
  return f16 ? from_f16(h) : from_bf16(h);
}

/// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}: the warp's fragments
/// gathered, each lane summing its own four results (in the fragment
/// layout of the PTX ISA, "Matrix Fragments for mma.m16n8k16").
inline void mma_m16n8k16(float (&d)[4], const unsigned (&a)[4],
                         const unsigned (&b)[2], bool f16) {
  unsigned long long *mine = my_slot();
  for (int i = 0; i < 4; ++i)
    mine[i] = a[i];
  mine[4] = b[0];
  mine[5] = b[1];
  syncwarp();
  int l = lane(), group = l / 4, pair = l % 4;
  for (int out = 0; out < 4; ++out) {
    int row = group + (out >= 2 ? 8 : 0), col = 2 * pair + (out & 1);
    float sum = 0.0f;
    for (int k = 0; k < 16; ++k) {
      // A (row, k): lane (row % 8) * 4 + (k % 8) / 2, register
      // (row >= 8) + 2 (k >= 8), half k % 2.
      int aLane = (row % 8) * 4 + (k % 8) / 2;
      int aReg = (row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0);
      // B (k, col): lane col * 4 + (k % 8) / 2, register k >= 8.
      int bLane = col * 4 + (k % 8) / 2;
      int bReg = 4 + (k >= 8 ? 1 : 0);
      sum += half_of((unsigned)slot_of(aLane)[aReg], k % 2, f16) *
             half_of((unsigned)slot_of(bLane)[bReg], k % 2, f16);
    }
    d[out] += sum;
  }
  syncwarp();
}

/// ldmatrix.sync.aligned.m8n8.{x2,x4}[.trans].shared.b16: lane 8 i + j
/// names row j of matrix i; register i of lane l holds row l / 4, columns
/// 2 (l % 4) and 2 (l % 4) + 1 of matrix i (of its transpose with trans).
inline void ldmatrix(unsigned *r, int matrices, const void *p, bool trans) {
  my_slot()[0] = (unsigned long long)(uintptr_t)p;
  syncwarp();
  int l = lane();
  for (int i = 0; i < matrices; ++i) {
    unsigned short half[2];
    for (int e = 0; e < 2; ++e) {
      int row = trans ? 2 * (l % 4) + e : l / 4;
      int col = trans ? l / 4 : 2 * (l % 4) + e;
      const unsigned char *rowAt =
          (const unsigned char *)(uintptr_t)slot_of(i * 8 + row)[0];
      memcpy(&half[e], rowAt + 2 * col, 2);
    }
    r[i] = unsigned(half[0]) | (unsigned(half[1]) << 16);
  }
  syncwarp();
}

/// A vector access of `bytes` bytes at `at` (the address the GPU accesses:
/// `to` for a store, `from` for a load), which traps where the GPU's would
/// fault: at an address not `bytes`-aligned.
inline void vector_copy(void *to, const void *from, int bytes, const void *at) {
  if ((uintptr_t)at % bytes != 0)
    trap();
  memcpy(to, from, bytes);
}

/// cp.async with a source size: `bytes` land, those past `source` zero. The
/// copy is done when issued, which the commit/wait pairs allow.
inline void copy_async(void *dst, const void *src, int bytes, int source) {
  if (source > 0)
    memcpy(dst, src, source);
  if (source < bytes)
    memset((char *)dst + source, 0, bytes - source);
}

template <typename T> T *dynamic_shared() {
  return reinterpret_cast<T *>(current->shared);
}

/// Calls a kernel with its parameters from a cuLaunchKernel array.
template <typename... A, size_t... I>
void invoke_with(void (*kernel)(A...), void **args, std::index_sequence<I...>) {
  kernel(
      *static_cast<std::remove_cv_t<std::remove_reference_t<A>> *>(args[I])...);
}
template <typename... A> void invoke(void (*kernel)(A...), void **args) {
  invoke_with(kernel, args, std::index_sequence_for<A...>{});
}

inline void fiber_main() {
  current->entry(current->args);
  Fiber &f = self();
  f.done = true;
  ++current->progress;
  // An exited thread no longer holds a barrier back.
  auto leave = [](Barrier &b) {
    if (--b.alive > 0 && b.arrived == b.alive)
      open(b);
  };
  leave(current->cta);
  leave(current->warps[warp()]);
  leave(current->warpgroups[warp() / 4]);
}

#ifdef LINA_EMU_FAST_SWITCH
/// Where a fiber starts: it runs the thread, then hands the scheduler back
/// for good (a finished fiber is not resumed; ucontext's uc_link does this
/// for the other build).
[[noreturn]] inline void fiber_start() {
  fiber_main();
  for (;;)
    yield();
}
#endif

} // namespace lina_emu

#define threadIdx (::lina_emu::self().index)
#define blockIdx (::lina_emu::current->blockIndex)
#define blockDim (::lina_emu::current->block)
#define gridDim (::lina_emu::current->grid)

inline void __syncthreads() { lina_emu::syncthreads(); }
inline int __syncthreads_or(int p) { return lina_emu::syncthreads_or(p); }
inline void __syncwarp(unsigned = 0xffffffffu) { lina_emu::syncwarp(); }
[[noreturn]] inline void __trap() { lina_emu::trap(); }
template <typename T> inline T __shfl_sync(unsigned, T v, int src, int w = 32) {
  int l = lina_emu::lane();
  return lina_emu::shuffle(v, (l / w) * w + src % w);
}
template <typename T>
inline T __shfl_xor_sync(unsigned, T v, int mask, int w = 32) {
  int l = lina_emu::lane(), to = l ^ mask;
  return lina_emu::shuffle(v, to / w == l / w ? to : l);
}
template <typename T>
inline T __shfl_up_sync(unsigned, T v, unsigned delta, int w = 32) {
  int l = lina_emu::lane(), from = l - int(delta);
  return lina_emu::shuffle(v, from >= (l / w) * w ? from : l);
}
template <typename T>
inline T __shfl_down_sync(unsigned, T v, unsigned delta, int w = 32) {
  int l = lina_emu::lane(), from = l + int(delta);
  return lina_emu::shuffle(v, from < (l / w + 1) * w ? from : l);
}
inline int __any_sync(unsigned, int p) {
  int any = p != 0;
  for (int o = 16; o > 0; o /= 2)
    any |= __shfl_xor_sync(0xffffffffu, any, o);
  return any;
}
// One host thread runs a CTA's threads in turn: an add is atomic.
template <typename T> inline T atomicAdd(T *p, T v) {
  T old = *p;
  *p = old + v;
  return old;
}
template <typename T> inline T atomicOr(T *p, T v) {
  T old = *p;
  *p = old | v;
  return old;
}
// CUDA's min and max take any two arithmetic values.
template <typename A, typename B>
inline std::common_type_t<A, B> min(A a, B b) {
  return b < a ? b : a;
}
template <typename A, typename B>
inline std::common_type_t<A, B> max(A a, B b) {
  return a < b ? b : a;
}
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return sqrtf(x); }
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __saturatef(float x) { return fminf(fmaxf(x, 0.0f), 1.0f); }
inline int __float2int_rz(float x) { return (int)x; }
inline float __int2float_rn(int x) { return (float)x; }
inline float __uint_as_float(unsigned u) { return lina_emu::bits_to_float(u); }
inline unsigned __float_as_uint(float f) { return lina_emu::float_to_bits(f); }
inline float __int_as_float(int i) {
  return lina_emu::bits_to_float((unsigned)i);
}
inline int __float_as_int(float f) { return (int)lina_emu::float_to_bits(f); }
inline size_t __cvta_generic_to_shared(const void *p) {
  return (size_t)(uintptr_t)p;
}

/// A kernel's entry for the emulated driver: `name__emulated(args)`.
#define LINA_KERNEL_ENTRY(name)                                                \
  extern "C" void name##__emulated(void **args) {                              \
    ::lina_emu::invoke(name, args);                                            \
  }

namespace lina_emu {

/// Every launch of this module runs alone (the shared buffers are the
/// module's).
inline std::mutex launchMutex;

/// Memory with an inaccessible page after it (and the allocation's start
/// in \p base, for munmap).
inline unsigned char *guarded(size_t bytes, void *&base, size_t &mapped) {
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  size_t rounded = (bytes + page - 1) / page * page;
  mapped = rounded + page;
  base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED)
    return nullptr;
  mprotect((char *)base + rounded, page, PROT_NONE);
  // The buffer ends where the guard page starts.
  return (unsigned char *)base + (rounded - bytes);
}

} // namespace lina_emu

/// Runs \p entry over the grid: 0 when every CTA finished, 1 when a thread
/// trapped, 2 when the threads of a CTA wait on each other forever (a
/// barrier some never reach), 3 when memory ran out. \p message says which
/// CTA. Inline (one definition however many of a program's sources include
/// this, as tests do) and kept where nothing calls it (the driver finds it
/// in a kernel's shared object by name).
extern "C" __attribute__((used)) inline int
lina_emulation_launch(void (*entry)(void **), void **args, unsigned gx,
                      unsigned gy, unsigned gz, unsigned bx, unsigned by,
                      unsigned bz, unsigned sharedBytes, char *message,
                      size_t messageSize) {
  using namespace lina_emu;
  std::lock_guard<std::mutex> lock(launchMutex);
  const int threads = int(bx * by * bz);
  const size_t stackBytes = 256 * 1024;
  void *sharedBase = nullptr, *stacksBase = nullptr;
  size_t sharedMapped = 0, stacksMapped = 0;
  unsigned char *shared =
      guarded(sharedBytes ? sharedBytes : 16, sharedBase, sharedMapped);
  unsigned char *stacks =
      guarded(stackBytes * threads, stacksBase, stacksMapped);
  // Each thread's stack starts with an inaccessible page: one that
  // overflows stops the process instead of writing into the next's.
  if (stacks) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (int t = 0; t < threads; ++t)
      mprotect(stacks + size_t(t) * stackBytes, page, PROT_NONE);
  }
  static Cta cta; // large (the warp slots): one per module
  // LINA_EMULATION_ORDER=reverse runs each step's threads from the last:
  // a read that no barrier orders after another thread's write sees the
  // old value in one order and the new in the other, so a kernel whose
  // results change with the order has a race.
  const char *order = getenv("LINA_EMULATION_ORDER");
  const bool reverse = order && strcmp(order, "reverse") == 0;
  Fiber *fibers = new Fiber[threads];
  int result = 0;
  if (!shared || !stacks) {
    snprintf(message, messageSize, "no memory for %d emulated threads",
             threads);
    result = 3;
  }
  for (unsigned z = 0; z < gz && result == 0; ++z)
    for (unsigned y = 0; y < gy && result == 0; ++y)
      for (unsigned x = 0; x < gx && result == 0; ++x) {
        cta.block = {bx, by, bz};
        cta.grid = {gx, gy, gz};
        cta.blockIndex = {x, y, z};
        cta.fibers = fibers;
        cta.cta = Barrier{0, threads};
        for (int w = 0; w < 32; ++w)
          cta.warps[w] =
              Barrier{0, std::min(32, std::max(0, threads - w * 32))};
        for (int g = 0; g < 8; ++g)
          cta.warpgroups[g] =
              Barrier{0, std::min(128, std::max(0, threads - g * 128))};
        for (NamedBarrier &b : cta.named)
          b = NamedBarrier{};
        cta.mbarriers.clear();
        for (ProductQueue &q : cta.products)
          q = ProductQueue{};
        cta.shared = shared;
        cta.trapped = false;
        cta.entry = entry;
        cta.args = args;
        memset(shared, 0xff, sharedBytes); // NaN in every float
        for (int t = 0; t < threads; ++t) {
          Fiber &f = fibers[t];
          f.done = false;
          f.index = {unsigned(t) % bx, unsigned(t) / bx % by,
                     unsigned(t) / (bx * by)};
          f.stack = (char *)stacks + size_t(t) * stackBytes;
#ifdef LINA_EMU_FAST_SWITCH
          f.sp = fiber_stack(f.stack, stackBytes, fiber_start);
#else
          getcontext(&f.context);
          f.context.uc_stack.ss_sp = f.stack;
          f.context.uc_stack.ss_size = stackBytes;
          f.context.uc_link = &cta.scheduler;
          makecontext(&f.context, (void (*)())fiber_main, 0);
#endif
        }
        current = &cta;
        int finished = 0;
        while (finished < threads) {
          unsigned long long before = cta.progress;
          finished = 0;
          for (int i = 0; i < threads; ++i) {
            int t = reverse ? threads - 1 - i : i;
            if (fibers[t].done) {
              ++finished;
              continue;
            }
            cta.running = t;
#ifdef LINA_EMU_FAST_SWITCH
            fiber_switch(&cta.scheduler, fibers[t].sp);
#else
            swapcontext(&cta.scheduler, &fibers[t].context);
#endif
            if (cta.trapped)
              break;
          }
          if (cta.trapped) {
            snprintf(message, messageSize,
                     "__trap() in CTA (%u, %u, %u), thread %d", x, y, z,
                     cta.running);
            result = 1;
            break;
          }
          if (finished < threads && cta.progress == before) {
            snprintf(message, messageSize,
                     "CTA (%u, %u, %u): its threads wait at barriers that "
                     "some never reach",
                     x, y, z);
            result = 2;
            break;
          }
        }
        current = nullptr;
      }
  delete[] fibers;
  if (sharedBase)
    munmap(sharedBase, sharedMapped);
  if (stacksBase)
    munmap(stacksBase, stacksMapped);
  return result;
}
