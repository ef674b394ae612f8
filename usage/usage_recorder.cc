#include "usage/usage_recorder.h"

#include <algorithm>
#include <functional>
#include <map>
#include <random>

#include "absl/strings/str_format.h"
#include "common/strings.h"

namespace tweetsearch::usage {
namespace {

// 64 random bits in hex: tells this recorder's batches from every other front door's.
std::string RandomPrefix() {
  std::random_device random;
  const uint64_t bits = (uint64_t{random()} << 32) ^ random();
  return absl::StrFormat("%016x", bits);
}

}  // namespace

UsageRecorder::UsageRecorder(UsageStore& store, const Clock& clock,
                             const UsageRecorderOptions& options)
    : store_(store), clock_(clock), options_(options), batch_prefix_(RandomPrefix()) {}

UsageRecorder::~UsageRecorder() { Stop(); }

void UsageRecorder::Record(std::string_view key_id, Outcome outcome, std::string_view limit,
                           int64_t search_latency_us) {
  const int64_t now_s = clock_.NowUnixMillis() / 1000;
  const int64_t minute = now_s - ((now_s % 60) + 60) % 60;
  Shard& shard = shards_[std::hash<std::string_view>()(key_id) % kShards];
  {
    absl::MutexLock lock(&shard.mu);
    auto it = shard.pending.find(AsAbsl(key_id));
    if (it == shard.pending.end()) it = shard.pending.emplace(std::string(key_id), Minutes()).first;
    Minutes& minutes = it->second;
    if (minutes.empty() || minutes.back().first != minute) minutes.emplace_back(minute, Counters());
    Counters& c = minutes.back().second;
    c.Count(outcome, limit);
    if (search_latency_us >= 0) c.AddSearchLatency(static_cast<uint64_t>(search_latency_us));
  }
  recorded_.fetch_add(1, std::memory_order_relaxed);
}

absl::Status UsageRecorder::Flush() {
  absl::MutexLock flush_lock(&flush_mu_);
  if (unsent_.has_value()) {
    if (absl::Status s = Send(*unsent_); !s.ok()) return s;  // newer counts wait behind it
    unsent_.reset();
  }
  std::vector<Increment> increments;
  std::map<int64_t, Counters> all;
  for (Shard& shard : shards_) {
    absl::flat_hash_map<std::string, Minutes> pending;
    {
      absl::MutexLock lock(&shard.mu);
      pending.swap(shard.pending);
    }
    for (auto& [key, minutes] : pending) {
      for (auto& [minute, counters] : minutes) {
        all[minute].Add(counters);
        increments.push_back(Increment{key, minute, std::move(counters)});
      }
    }
  }
  if (increments.empty()) return absl::OkStatus();
  for (auto& [minute, counters] : all) {
    increments.push_back(Increment{std::string(kAllKeys), minute, std::move(counters)});
  }
  Batch batch{StrCat(batch_prefix_, "-", ++batches_), std::move(increments)};
  absl::Status s = Send(batch);
  if (!s.ok()) unsent_ = std::move(batch);
  return s;
}

absl::Status UsageRecorder::Send(const Batch& batch) {
  absl::Status s = store_.Add(batch.increments, batch.id);
  (s.ok() ? flushes_ : flush_errors_).fetch_add(1, std::memory_order_relaxed);
  return s;
}

void UsageRecorder::Start() {
  last_expire_ms_ = clock_.NowUnixMillis();
  thread_ = std::make_unique<PeriodicTask>(absl::Milliseconds(options_.flush_interval_ms), [this] {
    (void)Flush();  // a failure keeps the counts and shows in Stats()
    const int64_t now = clock_.NowUnixMillis();
    if (options_.expire_interval_ms > 0 && now - last_expire_ms_ >= options_.expire_interval_ms) {
      last_expire_ms_ = now;
      (void)store_.ExpireNow();  // expired buckets are hidden from queries meanwhile
    }
  });
}

void UsageRecorder::Stop() {
  if (thread_ != nullptr) thread_->Stop();
  (void)Flush();
}

RecorderStats UsageRecorder::Stats() const {
  return RecorderStats{recorded_.load(std::memory_order_relaxed),
                       flushes_.load(std::memory_order_relaxed),
                       flush_errors_.load(std::memory_order_relaxed)};
}

}  // namespace tweetsearch::usage
