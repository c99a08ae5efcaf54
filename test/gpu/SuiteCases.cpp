//===- SuiteCases.cpp - the case matrix -------------------------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "RandomSpecs.h"
#include "Suite.h"

#include "lina/Codegen/KernelPlanner.h"
#include "lina/Runtime/KernelForms.h"

namespace lina::gpusuite {
//===----------------------------------------------------------------------===//
// The case matrix
//===----------------------------------------------------------------------===//

/// "gdn/fused/bf16/d128/B2.T1000.H2.HV2/init". Slashes separate the parts so
/// that --filter can pick any of them ("/f32/", "varlen", "gdn/fused").
std::string caseName(const Case &c) {
  std::string shape = c.lengths.empty()
                          ? "B" + std::to_string(c.batch)
                          : "varlen" + std::to_string(c.lengths.size());
  shape += ".T" + std::to_string(c.seqLen) + ".H" + std::to_string(c.heads) +
           ".HV" + std::to_string(c.valueHeads);
  return c.preset + "/" + strategyName(c) + "/" + toString(c.dtype) + "/d" +
         std::to_string(c.dim) + "/" + shape + "/" +
         (c.initialState ? "init" : "zero");
}

std::string strategyName(const Case &c) {
  std::string name =
      std::string(toString(c.strategy)) + (c.prefetch ? "+prefetch" : "");
  if (c.tileV)
    name += "+tv" + std::to_string(c.tileV) + "w" + std::to_string(c.warps);
  return name + (c.sharedState ? "+shared" : "") +
         (c.directDecay ? "+direct" : "") + (c.twoCTAs ? "+2cta" : "") +
         (c.segments > 1 ? "+seg" + std::to_string(c.segments) : "") +
         (c.warpgroup ? "+wgmma" : "") + (c.misaligned ? "+misaligned" : "") +
         (c.gateScale != 1 ? "+gates" + std::to_string(int(c.gateScale)) : "");
}

/// The shapes run for every preset, strategy, dtype and head dim. Each
/// distinct (heads, value heads, varlen, initial state) is one more kernel
/// to compile, so the shapes share as few as the coverage allows: five
/// kernels per combination.
namespace {
struct Shape {
  int64_t batch, seqLen, heads, valueHeads;
  std::vector<int64_t> lengths;
  bool initialState;
};
} // namespace

static std::vector<Shape> shapes() {
  // defaultSchedule's chunks are 64 tokens at K = 64 (32 for the delta
  // rule) and 32 at K = 128, so 63, 64 and 65 end just before, on and just
  // after a chunk boundary at all of them. Packed sequences also start mid-chunk of the packed T, include an
  // empty one, and each restarts its chunks at its own start.
  const std::vector<int64_t> varlen = {1, 63, 64, 65, 200, 0, 300};
  int64_t packed = 0;
  for (int64_t length : varlen)
    packed += length;
  return {
      // Partial, whole and many chunks; batch rows are separate sequences.
      {2, 1, 2, 2, {}, true},
      {2, 63, 2, 2, {}, true},
      {2, 64, 2, 2, {}, true},
      {2, 1000, 2, 2, {}, true},
      // A long sequence, and one past a boundary in an odd batch, with a
      // zero initial state on one head.
      {1, 4096, 1, 1, {}, false},
      {3, 65, 1, 1, {}, false},
      // 256 (sequence, head) pairs: a realistic grid.
      {4, 64, 64, 64, {}, true},
      // Grouped value heads: value head hv reads q/k head hv / 2.
      {2, 200, 2, 4, {}, true},
      // Packed sequences with cu_seqlens.
      {1, packed, 2, 2, varlen, true},
  };
}

/// The --quick case of each preset x strategy x dtype (and of f16).
static bool isQuickShape(const Shape &s, int64_t dim) {
  return dim == 128 && s.batch == 2 && s.seqLen == 1000;
}

static Case makeCase(const std::string &preset, Strategy strategy, DType dtype,
                     int64_t dim, const Shape &shape, bool prefetch = false) {
  Case c;
  c.preset = preset;
  c.strategy = strategy;
  c.prefetch = prefetch;
  c.dtype = dtype;
  c.dim = dim;
  c.batch = shape.batch;
  c.seqLen = shape.seqLen;
  c.heads = shape.heads;
  c.valueHeads = shape.valueHeads;
  c.lengths = shape.lengths;
  c.initialState = shape.initialState;
  c.quick = isQuickShape(shape, dim);
  c.name = caseName(c);
  return c;
}

/// The wgmma scan's cases of `preset` at `shapes` (bf16 and d128 unless
/// `dtype` and `dim` say, the layout withWarpgroup gives: a warpgroup for each
/// 64 value columns), where the scan covers the preset (canRunWgmmaScan); with
/// `segments`, each sequence in that many pieces; with `tileV` 64 at d128,
/// the scans a CTA a 64-column value tile (where that is not already their
/// layout: DPLR's at d128).
static void addWgmmaCases(std::vector<Case> &cases, const Preset &preset,
                          const std::vector<Shape> &shapes,
                          int64_t segments = 0, int64_t dim = 128,
                          DType dtype = DType::BF16, int64_t tileV = 0) {
  for (const Shape &shape : shapes) {
    Case c = makeCase(preset.name, Strategy::FusedScan, dtype, dim, shape);
    // withWarpgroup's layout: DPLR's record at d128 leaves room for 64 columns.
    const int64_t layout = withWarpgroup(ScheduleOptions(), caseSpec(c)).tileV;
    if (!canRunWgmmaScan(caseSpec(c)) || (tileV != 0 && tileV == layout))
      return;
    c.tileV = tileV != 0 ? tileV : layout;
    c.warps = c.tileV / 16;
    c.warpgroup = true;
    c.segments = segments;
    c.name = caseName(c);
    cases.push_back(c);
  }
}

/// The printed scans' 64-column value tile on eight warps, at `shapes`, in
/// bf16 and f16 at d128 and at d64 (the default of the delta rules and of
/// GLA where two CTAs a head fit in the SMs): the delta rule's second
/// warpgroup forms the scores (WarpgroupScan::scoresApart); a per-channel
/// decay's and DPLR's prepares the chunks and leaves the scan at once.
static void addSecondWarpgroupCases(std::vector<Case> &cases,
                                    const Preset &preset,
                                    const std::vector<Shape> &shapes) {
  if (!wgmmaScanPreparesChunks(preset.spec))
    return;
  for (auto [dim, dtype] : {std::pair{int64_t(128), DType::BF16},
                            std::pair{int64_t(128), DType::F16},
                            std::pair{int64_t(64), DType::BF16}})
    for (const Shape &shape : shapes) {
      Case c = makeCase(preset.name, Strategy::FusedScan, dtype, dim, shape);
      if (!canRunWgmmaScan(caseSpec(c)))
        continue;
      c.tileV = 64;
      c.warps = 8;
      c.warpgroup = true;
      c.name = caseName(c);
      cases.push_back(c);
    }
}

/// Every preset x {fused, materialize} x {bf16, f32} x {64, 128} x shapes(),
/// plus f16 at one shape per preset x strategy: f16 is a supported input
/// dtype with its own conversions in the kernel, so it gets checked too.
std::vector<Case> allCases() {
  std::vector<Case> cases;
  const Strategy strategies[] = {Strategy::FusedScan, Strategy::Materialize,
                                 Strategy::Split};
  for (const Preset &preset : presets()) {
    for (Strategy strategy : strategies) {
      for (DType dtype : {DType::BF16, DType::F32})
        for (int64_t dim : {64, 128})
          for (const Shape &shape : shapes())
            cases.push_back(makeCase(preset.name, strategy, dtype, dim, shape));
      for (const Shape &shape : shapes())
        if (isQuickShape(shape, 128))
          cases.push_back(
              makeCase(preset.name, strategy, DType::F16, 128, shape));
    }
    // The prefetching scans (not yet a default): the kernels that walk the
    // chunks, bf16 at both head dims, every shape.
    for (Strategy strategy : {Strategy::FusedScan, Strategy::Split})
      for (int64_t dim : {64, 128})
        for (const Shape &shape : shapes())
          cases.push_back(makeCase(preset.name, strategy, DType::BF16, dim,
                                   shape, /*prefetch=*/true));
    // The register-resident state under each way of spreading it over the
    // warps, and the shared-memory state it replaced, at the preset's
    // default strategy: a long sequence, a chunk boundary with a zero
    // initial state, and packed sequences.
    struct Layout {
      int64_t tileV, warps;
      bool shared, twoCTAs = false;
    };
    // Whole heads with two CTAs an SM: the delta rules' default where their
    // heads outnumber the SMs (Plan.cpp).
    const Layout layouts[] = {{128, 8, false}, {64, 8, false}, {16, 8, false},
                              {0, 0, true}, {128, 8, false, true}};
    Strategy own = defaultSchedule(preset.spec).strategy;
    for (const Layout &layout : layouts) {
      if (layout.twoCTAs && preset.spec.update != UpdateRule::Delta)
        continue;
      for (const Shape &shape : shapes())
        if (shape.seqLen == 1000 || shape.batch == 3 || !shape.lengths.empty()) {
          Case c = makeCase(preset.name, own, DType::BF16, 128, shape,
                            /*prefetch=*/own == Strategy::Split);
          c.tileV = layout.tileV;
          c.warps = layout.warps;
          c.sharedState = layout.shared;
          c.twoCTAs = layout.twoCTAs;
          c.name = caseName(c);
          cases.push_back(c);
        }
    }
    // Whole heads on eight warps without prefetch, for the scalar-gated
    // presets (retnet, mamba2, gdn): the layouts above run whole heads with
    // their tiles fetched ahead; here each chunk's tiles take load_tile.
    if (preset.spec.decay == DecayKind::Scalar ||
        preset.spec.decay == DecayKind::FixedPerHead)
      for (const Shape &shape : shapes())
        if (shape.seqLen == 1000 || !shape.lengths.empty()) {
          Case c = makeCase(preset.name, Strategy::Split, DType::BF16, 128,
                            shape, /*prefetch=*/false);
          c.tileV = 128;
          c.warps = 8;
          c.name = caseName(c);
          cases.push_back(c);
        }
    // Segments (Segments.cuh), for the additive rules with a decay: whole
    // heads and split keys, at both head dims. Pieces are whole chunks but
    // the sequence's last: T = 1000 cuts into three of 256 tokens and
    // one of 232 (or seven of 128 and one of 104), T = 4096 into equal pieces
    // with a zero initial state (the first segment's carry skipped), 4x64
    // into a chunk a piece, T = 65 leaves a last piece of one token, the
    // prime T = 4093 one of 1021 or 509 (ChunkKernel::segmentsFor). Packed
    // sequences are cut each by its own length (sequence_bounds): of
    // varlen7's, 300 tokens into pieces of 80 (C16, four pieces) with a
    // last of 60, one token into a piece and three empty ones, the empty
    // sequence into empty pieces; and a long one (4093) beside short ones.
    std::vector<Shape> segmentShapes = shapes();
    segmentShapes.push_back({2, 4093, 2, 2, {}, true});
    segmentShapes.push_back({1, 5598, 2, 2, {4093, 5, 1500}, true});
    if (preset.spec.update == UpdateRule::Additive &&
        preset.spec.decay != DecayKind::None)
      for (int64_t dim : {64, 128})
        for (auto [tileV, segments] :
             {std::pair<int64_t, int64_t>{dim, 4}, {32, 8}})
          for (const Shape &shape : segmentShapes)
            if (shape.seqLen >= 64 && shape.valueHeads != 4) {
              Case c = makeCase(preset.name, Strategy::Split, DType::BF16, dim,
                                shape, /*prefetch=*/true);
              c.tileV = tileV;
              c.warps = 8;
              c.segments = segments;
              c.name = caseName(c);
              cases.push_back(c);
            }
    // The wgmma scan in segments (sm_90; mamba2 and retnet at d128): its
    // own records for the same combine and carry kernels, four pieces of
    // 64-token chunks (T = 1000: three of 256 and one of 232; T = 65: 64
    // and 1; T = 4093: 1024 and a last of 1021; packed ones each by its
    // own length).
    if (canRunWgmmaSegments(preset.spec)) {
      std::vector<Shape> pieced;
      for (const Shape &shape : segmentShapes)
        if (shape.seqLen >= 64 && shape.valueHeads != 4)
          pieced.push_back(shape);
      addWgmmaCases(cases, preset, pieced, 4);
    }
    // The wgmma scan (sm_90), for the additive rules with at most a scalar
    // decay at d128, bf16: every shape (partial chunks of 1, 63 and 65
    // tokens, one of 64, 1000 and 4096 tokens, a zero initial state,
    // grouped value heads, packed sequences whose chunks TMA reads on into
    // the next sequence's rows).
    addWgmmaCases(cases, preset, shapes());
    // The printed additive scan at d64 (one warpgroup a CTA), in pieces too,
    // and in f16.
    addWgmmaCases(cases, preset, shapes(), 0, /*dim=*/64);
    addWgmmaCases(cases, preset, shapes(), 0, /*dim=*/128, DType::F16);
    if (canRunWgmmaSegments(preset.spec))
      addWgmmaCases(cases, preset, {Shape{2, 1000, 2, 2, {}, true}}, 4,
                    /*dim=*/64);
    std::vector<Shape> held;
    for (const Shape &shape : shapes())
      if (shape.seqLen == 63 || shape.seqLen == 1000 || shape.batch == 3 ||
          shape.valueHeads > 2 || !shape.lengths.empty())
        held.push_back(shape);
    addSecondWarpgroupCases(cases, preset, held);
    // KDA's wgmma prepare sums a block row directly where its gates span
    // too much to factor: log gates ten times fla's, a partial chunk and
    // packed sequences.
    if (preset.spec.decay == DecayKind::PerChannel) {
      size_t first = cases.size();
      addWgmmaCases(cases, preset,
                    {Shape{2, 1000, 2, 2, {}, true},
                     Shape{1, 365, 2, 2, {300, 65}, true}});
      for (size_t i = first; i < cases.size(); ++i) {
        cases[i].gateScale = 10;
        cases[i].name = caseName(cases[i]);
      }
    }
    // Per-channel decay products summed directly (the direct_decay flag;
    // the default factors them onto the tensor cores), in the prepare
    // kernel (split) and in the scan (fused), both head dims.
    if (preset.spec.decay == DecayKind::PerChannel)
      for (Strategy strategy : {Strategy::Split, Strategy::FusedScan})
        for (int64_t dim : {64, 128})
          for (const Shape &shape : shapes())
            if (shape.seqLen == 1000 || shape.batch == 3 ||
                !shape.lengths.empty()) {
              Case c = makeCase(preset.name, strategy, DType::BF16, dim, shape,
                                /*prefetch=*/true);
              c.directDecay = true;
              c.name = caseName(c);
              cases.push_back(c);
            }
    // Inputs one element off a 16-byte boundary, through the split
    // strategy's prepare kernel (row passes fetch the rows) and scan and
    // through the fused scan.
    for (Strategy strategy : {Strategy::Split, Strategy::FusedScan})
      for (DType dtype : {DType::BF16, DType::F32})
        for (const Shape &shape : shapes())
          if (shape.seqLen == 1000 || !shape.lengths.empty()) {
            Case c = makeCase(preset.name, strategy, dtype, 128, shape,
                              /*prefetch=*/true);
            c.misaligned = true;
            c.name = caseName(c);
            cases.push_back(c);
          }
  }
  return cases;
}

std::vector<Case> tinyCases() {
  // defaultSchedule's chunk at K = 64 is 64 tokens (32 for the delta
  // rule): 65 tokens end with a chunk of one token; grouped value heads.
  // The varlen batch has a one-token sequence, a whole chunk, an empty one
  // and one that starts mid-chunk of the packed T.
  const Shape plain{1, 65, 1, 2, {}, true};
  const Shape varlen{1, 67, 1, 1, {1, 64, 0, 2}, true};
  std::vector<Case> cases;
  for (const Preset &preset : presets())
    for (Strategy strategy :
         {Strategy::FusedScan, Strategy::Materialize, Strategy::Split}) {
      cases.push_back(makeCase(preset.name, strategy, DType::BF16, 64, plain));
      cases.push_back(makeCase(preset.name, strategy, DType::BF16, 64, varlen));
      cases.push_back(makeCase(preset.name, strategy, DType::F32, 64, plain));
    }
  for (const Preset &preset : presets()) {
    cases.push_back(makeCase(preset.name, Strategy::Split, DType::BF16, 64,
                             plain, /*prefetch=*/true));
    cases.push_back(makeCase(preset.name, Strategy::Split, DType::BF16, 64,
                             varlen, /*prefetch=*/true));
    // The register-resident state with whole key rows per warp (tv64 w4)
    // and split two ways (tv64 w8); the default splits them four ways.
    for (int64_t warps : {4, 8}) {
      Case c = makeCase(preset.name, Strategy::Split, DType::BF16, 64, plain,
                        /*prefetch=*/true);
      c.tileV = 64;
      c.warps = warps;
      c.name = caseName(c);
      cases.push_back(c);
    }
    if (preset.spec.decay == DecayKind::PerChannel) {
      Case c = makeCase(preset.name, Strategy::Split, DType::BF16, 64, plain,
                        /*prefetch=*/true);
      c.directDecay = true;
      c.name = caseName(c);
      cases.push_back(c);
    }
    // The wgmma scan (TMA, mbarriers, wgmma; sm_90): d128, a last chunk of
    // one token and packed sequences whose chunks TMA reads on past their
    // end, for compute-sanitizer too (gpu-sanitize.sh --filter wgmma).
    addWgmmaCases(cases, preset, {plain, varlen});
    // The printed additive scan at d64 (one warpgroup a CTA) and in f16
    // (wgmma's f16 products).
    addWgmmaCases(cases, preset, {plain, varlen}, 0, /*dim=*/64);
    addWgmmaCases(cases, preset, {plain}, 0, /*dim=*/128, DType::F16);
    addWgmmaCases(cases, preset, {varlen}, 0, /*dim=*/64, DType::F16);
    // Gates seven times fla's put the blocks' midpoints of a chunk far
    // enough apart that the per-channel prepare kernels' factor between two
    // blocks flushed to zero though the term it scaled was large (GLA's
    // output 2.6e-2 from float64), while each block's own span still
    // factors: the printed kernels at d128 and at d64.
    if (preset.spec.decay == DecayKind::PerChannel)
      for (int64_t dim : {128, 64}) {
        size_t first = cases.size();
        addWgmmaCases(cases, preset, {Shape{1, 200, 2, 2, {}, true}}, 0, dim);
        for (size_t i = first; i < cases.size(); ++i) {
          cases[i].gateScale = 7;
          cases[i].name = caseName(cases[i]);
        }
      }
    // The printed per-channel prepare kernel (GLA at d64) sums a block row
    // directly where its gates span too much to factor: log gates ten
    // times fla's.
    if (preset.spec.decay == DecayKind::PerChannel) {
      size_t first = cases.size();
      addWgmmaCases(cases, preset, {plain, varlen}, 0, /*dim=*/64);
      for (size_t i = first; i < cases.size(); ++i) {
        cases[i].gateScale = 10;
        cases[i].name = caseName(cases[i]);
      }
    }
    // The printed scans a CTA a 64-column value tile of a d128 head, on
    // four warps.
    addWgmmaCases(cases, preset, {varlen}, 0, /*dim=*/128, DType::BF16,
                  /*tileV=*/64);
    addWgmmaCases(cases, preset, {plain}, 0, /*dim=*/128, DType::F16,
                  /*tileV=*/64);
    // ... and on eight warps, the second warpgroup the scores' or the
    // prepare kernel's (the delta rules' and GLA's default on few heads).
    addSecondWarpgroupCases(cases, preset,
                            preset.spec.update == UpdateRule::DPLR
                                ? std::vector<Shape>{varlen}
                                : std::vector<Shape>{plain, varlen});
    // Segments (the combine and carry kernels): two sequences of 100
    // tokens in four pieces, 32 tokens each but the last (4), with an
    // initial state.
    if (canRunInSegments(preset.spec)) {
      Case c = makeCase(preset.name, Strategy::Split, DType::BF16, 64,
                        Shape{2, 100, 1, 2, {}, true}, /*prefetch=*/true);
      c.tileV = 64;
      c.warps = 8;
      c.segments = 4;
      c.name = caseName(c);
      cases.push_back(c);
      // The same through the wgmma scan (d128): a piece of 64 tokens and
      // one of 36, the scan's records read by the carry.
      if (canRunWgmmaSegments(preset.spec))
        addWgmmaCases(cases, preset, {Shape{2, 100, 1, 2, {}, true}}, 4);
    }
  }
  return cases;
}

std::vector<Case> randomCases(int count, uint64_t seed) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 29);
  std::vector<Case> cases;
  for (int attempt = 0; attempt < 100 * count && (int)cases.size() < count;
       ++attempt) {
    std::optional<Spec> s = randomspecs::drawKernelSpec(rng);
    if (!s)
      continue;
    s->finalState = true; // the suite compares it
    Case c;
    c.strategy = static_cast<Strategy>(randomspecs::pickFrom(rng, 3));
    c.prefetch =
        c.strategy != Strategy::Materialize && randomspecs::pickFrom(rng, 2);
    // Half the specs the wgmma kernels cover run them, in their layout: a
    // warpgroup for each 64 value columns (sm_90; the emulated device runs
    // them too).
    if (canRunWgmmaScan(*s) && randomspecs::pickFrom(rng, 2)) {
      c.warpgroup = true;
      c.strategy = Strategy::FusedScan;
      c.prefetch = true;
      c.tileV = withWarpgroup(ScheduleOptions(), *s).tileV;
      c.warps = c.tileV / 16;
    }
    randomspecs::DrawnShape shape = randomspecs::drawShape(rng, s->varlen);
    c.dtype = s->dtype;
    c.dim = s->keyDim;
    c.heads = s->heads;
    c.valueHeads = s->valueHeads;
    c.initialState = s->initialState;
    c.batch = shape.batch;
    c.seqLen = shape.seqLen;
    c.lengths = shape.lengths;
    c.drawn = s;
    c.preset = "random" + std::to_string(cases.size()) + "/" +
               randomspecs::describeSpec(*s);
    c.name = caseName(c);
    cases.push_back(c);
  }
  return cases;
}

