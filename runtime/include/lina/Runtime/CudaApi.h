//===- CudaApi.h - The few CUDA driver API types lina uses ------*- C++ -*-===//
//
// Part of lina. Declarations copied from CUDA 13.0's cuda.h (same names, values
// and layouts) so that building lina needs no CUDA headers: the driver is
// loaded with dlopen at run time. Only what the runtime calls is declared.
//
// The opaque handle structs are declared at global scope, exactly like cuda.h
// does, so lina::cuda::CUstream is the same type as ::CUstream and
// cudaStream_t: a caller can hand lina its PyTorch/CUDA stream directly. The
// enums live in lina::cuda and do not clash with cuda.h's if both are included.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_RUNTIME_CUDAAPI_H
#define LINA_RUNTIME_CUDAAPI_H

#include <cstddef>

struct CUctx_st;
struct CUmod_st;
struct CUfunc_st;
struct CUstream_st;
struct CUevent_st;

namespace lina::cuda {

using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = ::CUctx_st *;
using CUmodule = ::CUmod_st *;
using CUfunction = ::CUfunc_st *;
using CUstream = ::CUstream_st *;
using CUevent = ::CUevent_st *;

/// The subset of cuda.h's CUresult that lina names; the driver may return
/// others, which cuGetErrorName still names.
enum CUresult : int {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_OUT_OF_MEMORY = 2,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_DEINITIALIZED = 4,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  CUDA_ERROR_INVALID_PTX = 218,
  CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600,
  CUDA_ERROR_ILLEGAL_ADDRESS = 700,
  CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
  CUDA_ERROR_LAUNCH_FAILED = 719,
  CUDA_ERROR_NOT_SUPPORTED = 801,
  CUDA_ERROR_UNKNOWN = 999,
};

/// The subset of CUdevice_attribute that Device queries.
enum CUdevice_attribute : int {
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
  CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
  CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12,
  CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
  CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82,
  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};

/// The subset of CUfunction_attribute that the autotuner reads or sets.
enum CUfunction_attribute : int {
  CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
  CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
  CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES = 2,
  CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
  CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
  CU_FUNC_ATTRIBUTE_PTX_VERSION = 5,
  CU_FUNC_ATTRIBUTE_BINARY_VERSION = 6,
  CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
  CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT = 9,
};

/// CUtensorMap: a TMA descriptor, 128 opaque bytes.
struct alignas(64) CUtensorMap {
  unsigned long long opaque[16];
};

/// The values of cuTensorMapEncodeTiled's enums that lina passes.
enum CUtensorMapDataType : int {
  CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6,
  CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 = 9
};
enum CUtensorMapInterleave : int { CU_TENSOR_MAP_INTERLEAVE_NONE = 0 };
enum CUtensorMapSwizzle : int { CU_TENSOR_MAP_SWIZZLE_128B = 3 };
enum CUtensorMapL2promotion : int { CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3 };
enum CUtensorMapFloatOOBfill : int { CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0 };

/// CUevent_flags.
enum CUevent_flags : unsigned {
  CU_EVENT_DEFAULT = 0x0,
  CU_EVENT_BLOCKING_SYNC = 0x1,
  CU_EVENT_DISABLE_TIMING = 0x2,
};

} // namespace lina::cuda

#endif // LINA_RUNTIME_CUDAAPI_H
