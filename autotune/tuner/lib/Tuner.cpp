//===- Tuner.cpp - The sweep and the fast search over a schedule space -===//
//
// Part of lina.
//
//===----------------------------------------------------------------------===//
#include "lina/Autotune/Tuner.h"

#include <algorithm>
#include <exception>

namespace lina {

namespace {

constexpr const char *kInFlight =
    "the tune stopped while this candidate ran; it is tried once more";
constexpr const char *kInFlightTwice =
    "the tune stopped twice while this candidate ran (a hang?); not tried "
    "again";

bool faster(const cache::Candidate &a,
            const std::optional<cache::Candidate> &b) {
  if (a.status != cache::CandidateStatus::Ok || !a.timeMs)
    return false;
  return !b || *a.timeMs < *b->timeMs;
}

/// One run: the recorded candidates, what was looked at, the best so far.
class Session {
public:
  Session(cache::Cache &cache, const cache::TuningKey &key,
          const TuneConfig &config, size_t limit)
      : cache(cache), key(key), config(config), limit(limit) {
    for (cache::Candidate &c : cache.candidates(key))
      known.push_back(std::move(c));
  }

  /// The candidate for `s`, recorded or tried now (and recorded); nullopt
  /// when the run must stop (trial limit, or not recorded in replay).
  std::optional<cache::Candidate> look(const ScheduleOptions &s) {
    if (stopped)
      return std::nullopt;
    cache::Schedule cs = toCacheSchedule(s);
    for (const cache::Candidate &c : seen)
      if (c.schedule == cs)
        return c;
    std::optional<cache::Candidate> found = recorded(cs);
    bool wasRecorded = found.has_value();
    if (!found) {
      if (config.recordedOnly ||
          (config.maxNewTrials && result.tried >= config.maxNewTrials)) {
        result.finished = false;
        return std::nullopt;
      }
      // Marked before the trial: if the process dies inside it (a kernel
      // that hangs until killed), the next run tries it once more, and the
      // run after that skips it instead of hanging again.
      cache::Candidate mark;
      mark.schedule = cs;
      mark.status = cache::CandidateStatus::Timeout;
      mark.error = interrupted(cs) ? kInFlightTwice : kInFlight;
      cache.recordCandidate(key, mark);
      found = tryOne(s);
      found->schedule = cs;
      // Its own transaction: a tune killed after this keeps it.
      cache.recordCandidate(key, *found);
      ++result.tried;
      if (config.stop && config.stop()) {
        stopped = true;
        result.finished = false;
      }
    } else {
      ++result.recorded;
    }
    seen.push_back(*found);
    ++result.looked;
    if (faster(*found, result.best))
      result.best = *found;
    if (config.progress) {
      TuneEvent e;
      e.index = result.looked;
      e.limit = limit;
      e.candidate = &seen.back();
      e.recorded = wasRecorded;
      e.best = result.best ? &*result.best : nullptr;
      config.progress(e);
    }
    return found;
  }

  bool isSeen(const ScheduleOptions &s) const {
    cache::Schedule cs = toCacheSchedule(s);
    return std::any_of(
        seen.begin(), seen.end(),
        [&](const cache::Candidate &c) { return c.schedule == cs; });
  }

  void prepare(const std::vector<ScheduleOptions> &batch) {
    if (!config.prepare || config.recordedOnly)
      return;
    std::vector<ScheduleOptions> todo;
    for (const ScheduleOptions &s : batch)
      if (!isSeen(s) && !recorded(toCacheSchedule(s)))
        todo.push_back(s);
    if (!todo.empty())
      config.prepare(todo);
  }

  TuneResult result;

private:
  /// The recorded result of `cs`, unless it is missing or a first
  /// interruption (to be tried again).
  std::optional<cache::Candidate> recorded(const cache::Schedule &cs) const {
    for (const cache::Candidate &c : known)
      if (c.schedule == cs && c.error != kInFlight)
        return c;
    return std::nullopt;
  }

  bool interrupted(const cache::Schedule &cs) const {
    return std::any_of(known.begin(), known.end(),
                       [&](const cache::Candidate &c) {
                         return c.schedule == cs && c.error == kInFlight;
                       });
  }

  cache::Candidate tryOne(const ScheduleOptions &s) {
    try {
      return config.trial(s);
    } catch (const std::exception &e) {
      cache::Candidate c;
      c.status = cache::CandidateStatus::LaunchError;
      c.error = std::string("exception: ") + e.what();
      return c;
    } catch (...) {
      cache::Candidate c;
      c.status = cache::CandidateStatus::LaunchError;
      c.error = "unknown exception";
      return c;
    }
  }

