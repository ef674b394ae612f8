// Cost of counting a request in the usage series (UsageRecorder::Record, on every API call's
// path) and of a flush: to one process's RocksDB store, and as a cluster's storage primary takes
// it (one idempotent write to the usage column family, logged, synced).
//
//   build/release/bench/usage_bench
#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/strings.h"
#include "storage/storage_node.h"
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

// What a cluster's storage primary does with a front door's share of a flush
// (cluster/cluster_usage.h), without the network: one idempotent write of the increments.
class StorageNodeUsage final : public UsageStore {
 public:
  explicit StorageNodeUsage(storage::StorageNode& node) : node_(node) {}
  absl::Status Add(const std::vector<Increment>& increments, std::string_view batch_id) override {
    storage::WriteOp op;
    op.usage = increments;
    op.request_key = StrCat("usage/", batch_id, "/0");
    op.record = storage::WriteRecord{};
    op.record->fingerprint = op.request_key;
    op.record->created_at_ms = SystemClock().NowUnixMillis();
    return node_.Write(std::move(op)).status();
  }
  absl::StatusOr<std::vector<Point>> Query(std::string_view key_id, Resolution r, int64_t from_s,
                                           int64_t to_s, size_t max_points) const override {
    return node_.QueryUsage(key_id, r, from_s, to_s, max_points);
  }
  absl::StatusOr<std::vector<std::string>> Keys() const override { return node_.UsageKeys(); }
  absl::Status ExpireNow() override { return absl::OkStatus(); }
  absl::StatusOr<uint64_t> StoredBuckets(Resolution) const override {
    return absl::UnimplementedError("not counted");
  }

 private:
  storage::StorageNode& node_;
};

// BM_Flush, written as a storage primary (alone, synced) takes it in a cluster.
void BM_FlushToStoragePrimary(benchmark::State& state) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("usage_bench_node_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  {
    storage::StorageNodeOptions options;
    options.node = "s0a";
    options.data_dir = dir.string();
    options.allow_single_replica = true;
    std::unique_ptr<storage::StorageNode> node = *storage::StorageNode::Open(options);
    if (!node->BecomePrimary(1, nullptr, nullptr, nullptr, nullptr).ok()) {
      state.SkipWithError("no primary");
      return;
    }
    StorageNodeUsage store(*node);
    UsageRecorder recorder(store, SystemClock());
    const std::vector<std::string> ids = KeyIds(static_cast<int>(state.range(0)));
    for (auto _ : state) {
      state.PauseTiming();
      for (const std::string& id : ids) recorder.Record(id, Outcome::kServed, {}, 250);
      state.ResumeTiming();
      if (!recorder.Flush().ok()) state.SkipWithError("flush failed");
    }
    state.SetItemsProcessed(state.iterations() * state.range(0));
  }
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_FlushToStoragePrimary)->Arg(10)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tweetsearch::usage
