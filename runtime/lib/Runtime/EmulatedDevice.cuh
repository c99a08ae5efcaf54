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
//
// Hopper's machinery runs here too (sm_90a sources), as asynchronous as
// the PTX ISA lets it be, so a kernel that reads too early sees it: a
// warpgroup product (wgmma) is one collective of the warpgroup's 128
// threads, queued when the last of them issues it and computed at the
// wgmma.wait_group that retires its group, its shared-memory operands read
// then through their descriptors (the 128-byte swizzle or none), its
// accumulators NaN until then; a TMA box or bulk copy fills its
// destination with NaN when issued and lands when a thread next waits on
// its mbarrier; mbarriers count arrivals and bytes and flip their phase;
// named barriers (bar.sync, bar.arrive) count the threads they are given.
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

/// One emulated thread.
struct Fiber {
  ucontext_t context;
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
  ucontext_t scheduler;
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
  swapcontext(&f.context, &current->scheduler);
}

/// Opens \p b: whoever completes it, the last arrival or a thread
/// exiting.
inline void open(Barrier &b) {
  b.arrived = 0;
  b.orResult = b.orPending;
  b.orPending = 0;
  ++b.generation;
}

/// Waits until every running thread of \p b has arrived.
inline void wait(Barrier &b) {
  unsigned long long mine = b.generation;
  ++current->progress;
  if (++b.arrived == b.alive) {
    open(b);
    return;
  }
  while (b.generation == mine && !current->trapped)
    yield();
}

inline void syncthreads() { wait(current->cta); }
inline int syncthreads_or(int predicate) {
  current->cta.orPending |= predicate != 0;
  wait(current->cta);
  return current->cta.orResult;
}
inline void syncwarp() { wait(current->warps[warp()]); }

/// Waits at \p b like wait(), but the arrival that completes it first runs
/// \p last (a collective's work over every thread's deposit).
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

/// cp.async with a source size: `bytes` land, those past `source` zero. The
/// copy is done when issued, which the commit/wait pairs allow.
inline void copy_async(void *dst, const void *src, int bytes, int source) {
  if (source > 0)
    memcpy(dst, src, source);
  if (source < bytes)
    memset((char *)dst + source, 0, bytes - source);
}

/// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32: fp32 operands of
/// which the tensor core reads the top 19 bits (the low 13 dropped).
inline void mma_m16n8k8_tf32(float (&d)[4], const unsigned (&a)[4],
                             const unsigned (&b)[2]) {
  unsigned long long *mine = my_slot();
  for (int i = 0; i < 4; ++i)
    mine[i] = a[i] & 0xffffe000u;
  mine[4] = b[0] & 0xffffe000u;
  mine[5] = b[1] & 0xffffe000u;
  syncwarp();
  int l = lane(), group = l / 4, pair = l % 4;
  for (int out = 0; out < 4; ++out) {
    int row = group + (out >= 2 ? 8 : 0), col = 2 * pair + (out & 1);
    float sum = 0.0f;
    for (int k = 0; k < 8; ++k) {
      // A (row, k): lane (row % 8) * 4 + k % 4, register (row >= 8) +
      // 2 (k >= 4); B (k, col): lane col * 4 + k % 4, register k >= 4.
      int aLane = (row % 8) * 4 + k % 4, aReg = (row >= 8) + 2 * (k >= 4);
      int bLane = col * 4 + k % 4, bReg = 4 + (k >= 4);
      sum += bits_to_float((unsigned)slot_of(aLane)[aReg]) *
             bits_to_float((unsigned)slot_of(bLane)[bReg]);
    }
    d[out] += sum;
  }
  syncwarp();
}

/// stmatrix.sync.aligned.m8n8.{x2,x4}[.trans].shared.b16, ldmatrix's
/// inverse: lane 8 i + j names row j of matrix i, and register i of lane l
/// holds row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 of matrix i (of its
/// transpose with trans).
inline void stmatrix(void *p, const unsigned *r, int matrices, bool trans) {
  unsigned long long *mine = my_slot();
  mine[0] = (unsigned long long)(uintptr_t)p;
  for (int i = 0; i < matrices; ++i)
    mine[1 + i] = r[i];
  syncwarp();
  int l = lane();
  if (l < 8 * matrices) {
    int i = l / 8, row = l % 8;
    unsigned char *rowAt = (unsigned char *)(uintptr_t)mine[0];
    for (int col = 0; col < 8; ++col) {
      // The element (row, col) of the matrix in memory is element (col,
      // row) of the transposed fragment.
      int fr = trans ? col : row, fc = trans ? row : col;
      unsigned word = (unsigned)slot_of(fr * 4 + fc / 2)[1 + i];
      unsigned short h = (unsigned short)(fc % 2 ? word >> 16 : word);
      memcpy(rowAt + 2 * col, &h, 2);
    }
  }
  syncwarp();
}

