//===- TensorMaps.h - TMA descriptors of the wgmma scan's inputs -*- C++ -*-===//
//
// Part of lina. The wgmma scan (codegen's WgmmaScan.cuh) reads q, k and v
// through TMA: a descriptor a tensor, encoded on the host for each call and
// passed by value after the kernel's Params.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_RUNTIME_TENSORMAPS_H
#define LINA_RUNTIME_TENSORMAPS_H

#include "lina/Runtime/ChunkKernel.h"
#include "lina/Runtime/CudaApi.h"

namespace lina {

/// The kernel's second parameter (WgmmaScan.cuh's wg_maps).
struct WgmmaMaps {
  cuda::CUtensorMap q, k, v;
};

/// Descriptors of q, k [tokens][H][key_dim] and v [tokens][HV][value_dim]
/// as boxes of 64 tokens x 64 columns with the 128-byte swizzle. An error
/// names the tensor where TMA cannot read it (an unaligned address).
Expected<WgmmaMaps> wgmmaMaps(const KernelPlan &plan, const ForwardArgs &args);

} // namespace lina

#endif // LINA_RUNTIME_TENSORMAPS_H
