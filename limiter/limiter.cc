#include "limiter/limiter.h"

#include <algorithm>
#include <array>
#include <bit>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "common/strings.h"
#include "limiter/entry_table.h"
#include "limiter/local_limiter.h"
#include "limiter/rule_match.h"

namespace tweetsearch::limiter {
namespace {

constexpr size_t kShards = 64;

// When states last used at `last_ms` with a lifetime of `idle_ms` become idle (saturating).
int64_t ExpiryOf(int64_t last_ms, int64_t idle_ms) {
  return idle_ms > std::numeric_limits<int64_t>::max() - last_ms
             ? std::numeric_limits<int64_t>::max()
             : last_ms + idle_ms;
}

// One limit's state, and the units admitted into it that Redis has not heard of (debts: kept
// only by the Redis backend's stand-in, see local_limiter.h).
struct Slot {
  State state;
  uint64_t debt = 0;
};

// A bucket's states, inline in its shard's table (entry_table.h): two cache lines, asked for
// together. The first holds what a check of a rule set of one limit reads and writes: the id,
// the expiry, the fingerprint, the hand's mark and the first limit's state. The second holds
// the second limit's state and the debts; a rule set of more limits keeps the rest behind
// `more`.
struct alignas(64) Entry {
  static constexpr size_t kInline = 2;

  BucketId key;
  int64_t expiry_ms = 0;     // when its states become idle: last use plus the set's lifetime
  uint32_t fingerprint = 0;  // of the rule set its states follow (RuleSet::fingerprint)
  uint8_t n = 0;             // limits
  bool used = false;         // touched since the clock hand last passed (second chance)
  State first;
  State second;
  std::array<uint64_t, kInline> debts{};
  std::unique_ptr<Slot[]> more;  // limits kInline.. (rule sets of more limits)

  State& state(size_t j) { return j == 0 ? first : j == 1 ? second : more[j - kInline].state; }
  uint64_t& debt(size_t j) { return j < kInline ? debts[j] : more[j - kInline].debt; }
};
static_assert(sizeof(Entry) == 128, "an entry is two cache lines");

// A shard's lock: a test-and-test-and-set spin lock that yields its core after a short spin. A
// shard is held for tens of nanoseconds, and on x86 taking it is one atomic exchange and leaving
// it a plain store, where std::mutex pays a second atomic instruction to leave (each such
// instruction waits for the core's pending stores: together they were the largest cost of a
// decision on one key). ThreadSanitizer sees its ordering (acquire and release atomics).
class ABSL_LOCKABLE ShardLock {
 public:
  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    while (locked_.exchange(true, std::memory_order_acquire)) {
      for (int spins = 0; locked_.load(std::memory_order_relaxed); ++spins) {
        if (spins < 64) {
          Relax();
        } else {
          std::this_thread::yield();  // the holder may have lost its core
        }
      }
    }
  }
  void unlock() ABSL_UNLOCK_FUNCTION() { locked_.store(false, std::memory_order_release); }

 private:
  // Tells the core it is spinning (the other hardware thread of the core runs meanwhile).
  static void Relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }

  std::atomic<bool> locked_{false};
};

// A shard: its entries in a table found by bucket id. A clock hand goes round the table's places
// — a few per call — dropping states idle past their lifetime, and, while more than max_keys are
// kept in all, the first it finds not used since it last passed (CLOCK, an approximation of
// least recently used that needs no list to relink on every hit).
struct Shard {
  mutable ShardLock mu;
  // The entries. The hand's view of them is the table's hint per place: a time by which that
  // entry's states are surely not yet idle (its expiry as of when it was written: the entry may
  // have been used since, never less), or kNoHint. Eight places to a cache line, so the hand
  // passes a busy entry without reading the entry itself (at a million keys, a cache miss per
  // check); it reads the entry only where the view says idle (then refreshes the view) or
  // while more than max_keys states are kept.
  EntryTable<Entry> table ABSL_GUARDED_BY(mu);
  size_t hand ABSL_GUARDED_BY(mu) = 0;
  // Checks whose first bucket lives here, and of those the refused and shadow-exceeded ones:
  // counted under the lock the check holds anyway (a shared atomic counter cost every check an
  // atomic instruction, and two threads a cache line passed back and forth).
  uint64_t checks ABSL_GUARDED_BY(mu) = 0;
  uint64_t refused ABSL_GUARDED_BY(mu) = 0;
  uint64_t shadow_exceeded ABSL_GUARDED_BY(mu) = 0;
};

