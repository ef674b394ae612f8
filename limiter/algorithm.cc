#include "limiter/algorithm.h"

#include <algorithm>
#include <span>

#include "common/strings.h"

namespace tweetsearch::limiter {
namespace {

// TAT-based algorithms count in microseconds: exact in a double (Redis's Lua) for any Unix time
// of this millennium, and fine enough for any window.
constexpr int64_t kMicrosPerMilli = 1000;

struct NameOf {
  Algorithm algorithm;
  std::string_view name;
};
constexpr NameOf kNames[] = {
    {Algorithm::kTokenBucket, "token_bucket"},
    {Algorithm::kLeakyBucketMeter, "leaky_bucket"},
    {Algorithm::kLeakyBucketQueue, "leaky_bucket_queue"},
    {Algorithm::kFixedWindow, "fixed_window"},
    {Algorithm::kSlidingWindowLog, "sliding_window_log"},
    {Algorithm::kSlidingWindowCounter, "sliding_window_counter"},
    {Algorithm::kGcra, "gcra"},
};

int64_t CeilDiv(int64_t a, int64_t b) { return a <= 0 ? 0 : (a + b - 1) / b; }

// Token bucket and leaky-bucket meter share their arithmetic: amounts are kept in
// unit·milliseconds (units × window_ms), so that refilling `elapsed` ms adds exactly
// elapsed × limit, with integers only. The bucket holds `tokens`; the meter holds `level`,
// which is capacity − tokens: the two admit exactly the same requests, as the literature says.
Decision DecideBucket(const Limit& l, BucketState& s, int64_t now, uint64_t cost, bool meter,
                      bool commit) {
  const int64_t capacity = static_cast<int64_t>(l.limit) * l.window_ms;
  const int64_t need = static_cast<int64_t>(cost) * l.window_ms;
  int64_t tokens = !s.started ? capacity : meter ? capacity - s.amount : s.amount;
  const int64_t elapsed = s.started ? std::clamp<int64_t>(now - s.updated_ms, 0, l.window_ms) : 0;
  tokens = std::min(capacity, tokens + elapsed * static_cast<int64_t>(l.limit));
  Decision d;
  const int64_t rate = static_cast<int64_t>(l.limit);  // unit·ms per ms
  if (cost <= l.limit && tokens >= need) {
    d.allowed = true;
    tokens -= need;
    if (commit) {
      s.amount = meter ? capacity - tokens : tokens;
      s.updated_ms = std::max(now, s.started ? s.updated_ms : now);
      s.started = true;
    }
  } else {
    d.retry_after_ms = cost > l.limit ? l.window_ms : CeilDiv(need - tokens, rate);
  }
  d.remaining = static_cast<uint64_t>(tokens / l.window_ms);
  d.reset_ms = CeilDiv(capacity - tokens, rate);
  return d;
}

Decision DecideFixedWindow(const Limit& l, WindowState& s, int64_t now, uint64_t cost,
                           bool commit) {
  const int64_t start = now - (((now % l.window_ms) + l.window_ms) % l.window_ms);
  uint64_t current = start == s.window_start_ms ? s.current : 0;
  Decision d;
  d.reset_ms = start + l.window_ms - now;
  if (cost <= l.limit && current + cost <= l.limit) {
    d.allowed = true;
    current += cost;
    if (commit) {
      s.window_start_ms = start;
      s.current = current;
    }
  } else {
    d.retry_after_ms = cost > l.limit ? l.window_ms : d.reset_ms;
  }
  d.remaining = l.limit - std::min(current, l.limit);
  return d;
}

// Cloudflare's estimate: the previous window's count weighted by how much of it still
// overlaps the rolling window, plus the current window's count. Scaled by window_ms to stay in
// integers: estimate × W = previous × (W − elapsed) + current × W.
Decision DecideSlidingCounter(const Limit& l, WindowState& s, int64_t now, uint64_t cost,
                              bool commit) {
  const int64_t W = l.window_ms;
  const int64_t start = now - (((now % W) + W) % W);
  uint64_t current = 0, previous = 0;
  if (start == s.window_start_ms) {
    current = s.current;
    previous = s.previous;
  } else if (start == s.window_start_ms + W) {
    previous = s.current;
  }
  const int64_t elapsed = now - start;
  const __int128 estimate =
      static_cast<__int128>(previous) * (W - elapsed) + static_cast<__int128>(current) * W;
  const __int128 capacity = static_cast<__int128>(l.limit) * W;
  const __int128 need = static_cast<__int128>(cost) * W;
  Decision d;
  __int128 used = estimate;
  if (cost <= l.limit && estimate + need <= capacity) {
    d.allowed = true;
    current += cost;
    used += need;
    if (commit) {
      s.window_start_ms = start;
      s.current = current;
      s.previous = previous;
    }
  } else if (cost > l.limit) {
    d.retry_after_ms = W;
  } else if (current + cost <= l.limit && previous > 0) {
    // Within this window, once enough of the previous window has slid out:
    // previous × (W − e) + (current + cost) × W <= limit × W.
    const __int128 slack = capacity - static_cast<__int128>(current + cost) * W;
    const int64_t e = W - static_cast<int64_t>(slack / static_cast<__int128>(previous));
    d.retry_after_ms = std::max<int64_t>(1, e - elapsed);
  } else {
    // In the next window, where this window's count becomes the weighted previous one:
    // current × (W − e) + cost × W <= limit × W.
    const __int128 slack = capacity - need;
    const int64_t e =
        current == 0 ? 0 : W - static_cast<int64_t>(slack / static_cast<__int128>(current));
    d.retry_after_ms = W - elapsed + std::max<int64_t>(0, e);
  }
  d.remaining = used >= capacity ? 0 : static_cast<uint64_t>((capacity - used) / W);
  // Fully available once both counted windows have slid out.
  d.reset_ms = current > 0 ? 2 * W - elapsed : (previous > 0 ? W - elapsed : 0);
  return d;
}

using LogEntry = std::pair<int64_t, uint32_t>;

// Drops the entries older than the rolling window (time <= now − W): they no longer count.
void ExpireLog(const Limit& l, LogState& s, int64_t now) {
  if (!s.log) {
    if (s.total > 0 && s.single_ms <= now - l.window_ms) s.total = 0;
    return;
  }
  LogState::Log& log = *s.log;
  while (log.head < log.entries.size() && log.entries[log.head].first <= now - l.window_ms) {
    s.total -= log.entries[log.head].second;
    ++log.head;
  }
  if (log.head > 32 && log.head * 2 > log.entries.size()) {
    log.entries.erase(log.entries.begin(), log.entries.begin() + static_cast<long>(log.head));
    log.head = 0;
  }
}

// The live entries, oldest first: the log's from its head, or the inline one (copied to `one`).
std::span<const LogEntry> LiveEntries(const LogState& s, LogEntry& one) {
  if (s.log) return {s.log->entries.data() + s.log->head, s.log->entries.size() - s.log->head};
  if (s.total == 0) return {};
  one = {s.single_ms, static_cast<uint32_t>(s.total)};
  return {&one, 1};
}

// Appends an entry of `cost` (at least 1: Decide's costs are, and Charge skips nothing) at
// `now`: inline into an empty log, else behind the pointer (the inline entry moving there
// first).
void AppendLog(LogState& s, int64_t now, uint32_t cost) {
  if (!s.log && s.total == 0) {
    s.single_ms = now;
    s.total = cost;
    return;
  }
  if (!s.log) {
    s.log = std::make_unique<LogState::Log>();
    if (s.total > 0) s.log->entries.emplace_back(s.single_ms, static_cast<uint32_t>(s.total));
  }
  s.log->entries.emplace_back(now, cost);
  s.total += cost;
}

Decision DecideLog(const Limit& l, LogState& s, int64_t now, uint64_t cost, bool commit) {
  // Expiring entries changes no decision, so it happens on dry runs too.
  ExpireLog(l, s, now);
  LogEntry one;
  const std::span<const LogEntry> live = LiveEntries(s, one);
  const bool any = !live.empty();
  const int64_t newest = any ? live.back().first : now;
  Decision d;
  if (cost <= l.limit && s.total + cost <= l.limit) {
    d.allowed = true;
  } else if (cost > l.limit) {
    d.retry_after_ms = l.window_ms;
  } else {
    // Wait until enough of the oldest entries expire.
    uint64_t left = s.total;
    for (const LogEntry& e : live) {
      left -= e.second;
      if (left + cost <= l.limit) {
        d.retry_after_ms = std::max<int64_t>(1, e.first + l.window_ms - now);
        break;
      }
    }
  }
  d.remaining = l.limit - std::min(s.total + (d.allowed ? cost : 0), l.limit);
  // Full again once the newest entry leaves: an admitted request's own, on a dry run too.
  if (d.allowed) {
    d.reset_ms = std::max(newest, now) + l.window_ms - now;
    if (commit) AppendLog(s, now, static_cast<uint32_t>(cost));
  } else {
    d.reset_ms = any ? newest + l.window_ms - now : 0;
  }
  return d;
}

// One unit is worth T = window / limit, in microseconds.
int64_t EmissionMicros(const Limit& l) {
  return std::max<int64_t>(1, l.window_ms * kMicrosPerMilli / static_cast<int64_t>(l.limit));
}

// GCRA (ATM's "virtual scheduling"): a request of cost c moves TAT to max(TAT, now) + c·T and
// is admitted if the new TAT is at most one window ahead of now (burst tolerance: the whole
// limit).
Decision DecideGcra(const Limit& l, TatState& s, int64_t now_ms, uint64_t cost, bool commit) {
  const int64_t now = now_ms * kMicrosPerMilli;
  const int64_t T = EmissionMicros(l);
  const int64_t window = l.window_ms * kMicrosPerMilli;
  const int64_t tat = std::max(s.tat_us, now);
  const int64_t new_tat = tat + static_cast<int64_t>(cost) * T;
  Decision d;
  int64_t after = tat;
  if (cost <= l.limit && new_tat - now <= window) {
    d.allowed = true;
    if (commit) s.tat_us = new_tat;
    after = new_tat;
  } else {
    d.retry_after_ms =
        cost > l.limit ? l.window_ms : CeilDiv(new_tat - now - window, kMicrosPerMilli);
  }
  d.remaining = static_cast<uint64_t>(std::max<int64_t>(0, (now + window - after) / T));
  d.remaining = std::min<uint64_t>(d.remaining, l.limit);
  d.reset_ms = CeilDiv(after - now, kMicrosPerMilli);
  return d;
}

// A leaky bucket used as a queue: requests leave at one unit per T; a request is admitted if
// its turn comes within max_wait, and told how long to wait for it.
Decision DecideQueue(const Limit& l, TatState& s, int64_t now_ms, uint64_t cost, bool commit) {
  const int64_t now = now_ms * kMicrosPerMilli;
  const int64_t T = EmissionMicros(l);
  const int64_t max_wait = l.max_wait_ms * kMicrosPerMilli;
  const int64_t slot = std::max(s.tat_us, now);
  Decision d;
  int64_t next = slot;
  if (cost <= l.limit && slot - now <= max_wait) {
    d.allowed = true;
    d.delay_ms = CeilDiv(slot - now, kMicrosPerMilli);
    next = slot + static_cast<int64_t>(cost) * T;
    if (commit) s.tat_us = next;
  } else {
    d.retry_after_ms =
        cost > l.limit ? l.window_ms : CeilDiv(slot - now - max_wait, kMicrosPerMilli);
  }
  // Units that could still be queued within max_wait.
  const int64_t room = now + max_wait - next;
  d.remaining = room < 0 ? 0 : static_cast<uint64_t>(room / T + 1);
  d.remaining = std::min<uint64_t>(d.remaining, l.limit);
  d.reset_ms = CeilDiv(next - now, kMicrosPerMilli);
  return d;
}

// Charge(), per family of states.
void ChargeBucket(const Limit& l, BucketState& s, int64_t now, uint64_t units, bool meter) {
  const int64_t capacity = static_cast<int64_t>(l.limit) * l.window_ms;
  int64_t tokens = !s.started ? capacity : meter ? capacity - s.amount : s.amount;
  const int64_t elapsed = s.started ? std::clamp<int64_t>(now - s.updated_ms, 0, l.window_ms) : 0;
  tokens = std::min(capacity, tokens + elapsed * static_cast<int64_t>(l.limit));
  // Never below empty; fractions of a unit count (a whole-unit cut would leave up to a unit
  // per charge in the bucket that the admissions took).
  const uint64_t fits = static_cast<uint64_t>(tokens / l.window_ms) + 1;
  tokens = std::max<int64_t>(0, tokens - static_cast<int64_t>(std::min(units, fits)) * l.window_ms);
  s.amount = meter ? capacity - tokens : tokens;
  s.updated_ms = std::max(now, s.started ? s.updated_ms : now);
  s.started = true;
}

void ChargeWindow(const Limit& l, WindowState& s, int64_t now, uint64_t units) {
  const int64_t W = l.window_ms;
  const int64_t start = now - (((now % W) + W) % W);
  if (start != s.window_start_ms) {
    s.previous = start == s.window_start_ms + W ? s.current : 0;
    s.current = 0;
    s.window_start_ms = start;
  }
  s.current = std::min<uint64_t>(l.limit, s.current + units);
}

// Unlike the others, a log is charged in full even beyond its limit: its entries expire one by
// one, so units cut here would be missing once older entries expired.
void ChargeLog(const Limit& l, LogState& s, int64_t now, uint64_t units) {
  ExpireLog(l, s, now);
  AppendLog(s, now, static_cast<uint32_t>(std::min<uint64_t>(units, 1u << 30)));
}

void ChargeTat(const Limit& l, TatState& s, int64_t now_ms, uint64_t units, int64_t ahead_ms) {
  const int64_t now = now_ms * kMicrosPerMilli;
  const int64_t most = now + ahead_ms * kMicrosPerMilli;
  const int64_t tat = std::max(s.tat_us, now);
  s.tat_us =
      std::min(most, tat + static_cast<int64_t>(std::min(units, l.limit)) * EmissionMicros(l));
  s.tat_us = std::max(s.tat_us, tat);
}

}  // namespace

std::string_view AlgorithmName(Algorithm algorithm) {
  for (const NameOf& n : kNames) {
    if (n.algorithm == algorithm) return n.name;
  }
  return "?";
}

absl::StatusOr<Algorithm> ParseAlgorithm(std::string_view name) {
  for (const NameOf& n : kNames) {
    if (n.name == name) return n.algorithm;
  }
  return absl::InvalidArgumentError(
      StrCat("unknown algorithm '", name,
             "' (token_bucket, leaky_bucket, leaky_bucket_queue, fixed_window, sliding_window_log, "
             "sliding_window_counter, gcra)"));
}

int64_t StateLifetimeMs(const Limit& limit) {
  switch (limit.algorithm) {
    case Algorithm::kSlidingWindowCounter:
      return 2 * limit.window_ms;
    case Algorithm::kLeakyBucketQueue:
      return limit.window_ms + limit.max_wait_ms;
    default:
      return limit.window_ms;
  }
}

State NewState(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucketMeter:
      return BucketState{};
    case Algorithm::kFixedWindow:
    case Algorithm::kSlidingWindowCounter:
      return WindowState{};
    case Algorithm::kSlidingWindowLog:
      return LogState{};
    case Algorithm::kGcra:
    case Algorithm::kLeakyBucketQueue:
      return TatState{};
  }
  return WindowState{};
}

