//===- TuneReport.cpp - `lina tune --report FILE.html` -----------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "TuneReport.h"

#include "lina/Autotune/CacheKeys.h"
#include "lina/Autotune/ScheduleKnobs.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <unistd.h>

namespace lina::cli {

namespace {

// The plot's geometry, in SVG user units (pixels at 100%).
constexpr double kLeft = 56, kRight = 24, kTop = 40, kPlotHeight = 280;
constexpr double kPanelGap = 28, kBand = 18, kLegendRow = 22;
constexpr double kSlotWidth = 5, kMinColumn = 44, kMaxWidth = 1280;

/// Colours for the strategies, in the order they first appear; readable on
/// white and apart for the common forms of colour blindness.
constexpr const char *kPalette[] = {"#0072b2", "#e69f00", "#009e73",
                                    "#cc79a7", "#56b4e9", "#d55e00",
                                    "#7f7f00", "#6a3d9a"};

std::string escape(const std::string &text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&#39;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

std::string number(double v, const char *format = "%.1f") {
  char buf[48];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string milliseconds(double ms) { return number(ms, "%.4g") + " ms"; }

/// The schedule without its chunk size, tile-v and warps, which the plot
/// shows by position: "fused", "split prefetch", "split warpgroup segments 4".
std::string seriesOf(const TuneRow &row) {
  std::istringstream words(row.name);
  std::string word, rest;
  for (int i = 0; words >> word; ++i)
    if (i >= 3)
      rest += (rest.empty() ? "" : " ") + word;
  return rest;
}

/// A row's hover text: what it is and what became of it.
std::string tooltip(const TuneRow &row) {
  std::string text = row.name + ": ";
  if (std::optional<double> ms = row.timeMs())
    text += milliseconds(*ms);
  else
    text += row.status();
  if (!row.reason().empty())
    text += " (" + row.reason().substr(0, 300) + ")";
  if (row.isWinner)
    text += "; winner";
  if (row.isDefault)
    text += "; default";
  return escape(text);
}

/// Times from `lo` to `hi` onto the plot's height, log-scaled when they
/// span more than 3x.
class YScale {
public:
  YScale(double lo, double hi) : log(hi > 3 * lo && lo > 0) {
    if (log) {
      this->lo = std::log10(lo / 1.15);
      this->hi = std::log10(hi * 1.15);
    } else {
      this->lo = 0;
      this->hi = hi > 0 ? hi * 1.1 : 1;
    }
  }
  double y(double ms) const {
    double v = log ? std::log10(ms) : ms;
    return kTop + (hi - v) / (hi - lo) * kPlotHeight;
  }
  /// Log scale: 1, 2 and 5 times the powers of ten inside the range.
  /// Linear: from 0 in steps of a power of ten, or half of one, so that
  /// there are at least four.
  std::vector<double> ticks() const {
    std::vector<double> out;
    if (log) {
      double low = std::pow(10, lo), high = std::pow(10, hi);
      for (double decade = std::pow(10, std::floor(lo)); decade <= high;
           decade *= 10)
        for (double m : {1.0, 2.0, 5.0})
          if (decade * m >= low && decade * m <= high)
            out.push_back(decade * m);
      return out;
    }
    double step = std::pow(10, std::floor(std::log10(hi)));
    if (hi / step < 4)
      step /= 2;
    for (int i = 0; i * step <= hi; ++i)
      out.push_back(i * step);
    return out;
  }
  bool isLog() const { return log; }

private:
  bool log;
  double lo = 0, hi = 1;
};

/// An X mark centred on (x, y), as pruned and failed candidates are drawn.
std::string cross(double x, double y) {
  return "<path d=\"M" + number(x - 3) + " " + number(y - 3) +
         "l6 6m0 -6l-6 6\"/>";
}

/// What the plot places where: the chunk sizes (a panel each), the tile-v
/// values (a column each, in every panel), the strategies (a colour each)
/// and the (strategy, warps) pairs (a slot each, inside a column).
struct Layout {
  std::vector<int64_t> chunks, tiles;
  std::vector<std::string> series;
  std::vector<std::pair<std::string, int64_t>> slots;
  std::map<std::string, std::string> colour;
  double column = 0, panel = 0, width = 0;
  size_t panelsPerRow = 1, panelRows = 1;
  /// From a panel's top: the title, the plot area, the tile-v labels, the
  /// failed and the pruned band.
  static constexpr double kTitle = 22, kLabels = 18, kRowGap = 24;
  static constexpr double rowHeight() {
    return kTitle + kPlotHeight + kLabels + 2 * kBand + kRowGap;
  }
  double panelX(size_t i) const {
    return kLeft + double(i % panelsPerRow) * (panel + kPanelGap);
  }
  double panelTop(size_t i) const {
    return kTop + double(i / panelsPerRow) * rowHeight();
  }
};

Layout layOut(const TuneSummary &t) {
  Layout l;
  auto addUnique = [](auto &list, const auto &v) {
    if (std::find(list.begin(), list.end(), v) == list.end())
      list.push_back(v);
  };
  for (const TuneRow &row : t.rows) {
    addUnique(l.chunks, row.schedule.chunkSize);
    addUnique(l.tiles, row.schedule.tileV);
    addUnique(l.series, seriesOf(row));
    addUnique(l.slots, std::make_pair(seriesOf(row), row.schedule.warps));
  }
  std::sort(l.chunks.begin(), l.chunks.end());
  std::sort(l.tiles.begin(), l.tiles.end());
  auto seriesIndex = [&](const std::string &s) {
    return std::find(l.series.begin(), l.series.end(), s) - l.series.begin();
  };
  std::stable_sort(l.slots.begin(), l.slots.end(),
                   [&](const auto &a, const auto &b) {
                     if (seriesIndex(a.first) != seriesIndex(b.first))
                       return seriesIndex(a.first) < seriesIndex(b.first);
                     return a.second < b.second;
                   });
  for (size_t i = 0; i < l.series.size(); ++i)
    l.colour[l.series[i]] = kPalette[i % std::size(kPalette)];
  l.column = std::max(kMinColumn, kSlotWidth * double(l.slots.size()) + 10);
  l.panel = l.column * double(l.tiles.size());
  // Panels side by side up to about a laptop screen's width, then rows.
  l.panelsPerRow = std::max<size_t>(
      1, std::min(l.chunks.size(),
                  size_t((kMaxWidth - kLeft - kRight + kPanelGap) /
                         (l.panel + kPanelGap))));
  l.panelRows = (l.chunks.size() + l.panelsPerRow - 1) / l.panelsPerRow;
  l.width = kLeft + double(l.panelsPerRow) * (l.panel + kPanelGap) -
            kPanelGap + kRight;
  return l;
}

/// The plot: a panel per chunk size, tile-v across each, a slot per
/// (strategy, warps) inside a tile's column, the time up.
std::string plot(const TuneSummary &t) {
  Layout l = layOut(t);
  double lo = 0, hi = 0;
  bool anyTime = false;
  for (const TuneRow &row : t.rows)
    if (std::optional<double> ms = row.timeMs()) {
      lo = anyTime ? std::min(lo, *ms) : *ms;
      hi = anyTime ? std::max(hi, *ms) : *ms;
      anyTime = true;
    }
  YScale scale(lo, hi);

  // The legend flows in lines under the panels; its items are as wide as
  // their text (about 6.5 units a character at the legend's size).
  struct Item {
    std::string mark, text;
  };
  std::vector<Item> items;
  for (const std::string &s : l.series)
    items.push_back({"<circle cx=\"5\" cy=\"0\" r=\"4\" fill=\"" + l.colour[s] +
                         "\"/>",
                     s.empty() ? "(plain)" : s});
  items.push_back({"<circle class=\"winner\" cx=\"5\" cy=\"0\" r=\"7\"/>",
                   "winner (fastest recorded)"});
  items.push_back({"<rect class=\"default\" x=\"-1\" y=\"-6\" width=\"12\" "
                   "height=\"12\"/>",
                   "default schedule"});
  items.push_back({"<g class=\"failed\">" + cross(5, 0) + "</g>",
                   "failed: compile, launch, mismatch or timeout"});
  items.push_back({"<g class=\"pruned\">" + cross(5, 0) + "</g>",
                   "pruned: shared memory, registers, ..."});
  double legendTop = kTop + double(l.panelRows) * Layout::rowHeight();
  std::ostringstream legend;
  double lx = kLeft, ly = legendTop;
  for (const Item &item : items) {
    double itemWidth = 26 + 6.5 * double(item.text.size());
    if (lx > kLeft && lx + itemWidth > l.width - kRight) {
      lx = kLeft;
      ly += kLegendRow;
    }
    legend << "<g transform=\"translate(" << number(lx) << " " << number(ly)
           << ")\">" << item.mark << "<text class=\"legend\" x=\"16\" y=\"4\">"
           << escape(item.text) << "</text></g>\n";
    lx += itemWidth;
  }
  double height = ly + kLegendRow;

  std::ostringstream svg;
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << number(l.width)
      << "\" height=\"" << number(height) << "\" viewBox=\"0 0 "
      << number(l.width) << " " << number(height)
      << "\" role=\"img\" aria-label=\"every candidate's time by chunk size, "
         "tile-v and strategy\">\n"
      << "<text class=\"axis-title\" x=\"8\" y=\"" << number(kTop - 24)
      << "\">time per call (ms" << (scale.isLog() ? ", log scale" : "")
      << ")</text>\n";
  for (size_t ci = 0; ci < l.chunks.size(); ++ci) {
    double x0 = l.panelX(ci), top = l.panelTop(ci) + Layout::kTitle;
    double axis = top + kPlotHeight;
    double failedBand = axis + Layout::kLabels + kBand / 2;
    double prunedBand = failedBand + kBand;
    auto y = [&](double ms) { return top + (scale.y(ms) - kTop); };
    svg << "<g class=\"panel\">\n<text class=\"panel-title\" x=\""
        << number(x0 + l.panel / 2) << "\" y=\"" << number(top - 8)
        << "\" text-anchor=\"middle\">chunk size " << l.chunks[ci]
        << "</text>\n<rect class=\"frame\" x=\"" << number(x0) << "\" y=\""
        << number(top) << "\" width=\"" << number(l.panel) << "\" height=\""
        << number(kPlotHeight) << "\"/>\n";
    // The time axis on the left of each row, with grid lines.
    if (anyTime)
      for (double v : scale.ticks()) {
        svg << "<line class=\"grid\" x1=\"" << number(x0) << "\" x2=\""
            << number(x0 + l.panel) << "\" y1=\"" << number(y(v))
            << "\" y2=\"" << number(y(v)) << "\"/>";
        if (ci % l.panelsPerRow == 0)
          svg << "<text class=\"tick\" x=\"" << number(x0 - 6) << "\" y=\""
              << number(y(v) + 4) << "\" text-anchor=\"end\">"
              << number(v, "%.3g") << "</text>";
        svg << "\n";
      }
    else
      svg << "<text class=\"note\" x=\"" << number(x0 + 8) << "\" y=\""
          << number(top + kPlotHeight / 2)
          << "\">no candidate ran and matched the reference</text>\n";
    if (ci % l.panelsPerRow == 0)
      svg << "<text class=\"band\" x=\"" << number(x0 - 6) << "\" y=\""
          << number(failedBand + 4) << "\" text-anchor=\"end\">failed</text>"
          << "<text class=\"band\" x=\"" << number(x0 - 6) << "\" y=\""
          << number(prunedBand + 4) << "\" text-anchor=\"end\">pruned</text>\n";
    for (size_t ti = 0; ti < l.tiles.size(); ++ti) {
      double left = x0 + l.column * double(ti);
      svg << "<text class=\"tick\" x=\"" << number(left + l.column / 2)
          << "\" y=\"" << number(axis + 14) << "\" text-anchor=\"middle\">tv"
          << l.tiles[ti] << "</text>\n";
      if (ti > 0)
        svg << "<line class=\"divider\" x1=\"" << number(left) << "\" x2=\""
            << number(left) << "\" y1=\"" << number(top) << "\" y2=\""
            << number(axis) << "\"/>\n";
    }
    bool anyRan = false;
    for (const TuneRow &row : t.rows) {
      if (row.schedule.chunkSize != l.chunks[ci])
        continue;
      anyRan |= row.timeMs().has_value();
      size_t ti =
          std::find(l.tiles.begin(), l.tiles.end(), row.schedule.tileV) -
          l.tiles.begin();
      size_t si =
          std::find(l.slots.begin(), l.slots.end(),
                    std::make_pair(seriesOf(row), row.schedule.warps)) -
          l.slots.begin();
      double x = x0 + l.column * (double(ti) + 0.5) +
                 kSlotWidth * (double(si) - double(l.slots.size() - 1) / 2);
      std::string status = row.status();
      std::string title = "<title>" + tooltip(row) + "</title>";
      if (std::optional<double> ms = row.timeMs()) {
        double py = y(*ms);
        svg << "<g class=\"ok\">" << title << "<circle cx=\"" << number(x)
            << "\" cy=\"" << number(py) << "\" r=\"3.5\" fill=\""
            << l.colour[seriesOf(row)] << "\"/>";
        if (row.isDefault)
          svg << "<rect class=\"default\" x=\"" << number(x - 7) << "\" y=\""
              << number(py - 7) << "\" width=\"14\" height=\"14\"/>";
        if (row.isWinner)
          svg << "<circle class=\"winner\" cx=\"" << number(x) << "\" cy=\""
              << number(py) << "\" r=\"9\"/><text class=\"winner-label\" "
              << "x=\"" << number(x + 12) << "\" y=\"" << number(py + 4)
              << "\">winner</text>";
        svg << "</g>\n";
      } else if (status != "not_tried") {
        bool pruned = status == "pruned";
        svg << "<g class=\"" << (pruned ? "pruned" : "failed") << "\">"
            << title << cross(x, pruned ? prunedBand : failedBand) << "</g>\n";
      }
    }
    // Say why a panel is empty.
    bool allPruned = std::all_of(t.rows.begin(), t.rows.end(), [&](auto &r) {
      return r.schedule.chunkSize != l.chunks[ci] || r.status() == "pruned";
    });
    if (anyTime && !anyRan)
      svg << "<text class=\"note\" x=\"" << number(x0 + l.panel / 2)
          << "\" y=\"" << number(top + kPlotHeight / 2)
          << "\" text-anchor=\"middle\">"
          << (allPruned ? "every candidate pruned" : "none timed")
          << "</text>\n";
    svg << "</g>\n";
  }
  svg << legend.str() << "</svg>\n";
  return svg.str();
}

/// Every candidate: the Ok ones fastest first, then the failed, the
/// pruned and those not tried, each in the space's order.
std::string table(const TuneSummary &t) {
  std::vector<const TuneRow *> rows;
  for (const TuneRow &row : t.rows)
    rows.push_back(&row);
  auto rank = [](const TuneRow *r) {
    std::string s = r->status();
    return s == "ok" ? 0 : s == "pruned" ? 2 : s == "not_tried" ? 3 : 1;
  };
  std::stable_sort(rows.begin(), rows.end(), [&](auto *a, auto *b) {
    if (rank(a) != rank(b))
      return rank(a) < rank(b);
    if (rank(a) == 0)
      return *a->timeMs() < *b->timeMs();
    return false;
  });
  const TuneRow *winner = t.winner();
  double best = winner && winner->timeMs() ? *winner->timeMs() : 0;
  std::ostringstream html;
  html << "<table>\n<thead><tr><th>#</th><th>schedule</th><th>status</th>"
          "<th>time</th><th>vs winner</th><th>shared memory</th>"
          "<th>note</th></tr></thead>\n<tbody>\n";
  size_t n = 0;
  for (const TuneRow *row : rows) {
    std::optional<double> ms = row->timeMs();
    std::string note;
    auto add = [&](const std::string &part) {
      note += (note.empty() ? "" : "; ") + escape(part);
    };
    if (row->isWinner)
      add("winner");
    if (row->isDefault)
      add("default");
    if (row->recordedEarlier)
      add("recorded earlier");
    if (!row->reason().empty())
      add(row->reason().substr(0, row->reason().find('\n')));
    html << "<tr class=\"" << row->status()
         << (row->isWinner ? " winner-row" : "") << "\"><td>"
         << (ms ? std::to_string(++n) : "") << "</td><td>"
         << escape(row->name) << "</td><td>" << row->status() << "</td><td>"
         << (ms ? milliseconds(*ms) : "") << "</td><td>"
         << (ms && best > 0 ? number(*ms / best, "%.2fx") : "")
         << "</td><td>"
         << (row->sharedBytes > 0 ? std::to_string(row->sharedBytes) + " B"
                                  : "")
         << "</td><td>" << note << "</td></tr>\n";
  }
  html << "</tbody>\n</table>\n";
  return html.str();
}

/// What was tuned and what came of it, as a definition list.
std::string facts(const TuneSummary &t) {
  std::ostringstream html;
  auto fact = [&](const std::string &name, const std::string &value) {
    html << "<dt>" << name << "</dt><dd>" << value << "</dd>\n";
  };
  fact("spec", "<code>" + escape(cache::canonicalSpecText(t.spec)) + "</code>");
  fact("GPU", escape((t.gpu.name.empty() ? "" : t.gpu.name + ", ") +
                     t.gpu.arch + ", " + std::to_string(t.gpu.smCount) +
                     " SMs" + (t.simulated ? " (cost model, not timed)" : "")));
  fact("bucket", escape(t.bucket) + " (key <code>" + escape(t.key.substr(0, 16)) +
                     "</code>)");
  fact("mode",
       escape(t.mode) +
           (t.mode == "fast" ? ", at most " + std::to_string(t.budget) +
                                   " candidates"
                             : ""));
  fact("candidates",
       std::to_string(t.rows.size()) + " in the space, " +
           std::to_string(t.viable()) + " viable; looked at " +
           std::to_string(t.result.looked) + " (" +
           std::to_string(t.result.tried) + " tried now, " +
           std::to_string(t.result.recorded) + " recorded earlier) in " +
           number(t.seconds) + " s" +
           (t.result.finished ? "" : "; stopped early"));
  const TuneRow *winner = t.winner(), *fallback = t.defaultRow();
  if (winner && winner->timeMs())
    fact("winner", "<strong>" + escape(winner->name) + "</strong>, " +
                       milliseconds(*winner->timeMs()));
  else
    fact("winner", "none: " + escape(t.error));
  if (fallback && fallback->timeMs()) {
    std::string value =
        escape(fallback->name) + ", " + milliseconds(*fallback->timeMs());
    if (winner && winner->timeMs() && *winner->timeMs() > 0)
      value += " (the winner is " +
               number(*fallback->timeMs() / *winner->timeMs(), "%.2fx") +
               " faster)";
    fact("default", value);
  } else {
    fact("default", escape(t.defaultName) + " (not timed)");
  }
  if (t.fastVsFull)
    fact("fast vs full",
         "fast picks " +
             escape(describe(fromCacheSchedule(t.fastVsFull->fast.schedule))) +
             " after " + std::to_string(t.fastVsFull->fastLooked) + " of " +
             std::to_string(t.fastVsFull->viable) + " candidates, " +
             number((t.fastVsFull->ratio - 1) * 100) +
             "% slower than full's best");
  fact("saved", t.saved ? "yes, in " + escape(t.cachePath)
                        : "no: " + escape(t.notSavedReason));
  return html.str();
}

constexpr const char *kStyle = R"css(
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222; }
h1 { font-size: 20px; margin: 0 0 12px; }
dl { display: grid; grid-template-columns: max-content auto; gap: 2px 16px; }
dt { font-weight: 600; } dd { margin: 0; }
code { font-size: 12px; word-break: break-all; }
svg { display: block; margin: 16px 0; font-size: 11px; }
.frame { fill: none; stroke: #999; }
.grid { stroke: #e4e4e4; } .divider { stroke: #f0f0f0; }
.tick, .band, .legend { fill: #444; } .note { fill: #888; }
.axis-title, .panel-title { fill: #222; font-weight: 600; }
.winner { fill: none; stroke: #000; stroke-width: 2; }
.winner-label { fill: #000; font-weight: 600; }
.default { fill: none; stroke: #000; stroke-dasharray: 3 2; }
.failed path { stroke: #c00; stroke-width: 1.5; }
.pruned path { stroke: #999; stroke-width: 1.2; }
table { border-collapse: collapse; font-size: 12px; }
th, td { text-align: left; padding: 2px 10px 2px 0; border-bottom: 1px solid #eee; }
tr.winner-row td { font-weight: 600; }
tr.pruned td, tr.not_tried td { color: #888; }
tr.compile_error td, tr.launch_error td, tr.mismatch td, tr.timeout td { color: #a00; }
)css";

} // namespace

std::string renderTuneReport(const TuneSummary &t) {
  std::ostringstream html;
  std::string title = "lina tune: " + t.spec.name + " at B=" +
                      std::to_string(t.shape.batch) +
                      " T=" + std::to_string(t.shape.seqLen) +
                      " H=" + std::to_string(t.spec.heads) +
                      " HV=" + std::to_string(t.spec.valueHeads);
  html << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta "
          "charset=\"utf-8\">\n<title>"
       << escape(title) << "</title>\n<style>" << kStyle
       << "</style>\n</head>\n<body>\n<h1>" << escape(title) << "</h1>\n<dl>\n"
       << facts(t) << "</dl>\n"
       << plot(t) << "<h2>Every candidate</h2>\n"
       << table(t) << "</body>\n</html>\n";
  return html.str();
}

std::string reportPathProblem(const std::string &path) {
  if (path.empty() || path == "-")
    return "the report needs a file name";
  if (llvm::sys::fs::is_directory(path))
    return path + " is a directory";
  std::string dir = llvm::sys::path::parent_path(path).str();
  if (dir.empty())
    dir = ".";
  if (!llvm::sys::fs::is_directory(dir))
    return "no directory " + dir;
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return "cannot write in " + dir;
  return "";
}

std::string writeTuneReport(const std::string &path, const TuneSummary &t) {
  std::string page = renderTuneReport(t);
  llvm::Error error =
      llvm::writeToOutput(path, [&](llvm::raw_ostream &os) -> llvm::Error {
        os << page;
        return llvm::Error::success();
      });
  if (!error)
    return "";
  return llvm::toString(std::move(error));
}

} // namespace lina::cli