/// A 16-byte store to global memory, which traps where the GPU's would
/// fault (an address not 16-byte aligned).
inline void store_words(void *to, const unsigned (&w)[4]) {
  if ((uintptr_t)to % 16 != 0)
    trap();
  memcpy(to, w, 16);
}

/// Named barrier \p id of \p count threads: bar.sync waits until the count
/// has arrived, bar.arrive (\p wait false) counts without waiting.
inline void named_barrier(int id, int count, bool wait) {
  NamedBarrier &b = current->named[id & 15];
  unsigned long long mine = b.generation;
  ++current->progress;
  if (++b.arrived >= count) {
    b.arrived = 0;
    ++b.generation;
    return;
  }
  while (wait && b.generation == mine && !current->trapped)
    yield();
}

/// The mbarrier at \p bar, which must have been initialised in this CTA.
inline Mbarrier &mbarrier(const void *bar) {
  auto found = current->mbarriers.find(bar);
  if (found == current->mbarriers.end()) {
    fprintf(stderr, "lina emulated device: an mbarrier used before "
                    "mbarrier.init\n");
    trap();
  }
  return found->second;
}
/// A phase completes when its arrivals and its bytes are all in. Every
/// arrival and every byte count is progress (the launch's deadlock check
/// sees a round without any).
inline void mbarrier_settle(Mbarrier &m) {
  ++current->progress;
  if (m.pending > 0 || m.bytes != 0)
    return;
  m.phase ^= 1u;
  m.pending = m.expected;
}
inline void mbarrier_init(void *bar, unsigned count) {
  memset(bar, 0, 8);
  current->mbarriers[bar] = Mbarrier{int(count), int(count), 0, 0};
}
/// mbarrier.arrive.expect_tx: the bytes the phase now also waits for, then
/// an arrival.
inline void mbarrier_arrive_expect(void *bar, unsigned bytes) {
  Mbarrier &m = mbarrier(bar);
  m.bytes += bytes;
  --m.pending;
  mbarrier_settle(m);
}
inline void mbarrier_complete_bytes(void *bar, unsigned bytes) {
  Mbarrier &m = mbarrier(bar);
  m.bytes -= bytes;
  mbarrier_settle(m);
}
/// The copies in flight on \p m land and complete their bytes.
inline void mbarrier_land(Mbarrier &m) {
  std::vector<CopyInFlight> copies = std::move(m.inFlight);
  m.inFlight.clear();
  for (CopyInFlight &c : copies) {
    c.land();
    m.bytes -= c.bytes;
    mbarrier_settle(m);
  }
}
/// mbarrier.try_wait.parity: whether the phase of parity \p parity has
/// completed (the current phase has the other parity), after the copies in
/// flight on it land. A thread that must wait lets the others run first.
inline bool mbarrier_try_wait(void *bar, unsigned parity) {
  Mbarrier &m = mbarrier(bar);
  mbarrier_land(m);
  if (m.phase != (parity & 1u))
    return true;
  yield();
  mbarrier_land(m);
  return m.phase != (parity & 1u);
}
/// A copy of \p bytes to \p dst, done by \p land, in flight on \p bar.
inline void mbarrier_copy(void *bar, void *dst, unsigned bytes,
                          std::function<void()> land) {
  Mbarrier &m = mbarrier(bar);
  memset(dst, 0xff, bytes); // NaN until it lands
  m.inFlight.push_back(CopyInFlight{std::move(land), bytes});
  ++current->progress;
}

/// cp.async.bulk global -> shared, counted on \p bar.
inline void bulk_copy(void *dst, const void *src, unsigned bytes, void *bar) {
  if ((uintptr_t)dst % 16 || (uintptr_t)src % 16 || bytes % 16)
    trap(); // the PTX ISA's 16-byte alignment and size
  mbarrier_copy(bar, dst, bytes, [=] { memcpy(dst, src, bytes); });
}

