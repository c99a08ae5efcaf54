//===- Commands.h - The lina subcommands ------------------------*- C++ -*-===//
//
// Part of lina. Each returns the process exit code; usage mistakes throw
// cli::UsageError (exit 2).
//
//===----------------------------------------------------------------------===//
#ifndef LINA_TOOLS_COMMANDS_H
#define LINA_TOOLS_COMMANDS_H

#include <string>
#include <vector>

namespace lina::cli {

int presetsCommand(const std::vector<std::string> &args);
int specCommand(const std::vector<std::string> &args);
int runCommand(const std::vector<std::string> &args);
int compileCommand(const std::vector<std::string> &args);
int tuneCommand(const std::vector<std::string> &args);
int cacheCommand(const std::vector<std::string> &args);
int versionCommand(const std::vector<std::string> &args);

} // namespace lina::cli

#endif // LINA_TOOLS_COMMANDS_H
