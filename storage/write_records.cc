#include "storage/write_records.h"

#include "proto/tweetsearch.pb.h"

namespace tweetsearch::storage {
namespace {

bool Expired(const WriteRecord& r, int64_t now_ms) {
  return r.created_at_ms <= now_ms - kWriteRecordTtlMs;
}

absl::Status StatusOf(int32_t code, std::string message) {
  if (code < 0 || code > static_cast<int32_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::UnknownError(std::move(message));
  }
  return absl::Status(static_cast<absl::StatusCode>(code), std::move(message));
}

}  // namespace

void ToProto(const WriteRecord& r, v1::WriteRecord* out) {
  out->set_fingerprint(r.fingerprint);
  out->set_created_at_ms(r.created_at_ms);
  out->set_done(r.done);
  out->set_code(static_cast<int32_t>(r.status.code()));
  out->set_message(std::string(r.status.message()));
  out->set_likes(r.likes);
  for (TweetId id : r.ids) out->add_ids(id);
  for (const absl::Status& s : r.outcomes) {
    out->add_codes(static_cast<int32_t>(s.code()));
    out->add_messages(std::string(s.message()));
  }
}

WriteRecord FromProto(const v1::WriteRecord& r) {
  WriteRecord out;
  out.fingerprint = r.fingerprint();
  out.created_at_ms = r.created_at_ms();
  out.done = r.done();
  out.status = StatusOf(r.code(), r.message());
  out.likes = r.likes();
  out.ids.assign(r.ids().begin(), r.ids().end());
  for (int i = 0; i < r.codes_size(); ++i) {
    out.outcomes.push_back(StatusOf(r.codes(i), i < r.messages_size() ? r.messages(i) : ""));
  }
  return out;
}

std::string EncodeWriteRecord(const WriteRecord& r) {
  v1::WriteRecord proto;
  ToProto(r, &proto);
  return proto.SerializeAsString();
}

absl::StatusOr<WriteRecord> DecodeWriteRecord(std::string_view value) {
  v1::WriteRecord proto;
  if (!proto.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
    return absl::DataLossError("a stored write record does not decode");
  }
  return FromProto(proto);
}

StoredRequest ToStoredRequest(std::string key, const WriteRecord& record) {
  return StoredRequest{std::move(key), EncodeWriteRecord(record)};
}

absl::StatusOr<std::optional<WriteRecord>> FindWriteRecord(const TweetStore& store,
                                                           std::string_view key, int64_t now_ms) {
  absl::StatusOr<std::optional<std::string>> value = store.GetRequest(key);
  if (!value.ok()) return value.status();
  if (!value->has_value()) return std::optional<WriteRecord>();
  absl::StatusOr<WriteRecord> record = DecodeWriteRecord(**value);
  if (!record.ok()) return record.status();
  if (Expired(*record, now_ms)) return std::optional<WriteRecord>();
  return std::optional<WriteRecord>(*std::move(record));
}

absl::Status CheckSameRequest(const WriteRecord& record, std::string_view fingerprint) {
  if (record.fingerprint == fingerprint) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "this Idempotency-Key was used for another request in the last 24 hours: a key names "
      "one request, and its retries must repeat it exactly");
}

absl::StatusOr<uint64_t> DropExpiredWriteRecords(TweetStore& store, int64_t now_ms) {
  return store.DropRequests([now_ms](std::string_view value) {
    absl::StatusOr<WriteRecord> r = DecodeWriteRecord(value);
    return !r.ok() || Expired(*r, now_ms);
  });
}

}  // namespace tweetsearch::storage
