//===- Cache.h - The SQLite cache of cubins and tuning results --*- C++ -*-===//
//
// Part of lina. One SQLite file holds compiled cubins (so a fresh process with
// a warm cache launches without codegen or NVRTC) and every timed candidate
// of every tuning run (so no user waits for a tune twice).
//
// Nothing here throws or aborts. The database is opened in WAL mode with a
// busy timeout and every write is one IMMEDIATE transaction, so several
// processes may tune at once and a killed tune loses at most the candidate in
// flight. Every cache still open at exit (the process-wide one is never
// closed) is checkpointed, as is the cache an export reads, so whenever no
// lina process runs the database file alone holds every entry.
//
// A file that is not a usable lina cache (corrupt, truncated, another
// application's SQLite database) is moved aside as <file>.corrupt-<UTC time>
// with one warning and a new cache is made in its place. A newer lina's
// cache (a higher schema version) is never moved or changed: this process
// uses an empty in-memory cache instead, with a warning that names the fix.
// When no file can be used at all (unwritable directory, read-only file)
// the cache lives in memory for this process, again with one warning.
// A file that stops taking writes while in use (disk full, I/O error,
// read-only, locked by another process past the busy timeout, deleted) is
// handled the same way: its entries are copied into memory, the write is
// made there, and the file keeps everything it already held.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_CACHE_H
#define LINA_AUTOTUNE_CACHE_H

#include "lina/Autotune/CacheKeys.h"
#include "lina/Autotune/Candidate.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lina::cache {

/// The schema this build reads and writes (PRAGMA user_version). A file with
/// a higher number was written by a newer lina and is left as it is; one of
/// version 1 (lina 0.1) is migrated when opened, keeping every entry, and
/// imported as it is. 2 added the spec's name to cubins and tuning results
/// and the arch to cubins.
inline constexpr int kSchemaVersion = 2;
/// PRAGMA application_id of a lina cache ("lina" in ASCII): tells our files
/// apart from any other application's SQLite database.
inline constexpr int32_t kApplicationId = 0x6c696e61;

struct CacheOptions {
  /// Print each warning to stderr as "lina: warning: ..." when it happens.
  /// Tests turn this off and read Cache::warnings() instead.
  bool printWarnings = true;
  /// How long a write waits for another process's transaction.
  int busyTimeoutMs = 5000;
};

/// How many characters of a key `lina cache list` shows at least: more
/// where another entry's key starts alike (as git abbreviates hashes).
inline constexpr size_t kShortKeyLength = 8;

/// One row of `lina cache list`.
struct CacheEntry {
  enum class Kind { Cubin, Tuning };
  Kind kind = Kind::Cubin;
  /// The cubin key, or TuningKey::digest().
  std::string key;
  /// The shortest prefix of key, of at least kShortKeyLength characters,
  /// that no other entry's key starts with.
  std::string shortKey;
  /// The spec's name; "" where an older lina did not record it.
  std::string specName;
  /// A cubin's target, a tuning result's GPU's; "" for a cubin an older
  /// lina stored.
  std::string arch;
  /// Tuning results: canonicalSpecText(), the GPU, its SMs, the bucket.
  std::string spec;
  std::string gpuName;
  int64_t smCount = 0;
  std::string bucket;
  /// Cubins: the blob's size. Tuning results: the bytes of the values its
  /// rows hold (without SQLite's overhead), candidates included.
  int64_t bytes = 0;
  /// Tuning results: recorded candidates, how many are Ok, the fastest.
  int64_t candidates = 0;
  int64_t okCandidates = 0;
  std::optional<double> bestMs;
  int64_t createdAt = 0;
  /// When it was last written (Unix seconds): a cubin's createdAt, a tuning
  /// result's newest candidate (a full sweep after a fast one adds some).
  int64_t updatedAt = 0;
};

/// Everything the cache holds about one entry but the cubin's bytes: what
/// `lina cache show` prints.
struct CacheEntryDetail {
  CacheEntry entry;
  /// Cubins: the stored SHA-256, and whether the blob still matches it.
  std::string checksum;
  bool checksumMatches = true;
  /// Tuning results: the rest of the key, and every candidate, the Ok ones
  /// fastest first (as candidates()).
  std::string driverVersion, nvrtcVersion, linaVersion;
  std::vector<Candidate> results;
};

/// What a cubin was built for, kept beside it for `lina cache list`. Not
/// part of its key: the key already depends on all of it.
struct CubinInfo {
  std::string specName; ///< the spec's name, e.g. "gdn"
  std::string arch;     ///< e.g. "sm_90a"
};

/// Why \p schedule, read from a cache, is no schedule this lina's tune
/// records ("" when it is one). The search space belongs to the tuner, which
/// this library does not link: the caller passes its check
/// (lina::storedScheduleProblem) to best() and importFrom().
using ScheduleCheck = std::function<std::string(const Schedule &schedule)>;

/// What an import added.
struct ImportStats {
  int64_t cubins = 0;     ///< cubin rows added or replaced by newer ones
  int64_t tunings = 0;    ///< tuning keys new to this cache
  int64_t candidates = 0; ///< candidate rows added or replaced by newer ones
};

