//===- FuseSumsTest.cpp - lina-fuse-sums on programs too big for lit ----===//
//
// Part of lina. test/Transforms/lina-fuse-sums.mlir has the rewrite's
// cases; this holds what a lit file cannot show well: a chain of adds far
// longer than any derived backward has (a hand-written program) folds into
// one sum without running out of stack, and a sum of more product factors
// than the CUDA kernels can mark keeps the later products as tiles.
//
//===----------------------------------------------------------------------===//
#include "lina/Transforms/Passes.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <string>

using namespace lina;

namespace {

/// The start of a backward named `name` that loads k, then `body`'s ops.
std::string backwardText(const std::string &name, const std::string &body) {
  return "lina.chunked_backward @" + name +
         " <decay = none, update = additive, key_dim = 16, value_dim = 8, "
         "heads = 1, value_heads = 1, dtype = bf16> chunk_size(32) {\n"
         "^bb0(%s: !lina.tile<16x8>, %ds: !lina.tile<16x8>):\n"
         "  %k = lina.load k : <32x16>\n" +
         body + "  lina.yield %ds : <16x8>\n}\n";
}

/// `text` parsed and run through lina-fuse-sums; null (with a failure
/// reported) where either fails.
mlir::OwningOpRef<mlir::ModuleOp> fused(const std::string &text,
                                        mlir::MLIRContext &ctx) {
  ctx.loadDialect<LinaDialect>();
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceString<mlir::ModuleOp>(text, &ctx);
  EXPECT_TRUE(module);
  if (!module)
    return module;
  mlir::PassManager pm(&ctx);
  pm.addPass(createLinaFuseSums());
  if (mlir::failed(pm.run(*module))) {
    ADD_FAILURE() << "lina-fuse-sums failed";
    return {};
  }
  return module;
}

TEST(FuseSums, AVeryLongChainOfAddsIsOneSum) {
  constexpr int kAdds = 200000;
  std::string body = "  %a0 = lina.add %k, %k : <32x16>\n";
  for (int i = 1; i < kAdds; ++i)
    body += "  %a" + std::to_string(i) + " = lina.add %a" +
            std::to_string(i - 1) + ", %k : <32x16>\n";
  body += "  lina.accumulate k, %a" + std::to_string(kAdds - 1) +
          " : <32x16>\n";

  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      fused(backwardText("chain", body), ctx);
  ASSERT_TRUE(module);

  auto backward = *module->getOps<ChunkedBackwardOp>().begin();
  int sums = 0, adds = 0;
  size_t leaves = 0;
  backward.getBody().walk([&](mlir::Operation *op) {
    if (auto sum = mlir::dyn_cast<SumOp>(op)) {
      ++sums;
      leaves = sum.getAdded().size() + sum.getSubtracted().size();
    }
    adds += mlir::isa<AddOp>(op);
  });
  EXPECT_EQ(sums, 1);
  EXPECT_EQ(adds, 0);
  EXPECT_EQ(leaves, static_cast<size_t>(kAdds) + 1);
}

TEST(FuseSums, ProductsPastTheSixtyFourthTileStayTiles) {
  constexpr int kProducts = 70;
  std::string body = "  %a0 = lina.add %k, %k : <32x16>\n";
  for (int i = 1; i <= kProducts; ++i) {
    std::string n = std::to_string(i);
    body += "  %m" + n + " = lina.mul %k, %k : <32x16>\n";
    body += "  %a" + n + " = lina.add %a" + std::to_string(i - 1) + ", %m" +
            n + " : <32x16>\n";
  }
  body += "  lina.accumulate k, %a" + std::to_string(kProducts) +
          " : <32x16>\n";

  mlir::MLIRContext ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      fused(backwardText("products", body), ctx);
  ASSERT_TRUE(module);

  auto backward = *module->getOps<ChunkedBackwardOp>().begin();
  auto sums = backward.getBody().getOps<SumOp>();
  ASSERT_EQ(std::distance(sums.begin(), sums.end()), 1);
  llvm::SmallVector<SumOp::Term, 8> terms = (*sums.begin()).getTerms();
  ASSERT_EQ(terms.size(), static_cast<size_t>(kProducts) + 2);
  // %k, %k, then the products: the 31 whose factors fit in the first 64
  // tiles are terms, the rest tiles.
  for (size_t t = 0; t < terms.size(); ++t)
    EXPECT_EQ(static_cast<bool>(terms[t].rhs), t >= 2 && t < 33) << t;
  auto muls = backward.getBody().getOps<MulOp>();
  EXPECT_EQ(std::distance(muls.begin(), muls.end()), kProducts - 31);
}

} // namespace
