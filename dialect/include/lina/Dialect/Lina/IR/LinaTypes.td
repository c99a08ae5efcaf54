//===- LinaTypes.td - Types of the lina dialect ------------*- tablegen -*-===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TYPES_TD
#define LINA_TYPES_TD

include "lina/Dialect/Lina/IR/LinaDialect.td"
include "mlir/IR/AttrTypeBase.td"

def Lina_TileType : TypeDef<Lina_Dialect, "Tile"> {
  let mnemonic = "tile";
  let summary = "a rows x cols tile of one (sequence, value head), fp32 or wider";
  let description = [{
    A tile of the chunkwise algorithm: `!lina.tile<64x128>` is one chunk of 64
    tokens by 128 channels, `!lina.tile<128x128>` a state. Rows of a chunk tile
    beyond the chunk's valid length are zero. The element precision is the
    backend's (float64 on the CPU executor, fp32 accumulation on the GPU).
  }];
  let parameters = (ins "int64_t":$rows, "int64_t":$cols);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

#endif // LINA_TYPES_TD