  cache::Cache &cache;
  const cache::TuningKey &key;
  const TuneConfig &config;
  size_t limit;
  std::vector<cache::Candidate> known, seen;
  bool stopped = false;
};

bool contains(const std::vector<ScheduleOptions> &list,
              const ScheduleOptions &s) {
  return std::any_of(list.begin(), list.end(), [&](const ScheduleOptions &o) {
    return sameSchedule(o, s);
  });
}

} // namespace

TuneResult tuneFull(cache::Cache &cache, const cache::TuningKey &key,
                    const std::vector<ScheduleOptions> &viable,
                    const TuneConfig &config) {
  Session session(cache, key, config, viable.size());
  session.prepare(viable);
  for (const ScheduleOptions &s : viable)
    if (!session.look(s))
      break;
  return session.result;
}

TuneResult tuneFast(cache::Cache &cache, const cache::TuningKey &key,
                    const std::vector<ScheduleKnob> &knobs,
                    const std::vector<ScheduleOptions> &viable,
                    const ScheduleOptions &start, size_t budget,
                    const TuneConfig &config) {
  budget = std::min(budget, viable.size());
  Session session(cache, key, config, budget);
  TuneResult &r = session.result;
  if (viable.empty() || budget == 0)
    return r;
  // Start from the heuristic; when it is not viable or fails, from the
  // first viable schedule that works.
  ScheduleOptions current = contains(viable, start) ? start : viable.front();
  std::optional<cache::Candidate> c = session.look(current);
  if (!c)
    return r;
  for (size_t i = 0; !r.best && i < viable.size() && r.looked < budget; ++i) {
    if (session.isSeen(viable[i]))
      continue;
    current = viable[i];
    if (!session.look(current))
      return r;
  }
  if (!r.best)
    return r;
  // The wgmma scan has one layout: no knob but wgmma leads from it to a
  // viable schedule, and wgmma off at that layout rarely is one (gdn's
  // fused mma.sync scan at C64 tv128 needs too much shared memory), so a
  // descent from it would end where it began. Where the heuristic is the
  // wgmma scan, the descent walks from its mma.sync counterpart instead
  // (withoutWgmma: both are looked at), and the best of all wins.
  std::optional<cache::Candidate> here = r.best;
  if (start.wgmma && sameSchedule(current, start)) {
    ScheduleOptions counterpart = withoutWgmma(start);
    if (contains(viable, counterpart) && !session.isSeen(counterpart) &&
        r.looked < budget) {
      std::optional<cache::Candidate> other = session.look(counterpart);
      if (!other)
        return r;
      if (faster(*other, std::nullopt))
        here = *other;
    }
  }
  current = fromCacheSchedule(here->schedule);
  r.path.push_back(current);
  bool moved = true;
  while (moved) {
    moved = false;
    for (const ScheduleKnob &knob : knobs) {
      std::vector<ScheduleOptions> neighbours;
      for (int64_t v : knob.values) {
        ScheduleOptions n = current;
        knob.set(n, v);
        if (v != knob.get(current) && contains(viable, n))
          neighbours.push_back(n);
      }
      // Within the budget; schedules already looked at cost nothing.
      std::vector<ScheduleOptions> batch;
      size_t fresh = 0;
      for (const ScheduleOptions &n : neighbours) {
        bool isNew = !session.isSeen(n);
        if (isNew && r.looked + fresh >= budget)
          break;
        fresh += isNew;
        batch.push_back(n);
      }
      session.prepare(batch);
      for (const ScheduleOptions &n : batch) {
        std::optional<cache::Candidate> seen = session.look(n);
        if (!seen)
          return r;
        if (faster(*seen, here))
          here = *seen;
      }
      ScheduleOptions best = fromCacheSchedule(here->schedule);
      if (!sameSchedule(best, current)) {
        current = best;
        r.path.push_back(current);
        moved = true;
      }
      if (r.looked >= budget)
        return r;
    }
  }
  return r;
}

std::optional<FastVsFull>
compareFastToFull(cache::Cache &cache, const cache::TuningKey &key,
                  const std::vector<ScheduleKnob> &knobs,
                  const std::vector<ScheduleOptions> &viable,
                  const ScheduleOptions &start, size_t budget) {
  TuneConfig replay;
  replay.recordedOnly = true;
  TuneResult full = tuneFull(cache, key, viable, replay);
  if (!full.finished || !full.best)
    return std::nullopt;
  TuneResult fast = tuneFast(cache, key, knobs, viable, start, budget, replay);
  if (!fast.finished || !fast.best)
    return std::nullopt;
  FastVsFull out;
  out.fast = *fast.best;
  out.full = *full.best;
  out.fastLooked = fast.looked;
  out.viable = viable.size();
  out.ratio = *out.fast.timeMs / *out.full.timeMs;
  return out;
}

} // namespace lina