constexpr int64_t kNoHint = EntryTable<Entry>::kNoHint;

size_t ShardOf(const Bucket& b) { return b.id.hi % kShards; }

// Locks the shards of a request's buckets, in shard order (no deadlock), and makes room in
// them for the buckets' entries, so that finding (or inserting) one moves none of the others
// (entry_table.h).
class ShardLocks {
 public:
  ShardLocks(std::array<Shard, kShards>& shards, const std::array<Bucket, 2>& buckets, size_t n)
      : shards_(shards) {
    first_ = ShardOf(buckets[0]);
    second_ = n == 2 ? ShardOf(buckets[1]) : first_;
    if (second_ < first_) std::swap(first_, second_);
    shards_[first_].mu.lock();
    if (second_ != first_) shards_[second_].mu.lock();
    Reserve(n);
  }
  ~ShardLocks() {
    if (second_ != first_) shards_[second_].mu.unlock();
    shards_[first_].mu.unlock();
  }
  ShardLocks(const ShardLocks&) = delete;
  ShardLocks& operator=(const ShardLocks&) = delete;
  Shard& first() { return shards_[first_]; }
  Shard* second() { return second_ != first_ ? &shards_[second_] : nullptr; }

 private:
  void Reserve(size_t n) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (second_ != first_) {
      shards_[first_].table.Reserve(1);
      shards_[second_].table.Reserve(1);
    } else {
      shards_[first_].table.Reserve(n);
    }
  }

  std::array<Shard, kShards>& shards_;
  size_t first_, second_;
};

// How many limits the first `n` buckets' rule sets hold (LimitsOf without building the list).
size_t LimitCount(const std::array<Bucket, 2>& buckets, size_t n) {
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) count += buckets[i].set->limits.size();
  return count;
}

class MemoryLimiter final : public LocalLimiter {
 public:
  MemoryLimiter(const LimiterOptions& options, const Clock& clock, Rules rules, bool track_debts)
      : options_(options),
        clock_(clock),
        max_keys_(std::max<size_t>(1, options.max_keys)),
        track_debts_(track_debts) {
    SetRules(std::move(rules));
  }

  // The hot path: no allocation once warm (bucket keys are built in per-thread buffers, the
  // rules are a plain pointer), one or two shard locks.
  Verdict Check(const CheckRequest& request) override {
    return CheckAt(request, clock_.NowUnixMillis());
  }

