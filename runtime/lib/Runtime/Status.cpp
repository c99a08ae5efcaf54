//===- Status.cpp - Errors carried as values through the runtime ----------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Runtime/Status.h"

namespace lina {

const char *statusCodeName(StatusCode code) {
  switch (code) {
  case StatusCode::Ok:
    return "Ok";
  case StatusCode::InvalidArgument:
    return "InvalidArgument";
  case StatusCode::NoDriver:
    return "NoDriver";
  case StatusCode::DriverError:
    return "DriverError";
  case StatusCode::NoCompiler:
    return "NoCompiler";
  case StatusCode::CompileError:
    return "CompileError";
  }
  return "Unknown";
}

} // namespace lina
