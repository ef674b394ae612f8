// Idempotent writes: what a write made with an idempotency key did, kept so that a retry of it
// is answered as the first attempt was and changes nothing.
//
// A record sits in the requests column family of the store that made the write (TweetStore),
// written in the same atomic batch as the write's changes: a retry finds it exactly when the
// write landed. It is logged as a change of its own, so it replicates with the write, and a
// full copy of a replica carries it, so it survives failovers. A record is kept for a day
// (kWriteRecordTtlMs); each replica forgets its expired ones by the same rule.
//
// A likes change or a delete is one record beside its change. An ingest in a cluster spans
// storage partitions, so its record lives in one partition chosen by its key: first its plan
// (the id of every offered tweet), then its final answer once every tweet has one; a retry of
// an ingest whose answer is not final sends the same tweets, with the same ids, again.
#ifndef TWEETSEARCH_STORAGE_WRITE_RECORDS_H_
#define TWEETSEARCH_STORAGE_WRITE_RECORDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/ids.h"
#include "storage/tweet_store.h"

namespace tweetsearch::v1 {
class WriteRecord;  // proto/tweetsearch.proto
}  // namespace tweetsearch::v1

namespace tweetsearch::storage {

inline constexpr int64_t kWriteRecordTtlMs = int64_t{24} * 3600 * 1000;

struct WriteRecord {
  std::string fingerprint;  // what was asked, as the caller hashes it
  int64_t created_at_ms = 0;
  bool done = false;                   // the answer is final (false: an ingest's plan)
  absl::Status status;                 // a likes change or delete: its answer
  uint32_t likes = 0;                  // a likes change: the new value
  std::vector<TweetId> ids;            // an ingest: each offered tweet's id (0: none)
  std::vector<absl::Status> outcomes;  // an ingest, once done: each offered tweet's answer
};

void ToProto(const WriteRecord& r, v1::WriteRecord* out);
WriteRecord FromProto(const v1::WriteRecord& r);
std::string EncodeWriteRecord(const WriteRecord& r);
// DataLoss when `value` is not a record.
absl::StatusOr<WriteRecord> DecodeWriteRecord(std::string_view value);

// The store entry of `record` under `key`.
StoredRequest ToStoredRequest(std::string key, const WriteRecord& record);

// The record under `key`, unless there is none or it is older than a day at `now_ms`.
absl::StatusOr<std::optional<WriteRecord>> FindWriteRecord(const TweetStore& store,
                                                           std::string_view key, int64_t now_ms);

// FailedPrecondition when `record` answers another request than the one `fingerprint` hashes:
// an idempotency key may name one request only.
absl::Status CheckSameRequest(const WriteRecord& record, std::string_view fingerprint);

// Deletes the records older than a day at `now_ms`; returns how many.
absl::StatusOr<uint64_t> DropExpiredWriteRecords(TweetStore& store, int64_t now_ms);

}  // namespace tweetsearch::storage

#endif  // TWEETSEARCH_STORAGE_WRITE_RECORDS_H_
