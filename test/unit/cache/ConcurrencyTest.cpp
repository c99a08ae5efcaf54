//===- ConcurrencyTest.cpp - Several writers, killed writers ------------===//
//
// Part of lina. Several processes tuning at once lose nothing, and a tune
// killed midway keeps every candidate it committed.
//
//===----------------------------------------------------------------------===//
#include "CacheTestUtil.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <sys/wait.h>
#include <thread>

using namespace lina::cache;
using namespace lina::cache::test;

namespace {

/// Forks a child that runs \p body and exits with its result, without
/// running the parent's atexit handlers or gtest's teardown.
template <typename F> pid_t spawn(F body) {
  pid_t pid = fork();
  if (pid == 0)
    _exit(body());
  return pid;
}

/// Child \p p's candidate i: unique across children, by tile_v and warps.
Candidate childCandidate(int p, int i) {
  return okCandidate(64, i + 1, p + 1, 1.0 + p + i / 100.0);
}

TEST(Concurrency, ForkedWritersLoseNothing) {
  TempDir tmp;
  std::string path = tmp.file("lina.db");
  TuningKey key = testKey();
  // The children race to create the file as well as to write to it.
  std::vector<pid_t> children;
  for (int p = 0; p < 4; ++p) {
    pid_t pid = spawn([&, p] {
      Cache cache = Cache::open(path, quiet());
      if (cache.isInMemory())
        return 2;
      for (int i = 0; i < 50; ++i)
        if (!cache.recordCandidate(key, childCandidate(p, i)))
          return 3;
      if (!cache.putCubin("child" + std::to_string(p), "cubin"))
        return 4;
      return cache.warnings().empty() ? 0 : 5;
    });
    EXPECT_GT(pid, 0);
    if (pid > 0)
      children.push_back(pid);
  }
  // Reap every child before any check can return early: a child left
  // running would write into the directory while it is being removed.
  std::vector<int> statuses;
  for (pid_t pid : children) {
    int status = -1;
    EXPECT_EQ(waitpid(pid, &status, 0), pid);
    statuses.push_back(status);
  }
  for (int status : statuses) {
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  Cache cache = Cache::open(path, quiet());
  EXPECT_TRUE(cache.warnings().empty());
  std::vector<Candidate> all = cache.candidates(key);
  EXPECT_EQ(all.size(), 200u);
  for (int p = 0; p < 4; ++p)
    for (int i = 0; i < 50; ++i) {
      Schedule s = childCandidate(p, i).schedule;
      EXPECT_EQ(
          std::count_if(all.begin(), all.end(),
                        [&](const Candidate &c) { return c.schedule == s; }),
          1)
          << s.str();
    }
  for (int p = 0; p < 4; ++p)
    EXPECT_TRUE(cache.getCubin("child" + std::to_string(p)).has_value());
  EXPECT_TRUE(asideFiles(tmp.path()).empty());
}

TEST(Concurrency, ThreadsWithTheirOwnConnections) {
  TempDir tmp;
  std::string path = tmp.file("lina.db");
  TuningKey key = testKey();
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      Cache cache = Cache::open(path, quiet());
      for (int i = 0; i < 50; ++i)
        failures[t] += !cache.recordCandidate(key, childCandidate(t, i));
      failures[t] += static_cast<int>(cache.warnings().size());
    });
  for (std::thread &t : threads)
    t.join();
  EXPECT_EQ(failures, std::vector<int>(4, 0));
  EXPECT_EQ(Cache::open(path, quiet()).candidates(key).size(), 200u);
}

TEST(Concurrency, KilledWriterKeepsItsCommittedCandidates) {
  TempDir tmp;
  std::string path = tmp.file("lina.db");
  TuningKey key = testKey();
  pid_t pid = spawn([&] {
    Cache cache = Cache::open(path, quiet());
    for (int i = 0; i < 10; ++i)
      if (!cache.recordCandidate(key, childCandidate(0, i)))
        return 3;
    // The eleventh is in flight: written, not committed, when the process
    // dies.
    RawDb raw(path);
    if (raw.exec("BEGIN IMMEDIATE; INSERT INTO candidates(tuning_id, "
                 "chunk_size, tile_v, warps, strategy, status, time_ms, "
                 "error, created) SELECT id, 16, 99, 9, 'fused', 'ok', 0.1, "
                 "'', 0 FROM tunings") != "")
      return 4;
    raise(SIGKILL);
    return 5;
  });
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status))
      << "child exited with " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGKILL);

  Cache cache = Cache::open(path, quiet());
  EXPECT_TRUE(cache.warnings().empty());
  std::vector<Candidate> all = cache.candidates(key);
  EXPECT_EQ(all.size(), 10u);
  for (const Candidate &c : all)
    EXPECT_NE(c.schedule.tileV, 99);
  // The dead writer's lock is gone: a resumed tune can write at once.
  EXPECT_TRUE(cache.recordCandidate(key, childCandidate(0, 10)));
  EXPECT_EQ(cache.candidates(key).size(), 11u);
}

TEST(Concurrency, WriterKilledFromOutsideMidTune) {
  TempDir tmp;
  std::string path = tmp.file("lina.db");
  TuningKey key = testKey();
  { Cache make = Cache::open(path, quiet()); }
  pid_t pid = spawn([&] {
    Cache cache = Cache::open(path, quiet());
    for (int i = 0;; ++i)
      cache.recordCandidate(key, okCandidate(64, i + 1, 4, 1.0, "fused"));
    return 0;
  });
  ASSERT_GT(pid, 0);
  // Kill it at an arbitrary point once it has committed at least 20.
  int64_t seen = 0;
  for (int tries = 0; tries < 2000 && seen < 20; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    RawDb raw(path, /*readOnly=*/true);
    seen = raw.queryInt("SELECT count(*) FROM candidates").value_or(0);
  }
  kill(pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_GE(seen, 20);

  Cache cache = Cache::open(path, quiet());
  EXPECT_TRUE(cache.warnings().empty());
  std::vector<Candidate> all = cache.candidates(key);
  // Everything committed before the count was read is still there, and
  // every row is whole.
  EXPECT_GE(static_cast<int64_t>(all.size()), seen);
  for (const Candidate &c : all) {
    EXPECT_EQ(c.status, CandidateStatus::Ok);
    EXPECT_EQ(c.timeMs, 1.0);
  }
  EXPECT_TRUE(cache.recordCandidate(key, okCandidate(16, 1, 1, 0.5)));
  EXPECT_EQ(cache.best(key)->timeMs, 0.5);
}

} // namespace
