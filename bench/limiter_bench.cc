// limiter_bench: the cost of one in-process quota decision, and memory per active key.
//
//   build/release/bench/limiter_bench                  # Google Benchmark timings, then memory
//   build/release/bench/limiter_bench --benchmark_filter=OneKey
//
// Decisions go through the whole Limiter (rule lookup, shard lock, state update, headers'
// figures), as the front door calls it, with a ManualClock advancing 1 ms per call.
#include <malloc.h>

#include <iostream>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "common/clock.h"
#include "limiter/limiter.h"

namespace ts = tweetsearch;
using ts::limiter::Algorithm;

namespace {

constexpr Algorithm kAll[] = {Algorithm::kTokenBucket,      Algorithm::kLeakyBucketMeter,
                              Algorithm::kFixedWindow,      Algorithm::kSlidingWindowLog,
                              Algorithm::kSlidingWindowCounter, Algorithm::kGcra};

// One search limit of `limit` per `window` with `algorithm`, for tier "free".
ts::limiter::Rules OneLimit(Algorithm algorithm, uint64_t limit, int64_t window_ms) {
  ts::limiter::Rules rules;
  ts::limiter::RuleLimit r;
  r.limit = {"bench", algorithm, limit, window_ms, 0, false};
  ts::limiter::RuleSet set;
  set.limits.push_back(r);
  set.max_window_ms = window_ms;
  rules.tiers["free"]["search"] = set;
  return rules;
}

std::vector<std::string> Keys(size_t n) {
  std::vector<std::string> keys;
  keys.reserve(n);
  for (size_t i = 0; i < n; ++i) keys.push_back("ts_" + std::to_string(i * 2654435761u));
  return keys;
}

void BM_OneKey(benchmark::State& state) {
  static ts::ManualClock clock(1'767'225'600'000);
  static std::unique_ptr<ts::limiter::Limiter> limiter;
  const auto algorithm = static_cast<Algorithm>(state.range(0));
  if (state.thread_index() == 0) {
    limiter = ts::limiter::Limiter::CreateWithRules(OneLimit(algorithm, 1'000'000, 1000), {}, clock);
  }
  const std::string key = "ts_key" + std::to_string(state.thread_index());
  for (auto _ : state) {
    benchmark::DoNotOptimize(limiter->Check({key, "free", "search", "", 1, {}}));
  }
  state.SetLabel(std::string(ts::limiter::AlgorithmName(algorithm)));
}

void BM_ManyKeys(benchmark::State& state) {
  static ts::ManualClock clock(1'767'225'600'000);
  static std::unique_ptr<ts::limiter::Limiter> limiter;
  static std::vector<std::string> keys = Keys(1'000'000);
  const auto algorithm = static_cast<Algorithm>(state.range(0));
  if (state.thread_index() == 0) {
    limiter = ts::limiter::Limiter::CreateWithRules(OneLimit(algorithm, 500, 3'600'000), {}, clock);
    for (const std::string& k : keys) limiter->Check({k, "free", "search", "", 1, {}});
  }
  size_t i = static_cast<size_t>(state.thread_index()) * 7919;
  for (auto _ : state) {
    benchmark::DoNotOptimize(limiter->Check({keys[i % keys.size()], "free", "search", "", 1, {}}));
    i += 104729;  // a prime stride: every key, in an order the cache cannot predict
  }
  state.SetLabel(std::string(ts::limiter::AlgorithmName(algorithm)));
}

void Args(benchmark::internal::Benchmark* b) {
  for (Algorithm a : kAll) b->Arg(static_cast<int>(a));
}

BENCHMARK(BM_OneKey)->Apply(Args)->Threads(1)->Threads(2);
BENCHMARK(BM_ManyKeys)->Apply(Args)->Threads(1)->Threads(2);

// Heap bytes per key with every key at its quota of 500 requests in the hour (so a sliding
// log holds 500 entries), measured with mallinfo2 around building the states.
void MemoryPerKey() {
  std::cout << "\nmemory per active key at 500 requests/hour (heap bytes, whole limiter):\n";
  for (Algorithm a : kAll) {
    ts::ManualClock clock(1'767'225'600'000);
    const size_t n = a == Algorithm::kSlidingWindowLog ? 2'000 : 200'000;
    const std::vector<std::string> keys = Keys(n);
    const size_t before = mallinfo2().uordblks;
    {
      auto limiter = ts::limiter::Limiter::CreateWithRules(OneLimit(a, 500, 3'600'000), {}, clock);
      const int requests = a == Algorithm::kSlidingWindowLog ? 500 : 3;
      for (int r = 0; r < requests; ++r) {
        for (const std::string& k : keys) limiter->Check({k, "free", "search", "", 1, {}});
        clock.AdvanceMillis(1000);
      }
      const size_t during = mallinfo2().uordblks;
      std::cout << "  " << ts::limiter::AlgorithmName(a) << ": "
                << (during - before) / n << " B/key (" << n << " keys)\n";
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  MemoryPerKey();
  return 0;
}
