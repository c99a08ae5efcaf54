//===- KernelImage.cpp - A cubin with the launch facts it needs --------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/KernelImage.h"

#include <cstdlib>
#include <map>

namespace lina {

namespace {

constexpr const char *kMagic = "lina-kernel-image v4\n";

// A tripwire: KernelPlan grew or shrank, so a launch fact may be missing from
// the image. Add it to encodeKernelImage and decodeKernelImage (a field that
// launching reads must round-trip), bump the magic, then update this size.
// (The cubin key changes with the generator's sources anyway, so old images
// are never read by a new build.) index64 is not stored: the generator always
// emits 64-bit global offsets. (v4: needs_sm90a, which the launch reads:
// the wgmma scan takes its TMA descriptors as a second parameter; the bool
// fits beside index64, so the size did not move.) Nor is the written spec
// stored: it is the caller's, which buildKernelImage sets on a hit as the
// planner does.
static_assert(sizeof(KernelPlan) == sizeof(Spec) + sizeof(std::optional<Spec>) +
                                        8 * 4 + 32 * 6 + 8 * 8,
              "KernelPlan changed: update the kernel image format");

bool parseInt(const std::string &text, int64_t &out) {
  if (text.empty())
    return false;
  char *end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (*end != '\0')
    return false;
  out = v;
  return true;
}

} // namespace

std::string encodeKernelImage(const KernelPlan &plan,
                              const std::string &cubin) {
  std::string t = kMagic;
  auto line = [&](const char *name, const std::string &value) {
    t += name;
    t += '=';
    t += value;
    t += '\n';
  };
  line("strategy", toString(plan.strategy));
  line("chunk_size", std::to_string(plan.chunkSize));
  line("tile_v", std::to_string(plan.tileV));
  line("threads", std::to_string(plan.threads));
  line("scan_kernel", plan.scanKernel);
  line("scan_shared", std::to_string(plan.scanSharedBytes));
  line("output_kernel", plan.outputKernel);
  line("output_shared", std::to_string(plan.outputSharedBytes));
  line("prepare_kernel", plan.prepareKernel);
  line("prepare_shared", std::to_string(plan.prepareSharedBytes));
  line("chunk_data_floats", std::to_string(plan.chunkDataFloats));
  line("segments", std::to_string(plan.segments));
  line("combine_kernel", plan.combineKernel);
  line("carry_kernel", plan.carryKernel);
  line("carry_shared", std::to_string(plan.carrySharedBytes));
  line("segment_gate_columns", std::to_string(plan.segmentGateColumns));
  line("needs_sm90a", plan.needsSm90a ? "1" : "0");
  line("cubin_bytes", std::to_string(cubin.size()));
  t += '\n';
  t += cubin;
  return t;
}

std::optional<DecodedImage> decodeKernelImage(const std::string &image,
                                              const Spec &spec) {
  std::string magic = kMagic;
  if (image.compare(0, magic.size(), magic) != 0)
    return std::nullopt;
  std::map<std::string, std::string> fields;
  size_t pos = magic.size();
  while (true) {
    size_t eol = image.find('\n', pos);
    if (eol == std::string::npos)
      return std::nullopt;
    if (eol == pos) { // the blank line before the cubin
      pos = eol + 1;
      break;
    }
    std::string line = image.substr(pos, eol - pos);
    size_t eq = line.find('=');
    if (eq == std::string::npos)
      return std::nullopt;
    fields[line.substr(0, eq)] = line.substr(eq + 1);
    pos = eol + 1;
  }
  DecodedImage d;
  d.plan.spec = spec;
  // Zero until parsed (GCC cannot tell that a failed parse returns first).
  int64_t chunk = 0, tile = 0, threads = 0, scanShared = 0, outputShared = 0,
          prepareShared = 0, chunkData = 0, bytes = 0;
  Strategy parsed;
  const std::string &strategy = fields["strategy"];
  if (!parseInt(fields["chunk_size"], chunk) ||
      !parseInt(fields["tile_v"], tile) ||
      !parseInt(fields["threads"], threads) ||
      !parseInt(fields["scan_shared"], scanShared) ||
      !parseInt(fields["output_shared"], outputShared) ||
      !parseInt(fields["prepare_shared"], prepareShared) ||
      !parseInt(fields["chunk_data_floats"], chunkData) ||
      !parseInt(fields["cubin_bytes"], bytes) ||
      !parseStrategy(strategy, parsed) || prepareShared < 0 || chunkData < 0 ||
      fields["scan_kernel"].empty() || chunk < 1 || tile < 1 || threads < 1 ||
      scanShared < 0 || outputShared < 0 ||
      bytes != static_cast<int64_t>(image.size() - pos))
    return std::nullopt;
  d.plan.strategy = parsed;
  if (d.plan.strategy == Strategy::Materialize &&
      fields["output_kernel"].empty())
    return std::nullopt;
  d.plan.chunkSize = chunk;
  d.plan.tileV = tile;
  d.plan.threads = threads;
  d.plan.scanKernel = fields["scan_kernel"];
  d.plan.scanSharedBytes = static_cast<unsigned>(scanShared);
  d.plan.outputKernel = fields["output_kernel"];
  d.plan.outputSharedBytes = static_cast<unsigned>(outputShared);
  d.plan.prepareKernel = fields["prepare_kernel"];
  d.plan.prepareSharedBytes = static_cast<unsigned>(prepareShared);
  d.plan.chunkDataFloats = chunkData;
  int64_t segments = 0, carryShared = 0, gateColumns = 0;
  if (!parseInt(fields["segments"], segments) ||
      !parseInt(fields["carry_shared"], carryShared) ||
      !parseInt(fields["segment_gate_columns"], gateColumns) ||
      segments < 1 || carryShared < 0 || gateColumns < 0 ||
      (segments > 1 && (fields["combine_kernel"].empty() ||
                        fields["carry_kernel"].empty() || gateColumns < 1)))
    return std::nullopt;
  d.plan.segments = segments;
  d.plan.combineKernel = fields["combine_kernel"];
  d.plan.carryKernel = fields["carry_kernel"];
  d.plan.carrySharedBytes = static_cast<unsigned>(carryShared);
  d.plan.segmentGateColumns = gateColumns;
  const std::string &sm90a = fields["needs_sm90a"];
  if (sm90a != "0" && sm90a != "1")
    return std::nullopt;
  d.plan.needsSm90a = sm90a == "1";
  d.cubin = image.substr(pos);
  return d;
}

} // namespace lina
