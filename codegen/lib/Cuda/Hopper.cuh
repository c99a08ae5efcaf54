//===- Hopper.cuh - Hopper's device primitives ------------------*- CUDA
//-*-===//
//
// Part of lina's device library (appended to Prelude.cuh). Hopper's
// machinery one instruction (or one small group) at a time, for the kernels
// that run on sm_90a: warpgroup products (wgmma) and their fence, commit and
// wait, shared-memory operand descriptors in the 128-byte swizzle,
// mbarriers, TMA box and bulk copies, named barriers between warpgroups,
// stmatrix and 16-byte global stores (the tf32 product, which any arch
// from sm_80 runs, is Prelude.cuh's). Each has a
// LINA_HOST_EMULATION branch that the emulated device runs
// (runtime/lib/Runtime/EmulatedDevice.cuh). Whole kernels are not here.
//
// The 128-byte swizzle: a box of 64 2-byte columns keeps row r at r 128
// bytes and its 16-byte piece c at ((c ^ (r % 8)) 16), which the swizzle's
// pattern ties to address bits 7-9: swizzled tiles start 1024-aligned.
//
//===----------------------------------------------------------------------===//

namespace lina {

typedef unsigned long long u64;

/// A TMA descriptor (CUtensorMap), passed by value as a __grid_constant__
/// kernel parameter; the host's WgmmaMaps has the same layout.
struct alignas(64) tensor_map {
  u64 opaque[16];
};

/// Byte offset of row r, 2-byte column c (< 64) in a swizzled box (plain
/// arithmetic: also for the prepare kernels, which any arch compiles).
__device__ __forceinline__ unsigned wg_offset(int r, int c) {
  return r * 128 + ((((c >> 3) ^ (r & 7)) << 4) | ((c & 7) * 2));
}

/// The warpgroup products multiply mma_t operands (Prelude.cuh): bf16, or
/// f16 in an f16 spec's source, whose inputs bf16 would round to 8
/// significant bits.
#ifdef LINA_MMA_F16
#define LINA_WGMMA_TYPES ".f32.f16.f16"
constexpr bool kWgmmaF16 = true;
#else
#define LINA_WGMMA_TYPES ".f32.bf16.bf16"
constexpr bool kWgmmaF16 = false;
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n32k16_ss(float (&d)[16], u64 a, u64 b,
                                                   int accumulate) {
#ifdef LINA_HOST_EMULATION
  lina_emu::wgmma(32, d, nullptr, a, b, TA, TB, accumulate, kWgmmaF16);
#else
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n32k16" LINA_WGMMA_TYPES " "
               "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, "
               "%14, %15}, %16, %17, p, 1, 1, %19, %20;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]),
                 "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]),
                 "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
                 "+f"(d[14]), "+f"(d[15])
               : "l"(a), "l"(b), "r"(accumulate), "n"(TA), "n"(TB));
#endif
}

template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], u64 a, u64 b,
                                                   int accumulate) {
#ifdef LINA_HOST_EMULATION
  lina_emu::wgmma(64, d, nullptr, a, b, TA, TB, accumulate, kWgmmaF16);
#else
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16" LINA_WGMMA_TYPES " "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "
      "%30, %31}, %32, %33, p, 1, 1, %35, %36;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]),
        "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),
        "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
        "+f"(d[31])
      : "l"(a), "l"(b), "r"(accumulate), "n"(TA), "n"(TB));
#endif
}

template <int TB>
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[32],
                                                   const unsigned (&a)[4],
                                                   u64 b, int accumulate) {
#ifdef LINA_HOST_EMULATION
  lina_emu::wgmma(64, d, a, 0, b, false, TB, accumulate, kWgmmaF16);
#else
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16" LINA_WGMMA_TYPES " "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "
      "%30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]),
        "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),
        "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
        "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate),
        "n"(TB));
#endif
}

template <int TA, int TB>
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[64], u64 a,
                                                    u64 b, int accumulate) {
#ifdef LINA_HOST_EMULATION
  lina_emu::wgmma(128, d, nullptr, a, b, TA, TB, accumulate, kWgmmaF16);
#else
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16" LINA_WGMMA_TYPES " "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "
      "%30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "
      "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, "
      "%58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, %67, %68;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]),
        "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),
        "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
        "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
        "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]),
        "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),
        "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]),
        "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(a), "l"(b), "r"(accumulate), "n"(TA), "n"(TB));
#endif
}

