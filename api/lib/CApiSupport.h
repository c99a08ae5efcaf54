//===- CApiSupport.h - What every C API entry point shares ------*- C++ -*-===//
//
// Part of lina. The per-thread message behind lina_last_error, the mapping
// from lina::Status to lina_status, and the catch-all around every entry
// point, shared by the chunk (CApi.cpp), backward (BackwardCApi.cpp) and
// decode (DecodeCApi.cpp) parts; and the forward call's arguments in C++,
// which the forward and the backward both take.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_API_CAPISUPPORT_H
#define LINA_API_CAPISUPPORT_H

#include "lina/lina_c.h"

#include "lina/Runtime/ChunkKernel.h"
#include "lina/Runtime/Status.h"

#include <exception>
#include <string>

namespace lina::capi {

/// The message lina_last_error returns on this thread.
extern thread_local std::string lastError;

/// Sets the message and returns `status`.
lina_status fail(lina_status status, std::string message);

/// `message` with the runtime's C++ argument names (initialState, seqLen,
/// ...) spelt as the C API's fields (initial_state, seq_len, ...).
std::string withCFieldNames(std::string message);

/// LINA_OK (clearing the message) or the status and message of `s`, its
/// argument names as the C API spells them.
lina_status fromStatus(const lina::Status &s);
/// As fromStatus, the message after "`where`: " (the entry point's name).
lina_status fromStatus(const lina::Status &s, const char *where);

/// The runtime's ForwardArgs of a C call: lina_kernel_forward's, and the
/// `forward` member of lina_backward_run's arguments.
lina::ForwardArgs toForwardArgs(const lina_forward_args &a);

/// Forgets which schedule each (spec, shape bucket, device) got when a
/// kernel was created for an open schedule (CApi.cpp), so that the next such
/// kernel looks the tuned schedule up again: lina_tune may have changed it.
void forgetChosenSchedules();

/// Runs `body`; an exception becomes LINA_INTERNAL_ERROR with its message.
template <typename F> lina_status guarded(F body) {
  try {
    return body();
  } catch (const std::exception &e) {
    return fail(LINA_INTERNAL_ERROR,
                std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(LINA_INTERNAL_ERROR, "internal error");
  }
}

/// A kernel's workspace size query, `where` being the entry point
/// (lina_kernel_workspace_size, lina_backward_workspace_size): `Handle` is
/// the C handle of a chunk or backward kernel, whose `kernel` answers
/// workspaceBytes for a call's shape.
template <typename Handle>
lina_status workspaceSize(const char *where, const Handle *kernel,
                          int64_t batch, int64_t seqLen, int64_t numSequences,
                          size_t *bytes) {
  return guarded([&] {
    if (!kernel || !kernel->kernel || !bytes)
      return fail(LINA_INVALID_ARGUMENT,
                  std::string(where) +
                      ": kernel and bytes must not be NULL");
    lina::ForwardArgs shape;
    shape.batch = batch;
    shape.seqLen = seqLen;
    shape.numSequences = numSequences;
    lina::Expected<size_t> needed = kernel->kernel->workspaceBytes(shape);
    if (!needed.ok())
      return fromStatus(needed.status(), where);
    *bytes = *needed;
    lastError.clear();
    return LINA_OK;
  });
}

} // namespace lina::capi

#endif // LINA_API_CAPISUPPORT_H
