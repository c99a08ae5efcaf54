//===- CApiSupport.cpp - What every C API entry point shares ----------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "CApiSupport.h"

namespace lina::capi {

thread_local std::string lastError;

lina_status fail(lina_status status, std::string message) {
  lastError = std::move(message);
  return status;
}

lina_status fromStatus(const lina::Status &s) {
  using lina::StatusCode;
  if (s.ok()) {
    lastError.clear();
    return LINA_OK;
  }
  lina_status code = LINA_INTERNAL_ERROR;
  switch (s.code()) {
  case StatusCode::Ok:
    code = LINA_OK;
    break;
  case StatusCode::InvalidArgument:
    code = LINA_INVALID_ARGUMENT;
    break;
  case StatusCode::NoDriver:
    code = LINA_NO_DRIVER;
    break;
  case StatusCode::DriverError:
    code = LINA_DRIVER_ERROR;
    break;
  case StatusCode::NoCompiler:
    code = LINA_NO_COMPILER;
    break;
  case StatusCode::CompileError:
    code = LINA_COMPILE_ERROR;
    break;
  }
  return fail(code, s.message());
}

} // namespace lina::capi
