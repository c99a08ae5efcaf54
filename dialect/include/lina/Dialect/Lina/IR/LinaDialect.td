//===- LinaDialect.td - The lina dialect -------------------*- tablegen -*-===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_DIALECT_TD
#define LINA_DIALECT_TD

include "mlir/IR/OpBase.td"

def Lina_Dialect : Dialect {
  let name = "lina";
  let cppNamespace = "::lina";
  let summary = "Linear-attention recurrences and their chunkwise algorithms";
  let description = [{
    The `lina` dialect holds the generic linear-attention recurrence

      S_t = (D_t + b_t a_t^T) S_{t-1} + w_t k_t v_t^T,   o_t = S_t^T (scale q_t)

    as a spec (`lina.recurrence` with a `#lina.spec` attribute), and the
    chunkwise algorithm that computes it as tile-level ops inside
    `lina.chunked`, whose body runs once per chunk with the state threaded
    through.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
  // `lina.cut` (lina-cut-state's record on a chunk's ops) is checked.
  let hasOperationAttrVerify = 1;
  let extraClassDeclaration = [{
    /// Defined beside the attribute storage classes (LinaAttrs.cpp).
    void registerAttributes();
  }];
}

class Lina_Op<string mnemonic, list<Trait> traits = []>
    : Op<Lina_Dialect, mnemonic, traits>;

#endif // LINA_DIALECT_TD
