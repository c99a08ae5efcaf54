//===- WarpgroupScan.h - Hopper scans printed as warpgroup products -*- C++
//-*-===//
//
// Part of lina. On sm_90a a fused chunk of an additive rule with at most a
// scalar decay runs as one kernel of warpgroup products, printed from the
// chunk's ops (a delta rule's as a prepare kernel and a scan of the same
// kind, below): a CTA of a warpgroup for each 64 value columns a
// (sequence, value head), or a 64-column value tile of a d128 head, walks
// the 64-token chunks, q, k and v arrive by TMA, and each chunk is
//   scores   P = (A B^T) masked, decayed and scaled      (decay_product)
//   output   o = X S + P V                                (the state's
//            product, the intra-chunk product and their sum, stored)
//   update   S = decay(S) + K~^T V                        (decay_state, the
//            folded product and their sum, yielded)
// with S^T in the update's accumulators. Every other op is a row factor
// of a fetched tile (scale, scale_rows, decay_rows: the query's scale, a
// write weight, the decays) or a per-token column (gates, betas, their
// running sums), and the printer applies each factor where its product's
// accumulators land, so one kernel serves the rule however the spec spells
// its weights and gates. lina-warpgroup-roles records each op's part as
// `lina.warpgroup`, lina-warpgroup-groups the order the products are
// issued in as `lina.wg_group`; the printer prints from those records and
// refuses a chunk whose records do not match its ops.
//
// A per-channel decay (GLA, KDA) does not factor into a row's and a
// column's: its prepare kernel (WarpgroupChannels.cuh) applies every factor
// of q's, k's and v's rows and stores the scan's operands (X, K~, P, the
// state's decay a key channel; the delta rule's Y, T and v's residual
// factor too) in each chunk's record, and its scan fetches v alone. DPLR
// (free a and b) runs the same pair with a second write term: U along b,
// v along k (WarpgroupScan's low-rank fields).
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_CUDA_WARPGROUPSCAN_H
#define LINA_CODEGEN_CUDA_WARPGROUPSCAN_H

#include "lina/Dialect/Lina/IR/Lina.h"
#include "lina/Spec/Spec.h"

#include "mlir/IR/BuiltinOps.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace lina::cuda {

/// The part an op plays in the generated warpgroup scan (the values of
/// the `lina.warpgroup` attribute).
enum class WarpgroupRole {
  Fetch,        ///< q, k or v: a TMA box copy a chunk
  Column,       ///< a per-token value: a gate, a beta, a running sum
  RowFactor,    ///< a row scaling of a fetched tile, applied where it lands
  Scores,       ///< decay_product: P, through shared memory
  StateProduct, ///< X S: S^T X^T from the state's registers
  Intra,        ///< P V, accumulated onto the state's product
  Output,       ///< the output's sum (nothing of its own)
  Store,        ///< o, from the output's accumulators
  Decay,        ///< decay_state on the accumulators
  Update,       ///< K~^T V folded into the accumulators (K~ materialised)
  Next,         ///< the decayed state plus the update (nothing of its own)
  // The delta rule (lina-solve-residual's form): the chunk's values are
  // U = tri_solve(A, X - Y S) instead of v's rows.
  SolveMatrix,     ///< A's decay_product and its row weights: prepared
  ResidualProduct, ///< Y S: S^T Y^T from the state's registers
  Residual,        ///< X - Y S, in registers
  Solve,           ///< U^T = R^T T^T, T = (I + A)^-1 prepared a chunk
  // A per-channel decay: the prepare kernel applies every factor of q's
  // and k's rows (and of v's) into the tiles it stores for the scan.
  Prepared, ///< q, k or a row factor: applied by the prepare kernel
  Channel,  ///< a per-token, per-key-channel value: the gates, their sums
  // DPLR (free a and b): the residual is Y S + L V.
  ResidualIntra, ///< L V, accumulated onto Y S
  // Warp specialisation: a CTA of one 64-column value tile and a second
  // warpgroup (the delta rule's scan, a tile on eight warps).
  ScoresApart, ///< the scores, with q's norms and P, on that warpgroup
};

llvm::StringRef toString(WarpgroupRole role);
std::optional<WarpgroupRole> warpgroupRoleFrom(llvm::StringRef name);

/// A fetched tile with row factors: rows of `load`'s tile times the
/// product of `factors`, each a scale, scale_rows or decay_rows op.
struct ScaledRows {
  LoadOp load;
  llvm::SmallVector<mlir::Operation *, 4> factors;
};

/// The chunk's ops in their parts.
struct WarpgroupScan {
  llvm::DenseMap<mlir::Operation *, WarpgroupRole> roles;
  LoadOp q, k, v;
  DecayProductOp scores;
  ScaledRows scoresLhs, scoresRhs; ///< their bases: q and k
  MatmulOp stateProduct;
  ScaledRows stateLhs; ///< X of X S: its base q
  MatmulOp intra;
  ScaledRows intraRhs; ///< V of P V: its base v
  StoreOp store;
  DecayStateOp decay; ///< null without a decay
  MatmulOp update;
  ScaledRows updateLhs, updateRhs; ///< K~ and V of K~^T V: k and v
  /// The column ops in program order.
  llvm::SmallVector<mlir::Operation *, 8> columns;

