//===- DecodePresetCodes.h - The presets as Decode.cuh codes ----*- C++ -*-===//
//
// Part of lina. The Config codes each preset must print (DecodeSource.cpp):
// DecodePlanTest checks the printed source against this table, and the CPU
// emulation instantiates the kernel from it (DecodeEmulation.h's
// PresetConfig), so the two tests together tie what the planner prints to
// what was emulated.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TEST_DECODE_DECODEPRESETCODES_H
#define LINA_TEST_DECODE_DECODEPRESETCODES_H

namespace lina::decodetest {

struct PresetCodes {
  const char *preset;
  int decay, update, gate, beta, lowRankA, lowRankB, write;
  bool l2;
};

// Decode.cuh's enums: decay none/fixed/scalar/per_channel = 0..3; update
// additive/delta/dplr = 0..2; gate given = 0; beta none/given = 0/1.
constexpr PresetCodes kPresetCodes[] = {
    {"linear_attn", 0, 0, 0, 0, 0, 0, 0, false},
    {"retnet", 1, 0, 0, 0, 0, 0, 0, false},
    {"mamba2", 2, 0, 0, 0, 0, 0, 0, false},
    {"gla", 3, 0, 0, 0, 0, 0, 0, false},
    {"deltanet", 0, 1, 0, 1, 0, 0, 0, true},
    {"gdn", 2, 1, 0, 1, 0, 0, 0, true},
    {"kda", 3, 1, 0, 1, 0, 0, 0, true},
    {"rwkv7", 3, 2, 0, 0, 0, 0, 0, false},
};

} // namespace lina::decodetest

#endif // LINA_TEST_DECODE_DECODEPRESETCODES_H