Decision Decide(const Limit& limit, State& state, int64_t now_ms, uint64_t cost, bool commit) {
  switch (limit.algorithm) {
    case Algorithm::kTokenBucket:
      return DecideBucket(limit, std::get<BucketState>(state), now_ms, cost, false, commit);
    case Algorithm::kLeakyBucketMeter:
      return DecideBucket(limit, std::get<BucketState>(state), now_ms, cost, true, commit);
    case Algorithm::kFixedWindow:
      return DecideFixedWindow(limit, std::get<WindowState>(state), now_ms, cost, commit);
    case Algorithm::kSlidingWindowCounter:
      return DecideSlidingCounter(limit, std::get<WindowState>(state), now_ms, cost, commit);
    case Algorithm::kSlidingWindowLog:
      return DecideLog(limit, std::get<LogState>(state), now_ms, cost, commit);
    case Algorithm::kGcra:
      return DecideGcra(limit, std::get<TatState>(state), now_ms, cost, commit);
    case Algorithm::kLeakyBucketQueue:
      return DecideQueue(limit, std::get<TatState>(state), now_ms, cost, commit);
  }
  return Decision{};
}

void Charge(const Limit& limit, State& state, int64_t now_ms, uint64_t units) {
  if (units == 0) return;
  switch (limit.algorithm) {
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucketMeter:
      return ChargeBucket(limit, std::get<BucketState>(state), now_ms, units,
                          limit.algorithm == Algorithm::kLeakyBucketMeter);
    case Algorithm::kFixedWindow:
    case Algorithm::kSlidingWindowCounter:
      return ChargeWindow(limit, std::get<WindowState>(state), now_ms, units);
    case Algorithm::kSlidingWindowLog:
      return ChargeLog(limit, std::get<LogState>(state), now_ms, units);
    case Algorithm::kGcra:
      return ChargeTat(limit, std::get<TatState>(state), now_ms, units, limit.window_ms);
    case Algorithm::kLeakyBucketQueue:
      return ChargeTat(limit, std::get<TatState>(state), now_ms, units,
                       limit.window_ms + limit.max_wait_ms);
  }
}

size_t StateBytes(const State& state) {
  size_t bytes = sizeof(State);
  if (const LogState* log = std::get_if<LogState>(&state); log != nullptr && log->log) {
    bytes += sizeof(LogState::Log) + log->log->entries.capacity() * sizeof(log->log->entries[0]);
  }
  return bytes;
}

}  // namespace tweetsearch::limiter
