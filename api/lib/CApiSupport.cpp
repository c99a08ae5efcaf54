//===- CApiSupport.cpp - What every C API entry point shares ----------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "CApiSupport.h"

#include <cctype>
#include <cstring>
#include <utility>

namespace lina::capi {

thread_local std::string lastError;

lina_status fail(lina_status status, std::string message) {
  lastError = std::move(message);
  return status;
}

std::string withCFieldNames(std::string message) {
  // The runtime's checks name ForwardArgs', BackwardArgs' and DecodeArgs'
  // members; a C caller sets lina_forward_args', lina_backward_args' and
  // lina_decode_args' fields.
  static const std::pair<const char *, const char *> kNames[] = {
      {"initialState", "initial_state"},
      {"finalState", "final_state"},
      {"cuSeqlens", "cu_seqlens"},
      {"gateALog", "gate_a_log"},
      {"gateDtBias", "gate_dt_bias"},
      {"numSequences", "num_sequences"},
      {"seqLen", "seq_len"},
      {"stateIndices", "state_indices"},
      {"numAcceptedTokens", "num_accepted_tokens"},
      {"numSlots", "num_slots"},
      {"indicesPerToken", "indices_per_token"},
      {"cuSeqlensInt64", "cu_seqlens_int64"},
      {"intermediateStates", "intermediate_states"},
      {"intermediateIndices", "intermediate_indices"},
      {"numIntermediate", "num_intermediate"},
      {"intermediateSteps", "intermediate_steps"},
      {"disableStateUpdate", "disable_state_update"},
      {"dO", "d_o"},
      {"dFinalState", "d_final_state"},
      {"dBeta", "dbeta"},
      {"dGateALog", "d_gate_a_log"},
      {"dGateDtBias", "d_gate_dt_bias"},
      {"dInitialState", "d_initial_state"}};
  auto isWordChar = [](char c) { return std::isalnum(c) || c == '_'; };
  for (const auto &[cxx, c] : kNames) {
    size_t length = std::strlen(cxx);
    for (size_t at = message.find(cxx); at != std::string::npos;
         at = message.find(cxx, at)) {
      bool whole = (at == 0 || !isWordChar(message[at - 1])) &&
                   (at + length == message.size() ||
                    !isWordChar(message[at + length]));
      if (whole)
        message.replace(at, length, c);
      at += whole ? std::strlen(c) : length;
    }
  }
  return message;
}

lina::ForwardArgs toForwardArgs(const lina_forward_args &a) {
  lina::ForwardArgs args;
  args.q = a.q;
  args.k = a.k;
  args.v = a.v;
  args.g = a.g;
  args.beta = a.beta;
  args.a = a.a;
  args.b = a.b;
  args.gateALog = a.gate_a_log;
  args.gateDtBias = a.gate_dt_bias;
  args.o = a.o;
  args.initialState = a.initial_state;
  args.finalState = a.final_state;
  args.cuSeqlens = a.cu_seqlens;
  args.batch = a.batch;
  args.seqLen = a.seq_len;
  args.numSequences = a.num_sequences;
  args.stream = static_cast<lina::cuda::CUstream>(a.stream);
  return args;
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
  return fail(code, withCFieldNames(s.message()));
}

lina_status fromStatus(const lina::Status &s, const char *where) {
  lina_status code = fromStatus(s);
  if (code != LINA_OK)
    lastError = std::string(where) + ": " + lastError;
  return code;
}

} // namespace lina::capi