  /// The delta rule's values, U = tri_solve(A, X - Y S); null for the
  /// additive rule, whose values are v's rows.
  TriSolveOp solve;
  MatmulOp residualProduct;
  ScaledRows residualValues, residualKeys; ///< X (v's rows), Y (k's)
  /// A = diag(weights) decay_product(Ka, Kb, Ga, Gb, strict).
  DecayProductOp solveScores;
  ScaledRows solveLhs, solveRhs; ///< Ka and Kb: k's rows
  llvm::SmallVector<mlir::Value, 2> solveRowWeights;

  /// The gates' running sum G that the prepare kernel sums a key channel:
  /// a per-channel decay's (a value a token and key channel), which every
  /// decay reads; or a DPLR chunk's with a scalar, fixed or no decay (a
  /// value a token, or zeros), which it broadcasts over the key channels.
  /// Null for the other rules with at most a scalar decay, which have no
  /// such prepare kernel.
  mlir::Value channelSums;
  bool perChannel() const { return static_cast<bool>(channelSums); }

  /// DPLR (free a and b, any decay): the chunk writes two terms,
  /// the values U (the solve above, of the residual Y S + L V) along b and
  /// v's rows along k. The fields above hold U's: P of P U (q's and b's
  /// scores), B~ of its update, Y (a's rows, decayed to the row before) and
  /// A's operands a and b. These hold v's: P V with P q's and k's scores,
  /// K~^T V, and the residual's L V with L a's and k's scores.
  LoadOp a, b;
  MatmulOp directIntra, directUpdate, residualIntra;
  DecayProductOp directScores, residualScores;
  ScaledRows directScoresLhs, directScoresRhs, directIntraRhs;
  ScaledRows directUpdateLhs, directUpdateRhs;
  ScaledRows residualScoresLhs, residualScoresRhs, residualIntraRhs;
  /// G's exclusive twin, G_{t-1}: the decay of a's rows to the row before.
  mlir::Value channelSumsBefore;
  /// Whether the scores run on a warpgroup of their own (ScoresApart):
  /// the schedule gives a 64-column value tile eight warps, and the
  /// delta rule's scan leaves the state's chain (its products, the
  /// residual, the solve) to the first warpgroup while the second forms q's
  /// norms, the per-token tables and P beside it.
  bool scoresApart = false;
  /// Whether A is negated (DPLR's T = (I - A)^-1 written tri_solve(-A)).
  bool solveNegated = false;
  bool lowRank() const { return static_cast<bool>(directUpdate); }
};

/// Whether `op`'s schedule runs it as the generated warpgroup scan: wgmma
/// on a rule whose Hopper kernels are printed from the ops
/// (wgmmaScanCoversRule), whole sequences or segments.
bool printsWarpgroupScan(ChunkedOp op);

/// For a pass that records something on the ops of printed scans: removes
/// `attr` from every op of every chunk of `module` (records are made
/// afresh: a schedule changed since an earlier run may not print the scan),
/// then calls `record` with each chunk that prints the scan and its plan.
/// A chunk the scan cannot print, or whose `record` fails, is an error on
/// it; returns failure if any was.
mlir::LogicalResult recordOnPrintedScans(
    mlir::ModuleOp module, llvm::StringRef attr,
    llvm::function_ref<mlir::LogicalResult(ChunkedOp, WarpgroupScan &)> record);

/// For a pass that numbers ops of the chunks lina-warpgroup-roles recorded
/// (recordOnPrintedScans): sets `attr` to `plan`'s i64 on each op it maps;
/// a chunk whose ops carry no roles is an error naming that pass.
mlir::LogicalResult recordFromRoles(
    mlir::ModuleOp module, llvm::StringRef attr,
    llvm::function_ref<llvm::DenseMap<mlir::Operation *, int64_t>(
        const WarpgroupScan &)>
        plan);

/// The scan kernel's products in the order a chunk issues them, each its
/// commit group (0 first): the products of the landed tiles at the chunk's
/// top, the one whose result starts the longest chain of products to the
/// state's update first (the delta rule's residual product: residual,
/// solve, update; then the scores, which P's tile must be written from,
/// before the state's product, read in registers); then the solve, the
/// intra-chunk product and the update, each waiting on the ones before.
/// DPLR issues the residual's L V and v's P V and K~^T V first of the
/// later ones: the solve waits on L V alone.
llvm::DenseMap<mlir::Operation *, int64_t>
orderWarpgroupGroups(const WarpgroupScan &scan);

