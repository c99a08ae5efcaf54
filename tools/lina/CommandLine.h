//===- CommandLine.h - Argument parsing for the lina CLI --------*- C++ -*-===//
//
// Part of lina. A small strict parser: every subcommand declares its options,
// anything else is one clear error line and exit code 2 (UsageError).
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TOOLS_COMMANDLINE_H
#define LINA_TOOLS_COMMANDLINE_H

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace lina::cli {

/// A mistake in how lina was called; main prints it and exits with 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class ArgParser {
public:
  ArgParser(std::string command, std::string synopsis, std::string summary)
      : command(std::move(command)), synopsis(std::move(synopsis)),
        summary(std::move(summary)) {}

  void flag(const std::string &name, const std::string &help);
  void option(const std::string &name, const std::string &metavar,
              const std::string &help, std::string defaultValue = "");

  /// Parses `args` (without the program and subcommand names). Returns false
  /// when --help was given (help text already printed); throws UsageError.
  bool parse(const std::vector<std::string> &args);

  bool has(const std::string &name) const;
  /// The option's value, its default, or "" when neither.
  std::string get(const std::string &name) const;
  /// The option as an integer in [lo, hi]; unset gives `fallback`.
  int64_t getInt(const std::string &name, int64_t lo, int64_t hi,
                 int64_t fallback) const;
  const std::vector<std::string> &positional() const { return positionals; }
  std::string help() const;

private:
  struct Option {
    std::string metavar; ///< empty for a flag
    std::string help;
    std::string defaultValue;
  };
  std::string command, synopsis, summary;
  std::vector<std::string> order;
  std::map<std::string, Option> options;
  std::map<std::string, std::string> values;
  std::vector<std::string> positionals;
};

/// Parses a decimal integer in [lo, hi]; `what` names it in the error.
int64_t parseInt(const std::string &text, int64_t lo, int64_t hi,
                 const std::string &what);
/// Parses "a,b,c" into integers in [lo, hi].
std::vector<int64_t> parseIntList(const std::string &text, int64_t lo,
                                  int64_t hi, const std::string &what);

} // namespace lina::cli

#endif // LINA_TOOLS_COMMANDLINE_H
