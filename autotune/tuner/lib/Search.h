//===- Search.h - The sweep and the fast search, for any schedule -*- C++ -*-===//
//
// Part of lina. Tuner.cpp's searches written once for both schedule types
// (the forward's ScheduleOptions, the backward's BackwardScheduleOptions):
// a codec says how a schedule is stored in the cache, read back and
// compared, so the recording, resuming and the fast mode's walk are the
// same code, tested once for each.
//
//===----------------------------------------------------------------------===//
#ifndef LINA_AUTOTUNE_LIB_SEARCH_H
#define LINA_AUTOTUNE_LIB_SEARCH_H

#include "lina/Autotune/SearchKnob.h"
#include "lina/Autotune/Tuner.h"

#include <algorithm>
#include <exception>
#include <optional>

namespace lina::search {

/// What the search needs to know of a schedule type.
template <typename Schedule> struct Codec {
  cache::Schedule (*toCache)(const Schedule &);
  Schedule (*fromCache)(const cache::Schedule &);
  /// Whether two schedules are the same kernel.
  bool (*same)(const Schedule &, const Schedule &);
  /// Where fast mode also looks and walks from when `start` is a schedule
  /// no single knob leaves for a viable one (the forward's wgmma scan), or
  /// nullopt. May be null.
  std::optional<Schedule> (*counterpart)(const Schedule &start);
};

inline constexpr const char *kInFlight =
    "the tune stopped while this candidate ran; it is tried once more";
inline constexpr const char *kInFlightTwice =
    "the tune stopped twice while this candidate ran (a hang?); not tried "
    "again";

inline bool faster(const cache::Candidate &a,
                   const std::optional<cache::Candidate> &b) {
  if (a.status != cache::CandidateStatus::Ok || !a.timeMs)
    return false;
  return !b || *a.timeMs < *b->timeMs;
}

/// One run: the recorded candidates, what was looked at, the best so far.
template <typename Schedule> class Session {
public:
  Session(cache::Cache &cache, const cache::TuningKey &key,
          const BasicTuneConfig<Schedule> &config, const Codec<Schedule> &codec,
          size_t limit)
      : cache(cache), key(key), config(config), codec(codec), limit(limit) {
    // Each in this build's spelling, so that a row an older lina wrote
    // ("+wgmma" for "+warpgroup") is the schedule it names, not one to
    // try again beside it.
    for (cache::Candidate &c : cache.candidates(key)) {
      c.schedule = codec.toCache(codec.fromCache(c.schedule));
      known.push_back(std::move(c));
    }
  }

  /// The candidate for `s`, recorded or tried now (and recorded); nullopt
  /// when the run must stop (trial limit, or not recorded in replay).
  std::optional<cache::Candidate> look(const Schedule &s) {
    if (stopped)
      return std::nullopt;
    cache::Schedule cs = codec.toCache(s);
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

  bool isSeen(const Schedule &s) const {
    cache::Schedule cs = codec.toCache(s);
    return std::any_of(
        seen.begin(), seen.end(),
        [&](const cache::Candidate &c) { return c.schedule == cs; });
  }

  void prepare(const std::vector<Schedule> &batch) {
    if (!config.prepare || config.recordedOnly)
      return;
    std::vector<Schedule> todo;
    for (const Schedule &s : batch)
      if (!isSeen(s) && !recorded(codec.toCache(s)))
        todo.push_back(s);
    if (!todo.empty())
      config.prepare(todo);
  }

  BasicTuneResult<Schedule> result;

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

  cache::Candidate tryOne(const Schedule &s) {
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
  const BasicTuneConfig<Schedule> &config;
  const Codec<Schedule> &codec;
  size_t limit;
  std::vector<cache::Candidate> known, seen;
  bool stopped = false;
};

template <typename Schedule>
bool contains(const std::vector<Schedule> &list, const Schedule &s,
              const Codec<Schedule> &codec) {
  return std::any_of(list.begin(), list.end(),
                     [&](const Schedule &o) { return codec.same(o, s); });
}

template <typename Schedule>
BasicTuneResult<Schedule> full(cache::Cache &cache, const cache::TuningKey &key,
                               const std::vector<Schedule> &viable,
                               const BasicTuneConfig<Schedule> &config,
                               const Codec<Schedule> &codec) {
  Session<Schedule> session(cache, key, config, codec, viable.size());
  session.prepare(viable);
  for (const Schedule &s : viable)
    if (!session.look(s))
      break;
  return session.result;
}

template <typename Schedule>
BasicTuneResult<Schedule>
fast(cache::Cache &cache, const cache::TuningKey &key,
     const std::vector<SearchKnob<Schedule>> &knobs,
     const std::vector<Schedule> &viable, const Schedule &start, size_t budget,
     const BasicTuneConfig<Schedule> &config, const Codec<Schedule> &codec) {
  budget = std::min(budget, viable.size());
  Session<Schedule> session(cache, key, config, codec, budget);
  BasicTuneResult<Schedule> &r = session.result;
  if (viable.empty() || budget == 0)
    return r;
  // Start from the heuristic; when it is not viable or fails, from the
  // first viable schedule that works.
  Schedule current = contains(viable, start, codec) ? start : viable.front();
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
  // A start that no single knob leaves for a viable schedule (the forward's
  // wgmma scan, Tuner.cpp) would end the descent where it began: where the
  // heuristic is one, the descent walks from its counterpart instead (both
  // are looked at), and the best of all wins.
  std::optional<cache::Candidate> here = r.best;
  std::optional<Schedule> counterpart =
      codec.counterpart ? codec.counterpart(start) : std::nullopt;
  if (counterpart && codec.same(current, start) &&
      contains(viable, *counterpart, codec) && !session.isSeen(*counterpart) &&
      r.looked < budget) {
    std::optional<cache::Candidate> other = session.look(*counterpart);
    if (!other)
      return r;
    if (faster(*other, std::nullopt))
      here = *other;
  }
  current = codec.fromCache(here->schedule);
  r.path.push_back(current);
  bool moved = true;
  while (moved) {
    moved = false;
    for (const SearchKnob<Schedule> &knob : knobs) {
      std::vector<Schedule> neighbours;
      for (int64_t v : knob.values) {
        Schedule n = current;
        knob.set(n, v);
        if (v != knob.get(current) && contains(viable, n, codec))
          neighbours.push_back(n);
      }
      // Within the budget; schedules already looked at cost nothing.
      std::vector<Schedule> batch;
      size_t fresh = 0;
      for (const Schedule &n : neighbours) {
        bool isNew = !session.isSeen(n);
        if (isNew && r.looked + fresh >= budget)
          break;
        fresh += isNew;
        batch.push_back(n);
      }
      session.prepare(batch);
      for (const Schedule &n : batch) {
        std::optional<cache::Candidate> seen = session.look(n);
        if (!seen)
          return r;
        if (faster(*seen, here))
          here = *seen;
      }
      Schedule best = codec.fromCache(here->schedule);
      if (!codec.same(best, current)) {
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

template <typename Schedule>
std::optional<FastVsFull>
compare(cache::Cache &cache, const cache::TuningKey &key,
        const std::vector<SearchKnob<Schedule>> &knobs,
        const std::vector<Schedule> &viable, const Schedule &start,
        size_t budget, const Codec<Schedule> &codec) {
  BasicTuneConfig<Schedule> replay;
  replay.recordedOnly = true;
  BasicTuneResult<Schedule> all = full(cache, key, viable, replay, codec);
  if (!all.finished || !all.best)
    return std::nullopt;
  BasicTuneResult<Schedule> walk =
      fast(cache, key, knobs, viable, start, budget, replay, codec);
  if (!walk.finished || !walk.best)
    return std::nullopt;
  FastVsFull out;
  out.fast = *walk.best;
  out.full = *all.best;
  out.fastLooked = walk.looked;
  out.viable = viable.size();
  out.ratio = *out.fast.timeMs / *out.full.timeMs;
  return out;
}

} // namespace lina::search

#endif // LINA_AUTOTUNE_LIB_SEARCH_H
