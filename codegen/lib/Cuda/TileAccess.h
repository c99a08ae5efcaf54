//===- TileAccess.h - The shared-memory tiles each op touches ----*- C++ -*-===//
//
// Part of lina. What an op of a kernel reads from and writes to shared
// memory depends on the kernel's plans: a scan keeping its state in
// registers (RegisterState.h), a prepare kernel's row passes (RowPass.h)
// and its values stored straight from registers each take tiles out of
// shared memory or move an op's work into another's call. The allocator,
// the barrier tracker and the choice of packed tiles all ask this one place.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_CODEGEN_CUDA_TILEACCESS_H
#define LINA_CODEGEN_CUDA_TILEACCESS_H

#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

namespace lina::cuda {

struct RegisterState;
struct RowPlan;

struct TileAccess {
  /// The scan's register-resident state, or null.
  const RegisterState *registers = nullptr;
  /// The kernel's row passes, or null.
  const RowPlan *rows = nullptr;
  /// Ops whose call writes their result straight to global memory and to
  /// no tile (a prepare kernel's stored values that no op of it reads; a
  /// scan's output made in a product's epilogue), and the output stores
  /// they make unneeded, which read nothing and print nothing; or null.
  const llvm::DenseSet<mlir::Operation *> *storedDirect = nullptr;
  /// Transposes that no call makes: each reader is a matmul taking the
  /// transpose's input as its right operand, read transposed; or null.
  const llvm::DenseSet<mlir::Operation *> *foldedTransposes = nullptr;

  /// The tiles `inner`'s call reads: its operands, or what the plans say
  /// (for a row pass, its last member reads what the whole pass reads).
  llvm::SmallVector<mlir::Value, 4> reads(mlir::Operation *inner) const;
  /// The tiles `inner`'s call writes: its results, or what the plans say.
  llvm::SmallVector<mlir::Value, 2> writes(mlir::Operation *inner) const;
  /// Done inside another op's call: a folded product, an epilogue, a row
  /// pass's members but the last.
  bool printsNothing(mlir::Operation *inner) const;
  /// An output store whose value the producing op's call writes itself.
  bool storedByProducer(mlir::Operation *inner) const;
  /// Whether `inner`'s result may take the buffer of an operand dying there
  /// (a row pass's warps read rows of its inputs while others write).
  bool mayWorkInPlace(mlir::Operation *inner) const;
};

} // namespace lina::cuda

#endif // LINA_CODEGEN_CUDA_TILEACCESS_H
