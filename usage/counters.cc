#include "usage/counters.h"

#include <bit>

namespace tweetsearch::usage {

Outcome OutcomeForHttpStatus(int status) {
  if (status == 429) return Outcome::kLimited;
  if (status >= 500) return Outcome::kFailed;
  if (status >= 400) return Outcome::kRejected;
  return Outcome::kServed;
}

void Counters::Add(const Counters& other) {
  served += other.served;
  limited += other.limited;
  rejected += other.rejected;
  failed += other.failed;
  searches += other.searches;
  search_latency_us_sum += other.search_latency_us_sum;
  for (int i = 0; i < kLatencyBuckets; ++i) search_latency[i] += other.search_latency[i];
  for (const auto& [name, n] : other.limited_by) limited_by[name] += n;
}

void Counters::Count(Outcome outcome, std::string_view limit) {
  switch (outcome) {
    case Outcome::kServed:
      ++served;
      break;
    case Outcome::kRejected:
      ++rejected;
      break;
    case Outcome::kFailed:
      ++failed;
      break;
    case Outcome::kLimited: {
      ++limited;
      auto it = limited_by.find(limit);
      if (it == limited_by.end()) it = limited_by.emplace(std::string(limit), 0).first;
      ++it->second;
      break;
    }
  }
}

void Counters::AddSearchLatency(uint64_t micros) {
  ++searches;
  search_latency_us_sum += micros;
  // Bucket i holds [base << (i-1), base << i); bucket 0 everything below base.
  const uint64_t scaled = micros / kLatencyBaseUs;
  const int bucket = scaled == 0 ? 0 : std::bit_width(scaled);
  ++search_latency[bucket < kLatencyBuckets ? bucket : kLatencyBuckets - 1];
}

double Counters::SearchLatencyQuantileMs(double q) const {
  uint64_t total = 0;
  for (uint64_t n : search_latency) total += n;
  if (total == 0) return 0;
  const double rank = q * static_cast<double>(total);
  double seen = 0;
  for (int i = 0; i < kLatencyBuckets; ++i) {
    const double n = static_cast<double>(search_latency[i]);
    if (n == 0) continue;
    if (seen + n >= rank || i == kLatencyBuckets - 1) {
      const double lower = i == 0 ? 0 : static_cast<double>(kLatencyBaseUs << (i - 1));
      const double upper = static_cast<double>(kLatencyBaseUs << i);
      const double fraction = rank <= seen ? 0 : (rank - seen) / n;
      return (lower + fraction * (upper - lower)) / 1000.0;
    }
    seen += n;
  }
  return 0;
}

}  // namespace tweetsearch::usage