/// The tensor map the emulated driver's cuTensorMapEncodeTiled writes (in
/// the CUtensorMap's 128 bytes): a tag, the global address, the rank, each
/// dimension's extent and byte stride, the box, the element size and the
/// swizzle's span in bytes (0: none).
struct TensorMap {
  unsigned long long tag, address;
  unsigned long long dims[5], strides[5];
  unsigned box[5];
  unsigned rank, elementBytes, swizzleBytes;
};
static_assert(sizeof(TensorMap) <= 128, "a CUtensorMap's 128 bytes");
constexpr unsigned long long kTensorMapTag = 0x70616d2d616e696cull; // lina-map

/// The byte at \p address as the swizzle of \p span bytes moves it: the
/// 16-byte piece's index XOR the row's (address bits 7 and up) within the
/// span's pattern (the 128-byte swizzle: bits 4-6 XOR bits 7-9).
inline uintptr_t swizzled(uintptr_t address, unsigned span) {
  if (span == 0)
    return address;
  uintptr_t pieces = span / 16 - 1; // 7, 3 or 1
  return address ^ (((address >> 7) & pieces) << 4);
}

/// cp.async.bulk.tensor global -> shared of one box at \p coords: elements
/// outside the tensor land as zeros, the box's rows in the map's swizzle;
/// in flight on \p bar (the box is read from global memory when it lands).
inline void tensor_copy(void *dst, const void *map, const int *coords, int rank,
                        void *bar) {
  TensorMap m;
  memcpy(&m, map, sizeof m);
  if (m.tag != kTensorMapTag || int(m.rank) != rank) {
    fprintf(stderr, "lina emulated device: a TMA copy through a tensor map "
                    "the emulated driver did not encode\n");
    trap();
  }
  const unsigned rowBytes = m.box[0] * m.elementBytes;
  if (m.swizzleBytes && rowBytes != m.swizzleBytes) {
    fprintf(stderr,
            "lina emulated device: a swizzled box's rows must be "
            "the swizzle's %u bytes (they are %u)\n",
            m.swizzleBytes, rowBytes);
    trap();
  }
  unsigned rows = 1;
  for (int d = 1; d < rank; ++d)
    rows *= m.box[d];
  int at[5] = {0, 0, 0, 0, 0};
  for (int d = 0; d < rank; ++d)
    at[d] = coords[d];
  unsigned char *to = (unsigned char *)dst;
  mbarrier_copy(bar, dst, rows * rowBytes, [=] {
    for (unsigned row = 0; row < rows; ++row) {
      // The row's coordinates in dimensions 1 and up, and whether it is in
      // the tensor.
      long long offset = 0;
      bool inside = true;
      unsigned rest = row;
      for (int d = 1; d < rank; ++d) {
        long long c = (long long)at[d] + rest % m.box[d];
        rest /= m.box[d];
        inside = inside && c >= 0 && c < (long long)m.dims[d];
        offset += c * (long long)m.strides[d];
      }
      for (unsigned e = 0; e < m.box[0]; ++e) {
        long long c = (long long)at[0] + e;
        unsigned char *into = (unsigned char *)swizzled(
            (uintptr_t)(to + row * rowBytes + e * m.elementBytes),
            m.swizzleBytes);
        if (inside && c >= 0 && c < (long long)m.dims[0])
          memcpy(into,
                 (const unsigned char *)(uintptr_t)m.address + offset +
                     c * m.elementBytes,
                 m.elementBytes);
        else
          memset(into, 0, m.elementBytes);
      }
    }
  });
}

/// A wgmma shared-memory descriptor. The GPU's holds bits 4-17 of the
/// operand's shared address (bits 0-13), the leading and stride byte
/// offsets (bits 16-29, 32-45, in 16-byte units) and the layout (bits
/// 62-63: 0 no swizzle, 1 the 128-byte swizzle). Here the address is a
/// host pointer: bits 14-15 take the carries of an advanced address, and
/// bits 52-61 index the pointer's upper bits in a table of those seen.
inline unsigned long long descriptorBases[1024];
inline int descriptorBaseCount = 0;

