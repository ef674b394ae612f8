#include "aggregator/metrics.h"

#include <algorithm>

#include "common/strings.h"

namespace tweetsearch::aggregator {

void Metrics::RecordRequest(std::string_view transport, std::string_view route, int status,
                            double seconds) {
  // Built in a per-thread buffer: no allocation once the buffer has grown.
  thread_local std::string labels;
  labels.clear();
  labels.append("transport=\"").append(transport).append("\",route=\"").append(route).append("\"");
  std::atomic<uint64_t>* counter;
  Histogram* histogram;
  {
    absl::MutexLock lock(&mu_);
    auto h = latency_.find(labels);
    histogram = h != latency_.end() ? &h->second : &latency_[labels];
    labels.append(",code=\"").append(std::to_string(status)).append("\"");
    auto c = requests_.find(labels);
    counter = c != requests_.end() ? &c->second : &requests_[labels];
  }
  counter->fetch_add(1, std::memory_order_relaxed);
  const size_t bucket =
      std::lower_bound(kBuckets.begin(), kBuckets.end(), seconds) - kBuckets.begin();
  histogram->counts[bucket].fetch_add(1, std::memory_order_relaxed);
  histogram->sum_nanos.fetch_add(static_cast<uint64_t>(std::max(0.0, seconds) * 1e9),
                                 std::memory_order_relaxed);
}

void Metrics::Render(std::string* out) const {
  absl::MutexLock lock(&mu_);
  StrAppend(out, "# HELP tweetsearch_requests_total Requests answered, by route and status.\n",
            "# TYPE tweetsearch_requests_total counter\n");
  for (const auto& [labels, count] : requests_) {
    StrAppend(out, "tweetsearch_requests_total{", labels, "} ",
              count.load(std::memory_order_relaxed), "\n");
  }
  StrAppend(out, "# HELP tweetsearch_request_duration_seconds Time to answer a request.\n",
            "# TYPE tweetsearch_request_duration_seconds histogram\n");
  for (const auto& [labels, h] : latency_) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= kBuckets.size(); ++i) {
      cumulative += h.counts[i].load(std::memory_order_relaxed);
      const std::string le = i < kBuckets.size() ? StrCat(kBuckets[i]) : "+Inf";
      StrAppend(out, "tweetsearch_request_duration_seconds_bucket{", labels, ",le=\"", le, "\"} ",
                cumulative, "\n");
    }
    StrAppend(out, "tweetsearch_request_duration_seconds_sum{", labels, "} ",
              h.sum_nanos.load(std::memory_order_relaxed) / 1e9, "\n");
    StrAppend(out, "tweetsearch_request_duration_seconds_count{", labels, "} ", cumulative, "\n");
  }
}

void RateMeter::Sample(int64_t now_ms, uint64_t total) {
  absl::MutexLock lock(&mu_);
  samples_[count_ % kSamples] = {now_ms, total};
  ++count_;
}

double RateMeter::PerSecond(int64_t window_ms) const {
  absl::MutexLock lock(&mu_);
  if (count_ < 2) return 0;
  const auto& newest = samples_[(count_ - 1) % kSamples];
  // The oldest sample still inside the window (at least the one before the newest).
  const size_t available = std::min(count_, kSamples);
  size_t back = 1;
  while (back + 1 < available &&
         newest.first - samples_[(count_ - 1 - (back + 1)) % kSamples].first <= window_ms) {
    ++back;
  }
  const auto& oldest = samples_[(count_ - 1 - back) % kSamples];
  const int64_t dt = newest.first - oldest.first;
  if (dt <= 0 || newest.second < oldest.second) return 0;
  return static_cast<double>(newest.second - oldest.second) * 1000.0 / static_cast<double>(dt);
}

}  // namespace tweetsearch::aggregator
