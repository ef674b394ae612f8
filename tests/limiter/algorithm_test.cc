#include "limiter/algorithm.h"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <random>

namespace tweetsearch::limiter {
namespace {

// A trace: request times (ms) and costs.
using Trace = std::vector<std::pair<int64_t, uint64_t>>;

constexpr uint64_t kLimit = 10;
constexpr int64_t kWindow = 1000;  // 10 per second: one unit every 100 ms

Trace Steady() {  // twice the allowed rate, for 10 s
  Trace t;
  for (int64_t ms = 0; ms < 10'000; ms += 50) t.emplace_back(ms, 1);
  return t;
}
Trace Bursty() {  // 30 at once every 2.5 s, and a few costly requests
  Trace t;
  for (int64_t ms = 0; ms < 10'000; ms += 2500) {
    for (int i = 0; i < 30; ++i) t.emplace_back(ms, 1);
    t.emplace_back(ms + 700, 4);
  }
  return t;
}
Trace Boundary() {  // the limit just before a window boundary, and again just after it
  Trace t;
  for (int i = 0; i < 10; ++i) t.emplace_back(kWindow - 1, 1);
  for (int i = 0; i < 10; ++i) t.emplace_back(kWindow, 1);
  return t;
}

// Reference models: each algorithm's textbook definition, written as plainly as possible, in
// exact rational arithmetic (amounts scaled by the window so every quantity is an integer).
class Reference {
 public:
  virtual ~Reference() = default;
  virtual bool Admit(int64_t now, uint64_t cost) = 0;
};

class TokenBucketRef : public Reference {  // tokens ×W; refill L per ms; capacity L×W
  int64_t tokens_ = kLimit * kWindow, last_ = 0;

 public:
  bool Admit(int64_t now, uint64_t cost) override {
    tokens_ = std::min<int64_t>(kLimit * kWindow, tokens_ + (now - last_) * kLimit);
    last_ = now;
    if (tokens_ < static_cast<int64_t>(cost) * kWindow) return false;
    tokens_ -= cost * kWindow;
    return true;
  }
};

class FixedWindowRef : public Reference {
  std::map<int64_t, uint64_t> count_;

 public:
  bool Admit(int64_t now, uint64_t cost) override {
    uint64_t& c = count_[now / kWindow];
    if (c + cost > kLimit) return false;
    c += cost;
    return true;
  }
};

class SlidingLogRef : public Reference {  // admitted units in (now − W, now]
  std::deque<std::pair<int64_t, uint64_t>> log_;

 public:
  bool Admit(int64_t now, uint64_t cost) override {
    uint64_t in_window = 0;
    for (const auto& [t, c] : log_) {
      if (t > now - kWindow) in_window += c;
    }
    if (in_window + cost > kLimit) return false;
    log_.emplace_back(now, cost);
    return true;
  }
};

class SlidingCounterRef : public Reference {  // prev × (W − elapsed)/W + current
  std::map<int64_t, uint64_t> count_;

 public:
  bool Admit(int64_t now, uint64_t cost) override {
    const int64_t w = now / kWindow, elapsed = now % kWindow;
    const uint64_t previous = count_.count(w - 1) ? count_[w - 1] : 0;
    const int64_t scaled = previous * (kWindow - elapsed) + count_[w] * kWindow;
    if (scaled + static_cast<int64_t>(cost) * kWindow > static_cast<int64_t>(kLimit) * kWindow) {
      return false;
    }
    count_[w] += cost;
    return true;
  }
};

class GcraRef : public Reference {  // virtual scheduling, T = W/L, tolerance W − T
  int64_t tat_ = 0;
  static constexpr int64_t T = kWindow / kLimit;

 public:
  bool Admit(int64_t now, uint64_t cost) override {
    const int64_t tat = std::max(tat_, now);
    if (tat + static_cast<int64_t>(cost) * T - now > kWindow) return false;
    tat_ = tat + cost * T;
    return true;
  }
};

class QueueRef : public Reference {  // departures one unit per T; wait at most max_wait
  int64_t next_ = 0;
  int64_t max_wait_;
  static constexpr int64_t T = kWindow / kLimit;

 public:
  explicit QueueRef(int64_t max_wait) : max_wait_(max_wait) {}
  bool Admit(int64_t now, uint64_t cost) override {
    const int64_t slot = std::max(next_, now);
    if (slot - now > max_wait_) return false;
    next_ = slot + cost * T;
    return true;
  }
};

std::unique_ptr<Reference> ReferenceFor(Algorithm a, int64_t max_wait) {
  switch (a) {
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucketMeter:
      return std::make_unique<TokenBucketRef>();
    case Algorithm::kFixedWindow:
      return std::make_unique<FixedWindowRef>();
    case Algorithm::kSlidingWindowLog:
      return std::make_unique<SlidingLogRef>();
    case Algorithm::kSlidingWindowCounter:
      return std::make_unique<SlidingCounterRef>();
    case Algorithm::kGcra:
      return std::make_unique<GcraRef>();
    case Algorithm::kLeakyBucketQueue:
      return std::make_unique<QueueRef>(max_wait);
  }
  return nullptr;
}

constexpr Algorithm kAll[] = {
    Algorithm::kTokenBucket, Algorithm::kLeakyBucketMeter, Algorithm::kLeakyBucketQueue,
    Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter,
    Algorithm::kGcra};

// Replays `trace`; returns admitted times, and checks every decision against the reference.
std::vector<std::pair<int64_t, uint64_t>> Replay(Algorithm a, const Trace& trace) {
  Limit limit{"test", a, kLimit, kWindow, /*max_wait_ms=*/250, false};
  State state = NewState(a);
  auto reference = ReferenceFor(a, limit.max_wait_ms);
  std::vector<std::pair<int64_t, uint64_t>> admitted;
  for (const auto& [now, cost] : trace) {
    const Decision d = Decide(limit, state, now, cost);
    EXPECT_EQ(d.allowed, reference->Admit(now, cost))
        << AlgorithmName(a) << " at " << now << " ms, cost " << cost;
    if (d.allowed) admitted.emplace_back(now, cost);
    EXPECT_LE(d.remaining, kLimit);
    if (!d.allowed) {
      EXPECT_GT(d.retry_after_ms, 0) << AlgorithmName(a);
    }
  }
  return admitted;
}

uint64_t Units(const std::vector<std::pair<int64_t, uint64_t>>& admitted) {
  uint64_t total = 0;
  for (const auto& [t, c] : admitted) total += c;
  return total;
}

// Most units admitted in any rolling window of kWindow ms.
uint64_t MaxInRollingWindow(const std::vector<std::pair<int64_t, uint64_t>>& admitted) {
  uint64_t best = 0;
  for (size_t i = 0; i < admitted.size(); ++i) {
    uint64_t sum = 0;
    for (size_t j = i; j < admitted.size() && admitted[j].first < admitted[i].first + kWindow;
         ++j) {
      sum += admitted[j].second;
    }
    best = std::max(best, sum);
  }
  return best;
}

TEST(AlgorithmTest, EveryDecisionMatchesTheDefinitionOnEveryTrace) {
  for (Algorithm a : kAll) {
    for (const Trace& trace : {Steady(), Bursty(), Boundary()}) Replay(a, trace);
  }
}

TEST(AlgorithmTest, AdmittedCountsOfTheNamedTraces) {
  // Steady at twice the rate for 10 s: the rate-based ones admit the burst plus the refill.
  EXPECT_EQ(Units(Replay(Algorithm::kTokenBucket, Steady())), 10u + 99u);
  EXPECT_EQ(Units(Replay(Algorithm::kGcra, Steady())), 10u + 99u);
  EXPECT_EQ(Units(Replay(Algorithm::kFixedWindow, Steady())), 100u);
  EXPECT_EQ(Units(Replay(Algorithm::kSlidingWindowLog, Steady())), 100u);
  // The boundary burst: a fixed window admits twice its limit within 2 ms; the exact
  // algorithms admit the limit.
  EXPECT_EQ(Units(Replay(Algorithm::kFixedWindow, Boundary())), 20u);
  EXPECT_EQ(MaxInRollingWindow(Replay(Algorithm::kFixedWindow, Boundary())), 20u);
  EXPECT_EQ(Units(Replay(Algorithm::kSlidingWindowLog, Boundary())), 10u);
  EXPECT_EQ(Units(Replay(Algorithm::kSlidingWindowCounter, Boundary())), 10u);
  EXPECT_EQ(Units(Replay(Algorithm::kTokenBucket, Boundary())), 10u);
  EXPECT_EQ(Units(Replay(Algorithm::kGcra, Boundary())), 10u);
  // The queue paces: with 250 ms of allowed wait, 3 units more than the pace.
  EXPECT_EQ(Units(Replay(Algorithm::kLeakyBucketQueue, Boundary())), 3u);
}

// The exact algorithm never admits more than the limit in any rolling window, on random traces;
// the others stay within their documented bounds.
TEST(AlgorithmTest, RollingWindowBoundsOnRandomTraces) {
  std::mt19937_64 rng(17);
  for (int round = 0; round < 50; ++round) {
    Trace trace;
    int64_t now = 0;
    for (int i = 0; i < 400; ++i) {
      now += rng() % 4 == 0 ? static_cast<int64_t>(rng() % 400) : 0;
      trace.emplace_back(now, 1 + rng() % 3);
    }
    EXPECT_LE(MaxInRollingWindow(Replay(Algorithm::kSlidingWindowLog, trace)), kLimit);
    // Burst plus one window of refill.
    EXPECT_LE(MaxInRollingWindow(Replay(Algorithm::kTokenBucket, trace)), 2 * kLimit);
    EXPECT_LE(MaxInRollingWindow(Replay(Algorithm::kGcra, trace)), 2 * kLimit);
    EXPECT_LE(MaxInRollingWindow(Replay(Algorithm::kFixedWindow, trace)), 2 * kLimit);
    EXPECT_LE(MaxInRollingWindow(Replay(Algorithm::kSlidingWindowCounter, trace)), 2 * kLimit);
  }
}

TEST(AlgorithmTest, RetryAfterIsWhenTheRequestWouldPass) {
  for (Algorithm a : kAll) {
    if (a == Algorithm::kLeakyBucketQueue) continue;
    Limit limit{"t", a, kLimit, kWindow, 0, false};
    State state = NewState(a);
    int64_t now = 5000;
    while (Decide(limit, state, now, 1).allowed) {
    }
    State copy = state;
    const Decision denied = Decide(limit, copy, now, 1);
    ASSERT_FALSE(denied.allowed);
    // A moment before retry-after it is still refused; at retry-after it passes.
    if (denied.retry_after_ms > 1) {
      State early = state;
      EXPECT_FALSE(Decide(limit, early, now + denied.retry_after_ms - 1, 1).allowed)
          << AlgorithmName(a);
    }
    State later = state;
    EXPECT_TRUE(Decide(limit, later, now + denied.retry_after_ms, 1).allowed) << AlgorithmName(a);
  }
}

TEST(AlgorithmTest, CostAboveTheLimitNeverPasses) {
  for (Algorithm a : kAll) {
    Limit limit{"t", a, kLimit, kWindow, 10'000, false};
    State state = NewState(a);
    EXPECT_FALSE(Decide(limit, state, 0, kLimit + 1).allowed) << AlgorithmName(a);
    EXPECT_TRUE(Decide(limit, state, 0, kLimit).allowed) << AlgorithmName(a);
  }
}

TEST(AlgorithmTest, NamesRoundTrip) {
  for (Algorithm a : kAll) EXPECT_EQ(*ParseAlgorithm(AlgorithmName(a)), a);
  EXPECT_FALSE(ParseAlgorithm("leaky").ok());
}

}  // namespace
}  // namespace tweetsearch::limiter

namespace tweetsearch::limiter {
namespace {

// Long logs grow, move their live entries to the front of their block, and are copied, many
// times over: every figure of every decision and charge equals a plain model of the log (a
// deque of entries), and so does a copy's next decision.
TEST(AlgorithmTest, LongLogsDecideAsAPlainListOfTheirEntries) {
  const Limit limit{"t", Algorithm::kSlidingWindowLog, 300, kWindow, 0, false};
  std::mt19937_64 rng(29);
  State state = NewState(limit.algorithm);
  std::deque<std::pair<int64_t, uint64_t>> model;  // (time, cost), oldest first
  int64_t now = 0;
  for (int i = 0; i < 30'000; ++i) {
    now += static_cast<int64_t>(rng() % 8);
    while (!model.empty() && model.front().first <= now - kWindow) model.pop_front();
    uint64_t total = 0;
    for (const auto& [t, c] : model) total += c;
    if (rng() % 50 == 0) {  // units admitted elsewhere, charged even beyond the limit
      const uint64_t units = 1 + rng() % 40;
      Charge(limit, state, now, units);
      model.emplace_back(now, units);
      continue;
    }
    const uint64_t cost = 1 + rng() % 3;
    const bool commit = rng() % 4 != 0;
    Decision want;
    want.allowed = total + cost <= limit.limit;
    want.remaining = limit.limit - std::min(total + (want.allowed ? cost : 0), limit.limit);
    const int64_t newest = model.empty() ? now : model.back().first;
    want.reset_ms = want.allowed ? std::max(newest, now) + kWindow - now
                                 : (model.empty() ? 0 : newest + kWindow - now);
    if (!want.allowed) {
      uint64_t left = total;
      for (const auto& [t, c] : model) {
        left -= c;
        if (left + cost <= limit.limit) {
          want.retry_after_ms = std::max<int64_t>(1, t + kWindow - now);
          break;
        }
      }
    }
    if (i % 997 == 0) {  // a copy decides as the original
      State copy = state;
      const Decision c = Decide(limit, copy, now, cost, /*commit=*/false);
      ASSERT_EQ(c.allowed, want.allowed) << "copy, step " << i;
      ASSERT_EQ(c.retry_after_ms, want.retry_after_ms) << "copy, step " << i;
    }
    const Decision d = Decide(limit, state, now, cost, commit);
    ASSERT_EQ(d.allowed, want.allowed) << "step " << i;
    ASSERT_EQ(d.remaining, want.remaining) << "step " << i;
    ASSERT_EQ(d.retry_after_ms, want.retry_after_ms) << "step " << i;
    ASSERT_EQ(d.reset_ms, want.reset_ms) << "step " << i;
    if (d.allowed && commit) model.emplace_back(now, cost);
  }
}

// A dry run decides like the real thing and leaves the state as a refusal would.
TEST(AlgorithmTest, DryRunsDecideAlikeAndChangeNothing) {
  std::mt19937_64 rng(23);
  for (Algorithm a : kAll) {
    Limit limit{"t", a, kLimit, kWindow, 250, false};
    State real = NewState(a);
    int64_t now = 0;
    for (int i = 0; i < 2000; ++i) {
      now += static_cast<int64_t>(rng() % 120);
      const uint64_t cost = 1 + rng() % 3;
      State before = real;
      const Decision dry = Decide(limit, real, now, cost, /*commit=*/false);
      State after_dry = real;
      const Decision again = Decide(limit, after_dry, now, cost, /*commit=*/false);
      ASSERT_EQ(dry.allowed, again.allowed) << AlgorithmName(a);
      State committed = before;
      const Decision wet = Decide(limit, committed, now, cost, /*commit=*/true);
      ASSERT_EQ(dry.allowed, wet.allowed) << AlgorithmName(a) << " at " << now;
      real = committed;
    }
  }
}

// A log of one entry keeps it inline, and moves it behind its pointer when a second comes: both
// forms expire an entry exactly when its time is W or more behind, and say the same retry and
// reset times.
TEST(AlgorithmTest, ALogOfOneEntryAndOfSeveralExpireAtTheSameEdge) {
  const Limit one{"t", Algorithm::kSlidingWindowLog, 1, kWindow, 0, false};
  State s = NewState(one.algorithm);
  EXPECT_TRUE(Decide(one, s, 0, 1).allowed);
  Decision d = Decide(one, s, kWindow - 1, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_ms, 1);
  EXPECT_EQ(d.reset_ms, 1);
  State copy = s;  // an inline entry is copied too
  EXPECT_FALSE(Decide(one, copy, kWindow - 1, 1).allowed);
  d = Decide(one, s, kWindow, 1);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0u);
  EXPECT_EQ(d.reset_ms, kWindow);

  const Limit two{"t", Algorithm::kSlidingWindowLog, 2, kWindow, 0, false};
  s = NewState(two.algorithm);
  EXPECT_TRUE(Decide(two, s, 0, 1).allowed);
  EXPECT_TRUE(Decide(two, s, 500, 1).allowed);  // the first entry moves behind the pointer
  d = Decide(two, s, kWindow - 1, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_ms, 1);
  EXPECT_EQ(d.reset_ms, 501);
  d = Decide(two, s, kWindow, 1);  // the entry at 0 has gone
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0u);
  d = Decide(two, s, 1499, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_ms, 1);

  s = NewState(two.algorithm);  // charged units take the same two forms
  Charge(two, s, 100, 1);
  Charge(two, s, 200, 1);
  d = Decide(two, s, 1099, 1);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after_ms, 1);
  EXPECT_EQ(d.reset_ms, 101);
}

}  // namespace
}  // namespace tweetsearch::limiter
