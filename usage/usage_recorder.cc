#include "usage/usage_recorder.h"

#include <algorithm>
#include <functional>
#include <map>

#include "common/strings.h"

namespace tweetsearch::usage {

UsageRecorder::UsageRecorder(UsageStore& store, const Clock& clock,
                             const UsageRecorderOptions& options)
    : store_(store), clock_(clock), options_(options) {}

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
  const size_t own = increments.size();
  for (auto& [minute, counters] : all) {
    increments.push_back(Increment{std::string(kAllKeys), minute, std::move(counters)});
  }
  absl::Status s = store_.Add(increments);
  if (!s.ok()) {
    flush_errors_.fetch_add(1, std::memory_order_relaxed);
    increments.resize(own);  // the totals are made again from these
    Restore(increments);
    return s;
  }
  flushes_.fetch_add(1, std::memory_order_relaxed);
  return absl::OkStatus();
}

void UsageRecorder::Restore(const std::vector<Increment>& increments) {
  for (const Increment& inc : increments) {
    Shard& shard = shards_[std::hash<std::string_view>()(inc.key_id) % kShards];
    absl::MutexLock lock(&shard.mu);
    Minutes& minutes = shard.pending[inc.key_id];
    auto it = std::find_if(minutes.begin(), minutes.end(),
                           [&](const auto& m) { return m.first == inc.minute_start_s; });
    if (it == minutes.end()) {
      minutes.insert(minutes.begin(), {inc.minute_start_s, inc.counters});
    } else {
      it->second.Add(inc.counters);
    }
  }
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
