//===- TensorMaps.cpp - TMA descriptors of the wgmma scan's inputs ------===//
//
// Part of lina. See TensorMaps.h.
//
//===----------------------------------------------------------------------===//
#include "TensorMaps.h"

#include "lina/Runtime/Driver.h"

#include <cstdint>
#include <limits>

namespace lina {

namespace {

Status encode(cuda::CUtensorMap &map, const void *tensor, const char *name,
              int64_t tokens, int64_t heads, int64_t dim, DType dtype) {
  auto address = reinterpret_cast<uintptr_t>(tensor);
  if (address % 16 != 0)
    return Status::error(
        StatusCode::InvalidArgument,
        std::string(name) +
            " must start at a 16-byte aligned address for "
            "the wgmma scan's TMA copies (it starts at byte " +
            std::to_string(address % 16) +
            " of 16): pass a contiguous copy, or plan with --mma warp");
  const unsigned long long dims[3] = {static_cast<unsigned long long>(dim),
                                      static_cast<unsigned long long>(heads),
                                      static_cast<unsigned long long>(tokens)};
  // Bytes between consecutive heads and tokens (2-byte elements).
  const unsigned long long strides[2] = {
      static_cast<unsigned long long>(dim * 2),
      static_cast<unsigned long long>(heads * dim * 2)};
  const unsigned box[3] = {64, 1, 64}, elementStrides[3] = {1, 1, 1};
  return LINA_CU(cuTensorMapEncodeTiled(
      &map,
      dtype == DType::F16 ? cuda::CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                          : cuda::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
      3, const_cast<void *>(tensor), dims, strides, box, elementStrides,
      cuda::CU_TENSOR_MAP_INTERLEAVE_NONE, cuda::CU_TENSOR_MAP_SWIZZLE_128B,
      cuda::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      cuda::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
}

} // namespace

Expected<WgmmaMaps> wgmmaMaps(const KernelPlan &plan, const ForwardArgs &args) {
  const Spec &s = plan.spec;
  int64_t tokens = args.batch * args.seqLen;
  // The kernel's token coordinates are 32-bit.
  if (tokens >= std::numeric_limits<int32_t>::max())
    return Status::error(StatusCode::InvalidArgument,
                         "the wgmma scan addresses tokens with 32-bit "
                         "coordinates; this call has " +
                             std::to_string(tokens) +
                             ": split it, or plan with --mma warp");
  WgmmaMaps maps;
  LINA_RETURN_IF_ERROR(
      encode(maps.q, args.q, "q", tokens, s.heads, s.keyDim, s.dtype));
  LINA_RETURN_IF_ERROR(
      encode(maps.k, args.k, "k", tokens, s.heads, s.keyDim, s.dtype));
  LINA_RETURN_IF_ERROR(
      encode(maps.v, args.v, "v", tokens, s.valueHeads, s.valueDim, s.dtype));
  return maps;
}

} // namespace lina
