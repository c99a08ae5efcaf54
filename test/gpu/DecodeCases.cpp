//===- DecodeCases.cpp - lina-decode-suite's case matrix ----------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "DecodeSuite.h"

#include "lina/Spec/Presets.h"

namespace lina::decodesuite {

const char *toString(Kind kind) {
  switch (kind) {
  case Kind::Pool:
    return "pool";
  case Kind::Spec:
    return "spec";
  case Kind::Fla:
    return "fla";
  case Kind::Prefill:
    return "prefill";
  case Kind::Serving:
    return "serving";
  }
  return "?";
}

std::string caseName(const DecodeCase &c) {
  std::string name = c.preset + "/" + toString(c.kind) + "/" +
                     lina::toString(c.dtype) + "/d" + std::to_string(c.dim) +
                     "/B" + std::to_string(c.batch) + ".T" +
                     std::to_string(c.seqLen) + ".H" + std::to_string(c.heads) +
                     ".HV" + std::to_string(c.valueHeads) + "/w" +
                     std::to_string(c.schedule.warpColumns) + "x" +
                     std::to_string(c.schedule.warps);
  if (c.kind == Kind::Fla)
    name += c.initialState ? "/init" : "/zero";
  if (c.kind == Kind::Serving) {
    const char *forms[] = {"/packed", "/packed-spec", "/verify"};
    name += forms[int(c.serving)];
    name += c.vFirst ? "/vk" : "/kv";
    if (c.int64Offsets)
      name += "/i64";
  }
  return name;
}

namespace {

DecodeCase make(Kind kind, const std::string &preset, DType dtype, int64_t dim,
                int64_t batch, int64_t seqLen, int64_t heads,
                int64_t valueHeads, DecodeSchedule schedule = {}) {
  DecodeCase c;
  c.kind = kind;
  c.preset = preset;
  c.dtype = dtype;
  c.dim = dim;
  c.batch = batch;
  c.seqLen = seqLen;
  c.heads = heads;
  c.valueHeads = valueHeads;
  c.schedule = schedule;
  return c;
}

} // namespace

/// Every preset x {bf16, f32}:
/// - pool: T in {1, 2, 4, 16} at d = 128 with grouped heads (H 2, HV 4),
///   T = 1 at d = 64 without, and a wide batch (160 sequences x 16 value
///   heads: the widest warps) at T = 1;
/// - spec: T = 4 and 16 with per-token slots and accepted counts;
/// - fla: with and without an initial state;
/// - prefill: 100 tokens through the chunk kernel, then 6 decoded;
/// - every warp width, with 1, 3 and 8 warps per CTA, for one shape;
/// - serving (docs/decode.md, "Serving layouts"): packed sequences with
///   [K, V] and [V, K] pools and int32 and int64 offsets, packed
///   speculative rows, and verification with intermediate states;
/// plus f16 at one pool shape per preset.
std::vector<DecodeCase> allCases() {
  std::vector<DecodeCase> cases;
  for (const std::string &preset : presetNames()) {
    for (DType dtype : {DType::BF16, DType::F32}) {
      for (int64_t T : {1, 2, 4, 16}) {
        DecodeCase c = make(Kind::Pool, preset, dtype, 128, 5, T, 2, 4);
        c.quick = T == 4;
        cases.push_back(c);
      }
      cases.push_back(make(Kind::Pool, preset, dtype, 64, 6, 1, 3, 3));
      cases.push_back(make(Kind::Pool, preset, dtype, 128, 160, 1, 4, 16));
      for (int64_t T : {4, 16}) {
        DecodeCase c = make(Kind::Spec, preset, dtype, 128, 3, T, 2, 4);
        c.quick = T == 4;
        cases.push_back(c);
      }
      for (bool init : {true, false}) {
        DecodeCase c = make(Kind::Fla, preset, dtype, 64, 3, 2, 1, 2);
        c.initialState = init;
        cases.push_back(c);
      }
      DecodeCase prefill = make(Kind::Prefill, preset, dtype, 64, 2, 1, 2, 4);
      prefill.quick = true;
      cases.push_back(prefill);
      cases.push_back(make(Kind::Prefill, preset, dtype, 128, 2, 1, 1, 2));
      // Each width once, with CTAs of one warp, of 3 (the last CTA partly
      // past the columns) and of 8.
      for (DecodeSchedule s :
           {DecodeSchedule{4, 3}, DecodeSchedule{8, 1}, DecodeSchedule{16, 3},
            DecodeSchedule{16, 8}, DecodeSchedule{4, 8}})
        cases.push_back(make(Kind::Pool, preset, dtype, 128, 3, 2, 1, 2, s));
    }
    cases.push_back(make(Kind::Pool, preset, DType::F16, 128, 5, 3, 2, 4));
    for (DType dtype : {DType::BF16, DType::F32}) {
      struct Form {
        ServingForm form;
        bool vFirst, int64Offsets, quick;
      };
      for (Form f : {Form{ServingForm::Packed, false, false, false},
                     Form{ServingForm::Packed, true, true, true},
                     Form{ServingForm::PackedSpec, true, false, false},
                     Form{ServingForm::Verify, true, false, false},
                     Form{ServingForm::Verify, false, false, false}}) {
        // Sequences and their most tokens, as DecodeServingRun.cpp draws
        // them.
        int64_t batch = f.form == ServingForm::Packed       ? 5
                        : f.form == ServingForm::PackedSpec ? 4
                                                            : 3;
        int64_t tokens = f.form == ServingForm::Packed ? 16 : 4;
        DecodeCase c =
            make(Kind::Serving, preset, dtype, 128, batch, tokens, 2, 4);
        c.serving = f.form;
        c.vFirst = f.vFirst;
        c.int64Offsets = f.int64Offsets;
        c.quick = f.quick && dtype == DType::BF16;
        cases.push_back(c);
      }
    }
  }
  for (DecodeCase &c : cases)
    c.name = caseName(c);
  return cases;
}

Spec caseSpec(const DecodeCase &c) {
  Spec spec = findPreset(c.preset)->spec;
  spec.keyDim = spec.valueDim = c.dim;
  spec.heads = c.heads;
  spec.valueHeads = c.valueHeads;
  spec.dtype = c.dtype;
  spec.initialState = false; // the decode call says where the state is
  spec.finalState = false;
  spec.varlen = false;
  return spec;
}

uint64_t caseSeed(const std::string &name, uint64_t base) {
  uint64_t hash = 0xcbf29ce484222325ull; // FNV-1a, as lina-gpu-suite
  for (unsigned char ch : name)
    hash = (hash ^ ch) * 0x100000001b3ull;
  hash ^= base * 0x9E3779B97F4A7C15ull;
  return hash ? hash : 1;
}

} // namespace lina::decodesuite
