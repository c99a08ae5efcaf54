//===- CommandLine.cpp - Argument parsing for the lina CLI -------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "CommandLine.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace lina::cli {

void ArgParser::flag(const std::string &name, const std::string &help) {
  order.push_back(name);
  options[name] = Option{"", help, ""};
}

void ArgParser::option(const std::string &name, const std::string &metavar,
                       const std::string &help, std::string defaultValue) {
  order.push_back(name);
  options[name] = Option{metavar, help, std::move(defaultValue)};
}

bool ArgParser::parse(const std::vector<std::string> &args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(help().c_str(), stdout);
      return false;
    }
    // "-o" is the one-letter spelling of "--o"; "-" alone is a positional.
    bool shortOption = arg.size() == 2 && arg[0] == '-' && std::isalpha(arg[1]);
    if (!shortOption && (arg.size() < 2 || arg.compare(0, 2, "--") != 0)) {
      positionals.push_back(arg);
      continue;
    }
    std::string name = arg.substr(shortOption ? 1 : 2), value;
    size_t eq = name.find('=');
    bool inlineValue = eq != std::string::npos;
    if (inlineValue) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    auto it = options.find(name);
    if (it == options.end())
      throw UsageError("unknown option '--" + name + "' for 'lina " + command +
                       "' (see 'lina " + command + " --help')");
    if (it->second.metavar.empty()) {
      if (inlineValue)
        throw UsageError("option '--" + name + "' takes no value");
      values[name] = "1";
      continue;
    }
    if (!inlineValue) {
      if (i + 1 >= args.size())
        throw UsageError("option '--" + name + "' needs a value: --" + name +
                         " " + it->second.metavar);
      value = args[++i];
    }
    values[name] = value;
  }
  return true;
}

bool ArgParser::has(const std::string &name) const {
  return values.count(name) != 0;
}

std::string ArgParser::get(const std::string &name) const {
  auto it = values.find(name);
  if (it != values.end())
    return it->second;
  auto opt = options.find(name);
  return opt == options.end() ? "" : opt->second.defaultValue;
}

int64_t ArgParser::getInt(const std::string &name, int64_t lo, int64_t hi,
                          int64_t fallback) const {
  if (!has(name))
    return fallback;
  return parseInt(get(name), lo, hi, "--" + name);
}

std::string ArgParser::help() const {
  std::ostringstream os;
  os << "usage: lina " << command << " " << synopsis << "\n\n"
     << summary << "\n";
  if (!order.empty())
    os << "\noptions:\n";
  for (const std::string &name : order) {
    const Option &o = options.at(name);
    std::string left = "--" + name + (o.metavar.empty() ? "" : " " + o.metavar);
    os << "  " << left;
    for (size_t pad = left.size(); pad < 26; ++pad)
      os << ' ';
    os << " " << o.help;
    if (!o.defaultValue.empty())
      os << " (default " << o.defaultValue << ")";
    os << "\n";
  }
  os << "  --help                     show this help\n";
  return os.str();
}

int64_t parseInt(const std::string &text, int64_t lo, int64_t hi,
                 const std::string &what) {
  errno = 0;
  char *end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE)
    throw UsageError(what + " expects an integer, got '" + text + "'");
  if (v < lo || v > hi)
    throw UsageError(what + " must be between " + std::to_string(lo) +
                     " and " + std::to_string(hi) + ", got " + text);
  return v;
}

std::vector<int64_t> parseIntList(const std::string &text, int64_t lo,
                                  int64_t hi, const std::string &what) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    out.push_back(parseInt(text.substr(start, comma - start), lo, hi, what));
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return out;
}

} // namespace lina::cli