  Verdict CheckAt(const CheckRequest& request, int64_t now) override {
    const Rules& rules = rules_.current();
    std::array<Bucket, 2> buckets;
    const size_t n = MatchRules(rules, request, nullptr, buckets);
    Verdict v;
    if (n == 0) {
      unlimited_.fetch_add(1, std::memory_order_relaxed);
      return v;
    }

    // Dry-run every limit, then commit only if every enforced limit admits. A check with one
    // limit decides and commits in one step (Decide changes a state only when it admits).
    const bool one_limit = n == 1 && buckets[0].set->limits.size() == 1;
    bool allowed = true;
    {
      ShardLocks locks(shards_, buckets, n);
      Prefetch(locks);
      std::array<Entry*, 2> entries{};
      std::array<uint32_t, 2> shadow_admitted{};  // bit j: shadow limit j admitted the dry run
      for (size_t i = 0; i < n; ++i) {
        entries[i] = Find(buckets[i], now);
        const RuleSet& set = *buckets[i].set;
        for (size_t j = 0; j < set.limits.size(); ++j) {
          const RuleLimit& r = set.limits[j];
          const Decision d = Decide(r.limit, entries[i]->state(j), now, CostOf(r, request),
                                    /*commit=*/one_limit);
          if (r.limit.shadow && d.allowed) shadow_admitted[i] |= 1u << j;
          if (Fold(r, d, &v)) allowed = false;
        }
      }
      if (allowed && one_limit) {  // Decide committed it, unless a shadow limit went over
        const RuleLimit& r = buckets[0].set->limits[0];
        if (!r.limit.shadow || (shadow_admitted[0] & 1u)) NoteDebt(r, request, entries[0]->debt(0));
        entries[0]->expiry_ms = ExpiryOf(now, buckets[0].set->max_window_ms);
      } else if (allowed) {
        for (size_t i = 0; i < n; ++i)
          Commit(*buckets[i].set, shadow_admitted[i], request, now, *entries[i]);
      } else {
        v.delay_ms = 0;
      }
      Trim(locks.first(), now, entries);
      if (Shard* second = locks.second()) Trim(*second, now, entries);
      Shard& counted = shards_[ShardOf(buckets[0])];
      ++counted.checks;
      counted.refused += allowed ? 0 : 1;
      counted.shadow_exceeded += v.shadow_exceeded.empty() ? 0 : 1;
    }

    SetPolicy(buckets, n, &v);
    return v;
  }

  absl::Status Reload() override {
    return rules_.Reload(options_.rules_path, [this](Rules rules) { SetRules(std::move(rules)); });
  }

  void SetRules(Rules rules) override { rules_.Set(std::move(rules)); }

  void Mirror(const CheckRequest& request, std::span<const uint64_t> remaining,
              uint64_t front_doors, int64_t now_ms) override {
    const Rules& rules = rules_.current();
    std::array<Bucket, 2> buckets;
    const size_t n = MatchRules(rules, request, nullptr, buckets);
    if (n == 0 || LimitCount(buckets, n) != remaining.size()) return;
    ShardLocks locks(shards_, buckets, n);
    size_t k = 0;
    for (size_t i = 0; i < n; ++i) {
      Entry* e = Find(buckets[i], now_ms);
      for (size_t j = 0; j < e->n; ++j, ++k) {
        const RuleLimit& r = buckets[i].set->limits[j];
        const uint64_t share = r.fail == FailMode::kShare
                                   ? remaining[k] / std::max<uint64_t>(1, front_doors)
                                   : remaining[k];
        State& state = e->state(j);
        state = NewState(r.limit.algorithm);
        Charge(r.limit, state, now_ms, r.limit.limit - std::min(r.limit.limit, share));
      }
      e->expiry_ms = ExpiryOf(now_ms, buckets[i].set->max_window_ms);
    }
  }

  bool TakeDebts(const CheckRequest& request, std::span<uint64_t> debts) override {
    std::fill(debts.begin(), debts.end(), 0);
    if (owed_.load(std::memory_order_acquire) == 0) return false;
    return MoveDebts(request, debts, /*take=*/true);
  }

  void ReturnDebts(const CheckRequest& request, std::span<const uint64_t> debts) override {
    std::vector<uint64_t> copy(debts.begin(), debts.end());
    MoveDebts(request, copy, /*take=*/false);
  }

  LimiterStats Stats() const override {
    LimiterStats s;
    s.checks = unlimited_.load(std::memory_order_relaxed);
    s.evicted = evicted_.load(std::memory_order_relaxed);
    s.reloads = rules_.reloads();
    s.reload_errors = rules_.reload_errors();
    for (const Shard& shard : shards_) {
      std::lock_guard<ShardLock> lock(shard.mu);
      s.keys += shard.table.size();
      s.checks += shard.checks;
      s.refused += shard.refused;
      s.shadow_exceeded += shard.shadow_exceeded;
    }
    return s;
  }

