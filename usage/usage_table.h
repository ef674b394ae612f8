// UsageTable: the RocksDB layout of usage series, shared by the UsageStore of one process
// (usage/usage_store.h) and the "usage" column family of a cluster's storage partitions
// (storage/tweet_store.h).
//
// Key: <key id> '\0' <resolution byte> <bucket start, Unix seconds, big-endian u64>, so one
// key's series at one resolution is one ordered range. Value: a serialized
// tweetsearch.v1.UsageCounters. Every increment is a merge operand added to its bucket at all
// four resolutions (NewCountersMergeOperator sums them); expired buckets are dropped by a
// compaction filter (NewExpiryFilter) and never returned by a query.
#ifndef TWEETSEARCH_USAGE_USAGE_TABLE_H_
#define TWEETSEARCH_USAGE_USAGE_TABLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "usage/series.h"

namespace rocksdb {
class ColumnFamilyHandle;
class CompactionFilter;
class DB;
class MergeOperator;
class WriteBatch;
}  // namespace rocksdb

namespace tweetsearch::v1 {
class UsageCounters;
class UsageIncrement;
}  // namespace tweetsearch::v1

namespace tweetsearch::usage {

// Sums the counters of a bucket's merge operands.
std::shared_ptr<rocksdb::MergeOperator> NewCountersMergeOperator();
// Drops buckets past their resolution's retention at `clock`'s time, merge operands included.
// `clock` must outlive the filter.
std::unique_ptr<rocksdb::CompactionFilter> NewExpiryFilter(const Clock& clock);

// Adds `increments` to their buckets at every resolution, as merge operands in `batch`.
absl::Status AddToBatch(const std::vector<Increment>& increments, rocksdb::ColumnFamilyHandle* cf,
                        rocksdb::WriteBatch& batch);

// UsageStore::Query over the table in `cf` of `db`, at `now_s` (Unix seconds).
absl::StatusOr<std::vector<Point>> QueryTable(rocksdb::DB& db, rocksdb::ColumnFamilyHandle* cf,
                                              std::string_view key_id, Resolution resolution,
                                              int64_t from_s, int64_t to_s, size_t max_points,
                                              int64_t now_s);
// The key ids that have any bucket, in order.
absl::StatusOr<std::vector<std::string>> KeysOfTable(rocksdb::DB& db,
                                                     rocksdb::ColumnFamilyHandle* cf);
// How many buckets of `resolution` the table holds (expired ones not yet dropped included).
absl::StatusOr<uint64_t> CountBuckets(rocksdb::DB& db, rocksdb::ColumnFamilyHandle* cf,
                                      Resolution resolution);
// Drops expired buckets now: a forced compaction of the table.
absl::Status CompactTable(rocksdb::DB& db, rocksdb::ColumnFamilyHandle* cf);

void ToProto(const Counters& counters, v1::UsageCounters* out);
Counters FromProto(const v1::UsageCounters& counters);
void ToProto(const Increment& increment, v1::UsageIncrement* out);
Increment FromProto(const v1::UsageIncrement& increment);

}  // namespace tweetsearch::usage

#endif  // TWEETSEARCH_USAGE_USAGE_TABLE_H_