/// What the float64 reference costs: ~4 flops per state element per token
/// and value head (decay, write, read).
double referenceFlops(const Case &c) {
  return 4.0 * double(c.batch) * double(c.seqLen) * double(c.valueHeads) *
         double(c.dim) * double(c.dim);
}

/// The spec the case compiles: the preset at the case's size.
Spec caseSpec(const Case &c) {
  if (c.drawn)
    return *c.drawn;
  Spec spec = findPreset(c.preset)->spec;
  spec.keyDim = c.dim;
  spec.valueDim = c.dim;
  spec.heads = c.heads;
  spec.valueHeads = c.valueHeads;
  spec.dtype = c.dtype;
  spec.initialState = c.initialState;
  spec.finalState = true;
  spec.varlen = !c.lengths.empty();
  return spec;
}

/// Everything a compiled kernel depends on; cases with equal keys share one.
std::string kernelKey(const Case &c) {
  if (c.drawn)
    return c.name;
  return c.preset + "/" + strategyName(c) + "/" + toString(c.dtype) + "/d" +
         std::to_string(c.dim) + "/H" + std::to_string(c.heads) + ".HV" +
         std::to_string(c.valueHeads) + (c.lengths.empty() ? "" : "/varlen") +
         (c.initialState ? "/init" : "/zero");
}

/// A fixed, nonzero seed per case name: reruns reproduce a failure, and no
/// two cases draw the same inputs.
uint64_t caseSeed(const std::string &name, uint64_t base) {
  uint64_t hash = 0xcbf29ce484222325ull; // FNV-1a
  for (unsigned char ch : name)
    hash = (hash ^ ch) * 0x100000001b3ull;
  hash ^= base * 0x9E3779B97F4A7C15ull;
  return hash ? hash : 1;
}

} // namespace lina::gpusuite