  const std::string& rules_path() const override { return options_.rules_path; }
  std::optional<uint32_t> MaxStreams(std::string_view key_prefix,
                                     std::string_view tier) const override {
    return limiter::MaxStreams(rules_.current(), key_prefix, tier);
  }

 private:
  // The bucket's entry, created (or reset, after a rule change or a long idle) as needed. Its
  // shard's lock is held, with room reserved (ShardLocks).
  Entry* Find(const Bucket& b, int64_t now) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    Shard& shard = shards_[ShardOf(b)];
    Entry* e = shard.table.Find(b.id);
    const bool inserted = e == nullptr;
    if (inserted) {
      keys_.fetch_add(1, std::memory_order_relaxed);
      e = shard.table.Insert(b.id).first;
    }
    e->used = true;
    if (inserted || e->fingerprint != b.set->fingerprint || now > e->expiry_ms) {
      Reset(*e, *b.set, !inserted && now <= e->expiry_ms, now);
      shard.table.hint(shard.table.PlaceOf(*e)) = e->expiry_ms;
    }
    return e;
  }

  // Fresh states for the entry's rule set. Debts outlive a change of the rules (a front door's
  // share changes with the number of front doors), not an idle lifetime (then they no longer
  // matter).
  void Reset(Entry& e, const RuleSet& set, bool recent, int64_t now) {
    const size_t n = set.limits.size();
    const bool keep_debts = recent && e.n == n;
    absl::InlinedVector<uint64_t, Entry::kInline> debts;
    if (keep_debts) {
      for (size_t j = 0; j < n; ++j) debts.push_back(e.debt(j));
    } else {
      Forget(e);
    }
    e.fingerprint = set.fingerprint;
    if (n > Entry::kInline && e.n < n) e.more = std::make_unique<Slot[]>(n - Entry::kInline);
    if (n <= Entry::kInline) e.more.reset();
    e.n = static_cast<uint8_t>(n);
    for (size_t j = 0; j < n; ++j) {
      e.state(j) = NewState(set.limits[j].limit.algorithm);
      e.debt(j) = keep_debts ? debts[j] : 0;
    }
    e.expiry_ms = ExpiryOf(now, set.max_window_ms);
  }

  // Asks for the clock hands' next places in the view while the entries are looked up (at a
  // million keys each is a cache miss the lookups would otherwise wait behind).
  static void Prefetch(ShardLocks& locks) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (Shard* shard : {&locks.first(), locks.second()}) {
      if (shard != nullptr && shard->hand < shard->table.capacity()) {
        __builtin_prefetch(shard->table.hint_address(shard->hand));
      }
    }
  }

  // Moves the clock hand: states idle past their lifetime (as good as new) are dropped, and while
  // more than max_keys states are kept in all, entries are dropped at the hand, passing over
  // (once) those used since it last passed. The bound holds over all shards (a per-shard share
  // would evict early in the shards hashing gives more than their share). `keep` (this
  // request's entries) always stays.
  void Trim(Shard& shard, int64_t now,
            const std::array<Entry*, 2>& keep) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (shard.table.capacity() == 0) return;
    if (keys_.load(std::memory_order_relaxed) > max_keys_) Evict(shard, now, keep);
    Sweep(shard, now);
  }

  // The hand passes the rest of its line of the view (one to eight places, one cache line), and
  // the next lines too (up to kLines) while the last one held idle states. It reads an entry only
  // where the view says its states may be idle. (This request's entries were just used: none is
  // idle.)
  void Sweep(Shard& shard, int64_t now) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    constexpr size_t kLine = 8;  // places whose hints share a cache line
    constexpr int kLines = 4;    // the most lines passed in one call
    EntryTable<Entry>& table = shard.table;
    for (int line = 0; line < kLines; ++line) {
      const size_t base = shard.hand & ~(kLine - 1);
      const int64_t* hints = table.hint_address(base);
      // Bit i: place base + i may hold idle states (a hint other than kNoHint, below now). The
      // hints are compared as unsigned offsets from kNoHint, less one: kNoHint wraps to the
      // largest, so one comparison a place does.
      const uint64_t below = static_cast<uint64_t>(now) - static_cast<uint64_t>(kNoHint) - 1;
      uint32_t maybe_idle = 0;
#pragma GCC unroll 8
      for (size_t i = 0; i < kLine; ++i) {
        const uint64_t h = static_cast<uint64_t>(hints[i]) - static_cast<uint64_t>(kNoHint) - 1;
        maybe_idle |= static_cast<uint32_t>(h < below) << i;
      }
      maybe_idle &= ~0u << (shard.hand - base);  // the places the hand has yet to pass
      shard.hand = base + kLine == table.capacity() ? 0 : base + kLine;
      bool dropped = false;
      for (; maybe_idle != 0; maybe_idle &= maybe_idle - 1) {
        const size_t place = base + static_cast<size_t>(std::countr_zero(maybe_idle));
        Entry& e = table.at(place);
        if (now > e.expiry_ms) {
          Drop(shard, place);
          dropped = true;
        } else {
          table.hint(place) = e.expiry_ms;
        }
      }
      if (!dropped) break;
    }
    // The next call's line: this shard's next check is likely dozens of checks away, time
    // enough for it to arrive.
    __builtin_prefetch(table.hint_address(shard.hand));
  }

  // Beyond max_keys: the hand drops idle states and the first it finds not used since it last
  // passed (CLOCK's second chance), until the bound holds again or it has gone round twice.
  void Evict(Shard& shard, int64_t now,
             const std::array<Entry*, 2>& keep) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    EntryTable<Entry>& table = shard.table;
    const size_t places = table.capacity();
    for (size_t step = 0; step < 2 * places; ++step) {
      if (keys_.load(std::memory_order_relaxed) <= max_keys_) break;
      const size_t place = shard.hand;
      if (++shard.hand == places) shard.hand = 0;  // (a division cost more than the step)
      if (table.hint(place) == kNoHint || IsKept(shard, place, keep)) continue;
      Entry& e = table.at(place);
      const bool idle = now > e.expiry_ms;
      if (!idle && e.used) {
        e.used = false;  // a second chance
        table.hint(place) = e.expiry_ms;
        continue;
      }
      Drop(shard, place);
      if (!idle) evicted_.fetch_add(1, std::memory_order_relaxed);
    }
  }

  // Whether `place` of `shard` holds one of `keep` (compared without reading the place's entry).
  bool IsKept(const Shard& shard, size_t place,
              const std::array<Entry*, 2>& keep) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (const Entry* e : keep) {
      if (e != nullptr && &shards_[e->key.hi % kShards] == &shard &&
          shard.table.PlaceOf(*e) == place) {
        return true;
      }
    }
    return false;
  }

  void Drop(Shard& shard, size_t place) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    Forget(shard.table.at(place));
    shard.table.Erase(place);
    keys_.fetch_sub(1, std::memory_order_relaxed);
  }

  static uint64_t CostOf(const RuleLimit& r, const CheckRequest& request) {
    return r.per_request ? 1 : std::max<uint64_t>(1, request.units);
  }

  // Commits an admitted request into its entry's states (shadow limits only where their dry
  // run admitted), noting the units as owed to Redis when debts are kept.
  void Commit(const RuleSet& set, uint32_t shadow_admitted, const CheckRequest& request,
              int64_t now, Entry& e) {
    for (size_t j = 0; j < set.limits.size(); ++j) {
      const RuleLimit& r = set.limits[j];
      if (r.limit.shadow && !(shadow_admitted & (1u << j))) continue;
      Decide(r.limit, e.state(j), now, CostOf(r, request), /*commit=*/true);
      NoteDebt(r, request, e.debt(j));
    }
    e.expiry_ms = ExpiryOf(now, set.max_window_ms);
  }

  // Notes the units of an admitted request as owed to Redis, when debts are kept.
  void NoteDebt(const RuleLimit& r, const CheckRequest& request, uint64_t& debt) {
    if (!track_debts_) return;
    const uint64_t cost = CostOf(r, request);
    debt += cost;
    owed_.fetch_add(cost, std::memory_order_release);
  }

  // An entry's states are dropped: its debts no longer matter (they have expired with it).
  void Forget(Entry& e) {
    for (size_t j = 0; j < e.n; ++j) {
      uint64_t& debt = e.debt(j);
      owed_.fetch_sub(debt, std::memory_order_release);
      debt = 0;
    }
  }

  // Takes the request's debts into `debts`, or adds `debts` back to them.
  bool MoveDebts(const CheckRequest& request, std::span<uint64_t> debts, bool take) {
    const Rules& rules = rules_.current();
    std::array<Bucket, 2> buckets;
    const size_t n = MatchRules(rules, request, nullptr, buckets);
    if (n == 0 || LimitCount(buckets, n) != debts.size()) return false;
    const int64_t now = clock_.NowUnixMillis();
    ShardLocks locks(shards_, buckets, n);
    bool any = false;
    size_t k = 0;
    for (size_t i = 0; i < n; ++i) {
      Entry* e = Find(buckets[i], now);
      for (size_t j = 0; j < e->n; ++j, ++k) {
        uint64_t& debt = e->debt(j);
        if (take) {
          debts[k] = debt;
          owed_.fetch_sub(debt, std::memory_order_release);
          debt = 0;
        } else {
          debt += debts[k];
          owed_.fetch_add(debts[k], std::memory_order_release);
        }
        any |= debts[k] > 0;
      }
    }
    return any;
  }

  const LimiterOptions options_;
  const Clock& clock_;
  const size_t max_keys_;
  const bool track_debts_;
  std::atomic<uint64_t> owed_{0};  // units owed to Redis over all entries
  std::atomic<size_t> keys_{0};    // states kept, over all shards
  RulesHolder rules_;
  std::array<Shard, kShards> shards_;
  std::atomic<uint64_t> unlimited_{0};  // checks no limit applied to (the rest: per shard)
  std::atomic<uint64_t> evicted_{0};
};

}  // namespace

