// Metrics: request counters and latency histograms of the front door, rendered in the
// Prometheus text exposition format (version 0.0.4) together with gauges read at scrape time.
//
// Thread-safety: every method may be called from any thread. Recording takes one short mutex
// (to find the series) and then updates atomics.
#ifndef TWEETSEARCH_AGGREGATOR_METRICS_H_
#define TWEETSEARCH_AGGREGATOR_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/node_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace tweetsearch::usage {
struct RecorderStats;
}  // namespace tweetsearch::usage

namespace tweetsearch::aggregator {

struct EngineStats;
struct StreamHubStats;

class Metrics {
 public:
  // Upper bounds of the latency buckets, seconds (the last bucket is +Inf).
  static constexpr std::array<double, 14> kBuckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5};

  // One finished request: `route` is a fixed name ("search", "ingest", ...), never a raw path,
  // so that the number of series stays bounded.
  void RecordRequest(std::string_view transport, std::string_view route, int status,
                     double seconds);

  // Appends the recorded series to `out`.
  void Render(std::string* out) const;

 private:
  struct Histogram {
    std::array<std::atomic<uint64_t>, kBuckets.size() + 1> counts{};
    std::atomic<uint64_t> sum_nanos{0};
  };
  mutable absl::Mutex mu_;
  // (transport, route, status) -> count; (transport, route) -> latency.
  absl::node_hash_map<std::string, std::atomic<uint64_t>> requests_ ABSL_GUARDED_BY(mu_);
  absl::node_hash_map<std::string, Histogram> latency_ ABSL_GUARDED_BY(mu_);
};

// Appends the engine's gauges and counters (index, storage, ingest, cache, checkpoints, and per
// storage partition in a cluster), read at scrape time, in the same format.
void RenderEngineMetrics(const EngineStats& stats, std::string* out);
// The streams' series (tweetsearch_streams_open, ...).
void RenderStreamMetrics(const StreamHubStats& stats, std::string* out);

// Appends the usage recorder's counters.
void RenderUsageMetrics(const usage::RecorderStats& stats, std::string* out);

// RateMeter: the recent rate of a growing counter (tweets ingested), from samples taken about
// once a second. Keeps the last kSamples samples.
class RateMeter {
 public:
  static constexpr size_t kSamples = 64;

  void Sample(int64_t now_ms, uint64_t total);
  // Increase per second over about the last `window_ms`: 0 before two samples exist.
  double PerSecond(int64_t window_ms) const;

 private:
  mutable absl::Mutex mu_;
  std::array<std::pair<int64_t, uint64_t>, kSamples> samples_ ABSL_GUARDED_BY(mu_){};
  size_t count_ ABSL_GUARDED_BY(mu_) = 0;  // samples taken; the newest is at (count_-1) % kSamples
};

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_METRICS_H_
