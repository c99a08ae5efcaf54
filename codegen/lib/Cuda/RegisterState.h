//===- RegisterState.h - Whether a scan's state fits in registers -*- C++
//-*-===//
//
// Part of lina. A kernel that walks the chunks may keep its state in
// registers (the device library's reg_state) instead of a shared-memory
// tile, when everything the chunk does with the state is one of:
//   - a product X S (the state as the right operand),
//   - decay_state, in place,
//   - S + T, where T is a K x tile-v tile or a product Y^T Z read by
//     nothing else (then folded: S^T += Z^T Y on the accumulators),
//   - a lina.sum with S as one added term and tiles or such products as
//     the others, each added or subtracted (the backward's reverse scan:
//     dS' = Q^T dO + dS - K^T dV),
// in program order along one chain from the block argument to the yield.
// This file decides that and what the kernel then reads from and writes to
// shared memory.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_CUDA_REGISTERSTATE_H
#define LINA_CODEGEN_CUDA_REGISTERSTATE_H

#include "TileLayout.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace lina::cuda {

/// A term of a lina.sum that updates the state: a tile, or a product Y^T Z
/// folded into the accumulators; added (+1) or subtracted (-1).
struct StateTerm {
  mlir::Value tile;
  mlir::Operation *product = nullptr;
  int sign = 1;
};

struct RegisterState {
  /// The state along the chunk: the block argument and every decayed or
  /// updated state up to the yield. None of them has a shared-memory tile.
  llvm::DenseSet<mlir::Value> values;
  /// Products X S that read the state from registers.
  llvm::DenseSet<mlir::Operation *> products;
  /// For an add S + Y^T Z, the product Y^T Z it folds in; that product is
  /// never computed as a tile (it prints nothing).
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> foldedInto;
  llvm::DenseSet<mlir::Operation *> folded;
  /// For a lina.sum S + ... that updates the state, its other terms in
  /// order (a folded product is also in `folded`).
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<StateTerm, 4>> sumTerms;
  /// For a product X S read only by the op right after it, an add or sub
  /// with a tile T (T + X S, X S + T, T - X S): that op, done in the
  /// product's reduction pass, where the warps' partial sums meet T. X S
  /// then never exists as a tile, and the add or sub prints nothing: a pass
  /// and a barrier fewer per use (u - W S and q S + intra in the delta
  /// rule's chunk). Where warps split the key columns it is done in the
  /// reduction pass; otherwise each warp applies it to its own columns as
  /// it writes them.
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> epilogue;
  /// epilogue the other way: for such an add or sub, its product.
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> epilogueOps;
  /// A later product of the same state whose X is already in shared memory
  /// when this product runs: its partial sums are computed in this
  /// product's call, before its barrier, into the scratch's second region,
  /// and only its reduction is left at its own place (a barrier and a wait
  /// on the tensor cores fewer per chunk; the delta rule's W S0 and Q S0).
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> hoisted;
  llvm::DenseSet<mlir::Operation *> hoistedProducts;
  /// For a hoisted product T + X S whose T is a matmul printed just before
  /// it and read by nothing else (the delta rule's P_qk N): that matmul,
  /// whose epilogue adds the partial sums, so the product's reduction is no
  /// pass of its own (when T's tile is also the result's; see the emitter).
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> reducedBy;
  /// reducedBy the other way: for such a matmul, the hoisted product.
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> reduces;
  /// Each warp holds all key columns of its value rows (no warp splits
  /// them): a product's result, epilogue included, is written by the warp
  /// that owns its value columns, with no scratch and no barrier.
  bool ownColumns = false;
  /// With ownColumns, for a product T + X S whose T is a matmul A B of
  /// value-column tiles read by nothing else, and whose sum is only stored:
  /// that matmul, which then computes the sum in registers and writes the
  /// output (reg_state::product_add_mma_into) in place of both (the
  /// additive rules' P V + q S, the delta rule's P U + q S).
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> fusedMatmul;
  /// fusedMatmul the other way: for such a matmul, the product.
  llvm::DenseMap<mlir::Operation *, mlir::Operation *> fusedProduct;
  /// Floats of shared memory the products' partial sums need (warps that
  /// split the key columns add theirs there), one region per product whose
  /// partials are live at once; 0 when no warp splits them.
  int64_t scratchFloats = 0, scratchRegionFloats = 0;

  /// The shared-memory tiles `inner` reads under this plan: its operands
  /// minus the state, nothing for a folded product, the folded product's
  /// operands for the add that folds it.
  llvm::SmallVector<mlir::Value, 4> tileReads(mlir::Operation *inner) const;
  /// The values whose tiles `inner` writes: its results that have tiles;
  /// the epilogue's result for a product that has one; nothing for the
  /// epilogue itself.
  llvm::SmallVector<mlir::Value, 2> tileWrites(mlir::Operation *inner) const;
  /// T of `product`'s epilogue (null without one), and the sign X S takes
  /// there (+1 or -1).
  mlir::Value epilogueBase(mlir::Operation *product) const;
  int epilogueSign(mlir::Operation *product) const;
  /// A product folded into the add after it, or an add or sub folded into
  /// the product before it: done by another op's call.
  bool printsNothing(mlir::Operation *inner) const {
    return folded.contains(inner) || epilogueOps.contains(inner) ||
           fusedMatmul.count(inner);
  }
  /// Whether `v` has a shared-memory tile under this plan.
  bool inSharedMemory(mlir::Value v) const;
};

/// The part `inner` plays in `plan`, as lina-place-state records it on the
/// op (`lina.state_use`, lina/Codegen/Passes.h): "product" (X S from the
/// accumulators), "hoisted" (such a product whose partial sums the product
/// before it makes), "folded" (Y^T Z accumulated into the state by the add
/// that reads it), "epilogue" (the add or sub done in its product's
/// reduction), "reduces" (the matmul whose epilogue sums a hoisted
/// product's partials), "fused" (the matmul that makes T + X S in registers
/// and writes the output); empty for an op with no part.
llvm::StringRef stateUse(const RegisterState &plan, mlir::Operation *inner);

/// The register-resident plan for a scan running `ops` (in order) with
/// `warps` warps on value tiles of `tileV` columns, carrying `state` (a
/// block argument, key_dim `keyDim` rows), or nullopt when the state's
/// uses or the tile shape rule it out (the scan then keeps the state in
/// shared memory).
std::optional<RegisterState>
planRegisterState(mlir::Value state, int64_t keyDim,
                  const llvm::SetVector<mlir::Operation *> &ops,
                  const llvm::DenseMap<mlir::Value, TileShape> &shapes,
                  int64_t tileV, int64_t warps);

/// The same for the kernel that walks a lina.chunked's chunks.
std::optional<RegisterState>
planRegisterState(ChunkedOp op, const llvm::SetVector<mlir::Operation *> &ops,
                  const llvm::DenseMap<mlir::Value, TileShape> &shapes,
                  int64_t tileV, int64_t warps);

} // namespace lina::cuda

#endif // LINA_CODEGEN_CUDA_REGISTERSTATE_H
