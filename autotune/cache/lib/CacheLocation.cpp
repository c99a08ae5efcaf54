//===- CacheLocation.cpp - Where the cache database lives --------------===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/CacheLocation.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace lina::cache {

namespace {

/// The variable's value, or "" when it is unset or empty.
std::string env(const char *name) {
  const char *v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::string homeDirectory() {
  std::string home = env("HOME");
  if (!home.empty())
    return home;
  // Services and some containers run without $HOME; the password database
  // still knows it.
  std::vector<char> buf(16384);
  struct passwd pw, *result = nullptr;
  if (getpwuid_r(getuid(), &pw, buf.data(), buf.size(), &result) == 0 &&
      result && result->pw_dir)
    return result->pw_dir;
  return "";
}

std::string stripTrailingSlashes(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  return dir;
}

} // namespace

std::string cacheDirectoryFromEnvironment() {
  std::string dir = env("LINA_CACHE_DIR");
  if (!dir.empty())
    return stripTrailingSlashes(dir);
  dir = env("XDG_CACHE_HOME");
  if (!dir.empty() && dir.front() == '/')
    return stripTrailingSlashes(dir) + "/lina";
  std::string home = homeDirectory();
  if (home.empty())
    return "";
  return stripTrailingSlashes(home) + "/.cache/lina";
}

std::string makeDirectories(const std::string &dir, unsigned mode) {
  if (dir.empty())
    return "empty directory name";
  // Create each missing prefix in turn; an existing component that is not a
  // directory is reported by name, since that is what the user must fix.
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/')
      continue;
    std::string prefix = dir.substr(0, pos);
    struct stat st;
    if (stat(prefix.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode))
        return prefix + " is not a directory";
      continue;
    }
    if (mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST)
      return "cannot create " + prefix + ": " + std::strerror(errno);
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return dir + " is not a directory";
  return "";
}

CacheLocation findCacheLocation() {
  CacheLocation loc;
  loc.directory = cacheDirectoryFromEnvironment();
  if (loc.directory.empty()) {
    loc.error = "no cache directory: set LINA_CACHE_DIR (HOME is unset)";
    return loc;
  }
  loc.path = loc.directory + "/" + kDatabaseFileName;
  loc.error = makeDirectories(loc.directory);
  return loc;
}

} // namespace lina::cache
