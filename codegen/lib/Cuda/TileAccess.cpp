//===- TileAccess.cpp - The shared-memory tiles each op touches --------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "TileAccess.h"
#include "lina/Dialect/Lina/IR/Lina.h"
#include "RegisterState.h"
#include "RowPass.h"

using namespace mlir;

namespace lina::cuda {

bool TileAccess::storedByProducer(Operation *inner) const {
  return storedDirect && isa<StoreOp>(inner) && storedDirect->contains(inner);
}

/// The transpose a matmul's right operand comes from, when folded.
static Operation *
foldedTransposeOf(Operation *inner,
                  const llvm::DenseSet<Operation *> *foldedTransposes) {
  auto matmul = dyn_cast<MatmulOp>(inner);
  if (!matmul || !foldedTransposes)
    return nullptr;
  Operation *def = matmul.getRhs().getDefiningOp();
  return def && foldedTransposes->contains(def) ? def : nullptr;
}

llvm::SmallVector<Value, 4> TileAccess::reads(Operation *inner) const {
  if (storedByProducer(inner))
    return {};
  if (foldedTransposes && foldedTransposes->contains(inner))
    return {};
  if (Operation *transpose = foldedTransposeOf(inner, foldedTransposes))
    return {cast<MatmulOp>(inner).getLhs(), transpose->getOperand(0)};
  if (rows) {
    if (rows->isFetched(inner))
      return {};
    if (const RowPass *pass = rows->passOfMember(inner))
      return inner == pass->last() ? pass->reads
                                   : llvm::SmallVector<Value, 4>();
  }
  if (registers)
    return registers->tileReads(inner);
  return llvm::SmallVector<Value, 4>(inner->getOperands());
}

llvm::SmallVector<Value, 2> TileAccess::writes(Operation *inner) const {
  if (storedDirect && storedDirect->contains(inner))
    return {};
  if (foldedTransposes && foldedTransposes->contains(inner))
    return {};
  if (rows) {
    if (rows->isFetched(inner))
      return {};
    if (const RowPass *pass = rows->passOfMember(inner)) {
      llvm::SmallVector<Value, 2> written;
      if (inner == pass->last()) {
        for (Operation *load : pass->fetched)
          if (pass->toShared.contains(load->getResult(0)))
            written.push_back(load->getResult(0));
        for (Operation *member : pass->members)
          if (pass->toShared.contains(member->getResult(0)))
            written.push_back(member->getResult(0));
      }
      return written;
    }
  }
  if (registers)
    return registers->tileWrites(inner);
  return llvm::SmallVector<Value, 2>(inner->getResults());
}

bool TileAccess::printsNothing(Operation *inner) const {
  if (storedByProducer(inner))
    return true;
  if (foldedTransposes && foldedTransposes->contains(inner))
    return true;
  if (registers && registers->printsNothing(inner))
    return true;
  if (rows)
    if (const RowPass *pass = rows->passOfMember(inner))
      return inner != pass->last();
  return false;
}

bool TileAccess::mayWorkInPlace(Operation *inner) const {
  return !(rows && rows->passOfMember(inner));
}

} // namespace lina::cuda
