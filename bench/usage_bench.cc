// Cost of counting a request in the usage series (UsageRecorder::Record, on every API call's
// path) and of a flush to the RocksDB store.
//
//   build/release/bench/usage_bench
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/clock.h"
#include "usage/usage_recorder.h"
#include "usage/usage_store.h"

namespace tweetsearch::usage {
namespace {

struct Fixture {
  Fixture() {
    dir = std::filesystem::temp_directory_path() / ("usage_bench_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    store = *UsageStore::Open(dir.string(), SystemClock());
    recorder = std::make_unique<UsageRecorder>(*store, SystemClock());
  }
  ~Fixture() {
    recorder.reset();
    store.reset();
    std::filesystem::remove_all(dir);
  }
  std::filesystem::path dir;
  std::unique_ptr<UsageStore> store;
  std::unique_ptr<UsageRecorder> recorder;
};

Fixture* fixture = nullptr;

std::vector<std::string> KeyIds(int n) {
  std::vector<std::string> ids;
  for (int i = 0; i < n; ++i) {
    char buf[17];
    std::snprintf(buf, sizeof(buf), "%016x", i * 2654435761u);
    ids.emplace_back(buf);
  }
  return ids;
}

// One search counted, for `range(0)` distinct keys, from `threads` threads.
void BM_Record(benchmark::State& state) {
  if (state.thread_index() == 0) fixture = new Fixture();
  const std::vector<std::string> ids = KeyIds(static_cast<int>(state.range(0)));
  size_t i = static_cast<size_t>(state.thread_index()) * 7919;
  for (auto _ : state) {
    fixture->recorder->Record(ids[i++ % ids.size()], Outcome::kServed, {}, 250);
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    delete fixture;
    fixture = nullptr;
  }
}
BENCHMARK(BM_Record)->Arg(1)->Arg(1000)->Arg(100000)->Threads(1)->Threads(2)->UseRealTime();

// A flush of one interval's counts of `range(0)` keys (each key's minute at four resolutions,
// plus the all-keys series), synced.
void BM_Flush(benchmark::State& state) {
  Fixture f;
  const std::vector<std::string> ids = KeyIds(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    state.PauseTiming();
    for (const std::string& id : ids) f.recorder->Record(id, Outcome::kServed, {}, 250);
    state.ResumeTiming();
    if (!f.recorder->Flush().ok()) state.SkipWithError("flush failed");
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Flush)->Arg(10)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tweetsearch::usage
