// Counters: what one usage bucket holds for one API key — requests by outcome, refusals by the
// quota rule that refused them, and a histogram of search latency. Plain values that add up, so
// buckets merge by addition (in memory, in RocksDB's merge operator, and from several front
// doors) and never need a read-modify-write.
#ifndef TWEETSEARCH_USAGE_COUNTERS_H_
#define TWEETSEARCH_USAGE_COUNTERS_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace tweetsearch::usage {

// How a request ended, as its caller saw it.
enum class Outcome : uint8_t {
  kServed,    // answered (2xx)
  kLimited,   // refused by a quota rule (429)
  kRejected,  // bad input: malformed, unknown key, missing scope, not found (other 4xx)
  kFailed,    // our failure (5xx)
};

// kServed for 2xx (and 1xx/3xx), kLimited for 429, kRejected for other 4xx, kFailed for 5xx.
Outcome OutcomeForHttpStatus(int status);

// Search latency histogram: bucket i counts latencies below kLatencyBase_us << i (and at or
// above the previous bound); the last bucket counts everything slower.
inline constexpr int kLatencyBuckets = 20;
inline constexpr uint64_t kLatencyBaseUs = 64;

struct Counters {
  uint64_t served = 0;
  uint64_t limited = 0;
  uint64_t rejected = 0;
  uint64_t failed = 0;
  uint64_t searches = 0;  // searches answered, each with a latency below
  uint64_t search_latency_us_sum = 0;
  std::array<uint64_t, kLatencyBuckets> search_latency{};
  // Refusals by the name of the limit that refused them (sums to `limited`).
  std::map<std::string, uint64_t, std::less<>> limited_by;

  uint64_t requests() const { return served + limited + rejected + failed; }
  bool empty() const { return requests() == 0 && searches == 0; }

  void Add(const Counters& other);
  // Counts one request; `limit` names the refusing limit when `outcome` is kLimited.
  void Count(Outcome outcome, std::string_view limit = {});
  void AddSearchLatency(uint64_t micros);
  // The q-quantile (0..1) of search latency in milliseconds, interpolated inside its histogram
  // bucket; 0 without searches.
  double SearchLatencyQuantileMs(double q) const;

  bool operator==(const Counters&) const = default;
};

}  // namespace tweetsearch::usage

#endif  // TWEETSEARCH_USAGE_COUNTERS_H_