// The emulated device queues each warpgroup's products until the wait that
// retires their group (its wgmma's fence orders nothing more).
__device__ __forceinline__ void wg_fence() {
#ifndef LINA_HOST_EMULATION
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wg_commit() {
#ifdef LINA_HOST_EMULATION
  lina_emu::wgmma_commit();
#else
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
template <int Pending> __device__ __forceinline__ void wg_wait() {
#ifdef LINA_HOST_EMULATION
  lina_emu::wgmma_wait(Pending);
#else
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
#endif
}
/// Generic-proxy writes to shared memory before async-proxy (wgmma) reads.
__device__ __forceinline__ void async_proxy_fence() {
#ifndef LINA_HOST_EMULATION
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
/// mbarrier.init's writes before any other thread or the async proxy uses
/// the barriers.
__device__ __forceinline__ void mbar_init_fence() {
#ifndef LINA_HOST_EMULATION
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

/// A shared-memory operand descriptor for the 128-byte swizzle: the start
/// address and the strides (bytes) between 64-column boxes (lbo, MN-major
/// operands wider than 64) and between 8-row groups (sbo).
__device__ __forceinline__ u64 wg_descriptor(const void *tile, unsigned lbo,
                                             unsigned sbo) {
#ifdef LINA_HOST_EMULATION
  return lina_emu::describe(tile, lbo, sbo);
#else
  unsigned address = shared_address(tile);
  return (u64)((address >> 4) & 0x3FFF) | ((u64)((lbo >> 4) & 0x3FFF) << 16) |
         ((u64)((sbo >> 4) & 0x3FFF) << 32) | (1ull << 62);
#endif
}

__device__ __forceinline__ void mbar_init(u64 *bar, unsigned count) {
#ifdef LINA_HOST_EMULATION
  lina_emu::mbarrier_init(bar, count);
#else
  asm volatile(
      "mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(bar)),
      "r"(count)
      : "memory");
#endif
}
__device__ __forceinline__ void mbar_expect_bytes(u64 *bar, unsigned bytes) {
#ifdef LINA_HOST_EMULATION
  lina_emu::mbarrier_arrive_expect(bar, bytes);
#else
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                   shared_address(bar)),
               "r"(bytes)
               : "memory");
#endif
}
__device__ __forceinline__ void mbar_wait(u64 *bar, unsigned parity) {
#ifdef LINA_HOST_EMULATION
  while (!lina_emu::mbarrier_try_wait(bar, parity)) {
  }
#else
  unsigned done = 0;
  while (!done)
    asm volatile("{\n.reg .pred p;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(shared_address(bar)), "r"(parity)
                 : "memory");
#endif
}
/// One box of a 3-d tensor map at (column, head, token) into shared memory;
/// its bytes count on `bar`. Rows past the tensor's end arrive as zeros.
__device__ __forceinline__ void tma_box(void *dst, const tensor_map *map,
                                        int column, int head, int token,
                                        u64 *bar) {
#ifdef LINA_HOST_EMULATION
  const int coords[3] = {column, head, token};
  lina_emu::tensor_copy(dst, map, coords, 3, bar);
#else
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::"
               "complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(
                   shared_address(dst)),
               "l"((u64)map), "r"(column), "r"(head), "r"(token),
               "r"(shared_address(bar))
               : "memory");
#endif
}

template <int TB>
__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[64],
                                                    const unsigned (&a)[4],
                                                    u64 b, int accumulate) {
#ifdef LINA_HOST_EMULATION
  lina_emu::wgmma(128, d, a, 0, b, false, TB, accumulate, kWgmmaF16);
#else
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16" LINA_WGMMA_TYPES " "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, "
      "%30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, "
      "%44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, "
      "%58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, "
      "%70;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
        "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]),
        "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]),
        "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
        "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
        "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]),
        "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),
        "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]),
        "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate),
        "n"(TB));
#endif
}

/// `bytes` contiguous bytes from global to shared memory, counted on `bar`.
__device__ __forceinline__ void bulk_copy(void *dst, const void *src,
                                          unsigned bytes, u64 *bar) {
#ifdef LINA_HOST_EMULATION
  lina_emu::bulk_copy(dst, src, bytes, bar);
#else
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::"
               "bytes [%0], [%1], %2, [%3];\n" ::"r"(shared_address(dst)),
               "l"(src), "r"(bytes), "r"(shared_address(bar))
               : "memory");
#endif
}

/// The descriptor of the operand `bytes` past the one `base` describes:
/// the start address is its low 14 bits in 16-byte units, and shared
/// memory's 228 KB keep the sum in them. (Encoding each k-step's descriptor
/// from its pointer cost the scan ~50 uniform instructions a wgmma.)
__device__ __forceinline__ u64 wg_advance(u64 base, unsigned bytes) {
  return base + (bytes >> 4);
}

/// Named barriers of `Threads` threads (the CTA's 256 unless told):
/// bar.sync waits for the count to arrive, bar.arrive counts without
/// waiting (a producer warpgroup's signal). With a count, the threads may
/// reach a barrier from different places (each warp from one).
template <int Id, int Threads = 256>
__device__ __forceinline__ void cta_sync_at() {
#ifdef LINA_HOST_EMULATION
  lina_emu::named_barrier(Id, Threads, true);
#else
  asm volatile("bar.sync %0, %1;\n" ::"n"(Id), "n"(Threads) : "memory");
#endif
}
template <int Id, int Threads = 256>
__device__ __forceinline__ void cta_arrive_at() {
#ifdef LINA_HOST_EMULATION
  lina_emu::named_barrier(Id, Threads, false);
#else
  asm volatile("bar.arrive %0, %1;\n" ::"n"(Id), "n"(Threads) : "memory");
#endif
}

/// stmatrix.m8n8.x4.trans: lane 8 i + j names row j of matrix i at `row`;
/// register i is matrix i's fragment (ldmatrix's layout), stored
/// transposed.
__device__ __forceinline__ void stmatrix_x4_trans(void *row,
                                                  const unsigned (&r)[4]) {
#ifdef LINA_HOST_EMULATION
  lina_emu::stmatrix(row, r, 4, true);
#else
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, "
               "%2, %3, %4};\n" ::"r"(shared_address(row)),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
#endif
}

/// bar.sync of named barrier `id` (not 0, the CTA's) by `Threads` threads
/// (cta_sync_at for an id known when compiling).
template <int Threads> __device__ __forceinline__ void named_sync(int id) {
#ifdef LINA_HOST_EMULATION
  lina_emu::named_barrier(id, Threads, true);
#else
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(Threads) : "memory");
#endif
}

/// One 16-byte store to global memory (`to` 16-byte aligned).
__device__ __forceinline__ void store_global_words(void *to, u32x4 w) {
#ifdef LINA_HOST_EMULATION
  lina_emu::vector_copy(to, &w, 16, to);
#else
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(to), "r"(w.x),
               "r"(w.y), "r"(w.z), "r"(w.w)
               : "memory");
#endif
}

#endif // __CUDA_ARCH_FEAT_SM90_ALL

} // namespace lina