absl::StatusOr<std::unique_ptr<Limiter>> Limiter::Create(const LimiterOptions& options,
                                                         const Clock& clock) {
  Rules rules;
  if (!options.rules_path.empty()) {
    absl::StatusOr<Rules> loaded = LoadRulesFile(options.rules_path);
    if (!loaded.ok()) return loaded.status();
    rules = *std::move(loaded);
  }
  return std::unique_ptr<Limiter>(new MemoryLimiter(options, clock, std::move(rules), false));
}

std::unique_ptr<Limiter> Limiter::CreateWithRules(Rules rules, const LimiterOptions& options,
                                                  const Clock& clock) {
  return std::make_unique<MemoryLimiter>(options, clock, std::move(rules), false);
}

std::unique_ptr<LocalLimiter> CreateLocalLimiter(Rules rules, const LimiterOptions& options,
                                                 const Clock& clock) {
  return std::make_unique<MemoryLimiter>(options, clock, std::move(rules), true);
}

bool RefusesWithoutRedis(const RuleLimit& limit, uint64_t front_doors) {
  if (limit.limit.shadow) return false;
  return limit.fail == FailMode::kClosed ||
         (limit.fail == FailMode::kShare && limit.limit.limit < front_doors);
}

Rules ShareRules(const Rules& rules, uint64_t front_doors) {
  Rules shared = rules;
  ForEachRuleSet(shared, [front_doors](RuleSet& set, auto...) {
    for (RuleLimit& r : set.limits) {
      if (r.fail == FailMode::kShare) {
        r.limit.limit = std::max<uint64_t>(1, r.limit.limit / std::max<uint64_t>(1, front_doors));
      }
    }
  });
  return shared;
}

}  // namespace tweetsearch::limiter
