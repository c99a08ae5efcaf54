//===- CompileMemo.cpp - Compiles remembered across test processes --------===//
//
// Part of lina. See CompileMemo.h.
//
//===----------------------------------------------------------------------===//
#include "CompileMemo.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string_view>
#include <sys/stat.h>
#include <unistd.h>

namespace lina::cuda {
namespace {

constexpr char kMagic[8] = {'L', 'I', 'N', 'A', 'M', 'E', 'M', '1'};

uint64_t fnv1a(std::string_view text) {
  uint64_t hash = 14695981039346656037ull;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

/// Two unrelated 64-bit hashes of the key: a file is taken only when both
/// match, so a wrong hit needs both to collide at once.
struct KeyHash {
  uint64_t first = 0, second = 0;
};

KeyHash hashKey(const std::string &key) {
  return {fnv1a(key), std::hash<std::string_view>{}(key)};
}

void putWord(std::string &out, uint64_t value) {
  out.append(reinterpret_cast<const char *>(&value), sizeof(value));
}

void putText(std::string &out, const std::string &text) {
  putWord(out, text.size());
  out += text;
}

/// Reads what putWord and putText wrote, refusing to read past the end.
class Reader {
public:
  explicit Reader(const std::string &data) : data_(data) {}
  bool word(uint64_t &value) {
    if (data_.size() - at_ < sizeof(value))
      return false;
    std::memcpy(&value, data_.data() + at_, sizeof(value));
    at_ += sizeof(value);
    return true;
  }
  bool text(std::string &out) {
    uint64_t size = 0;
    if (!word(size) || data_.size() - at_ < size)
      return false;
    out.assign(data_, at_, size);
    at_ += size;
    return true;
  }
  bool atEnd() const { return at_ == data_.size(); }

private:
  const std::string &data_;
  size_t at_ = sizeof(kMagic);
};

std::string hex(uint64_t value) {
  char buffer[17];
  std::snprintf(buffer, sizeof(buffer), "%016llx",
                static_cast<unsigned long long>(value));
  return buffer;
}

} // namespace

CompileMemo::CompileMemo(const std::string &compiler, const std::string &source,
                         const CompileOptions &options) {
  const char *directory = std::getenv("LINA_COMPILE_MEMO_DIR");
  if (!directory || !*directory)
    return;
  std::string key = compiler;
  key += '\0';
  key += options.arch;
  for (const std::string &flag : options.flags) {
    key += '\0';
    key += flag;
  }
  key += '\0';
  key += options.programName;
  key += '\0';
  key += source;
  KeyHash hash = hashKey(key);
  first_ = hash.first;
  second_ = hash.second;
  path_ = std::string(directory) + "/" + hex(hash.first) + hex(hash.second);
}

std::optional<CompiledKernel> CompileMemo::lookup() const {
  if (path_.empty())
    return std::nullopt;
  std::ifstream in(path_, std::ios::binary);
  if (!in)
    return std::nullopt;
  std::ostringstream contents;
  contents << in.rdbuf();
  const std::string data = contents.str();
  if (data.size() < sizeof(kMagic) ||
      data.compare(0, sizeof(kMagic), kMagic, sizeof(kMagic)) != 0)
    return std::nullopt;
  Reader reader(data);
  uint64_t first = 0, second = 0;
  CompiledKernel compiled;
  if (!reader.word(first) || !reader.word(second) || first != first_ ||
      second != second_ || !reader.text(compiled.arch) ||
      !reader.text(compiled.log) || !reader.text(compiled.cubin) ||
      !reader.atEnd() || compiled.cubin.empty())
    return std::nullopt;
  return compiled;
}

void CompileMemo::store(const CompiledKernel &compiled) const {
  if (path_.empty())
    return;
  (void)mkdir(path_.substr(0, path_.rfind('/')).c_str(), 0777);
  std::string data(kMagic, sizeof(kMagic));
  putWord(data, first_);
  putWord(data, second_);
  putText(data, compiled.arch);
  putText(data, compiled.log);
  putText(data, compiled.cubin);
  // Another thread or process may be writing the same program's file.
  static std::atomic<unsigned> writes{0};
  const std::string temporary = path_ + ".tmp" +
                                std::to_string(static_cast<long>(getpid())) +
                                "." + std::to_string(writes++);
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out) {
      out.close();
      std::remove(temporary.c_str());
      return;
    }
  }
  if (std::rename(temporary.c_str(), path_.c_str()) != 0)
    std::remove(temporary.c_str());
}

} // namespace lina::cuda