/// The values the delta rule's prepare kernel computes into each chunk's
/// record after T, each in a 64-float slot of its own (0 first, in program
/// order): every per-token column that an op of the scan kernel reads (an
/// op other than a column or A's), the norms of k's rows, and each chain of
/// k's row factors a scan product reads that costs more than a load a row
/// (on its outermost op, carried as its product a row). The prepare
/// kernel has them at hand for A; the scan then reads them where its stage
/// lands instead of loading, summing and normalising on its chain. Empty
/// for the additive rule with at most a scalar decay, which has no prepare
/// kernel.
///
/// With a per-channel decay the record holds every operand the scan's
/// products read from q and k, their factors applied (warpgroupChannelRecord
/// lays it out): X of X S and K~ of the update (on each chain's outermost
/// op, or its load where it has no factor), P (on the scores'
/// decay_product) and the state's decay a key channel (on decay_state);
/// for the delta rule also Y of Y S, T (on the tri_solve) and the
/// residual's factor of v's rows (on that chain's outermost op); for DPLR
/// Y, T, L of the residual's L V (on its decay_product), the P of v's P V
/// and K~ of v's update.
llvm::DenseMap<mlir::Operation *, int64_t>
planWarpgroupRecord(const WarpgroupScan &scan);

/// Fills `scan` from `op`'s chunk and returns "", or returns why the chunk
/// is not an additive scan the warpgroup kernel prints (naming the op).
std::string planWarpgroupScan(ChunkedOp op, WarpgroupScan &scan);

/// Why the generated warpgroup scan cannot run `spec` at this schedule, or
/// "": the additive, delta or DPLR rule, bf16 or
/// f16, key and value dims 64 or 128, 64-token chunks, tile-v the value dim
/// or 64 (64 for DPLR at key dim 128), and a warpgroup for each 64 columns
/// of the tile; or for a rule with a prepare kernel, a 64-column tile on
/// eight warps (tileHasSecondWarpgroup).
std::string warpgroupScanRefusal(const Spec &spec, int64_t chunkSize,
                                 int64_t tileV, int64_t threads);

/// Whether a CTA of `threads` on `tileV` value columns has a warpgroup
/// beside the tile's one: a 64-column tile on eight warps. The delta rule
/// with at most a scalar decay runs its scores there
/// (WarpgroupScan::scoresApart); a per-channel decay's or DPLR's prepare
/// kernel uses it, and their scan lets it go at once.
inline bool tileHasSecondWarpgroup(int64_t tileV, int64_t threads) {
  return tileV == 64 && threads == 256;
}

/// A per-channel decay's chunk record as the kernels lay it out: each of
/// planWarpgroupRecord's values at its byte offset (in slot order, 1024-byte
/// aligned: a [64][K] tile of mma_t for a chain of q's or k's rows, a
/// 64 x 64 box for P and for T, 1024 bytes for the decay and for v's
/// factor a row), and the record's bytes.
struct ChannelRecord {
  llvm::DenseMap<mlir::Operation *, int64_t> offsets;
  int64_t bytes = 0;
};
ChannelRecord
warpgroupChannelRecord(const llvm::DenseMap<mlir::Operation *, int64_t> &slots,
                       int64_t keyDim);

/// The delta rule's or a per-channel decay's prepare kernel `name` for `op`
/// (a CTA a chunk and value head: T = (I + A)^-1 and the record's values,
/// planWarpgroupRecord, or the per-channel record, warpgroupChannelRecord,
/// into the chunk's record of `recordFloats` floats), its dynamic shared
/// memory in bytes; or -1 with `error` where the chunk is not such a scan
/// or, with `checkRecords`, its ops do not carry lina-warpgroup-record's
/// slots (without, the slots planWarpgroupRecord chooses).
int64_t printWarpgroupPrepare(llvm::raw_ostream &os, ChunkedOp op,
                              const Spec &spec, const std::string &name,
                              std::string &error, int64_t &recordFloats,
                              bool checkRecords = true);
/// The delta rule's record a (chunk slot, value head), in floats: T as a
/// 64 x 64 box of mma_t in the 128-byte swizzle, then 64 floats for each
/// of `slots` prepared values.
constexpr int64_t warpgroupSolveRecordFloats(int64_t slots) {
  return 64 * 64 / 2 + 64 * slots;
}

/// Prints the kernel `name` for `op` and returns its dynamic shared memory
/// in bytes, or -1 with `error` where the chunk is not such a scan or, with
/// `checkRecords`, its ops do not carry lina-warpgroup-roles' records of
/// their parts, lina-warpgroup-groups' of its products' order and
/// lina-warpgroup-record's of its prepared values (without, the order
/// orderWarpgroupGroups and the slots planWarpgroupRecord choose). With
/// `segments` the sequences are pieces of longer ones and each chunk also
/// stores its segment record (wgmmaSegmentCut's: X, the state product's rows of
/// q with their factors, and the state's decay), which the split strategy's
/// combine and carry kernels read.
int64_t printWarpgroupScan(llvm::raw_ostream &os, ChunkedOp op,
                           const Spec &spec, const std::string &name,
                           std::string &error, bool checkRecords = true,
                           bool segments = false);

} // namespace lina::cuda

#endif // LINA_CODEGEN_CUDA_WARPGROUPSCAN_H
