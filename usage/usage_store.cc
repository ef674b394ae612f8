#include "usage/usage_store.h"

#include <rocksdb/compaction_filter.h>
#include <rocksdb/db.h>
#include <rocksdb/merge_operator.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include "common/strings.h"
#include "storage/rocks_util.h"
#include "usage/usage_table.h"

namespace tweetsearch::usage {
namespace {

absl::Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::UnavailableError(StrCat("usage store: ", what, ": ", s.ToString()));
}

class RocksUsageStore final : public UsageStore {
 public:
  RocksUsageStore(const Clock& clock, const UsageStoreOptions& options)
      : filter_(NewExpiryFilter(clock)), clock_(clock), options_(options) {}

  absl::Status OpenDb(const std::string& dir) {
    rocksdb::Options options;
    options.create_if_missing = true;
    options.merge_operator = NewCountersMergeOperator();
    options.compaction_filter = filter_.get();
    options.max_background_jobs = 1;
    options.write_buffer_size = 8 << 20;
    rocksdb::DB* raw = nullptr;
    if (absl::Status s = FromRocks(rocksdb::DB::Open(options, dir, &raw), "open " + dir); !s.ok()) {
      return s;
    }
    db_.reset(raw);
    // The same reserve as the tweet store's default: a full disk refuses the flush (its counts
    // wait for the next one) instead of running RocksDB out of space.
    guard_ = std::make_unique<storage::WriteGuard>(db_.get(), dir, uint64_t{64} << 20);
    return absl::OkStatus();
  }

  // One atomic write: a retry adds nothing twice, so the batch id is not needed.
  absl::Status Add(const std::vector<Increment>& increments,
                   std::string_view /*batch_id*/) override {
    if (increments.empty()) return absl::OkStatus();
    rocksdb::WriteBatch batch;
    if (absl::Status s = AddToBatch(increments, db_->DefaultColumnFamily(), batch); !s.ok()) {
      return s;
    }
    rocksdb::WriteOptions write;
    write.sync = options_.sync;
    if (absl::Status s = guard_->BeforeWrite(); !s.ok()) return s;
    return guard_->After(db_->Write(write, &batch), "usage write");
  }

  absl::StatusOr<std::vector<Point>> Query(std::string_view key_id, Resolution r, int64_t from_s,
                                           int64_t to_s, size_t max_points) const override {
    return QueryTable(*db_, db_->DefaultColumnFamily(), key_id, r, from_s, to_s, max_points,
                      clock_.NowUnixMillis() / 1000);
  }

  absl::StatusOr<std::vector<std::string>> Keys() const override {
    return KeysOfTable(*db_, db_->DefaultColumnFamily());
  }

  absl::Status ExpireNow() override { return CompactTable(*db_, db_->DefaultColumnFamily()); }

  absl::StatusOr<uint64_t> StoredBuckets(Resolution r) const override {
    return CountBuckets(*db_, db_->DefaultColumnFamily(), r);
  }

 private:
  // Declared before db_: the DB uses the filter until it closes.
  std::unique_ptr<rocksdb::CompactionFilter> filter_;
  const Clock& clock_;
  const UsageStoreOptions options_;
  std::unique_ptr<rocksdb::DB> db_;
  std::unique_ptr<storage::WriteGuard> guard_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<UsageStore>> UsageStore::Open(const std::string& dir,
                                                             const Clock& clock,
                                                             const UsageStoreOptions& options) {
  auto store = std::make_unique<RocksUsageStore>(clock, options);
  if (absl::Status s = store->OpenDb(dir); !s.ok()) return s;
  return store;
}

}  // namespace tweetsearch::usage