inline unsigned long long describe(const void *tile, unsigned lbo, unsigned sbo,
                                   unsigned layout = 1) {
  uintptr_t address = (uintptr_t)tile, base = address & ~(uintptr_t)0x3ffff;
  int index = 0;
  while (index < descriptorBaseCount && descriptorBases[index] != base)
    ++index;
  if (index == descriptorBaseCount) {
    if (index == 1024)
      trap();
    descriptorBases[descriptorBaseCount++] = base;
  }
  return (unsigned long long)((address >> 4) & 0x3fff) |
         ((unsigned long long)((lbo >> 4) & 0x3fff) << 16) |
         ((unsigned long long)((sbo >> 4) & 0x3fff) << 32) |
         ((unsigned long long)index << 52) |
         ((unsigned long long)(layout & 3) << 62);
}

/// Element (mn, k) of a wgmma operand in shared memory (A: M x K, B: N x
/// K), 16-bit, through descriptor \p desc (the PTX ISA's canonical layouts,
/// as CUTLASS's GmmaDescriptor spells them). The 128-byte swizzle: K-major,
/// 8 rows of 128 bytes a group, SBO between groups, k along the row;
/// MN-major (\p mnMajor), k a 128-byte row, SBO between groups of 8 k, 64
/// elements of mn along the row, LBO between those. No swizzle: 8 x 16-byte
/// core matrices (rows mn, 8 k a row, K-major; rows k, 8 mn a row,
/// MN-major), LBO between those adjacent in K and SBO between those
/// adjacent in M or N either way (as measured on an H200: WgmmaGpuTest).
inline unsigned short operand_element(unsigned long long desc, bool mnMajor,
                                      int mn, int k) {
  const unsigned layout = unsigned(desc >> 62);
  if (layout > 1) {
    fprintf(stderr,
            "lina emulated device: wgmma reads operands without a "
            "swizzle or in the 128-byte one only (descriptor "
            "layout %u)\n",
            layout);
    trap();
  }
  uintptr_t start =
      descriptorBases[(desc >> 52) & 0x3ff] + (uintptr_t)((desc & 0xffff) << 4);
  uintptr_t lbo = ((desc >> 16) & 0x3fff) << 4;
  uintptr_t sbo = ((desc >> 32) & 0x3fff) << 4;
  uintptr_t offset;
  if (layout == 0)
    offset =
        (k / 8) * lbo + (mn / 8) * sbo +
        (mnMajor ? (k % 8) * 16 + (mn % 8) * 2 : (mn % 8) * 16 + (k % 8) * 2);
  else
    offset = mnMajor ? (k % 8) * 128 + (k / 8) * sbo + (mn % 64) * 2 +
                           (mn / 64) * lbo
                     : (mn % 8) * 128 + (mn / 8) * sbo + k * 2;
  unsigned short h;
  memcpy(&h, (const void *)swizzled(start + offset, layout == 1 ? 128 : 0), 2);
  return h;
}

/// Computes \p p now: its shared-memory operands as they are, D's input
/// from the accumulators (chained) or as they were when issued.
inline void retire(PendingProduct &p) {
  static float A[64][16], B[256][16];
  for (int row = 0; row < 64; ++row)
    for (int k = 0; k < 16; ++k) {
      unsigned short h;
      if (p.aInRegisters) {
        // mma.m16n8k16's A layout, warp w holding rows 16 w ..
        int t = 32 * (row / 16) + (row % 8) * 4 + (k % 8) / 2;
        unsigned word = p.aWords[t][(row % 16 >= 8) + 2 * (k >= 8)];
        h = (unsigned short)(k % 2 ? word >> 16 : word);
      } else {
        h = operand_element(p.a, p.transA, row, k);
      }
      A[row][k] = p.f16 ? from_f16(h) : from_bf16(h);
    }
  for (int col = 0; col < p.n; ++col)
    for (int k = 0; k < 16; ++k) {
      unsigned short h = operand_element(p.b, p.transB, col, k);
      B[col][k] = p.f16 ? from_f16(h) : from_bf16(h);
    }
  const int per = p.n / 2;
  for (int t = 0; t < 128; ++t)
    for (int j = 0; j < p.n / 8; ++j)
      for (int h = 0; h < 2; ++h)
        for (int e = 0; e < 2; ++e) {
          int row = 16 * (t / 32) + t % 32 / 4 + 8 * h,
              col = 8 * j + 2 * (t % 4) + e, i = 4 * j + 2 * h + e;
          float sum = 0.0f;
          for (int k = 0; k < 16; ++k)
            sum += A[row][k] * B[col][k];
          float in = p.chained ? p.d[t][i] : p.input[t * per + i];
          p.d[t][i] = p.accumulate ? in + sum : sum;
        }
}

/// wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16}: D (64 x N, fp32)
/// = A B (+ D where \p accumulate), A from the descriptor \p a (or, with
/// \p aRegisters, from each thread's four registers in mma.m16n8k16's A
/// layout, warp w holding rows 16 w ..), B from \p b; \p transA and
/// \p transB the operands' MN-major flags. A collective of the warpgroup:
/// the last thread to issue it queues it (PendingProduct) for the
/// wgmma.wait_group that retires its group, which writes every thread's
/// accumulators (warp w's rows 16 w + l / 4 (+ 8), columns 8 j + 2 (l % 4)
/// (+ 1), as m16n8's).
inline void wgmma(int n, float *d, const unsigned *aRegisters,
                  unsigned long long a, unsigned long long b, bool transA,
                  bool transB, int accumulate, bool f16) {
  unsigned long long *mine = my_slot();
  mine[0] = (unsigned long long)(uintptr_t)d;
  if (aRegisters)
    for (int i = 0; i < 4; ++i)
      mine[1 + i] = aRegisters[i];
  const int group = warp() / 4;
  gather(current->warpgroups[group], [&] {
    ProductQueue &q = current->products[group];
    PendingProduct p;
    p.n = n;
    p.accumulate = accumulate;
    p.a = a;
    p.b = b;
    p.aInRegisters = aRegisters != nullptr;
    p.transA = transA;
    p.transB = transB;
    p.f16 = f16;
    for (int t = 0; t < 128; ++t) {
      const unsigned long long *slot =
          current->slots[4 * group + t / 32][t % 32];
      p.d[t] = (float *)(uintptr_t)slot[0];
      for (int i = 0; i < 4; ++i)
        p.aWords[t][i] = (unsigned)slot[1 + i];
    }
    auto writes = [&](const PendingProduct &o) { return o.d[0] == p.d[0]; };
    p.chained = std::any_of(q.open.begin(), q.open.end(), writes);
    for (const std::vector<PendingProduct> &g : q.committed)
      p.chained = p.chained || std::any_of(g.begin(), g.end(), writes);
    if (!p.chained) {
      p.input.resize(size_t(128) * (n / 2));
      for (int t = 0; t < 128; ++t)
        memcpy(&p.input[size_t(t) * (n / 2)], p.d[t], sizeof(float) * (n / 2));
    }
    for (int t = 0; t < 128; ++t)
      for (int i = 0; i < n / 2; ++i)
        p.d[t][i] = NAN; // not there before the wait
    q.open.push_back(std::move(p));
  });
}

/// wgmma.commit_group: the warpgroup's products issued since the last
/// commit become a group.
inline void wgmma_commit() {
  const int group = warp() / 4;
  gather(current->warpgroups[group], [&] {
    ProductQueue &q = current->products[group];
    q.committed.push_back(std::move(q.open));
    q.open.clear();
  });
}

/// wgmma.wait_group \p pending: every committed group but the newest
/// \p pending retires, oldest first.
inline void wgmma_wait(int pending) {
  const int group = warp() / 4;
  gather(current->warpgroups[group], [&] {
    ProductQueue &q = current->products[group];
    while ((int)q.committed.size() > pending) {
      for (PendingProduct &p : q.committed.front())
        retire(p);
      q.committed.erase(q.committed.begin());
    }
  });
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
template <typename T> inline T atomicMax(T *p, T v) {
  T old = *p;
  *p = old < v ? v : old;
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
/// CTA.
extern "C" int lina_emulation_launch(void (*entry)(void **), void **args,
                                     unsigned gx, unsigned gy, unsigned gz,
                                     unsigned bx, unsigned by, unsigned bz,
                                     unsigned sharedBytes, char *message,
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
          getcontext(&f.context);
          f.context.uc_stack.ss_sp = f.stack;
          f.context.uc_stack.ss_size = stackBytes;
          f.context.uc_link = &cta.scheduler;
          makecontext(&f.context, (void (*)())fiber_main, 0);
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
            swapcontext(&cta.scheduler, &fibers[t].context);
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

#line 1 "kernel.cu"
