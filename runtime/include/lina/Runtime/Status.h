//===- Status.h - Errors carried as values through the runtime --*- C++ -*-===//
//
// Part of lina. Every runtime entry point returns a Status or an Expected<T>
// instead of throwing or aborting: the runtime sits under a C API and a Python
// binding, and a missing GPU, driver or compiler is an ordinary outcome there,
// not a crash.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_RUNTIME_STATUS_H
#define LINA_RUNTIME_STATUS_H

#include <cassert>
#include <optional>
#include <string>
#include <utility>

namespace lina {

/// What kind of failure a Status reports. Coarse on purpose: the C API maps it
/// to a status code, the message says the rest.
enum class StatusCode {
  Ok,
  InvalidArgument, ///< The caller asked for something malformed.
  NoDriver,        ///< libcuda.so.1 is missing or cuInit failed.
  DriverError,     ///< A CUDA driver call failed.
  NoCompiler,      ///< libnvrtc could not be loaded.
  CompileError,    ///< NVRTC rejected the source or the options.
};

/// Returns a stable name for \p code, e.g. "CompileError".
const char *statusCodeName(StatusCode code);

/// Success, or a failure with a human-readable message. \p apiResult keeps the
/// raw CUresult / nvrtcResult where one caused the failure (0 otherwise), so
/// callers can react to e.g. CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES without parsing
/// the message.
class [[nodiscard]] Status {
public:
  /// A success.
  Status() = default;

  /// A failure. \p code must not be StatusCode::Ok.
  static Status error(StatusCode code, std::string message, int apiResult = 0) {
    assert(code != StatusCode::Ok && "an error needs a failure code");
    Status s;
    s.code_ = code;
    s.message_ = std::move(message);
    s.apiResult_ = apiResult;
    return s;
  }

  bool ok() const { return code_ == StatusCode::Ok; }
  StatusCode code() const { return code_; }
  /// Empty on success.
  const std::string &message() const { return message_; }
  int apiResult() const { return apiResult_; }

private:
  StatusCode code_ = StatusCode::Ok;
  std::string message_;
  int apiResult_ = 0;
};

/// A T or the Status saying why there is none (LLVM's Expected without the
/// must-check-before-destroy rule, which would abort).
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : value_(std::move(value)) {}
  /// \p error must be a failure; a success without a value would leave
  /// value() undefined, so it is turned into an InvalidArgument error.
  Expected(Status error) : status_(std::move(error)) {
    if (status_.ok())
      status_ = Status::error(StatusCode::InvalidArgument,
                              "internal: Expected<T> built from a success "
                              "Status with no value");
  }

  bool ok() const { return value_.has_value(); }
  /// The failure, or a success Status when a value is present.
  const Status &status() const { return status_; }
  /// Shorthand for status().message().
  const std::string &message() const { return status_.message(); }

  /// Precondition: ok().
  T &value() & {
    assert(ok() && "value() of a failed Expected");
    return *value_;
  }
  const T &value() const & {
    assert(ok() && "value() of a failed Expected");
    return *value_;
  }
  T &&value() && {
    assert(ok() && "value() of a failed Expected");
    return std::move(*value_);
  }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }

private:
  std::optional<T> value_;
  Status status_;
};

} // namespace lina

/// Returns the Status of \p expr from the enclosing function when it failed.
/// The enclosing function may return Status or any Expected<T>.
#define LINA_RETURN_IF_ERROR(expr)                                             \
  do {                                                                         \
    ::lina::Status linaStatus_ = (expr);                                       \
    if (!linaStatus_.ok())                                                     \
      return linaStatus_;                                                      \
  } while (false)

#endif // LINA_RUNTIME_STATUS_H
