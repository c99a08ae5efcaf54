//===- DecodeReferenceTest.cpp - The decode semantics, in float64 -------===//
//
// Part of lina. runDecodeReference is what the GPU suite holds decode
// kernels to, so it is checked here against the plain recurrence on whole
// sequences: a prompt decoded call by call through its slot is the same
// recurrence as all of it at once; a speculative call restarts from the
// accepted prefix's state; a negative slot starts from zero and keeps
// nothing.
//
//===----------------------------------------------------------------------===//
#include "lina/Reference/DecodeReference.h"
#include "lina/Reference/Reference.h"
#include "lina/Spec/Presets.h"

#include <gtest/gtest.h>

#include <random>

using namespace lina;
using namespace lina::reference;

namespace {

constexpr double kExact = 1e-12;

Spec smallSpec(const std::string &preset) {
  Spec s = findPreset(preset)->spec;
  s.keyDim = 8;
  s.valueDim = 4;
  s.heads = 1;
  s.valueHeads = 2;
  s.initialState = true;
  s.finalState = true;
  return s;
}

class EveryPreset : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryPreset, DecodingThroughTheSlotEqualsTheWholeSequence) {
  std::mt19937_64 rng(42);
  Spec spec = smallSpec(GetParam());
  Problem full = randomProblem(spec, 2, 7, rng);
  Result whole = runRecurrent(full);

  // Sequence 0 lives in slot 2, sequence 1 in slot 0; slot 1 is another
  // request's and must not change.
  const int64_t slotSize = spec.valueHeads * spec.keyDim * spec.valueDim;
  DecodeProblem call;
  call.numSlots = 3;
  call.pool.assign(3 * slotSize, 0.0);
  std::normal_distribution<double> normal;
  for (double &x : call.pool)
    x = normal(rng);
  const std::vector<double> before = call.pool;
  std::copy(full.initialState.begin(), full.initialState.begin() + slotSize,
            call.pool.begin() + 2 * slotSize);
  std::copy(full.initialState.begin() + slotSize, full.initialState.end(),
            call.pool.begin());
  call.slots = {2, 0};

  int64_t t0 = 0;
  for (int64_t n : {3, 1, 3}) {
    call.step = sliceTokens(full, t0, n);
    ASSERT_EQ(checkDecodeShapes(call), "");
    DecodeResult r = runDecodeReference(call);
    EXPECT_LE(relativeError(r.o, outputRows(whole.o, spec, 2, 7, t0, n)),
              kExact)
        << "tokens " << t0 << ".." << t0 + n;
    call.pool = r.pool;
    t0 += n;
  }
  std::vector<double> seq0(call.pool.begin() + 2 * slotSize, call.pool.end());
  std::vector<double> seq1(call.pool.begin(), call.pool.begin() + slotSize);
  EXPECT_LE(relativeError(
                seq0, std::vector<double>(whole.finalState.begin(),
                                          whole.finalState.begin() + slotSize)),
            kExact);
  EXPECT_LE(relativeError(
                seq1, std::vector<double>(whole.finalState.begin() + slotSize,
                                          whole.finalState.end())),
            kExact);
  EXPECT_TRUE(std::equal(call.pool.begin() + slotSize,
                         call.pool.begin() + 2 * slotSize,
                         before.begin() + slotSize));
}

TEST_P(EveryPreset, SpeculativeCallRestartsFromTheAcceptedPrefix) {
  std::mt19937_64 rng(7);
  Spec spec = smallSpec(GetParam());
  const int64_t slotSize = spec.valueHeads * spec.keyDim * spec.valueDim;
  const int64_t T = 3;
  // One sequence whose start is in slot 3. The draft call reads it (one
  // accepted token: slots[0, 0]) and keeps token t's state in slot
  // {3, 1, 2}[t], so the state after j accepted tokens is in slots[0, j - 1].
  Problem draft = randomProblem(spec, 1, T, rng);
  DecodeProblem first;
  first.numSlots = 4;
  first.pool.assign(4 * slotSize, 0.0);
  std::copy(draft.initialState.begin(), draft.initialState.end(),
            first.pool.begin() + 3 * slotSize);
  first.slots = {3, 1, 2};
  first.perToken = true;
  first.numAccepted = {1};
  first.step = sliceTokens(draft, 0, T);
  DecodeResult r1 = runDecodeReference(first);
  for (int64_t accepted = 1; accepted <= T; ++accepted) {
    SCOPED_TRACE("accepted " + std::to_string(accepted));
    Problem next = randomProblem(spec, 1, T, rng);
    DecodeProblem second;
    second.numSlots = 4;
    second.pool = r1.pool;
    second.slots = {3, 1, 2};
    second.perToken = true;
    second.numAccepted = {int32_t(accepted)};
    second.step = sliceTokens(next, 0, T);
    DecodeResult r2 = runDecodeReference(second);

    // The same as the draft's accepted prefix followed by the new tokens.
    Problem joined = draft;
    joined.seqLen = accepted + T;
    Problem head = sliceTokens(draft, 0, accepted);
    Problem tail = sliceTokens(next, 0, T);
    auto cat = [](std::vector<double> a, const std::vector<double> &b) {
      a.insert(a.end(), b.begin(), b.end());
      return a;
    };
    joined.q = cat(head.q, tail.q);
    joined.k = cat(head.k, tail.k);
    joined.v = cat(head.v, tail.v);
    if (spec.decay != DecayKind::FixedPerHead)
      joined.g = cat(head.g, tail.g);
    joined.beta = cat(head.beta, tail.beta);
    joined.a = cat(head.a, tail.a);
    joined.b = cat(head.b, tail.b);
    Result whole = runRecurrent(joined);
    EXPECT_LE(relativeError(r2.o, outputRows(whole.o, spec, 1, accepted + T,
                                             accepted, T)),
              kExact);
    std::vector<double> last(r2.pool.begin() + 2 * slotSize,
                             r2.pool.begin() + 3 * slotSize);
    EXPECT_LE(relativeError(last, whole.finalState), kExact);
  }
}

