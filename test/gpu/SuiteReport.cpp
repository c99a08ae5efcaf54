//===- SuiteReport.cpp - results and reports --------------------------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "Suite.h"

namespace lina::gpusuite {
//===----------------------------------------------------------------------===//
// Results
//===----------------------------------------------------------------------===//

std::string formatError(double error) {
  if (std::isnan(error))
    return "nan";
  if (std::isinf(error))
    return "inf";
  char text[32];
  std::snprintf(text, sizeof(text), "%.2e", error);
  return text;
}

/// `message` with every line indented, to set it off from the case lines.
std::string indent(const std::string &message) {
  std::string out;
  size_t start = 0;
  while (start < message.size()) {
    size_t end = std::min(message.find('\n', start), message.size());
    out += "    " + message.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

/// The first line of `message`, at most `width` characters.
std::string firstLine(const std::string &message, size_t width) {
  std::string line = message.substr(0, message.find('\n'));
  return line.size() > width ? line.substr(0, width - 3) + "..." : line;
}

CaseResult checkAgainstReference(const reference::Problem &p,
                                 const DeviceRun &run, CaseResult result) {
  double start = now();
  reference::Comparison comparison = reference::compareWithReference(p, run);
  result.referenceMilliseconds = (now() - start) * 1e3;
  result.compared = true;
  result.outputError = comparison.outputError;
  result.stateError = comparison.stateError;
  result.passed = comparison.passed;
  return result;
}

//===----------------------------------------------------------------------===//
// Reports
//===----------------------------------------------------------------------===//

void printSummaryTable(const std::vector<Case> &cases,
                       const std::vector<CaseResult> &results) {
  struct Row {
    size_t passed = 0, total = 0, compared = 0;
    double worstOutput = 0, worstState = 0;
  };
  std::vector<std::string> order;
  std::map<std::string, Row> rows;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case &c = cases[i];
    char key[96];
    std::snprintf(key, sizeof(key), "%-12s %-15s %-5s", c.preset.c_str(),
                  strategyName(c).c_str(), toString(c.dtype));
    if (!rows.count(key))
      order.push_back(key);
    Row &row = rows[key];
    ++row.total;
    row.passed += results[i].passed;
    if (!results[i].compared)
      continue; // it has no errors to speak of
    ++row.compared;
    // relativeError reports NaN as inf, so std::max sees no NaN here.
    row.worstOutput = std::max(row.worstOutput, results[i].outputError);
    row.worstState = std::max(row.worstState, results[i].stateError);
  }
  std::printf("\n%-12s %-15s %-5s %-9s %-10s %s\n", "preset", "strategy",
              "dtype", "passed", "worst out", "worst state");
  for (const std::string &key : order) {
    const Row &row = rows[key];
    std::string passed =
        std::to_string(row.passed) + "/" + std::to_string(row.total);
    bool any = row.compared > 0;
    std::printf("%s %-9s %-10s %-10s%s\n", key.c_str(), passed.c_str(),
                any ? formatError(row.worstOutput).c_str() : "-",
                any ? formatError(row.worstState).c_str() : "-",
                row.passed == row.total ? "" : " FAIL");
  }
}

static std::string jsonString(const std::string &text) {
  std::string out = "\"";
  for (unsigned char ch : text) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += static_cast<char>(ch);
    } else if (ch < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof(escape), "\\u%04x", ch);
      out += escape;
    } else {
      out += static_cast<char>(ch);
    }
  }
  return out + "\"";
}

/// JSON has no infinity: a non-finite error is written as null.
static std::string jsonNumber(double value) {
  if (!std::isfinite(value))
    return "null";
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g", value);
  return text;
}

bool writeJson(const std::string &path, const cuda::Device &device,
               const std::vector<Case> &cases,
               const std::vector<CaseResult> &results) {
  FILE *file = std::fopen(path.c_str(), "w");
  if (!file)
    return false;
  std::fprintf(file, "{\n  \"gpu\": %s,\n  \"arch\": %s,\n  \"cases\": [\n",
               jsonString(device.name).c_str(),
               jsonString(device.arch).c_str());
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case &c = cases[i];
    const CaseResult &r = results[i];
    std::string lengths;
    for (int64_t length : c.lengths)
      lengths += (lengths.empty() ? "" : ", ") + std::to_string(length);
    std::fprintf(
        file,
        "    {\"name\": %s, \"preset\": %s, \"strategy\": %s, \"dtype\": %s, "
        "\"dim\": %" PRId64 ", \"batch\": %" PRId64 ", \"seqLen\": %" PRId64
        ", \"heads\": %" PRId64 ", \"valueHeads\": %" PRId64
        ", \"varlen\": [%s], \"initialState\": %s, \"seed\": %" PRIu64
        ", \"passed\": %s, \"compared\": %s, \"tolerance\": %s, "
        "\"outputError\": %s, "
        "\"stateError\": %s, \"gpuMs\": %s, \"referenceMs\": %s, "
        "\"kernelCompileS\": %s, \"message\": %s}%s\n",
        jsonString(c.name).c_str(), jsonString(c.preset).c_str(),
        jsonString(strategyName(c)).c_str(),
        jsonString(toString(c.dtype)).c_str(), c.dim, c.batch, c.seqLen,
        c.heads, c.valueHeads, lengths.c_str(),
        c.initialState ? "true" : "false", r.seed, r.passed ? "true" : "false",
        r.compared ? "true" : "false", jsonNumber(tolerance(c.dtype)).c_str(),
        jsonNumber(r.outputError).c_str(), jsonNumber(r.stateError).c_str(),
        jsonNumber(r.gpuMilliseconds).c_str(),
        jsonNumber(r.referenceMilliseconds).c_str(),
        jsonNumber(r.compileSeconds).c_str(), jsonString(r.message).c_str(),
        i + 1 < cases.size() ? "," : "");
  }
  std::fprintf(file, "  ]\n}\n");
  return std::fclose(file) == 0;
}

} // namespace lina::gpusuite
