//===- EmulatedTensorMap.h - The emulated TMA descriptor --------*- C++ -*-===//
//
// Part of lina. What the emulated driver's cuTensorMapEncodeTiled writes in
// a CUtensorMap's 128 bytes and the emulated TMA copies read: included by
// EmulatedDriver.cpp, and put into the emulated device's text before
// EmulatedHopper.cuh (runtime/CMakeLists.txt), so both sides have one
// definition.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_RUNTIME_EMULATEDTENSORMAP_H
#define LINA_RUNTIME_EMULATEDTENSORMAP_H

namespace lina_emu {

/// A tag, the global address, each dimension's extent and byte stride, the
/// box, the rank, the element size and the swizzle's span in bytes (0:
/// none).
struct TensorMap {
  unsigned long long tag, address;
  unsigned long long dims[5], strides[5];
  unsigned box[5];
  unsigned rank, elementBytes, swizzleBytes;
};
static_assert(sizeof(TensorMap) <= 128, "a CUtensorMap's 128 bytes");
/// "lina-map": a map the emulated driver encoded.
constexpr unsigned long long kTensorMapTag = 0x70616d2d616e696cull;

} // namespace lina_emu

#endif // LINA_RUNTIME_EMULATEDTENSORMAP_H