/// The cache. Thread-safe: one SQLite connection per Cache, used under a
/// mutex. Separate Cache objects (in one process or many) on one file are
/// safe too; SQLite's file locks order their writes. A Cache must not be
/// used on both sides of a fork() (SQLite forbids sharing a connection with
/// a child): open a new one in the child.
class Cache {
public:
  /// Opens (creating if needed) the database at \p path; its directory must
  /// exist (openDefault() creates the default one). Never fails: an
  /// unusable file is replaced, and a newer lina's file or an unusable
  /// location gives an in-memory cache, each with a warning.
  static Cache open(const std::string &path, CacheOptions options = {});
  /// Opens findCacheLocation()'s path; a location that cannot be made gives
  /// an in-memory cache with a warning.
  static Cache openDefault(CacheOptions options = {});
  /// A cache that lives only as long as this object.
  static Cache openInMemory(CacheOptions options = {});

  Cache(Cache &&) noexcept;
  Cache &operator=(Cache &&) noexcept;
  ~Cache();

  /// The database file, or ":memory:".
  std::string path() const;
  bool isInMemory() const;
  /// Why entries written now are not kept after this process: the cause
  /// its warning gave when it moved into memory, naming the file and the
  /// OS or SQLite error (e.g. "the cache F is read-only (Permission
  /// denied)", "could not store a cubin in the cache F (database or disk
  /// is full)"). "" while the file takes the writes, and for
  /// openInMemory(), where nothing was meant to be kept.
  std::string notSavedReason() const;
  /// Whether what it holds is what its file held: true while it uses the
  /// file, and for the in-memory copy made when the file stopped taking
  /// writes; false when no file could be read (a newer lina's, an unusable
  /// location: the cache started empty) and for openInMemory().
  bool holdsFileEntries() const;
  /// Every warning given so far, each as printed (one line, no newline).
  std::vector<std::string> warnings() const;

  /// Stores \p blob under \p key (cubinKey()) with its SHA-256 and \p info;
  /// replaces an existing row. False when it could not be written (warned
  /// once).
  bool putCubin(const std::string &key, std::string_view blob,
                const CubinInfo &info = {});
  /// The blob, or nullopt on a miss. A row whose blob no longer matches its
  /// checksum is a miss too: it is deleted, with a warning.
  std::optional<std::string> getCubin(const std::string &key);

  /// Records \p candidate under \p key in its own transaction, replacing an
  /// earlier record of the same schedule.
  bool recordCandidate(const TuningKey &key, const Candidate &candidate);
  /// Every candidate of \p key: the Ok ones fastest first, then the rest by
  /// schedule.
  std::vector<Candidate> candidates(const TuningKey &key);
  /// The fastest Ok candidate with a time, if any. A row that could not
  /// have been recorded (a time that is not a finite number >= 0, a
  /// schedule number below 1, or one \p check refuses; e.g. from a file an
  /// older lina imported) is skipped with a warning, once per row, and the
  /// next fastest is taken: it must never become what kernels use.
  std::optional<Candidate> best(const TuningKey &key,
                                const ScheduleCheck &check = {});

  /// Every cubin, then every tuning key, oldest first.
  std::vector<CacheEntry> listEntries();
  /// The entry whose key is \p keyOrPrefix, else every entry whose key
  /// starts with it, as listEntries() gives them.
  std::vector<CacheEntry> findEntries(const std::string &keyOrPrefix);
  /// The entry findEntries() finds, when it finds exactly one. nullopt with
  /// \p error set when it finds none, or more than one: then \p error
  /// lists them, one line each (short key, kind, GPU, bucket, name).
  std::optional<CacheEntryDetail> entryDetail(const std::string &keyOrPrefix,
                                              std::string *error = nullptr);
  /// entryDetail() as a multi-line description (a cubin's size and
  /// checksum; a tuning key's fields and its candidates as a table).
  std::optional<std::string> show(const std::string &keyOrPrefix,
                                  std::string *error = nullptr);
  /// Deletes every entry. False when it could not be written.
  bool clear();
  /// Deletes the entries with the whole keys \p keys (findEntries() finds
  /// them from prefixes) in one transaction; \p removed counts those that
  /// were there. False when it could not be written.
  bool removeEntries(const std::vector<std::string> &keys,
                     int64_t *removed = nullptr);
  /// Deletes in one transaction every entry last written before \p cutoff
  /// (Unix seconds, against CacheEntry::updatedAt, judged inside the
  /// transaction), and gives the file back the space; \p removed gets them
  /// as listEntries() gave them. False when it could not be written.
  bool removeOlderThan(int64_t cutoff,
                       std::vector<CacheEntry> *removed = nullptr);

  /// Writes a consistent snapshot of the whole cache to \p path as a
  /// standalone SQLite database with this schema (replacing \p path
  /// atomically). A database rather than JSON: cubins stay binary, and the
  /// import checks are the ones open() makes.
  bool exportTo(const std::string &path, std::string *error = nullptr);
  /// Merges an exported file into this cache in one transaction; a row that
  /// exists on both sides keeps the newer. The file is checked first (a lina
  /// cache of this schema or of version 1, passes SQLite's integrity check, every cubin
  /// matches its checksum, every tuning key matches its fields, every status
  /// is known, every candidate has a finite time >= 0 or none and a
  /// schedule \p check accepts); if any check fails nothing changes and
  /// \p error says why, naming the row.
  bool importFrom(const std::string &path, std::string *error = nullptr,
                  ImportStats *stats = nullptr,
                  const ScheduleCheck &check = {});

  struct Impl;

private:
  explicit Cache(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

} // namespace lina::cache

#endif // LINA_AUTOTUNE_CACHE_H