INSTANTIATE_TEST_SUITE_P(AllPresets, EveryPreset,
                         ::testing::ValuesIn(presetNames()));

TEST(DecodeReference, NegativeSlotStartsFromZeroAndKeepsNothing) {
  std::mt19937_64 rng(3);
  Spec spec = smallSpec("gdn");
  spec.initialState = false;
  Problem step = randomProblem(spec, 2, 2, rng);
  DecodeProblem call;
  call.step = step;
  call.numSlots = 1;
  const int64_t slotSize = spec.valueHeads * spec.keyDim * spec.valueDim;
  call.pool.assign(slotSize, 5.0);
  call.slots = {-1, 7}; // 7 is past the pool: no slot either
  DecodeResult r = runDecodeReference(call);
  EXPECT_EQ(r.pool, call.pool);
  Result zero = runRecurrent(step); // no initial state: zero
  EXPECT_LE(relativeError(r.o, zero.o), kExact);
  EXPECT_EQ(decodeReadSlot(call, 0), -1);
  EXPECT_EQ(decodeReadSlot(call, 1), -1);
}

TEST(DecodeReference, ShapeErrorsNameTheTensor) {
  std::mt19937_64 rng(3);
  Spec spec = smallSpec("kda");
  DecodeProblem call;
  call.step = randomProblem(spec, 2, 2, rng);
  call.numSlots = 2;
  call.pool.assign(2 * spec.valueHeads * spec.keyDim * spec.valueDim, 0.0);
  call.slots = {0};
  EXPECT_NE(checkDecodeShapes(call).find("'slots' must have 2 entries"),
            std::string::npos);
  call.slots = {0, 1};
  call.numAccepted = {1, 1};
  EXPECT_NE(checkDecodeShapes(call).find("needs perToken"), std::string::npos);
  call.numAccepted.clear();
  call.pool.pop_back();
  EXPECT_NE(checkDecodeShapes(call).find("'pool' must have"),
            std::string::npos);
}

} // namespace

TEST(DecodeReference, WrittenSlotsAreTheCallsInRangeSlots) {
  DecodeProblem call;
  call.numSlots = 6;
  call.slots = {3, -1, 0, 6, 5};
  EXPECT_EQ(decodeWrittenSlots(call),
            (std::vector<bool>{true, false, false, true, false, true}));
  // Per token: every token's slot is written, also past the accepted ones.
  call.perToken = true;
  call.slots = {2, 4, -1, 1};
  EXPECT_EQ(decodeWrittenSlots(call),
            (std::vector<bool>{false, true, true, false, true, false}));
}

// A written element may come back with its old value: with bf16 inputs the
// products of a few tokens can cancel exactly. The GPU suite once flagged
// such an element as "a slot the call must not write changed"; the slots a
// call writes come from its indices, never from comparing values.
TEST(DecodeReference, AWrittenSlotCanKeepAnElementsValue) {
  Spec spec = smallSpec("linear_attn");
  std::mt19937_64 rng(5);
  DecodeProblem call;
  call.step = randomProblem(spec, 1, 2, rng);
  const int64_t K = spec.keyDim, V = spec.valueDim, H = spec.heads,
                HV = spec.valueHeads;
  // Token 1's k and v make k_1[0] v_1[0] = -k_0[0] v_0[0] in every head.
  for (int64_t h = 0; h < H; ++h) {
    call.step.k[(1 * H + h) * K] = -call.step.k[(0 * H + h) * K];
  }
  for (int64_t hv = 0; hv < HV; ++hv)
    call.step.v[(1 * HV + hv) * V] = call.step.v[(0 * HV + hv) * V];
  call.numSlots = 2;
  call.pool.assign(2 * HV * K * V, 0.25);
  call.slots = {1};
  DecodeResult r = runDecodeReference(call);
  const int64_t slotSize = HV * K * V;
  EXPECT_EQ(r.pool[slotSize], 0.25); // element (hv 0, row 0, column 0)
  EXPECT_TRUE(decodeWrittenSlots(call)[1]);
  // The reference's pool passes the check; a change in slot 0 does not.
  EXPECT_EQ(firstChangedUnwrittenElement(call, r.pool), -1);
  std::vector<double> touched = r.pool;
  touched[7] += 1.0;
  EXPECT_EQ(firstChangedUnwrittenElement(call, touched), 7);
}
