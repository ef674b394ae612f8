#include "storage/tweet_store.h"

#include <rocksdb/cache.h>
#include <rocksdb/compaction_filter.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <atomic>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/strings.h"
#include "proto/tweetsearch.pb.h"
#include "storage/convert.h"
#include "storage/rocks_util.h"
#include "usage/usage_table.h"

namespace tweetsearch::storage {
namespace {

std::string EncodeTweet(const StoredTweet& t) {
  v1::Tweet proto;
  proto.set_id(t.id);
  proto.set_user_id(t.user_id);
  proto.set_user_name(t.user_name);
  proto.set_text(t.text);
  proto.set_created_at_ms(t.created_at_ms);
  proto.set_lang(t.lang);
  proto.set_likes(t.likes);
  return proto.SerializeAsString();
}

absl::StatusOr<StoredTweet> DecodeTweet(const rocksdb::Slice& value, TweetId key) {
  v1::Tweet proto;
  if (!proto.ParseFromArray(value.data(), static_cast<int>(value.size())) || proto.id() != key) {
    return absl::DataLossError(StrCat("stored tweet ", key, " does not decode"));
  }
  StoredTweet t;
  t.id = proto.id();
  t.user_id = proto.user_id();
  t.user_name = std::move(*proto.mutable_user_name());
  t.text = std::move(*proto.mutable_text());
  t.created_at_ms = proto.created_at_ms();
  t.lang = std::move(*proto.mutable_lang());
  t.likes = proto.likes();
  return t;
}

// The log entry of a change: with the tweet a delete removed, or the record a request stores.
std::string EncodeChange(const ReplicatedChange& rc) {
  const Change& c = rc.change;
  v1::ChangeRecord record;
  record.set_kind(ChangeKindToProto(c.kind));
  record.set_id(c.id);
  record.set_likes(c.likes);
  if (c.kind == ChangeKind::kDelete && rc.tweet.has_value()) {
    const StoredTweet& deleted = *rc.tweet;
    v1::Tweet* t = record.mutable_deleted();
    t->set_id(deleted.id);
    t->set_user_id(deleted.user_id);
    t->set_user_name(deleted.user_name);
    t->set_text(deleted.text);
    t->set_created_at_ms(deleted.created_at_ms);
    t->set_lang(deleted.lang);
    t->set_likes(deleted.likes);
  }
  if (c.kind == ChangeKind::kRequest && rc.request.has_value()) {
    record.set_request_key(rc.request->key);
    record.set_request_value(rc.request->value);
  }
  for (const usage::Increment& inc : rc.usage) usage::ToProto(inc, record.add_usage());
  return record.SerializeAsString();
}

std::string EncodeChange(ChangeKind kind, TweetId id, uint32_t likes) {
  return EncodeChange(ReplicatedChange{Change{0, kind, id, likes}, std::nullopt, std::nullopt, {}});
}

// Decodes a change, with the record a request stores; with `bodies`, also the tweet a delete
// recorded (the tweet of a put is not in the log).
absl::StatusOr<ReplicatedChange> DecodeChange(const rocksdb::Slice& key,
                                              const rocksdb::Slice& value, bool bodies) {
  ReplicatedChange out;
  Change& change = out.change;
  change.sequence = DecodeKey(key);
  v1::ChangeRecord record;
  if (!record.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
    return absl::DataLossError(StrCat("change ", change.sequence, " does not decode"));
  }
  if (bodies && record.has_deleted()) {
    v1::Tweet& t = *record.mutable_deleted();
    out.tweet = StoredTweet{t.id(),
                            t.user_id(),
                            std::move(*t.mutable_user_name()),
                            std::move(*t.mutable_text()),
                            t.created_at_ms(),
                            std::move(*t.mutable_lang()),
                            t.likes()};
  }
  change.id = record.id();
  change.likes = record.likes();
  std::optional<ChangeKind> kind = ChangeKindFromProto(record.kind());
  if (!kind.has_value()) {
    return absl::DataLossError(StrCat("change ", change.sequence, " has an unknown kind"));
  }
  change.kind = *kind;
  if (change.kind == ChangeKind::kRequest) {
    out.request = StoredRequest{std::move(*record.mutable_request_key()),
                                std::move(*record.mutable_request_value())};
  }
  out.usage.reserve(record.usage_size());
  for (const v1::UsageIncrement& inc : record.usage()) out.usage.push_back(usage::FromProto(inc));
  return out;
}

class RocksDbSnapshot final : public StoreSnapshot {
 public:
  RocksDbSnapshot(rocksdb::DB* db, const rocksdb::Snapshot* snapshot,
                  rocksdb::ColumnFamilyHandle* tweets, rocksdb::ColumnFamilyHandle* requests,
                  rocksdb::ColumnFamilyHandle* usage, ReplicatedChange last)
      : db_(db), snapshot_(snapshot), last_(std::move(last)) {
    rocksdb::ReadOptions options;
    options.snapshot = snapshot_;
    options.fill_cache = false;  // a copy reads everything once
    it_.reset(db_->NewIterator(options, tweets));
    it_->SeekToFirst();
    requests_.reset(db_->NewIterator(options, requests));
    requests_->SeekToFirst();
    usage_.reset(db_->NewIterator(options, usage));
    usage_->SeekToFirst();
  }
  ~RocksDbSnapshot() override {
    it_.reset();
    requests_.reset();
    usage_.reset();
    db_->ReleaseSnapshot(snapshot_);
  }

  const ReplicatedChange& last() const override { return last_; }

  absl::StatusOr<std::vector<StoredTweet>> Next(size_t max) override {
    std::vector<StoredTweet> out;
    for (; it_->Valid() && out.size() < max; it_->Next()) {
      absl::StatusOr<StoredTweet> t = DecodeTweet(it_->value(), DecodeKey(it_->key()));
      if (!t.ok()) return t.status();
      out.push_back(*std::move(t));
    }
    if (absl::Status s = FromRocks(it_->status(), "snapshot"); !s.ok()) return s;
    return out;
  }

  absl::StatusOr<std::vector<StoredRequest>> NextRequests(size_t max) override {
    std::vector<StoredRequest> out;
    for (; requests_->Valid() && out.size() < max; requests_->Next()) {
      out.push_back(StoredRequest{requests_->key().ToString(), requests_->value().ToString()});
    }
    if (absl::Status s = FromRocks(requests_->status(), "snapshot"); !s.ok()) return s;
    return out;
  }

  absl::StatusOr<std::vector<StoredUsage>> NextUsage(size_t max) override {
    std::vector<StoredUsage> out;
    for (; usage_->Valid() && out.size() < max; usage_->Next()) {
      out.push_back(StoredUsage{usage_->key().ToString(), usage_->value().ToString()});
    }
    if (absl::Status s = FromRocks(usage_->status(), "snapshot"); !s.ok()) return s;
    return out;
  }

 private:
  rocksdb::DB* db_;
  const rocksdb::Snapshot* snapshot_;
  ReplicatedChange last_;
  std::unique_ptr<rocksdb::Iterator> it_;
  std::unique_ptr<rocksdb::Iterator> requests_;
  std::unique_ptr<rocksdb::Iterator> usage_;
};

class RocksDbTweetStore final : public TweetStore {
 public:
  RocksDbTweetStore(std::unique_ptr<rocksdb::DB> db,
                    std::vector<rocksdb::ColumnFamilyHandle*> handles, const std::string& dir,
                    const StoreOptions& options, uint64_t first_sequence, uint64_t last_sequence,
                    std::unique_ptr<rocksdb::CompactionFilter> usage_filter)
      : usage_filter_(std::move(usage_filter)),
        clock_(options.clock != nullptr ? *options.clock : SystemClock()),
        db_(std::move(db)),
        tweets_(handles[0]),
        changes_(handles[1]),
        requests_(handles[2]),
        usage_(handles[3]),
        sync_(options.sync_writes),
        guard_(db_.get(), dir, options.min_free_disk_bytes),
        first_sequence_(first_sequence),
        last_sequence_(last_sequence) {}

  ~RocksDbTweetStore() override {
    // Handles must go before the DB. Errors closing are logged by RocksDB itself.
    (void)db_->DestroyColumnFamilyHandle(tweets_);
    (void)db_->DestroyColumnFamilyHandle(changes_);
    (void)db_->DestroyColumnFamilyHandle(requests_);
    (void)db_->DestroyColumnFamilyHandle(usage_);
    (void)db_->Close();
  }

  absl::StatusOr<uint64_t> Write(const Mutation& m) override {
    absl::MutexLock lock(&write_mu_);
    if (absl::Status s = guard_.BeforeWrite(); !s.ok()) return s;
    uint64_t sequence = last_sequence_;
    rocksdb::WriteBatch batch;
    auto log = [&](ChangeKind kind, TweetId id, uint32_t likes) {
      return batch.Put(changes_, EncodeKey(++sequence), EncodeChange(kind, id, likes));
    };
    for (const StoredTweet& t : m.puts) {
      if (auto s = batch.Put(tweets_, EncodeKey(t.id), EncodeTweet(t)); !s.ok()) {
        return FromRocks(s, "batch");
      }
      if (auto s = log(ChangeKind::kPut, t.id, 0); !s.ok()) return FromRocks(s, "batch");
    }
    for (TweetId id : m.deletes) {
      // The log keeps what was deleted (streams tell from it whom the delete concerns).
      // Serialized by write_mu_, so the tweet read is the one deleted.
      absl::StatusOr<StoredTweet> gone = Get(id);
      if (!gone.ok() && !absl::IsNotFound(gone.status())) return gone.status();
      if (auto s = batch.Delete(tweets_, EncodeKey(id)); !s.ok()) return FromRocks(s, "batch");
      const ReplicatedChange change{
          Change{++sequence, ChangeKind::kDelete, id, 0},
          gone.ok() ? std::optional<StoredTweet>(*std::move(gone)) : std::nullopt,
          std::nullopt,
          {}};
      const rocksdb::Status s = batch.Put(changes_, EncodeKey(sequence), EncodeChange(change));
      if (!s.ok()) return FromRocks(s, "batch");
    }
    for (const auto& [id, likes] : m.likes) {
      // Read-modify-write is safe here: writes are serialized by write_mu_.
      absl::StatusOr<StoredTweet> t = Get(id);
      if (!t.ok()) return t.status();
      t->likes = likes;
      if (auto s = batch.Put(tweets_, EncodeKey(id), EncodeTweet(*t)); !s.ok()) {
        return FromRocks(s, "batch");
      }
      if (auto s = log(ChangeKind::kLikes, id, likes); !s.ok()) return FromRocks(s, "batch");
    }
    if (!m.usage.empty()) {
      const ReplicatedChange change{Change{++sequence, ChangeKind::kUsage, 0, 0}, std::nullopt,
                                    std::nullopt, m.usage};
      if (absl::Status s = AddUsage(batch, change); !s.ok()) return s;
    }
    for (const StoredRequest& r : m.requests) {
      if (auto s = PutRequest(batch, ++sequence, r); !s.ok()) return s;
    }
    if (sequence == last_sequence_) return sequence;
    rocksdb::WriteOptions options;
    options.sync = sync_;
    if (absl::Status s = guard_.After(db_->Write(options, &batch), "write"); !s.ok()) return s;
    last_sequence_ = sequence;
    return sequence;
  }

  absl::Status Apply(std::span<const ReplicatedChange> changes) override {
    absl::MutexLock lock(&write_mu_);
    if (changes.empty()) return absl::OkStatus();
    if (absl::Status s = guard_.BeforeWrite(); !s.ok()) return s;
    uint64_t sequence = last_sequence_;
    rocksdb::WriteBatch batch;
    // Likes changes read the tweet as this batch leaves it (a put earlier in the same batch).
    absl::flat_hash_map<TweetId, std::optional<StoredTweet>> pending;
    auto current = [&](TweetId id) -> absl::StatusOr<std::optional<StoredTweet>> {
      if (auto it = pending.find(id); it != pending.end()) return it->second;
      absl::StatusOr<StoredTweet> t = Get(id);
      if (absl::IsNotFound(t.status())) return std::optional<StoredTweet>();
      if (!t.ok()) return t.status();
      return std::optional<StoredTweet>(*std::move(t));
    };
    for (const ReplicatedChange& rc : changes) {
      const Change& c = rc.change;
      if (c.sequence != sequence + 1) {
        return absl::FailedPreconditionError(
            StrCat("change ", c.sequence, " out of order: expected ", sequence + 1));
      }
      sequence = c.sequence;
      rocksdb::Status s;
      const std::string key = EncodeKey(c.id);
      if (c.kind == ChangeKind::kPut) {
        if (rc.tweet.has_value()) {
          if (rc.tweet->id != c.id) return absl::InvalidArgumentError("put of another tweet");
          s = batch.Put(tweets_, key, EncodeTweet(*rc.tweet));
          pending[c.id] = rc.tweet;
        }
      } else if (c.kind == ChangeKind::kDelete) {
        s = batch.Delete(tweets_, key);
        pending[c.id] = std::nullopt;
      } else if (c.kind == ChangeKind::kRequest) {
        if (!rc.request.has_value()) return absl::InvalidArgumentError("request without record");
        if (absl::Status st = PutRequest(batch, c.sequence, *rc.request); !st.ok()) return st;
        continue;
      } else if (c.kind == ChangeKind::kUsage) {
        if (absl::Status st = AddUsage(batch, rc); !st.ok()) return st;
        continue;
      } else {
        absl::StatusOr<std::optional<StoredTweet>> t = current(c.id);
        if (!t.ok()) return t.status();
        if (t->has_value()) {
          (*t)->likes = c.likes;
          s = batch.Put(tweets_, key, EncodeTweet(**t));
          pending[c.id] = *std::move(t);
        }
      }
      if (!s.ok()) return FromRocks(s, "batch");
      s = batch.Put(changes_, EncodeKey(c.sequence), EncodeChange(rc));
      if (!s.ok()) return FromRocks(s, "batch");
    }
    rocksdb::WriteOptions options;
    options.sync = sync_;
    if (absl::Status s = guard_.After(db_->Write(options, &batch), "write"); !s.ok()) return s;
    last_sequence_ = sequence;
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<ReplicatedChange>> ReadChanges(uint64_t after, size_t max,
                                                            ChangeBodies bodies) const override {
    std::vector<ReplicatedChange> out;
    auto trimmed = [&] {
      return absl::FailedPreconditionError(
          StrCat("changes after ", after, " were trimmed; the oldest kept is ", FirstSequence()));
    };
    if (after + 1 < FirstSequence()) return trimmed();
    absl::Status s =
        ScanRecords(after, bodies == ChangeBodies::kInclude, [&](ReplicatedChange& rc) {
          out.push_back(std::move(rc));
          return out.size() < max;
        });
    if (!s.ok()) return s;
    // The log has no gaps, so a scan that does not start right after `after`
    // met a trim that ran since the check above.
    if (!out.empty() && out.front().change.sequence != after + 1) return trimmed();
    if (bodies == ChangeBodies::kOmit) return out;
    std::vector<TweetId> ids;
    std::vector<size_t> at;
    for (size_t i = 0; i < out.size(); ++i) {
      if (out[i].change.kind != ChangeKind::kPut) continue;
      ids.push_back(out[i].change.id);
      at.push_back(i);
    }
    std::vector<absl::StatusOr<StoredTweet>> tweets = MultiGet(ids);
    for (size_t j = 0; j < ids.size(); ++j) {
      if (tweets[j].ok()) {
        out[at[j]].tweet = *std::move(tweets[j]);
      } else if (!absl::IsNotFound(tweets[j].status())) {
        return tweets[j].status();
      }
    }
    return out;
  }

  // Kept in memory: seeking to the first change steps over every change a trim
  // deleted and compaction has not dropped yet, and readers ask on every poll.
  uint64_t FirstSequence() const override { return first_sequence_.load(); }

  absl::StatusOr<StoredTweet> Get(TweetId id) const override {
    rocksdb::PinnableSlice value;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), tweets_, EncodeKey(id), &value);
    if (s.IsNotFound()) return absl::NotFoundError(StrCat("tweet ", id, " not found"));
    if (absl::Status st = FromRocks(s, "get"); !st.ok()) return st;
    return DecodeTweet(value, id);
  }

  std::vector<absl::StatusOr<StoredTweet>> MultiGet(std::span<const TweetId> ids) const override {
    std::vector<absl::StatusOr<StoredTweet>> out;
    out.reserve(ids.size());
    Lookup(ids, [&](size_t i, const rocksdb::Status& s, const rocksdb::PinnableSlice& value) {
      if (s.IsNotFound()) {
        out.push_back(absl::NotFoundError(StrCat("tweet ", ids[i], " not found")));
      } else if (!s.ok()) {
        out.push_back(FromRocks(s, "multiget"));
      } else {
        out.push_back(DecodeTweet(value, ids[i]));
      }
    });
    return out;
  }

  absl::StatusOr<std::vector<bool>> Contains(std::span<const TweetId> ids) const override {
    std::vector<bool> out(ids.size());
    absl::Status error;
    Lookup(ids, [&](size_t i, const rocksdb::Status& s, const rocksdb::PinnableSlice&) {
      if (s.ok()) {
        out[i] = true;
      } else if (!s.IsNotFound() && error.ok()) {
        error = FromRocks(s, "multiget");
      }
    });
    if (!error.ok()) return error;
    return out;
  }

  absl::Status Scan(TweetId first, TweetId last,
                    const std::function<bool(const StoredTweet&)>& visit) const override {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), tweets_));
    for (it->Seek(EncodeKey(first)); it->Valid(); it->Next()) {
      const TweetId id = DecodeKey(it->key());
      if (id > last) break;
      absl::StatusOr<StoredTweet> t = DecodeTweet(it->value(), id);
      if (!t.ok()) return t.status();
      if (!visit(*t)) break;
    }
    return FromRocks(it->status(), "scan");
  }

  absl::Status ScanChanges(uint64_t after,
                           const std::function<bool(const Change&)>& visit) const override {
    return ScanRecords(after, false, [&](ReplicatedChange& rc) { return visit(rc.change); });
  }

  // ScanChanges, with each request's record, and the tweet each delete recorded when `bodies`.
  absl::Status ScanRecords(uint64_t after, bool bodies,
                           const std::function<bool(ReplicatedChange&)>& visit) const {
    if (after == UINT64_MAX) return absl::OkStatus();
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), changes_));
    for (it->Seek(EncodeKey(after + 1)); it->Valid(); it->Next()) {
      absl::StatusOr<ReplicatedChange> change = DecodeChange(it->key(), it->value(), bodies);
      if (!change.ok()) return change.status();
      if (!visit(*change)) break;
    }
    return FromRocks(it->status(), "scan changes");
  }

  absl::StatusOr<std::vector<usage::Point>> QueryUsage(std::string_view key_id,
                                                       usage::Resolution resolution, int64_t from_s,
                                                       int64_t to_s,
                                                       size_t max_points) const override {
    return usage::QueryTable(*db_, usage_, key_id, resolution, from_s, to_s, max_points,
                             clock_.NowUnixMillis() / 1000);
  }

  absl::StatusOr<std::vector<std::string>> UsageKeys() const override {
    return usage::KeysOfTable(*db_, usage_);
  }

  absl::Status ExpireUsage() override { return usage::CompactTable(*db_, usage_); }

  absl::StatusOr<std::optional<std::string>> GetRequest(std::string_view key) const override {
    std::string value;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), requests_, key, &value);
    if (s.IsNotFound()) return std::optional<std::string>();
    if (absl::Status st = FromRocks(s, "get request"); !st.ok()) return st;
    return std::optional<std::string>(std::move(value));
  }

  absl::StatusOr<uint64_t> DropRequests(
      const std::function<bool(std::string_view value)>& expired) override {
    rocksdb::WriteBatch batch;
    uint64_t dropped = 0;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), requests_));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      if (!expired(std::string_view(it->value().data(), it->value().size()))) continue;
      if (auto s = batch.Delete(requests_, it->key()); !s.ok()) return FromRocks(s, "batch");
      ++dropped;
    }
    if (absl::Status s = FromRocks(it->status(), "scan requests"); !s.ok()) return s;
    if (dropped == 0) return dropped;
    if (absl::Status s = guard_.BeforeWrite(/*adds_data=*/false); !s.ok()) return s;
    // A record rewritten meanwhile (an ingest finished) is newer than the rule's cut: losing it
    // a little early only costs that retry its replay.
    if (absl::Status s = guard_.After(db_->Write(rocksdb::WriteOptions(), &batch), "drop");
        !s.ok()) {
      return s;
    }
    return dropped;
  }

  absl::Status TrimChanges(uint64_t through) override {
    // The newest change always stays: it is how Open() learns the last sequence number.
    const uint64_t last = LastSequence();
    if (last <= 1 || through == 0) return absl::OkStatus();
    through = std::min(through, last - 1);
    // Readers are refused from here on, before any of it is gone.
    uint64_t first = first_sequence_.load();
    while (first < through + 1 && !first_sequence_.compare_exchange_weak(first, through + 1)) {
    }
    rocksdb::WriteOptions options;
    options.sync = sync_;
    const std::string end = EncodeKey(through + 1);  // DeleteRange's end is exclusive
    if (absl::Status s = guard_.BeforeWrite(/*adds_data=*/false); !s.ok()) return s;
    return guard_.After(db_->DeleteRange(options, changes_, EncodeKey(0), end), "trim changes");
  }

  // Without the write lock, which a synced write holds through its fsync.
  uint64_t LastSequence() const override { return last_sequence_.load(); }

  absl::StatusOr<std::unique_ptr<StoreSnapshot>> Snapshot() const override {
    const rocksdb::Snapshot* snapshot = nullptr;
    {
      // No write between the snapshot and reading the last sequence.
      absl::MutexLock lock(&write_mu_);
      snapshot = db_->GetSnapshot();
    }
    ReplicatedChange last;
    rocksdb::ReadOptions options;
    options.snapshot = snapshot;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(options, changes_));
    it->SeekToLast();  // the newest change is never trimmed
    if (it->Valid()) {
      absl::StatusOr<ReplicatedChange> change = DecodeChange(it->key(), it->value(), true);
      if (!change.ok()) {
        it.reset();
        db_->ReleaseSnapshot(snapshot);
        return change.status();
      }
      last = *std::move(change);
      if (last.change.kind == ChangeKind::kPut) {
        rocksdb::PinnableSlice value;
        rocksdb::Status s = db_->Get(options, tweets_, EncodeKey(last.change.id), &value);
        if (s.ok()) {
          absl::StatusOr<StoredTweet> t = DecodeTweet(value, last.change.id);
          if (t.ok()) last.tweet = *std::move(t);
        }
      }
    }
    absl::Status status = FromRocks(it->status(), "snapshot");
    it.reset();
    if (!status.ok()) {
      db_->ReleaseSnapshot(snapshot);
      return status;
    }
    return std::unique_ptr<StoreSnapshot>(
        new RocksDbSnapshot(db_.get(), snapshot, tweets_, requests_, usage_, std::move(last)));
  }

  absl::Status ClearForInstall() override {
    absl::MutexLock lock(&write_mu_);
    rocksdb::WriteOptions options;
    options.sync = sync_;
    const std::string end(9, '\xff');  // past every 8-byte key
    for (rocksdb::ColumnFamilyHandle* family : {tweets_, changes_}) {
      absl::Status s = FromRocks(db_->DeleteRange(options, family, EncodeKey(0), end), "clear");
      if (!s.ok()) return s;
    }
    // Request keys are any bytes: delete them one by one (there are a day's worth at most).
    rocksdb::WriteBatch batch;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), requests_));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      if (auto s = batch.Delete(requests_, it->key()); !s.ok()) return FromRocks(s, "batch");
    }
    if (absl::Status s = FromRocks(it->status(), "clear"); !s.ok()) return s;
    // Usage keys begin with a key id, printable ASCII: all below "\xff".
    if (auto s = batch.DeleteRange(usage_, rocksdb::Slice(), "\xff"); !s.ok()) {
      return FromRocks(s, "batch");
    }
    if (absl::Status s = FromRocks(db_->Write(options, &batch), "clear"); !s.ok()) return s;
    last_sequence_ = 0;
    first_sequence_ = 1;
    return absl::OkStatus();
  }

  absl::Status InstallTweets(std::span<const StoredTweet> tweets) override {
    if (absl::Status s = guard_.BeforeWrite(); !s.ok()) return s;
    rocksdb::WriteBatch batch;
    for (const StoredTweet& t : tweets) {
      if (auto s = batch.Put(tweets_, EncodeKey(t.id), EncodeTweet(t)); !s.ok()) {
        return FromRocks(s, "batch");
      }
    }
    return guard_.After(db_->Write(rocksdb::WriteOptions(), &batch), "install");
  }

  absl::Status InstallRequests(std::span<const StoredRequest> requests) override {
    if (absl::Status s = guard_.BeforeWrite(); !s.ok()) return s;
    rocksdb::WriteBatch batch;
    for (const StoredRequest& r : requests) {
      if (auto s = batch.Put(requests_, r.key, r.value); !s.ok()) return FromRocks(s, "batch");
    }
    return guard_.After(db_->Write(rocksdb::WriteOptions(), &batch), "install");
  }

  absl::Status InstallUsage(std::span<const StoredUsage> buckets) override {
    if (absl::Status s = guard_.BeforeWrite(); !s.ok()) return s;
    rocksdb::WriteBatch batch;
    for (const StoredUsage& b : buckets) {
      if (auto s = batch.Put(usage_, b.key, b.value); !s.ok()) return FromRocks(s, "batch");
    }
    return guard_.After(db_->Write(rocksdb::WriteOptions(), &batch), "install");
  }

  absl::Status FinishInstall(const ReplicatedChange& last) override {
    absl::MutexLock lock(&write_mu_);
    if (last_sequence_ != 0) {
      return absl::FailedPreconditionError("the store was written since it was cleared");
    }
    if (last.change.sequence == 0) return absl::OkStatus();  // the copy of an empty store
    rocksdb::WriteBatch batch;
    const Change& c = last.change;
    // The copy holds this change's effect: only a record (a Put) is written again; usage
    // counts would be added twice.
    rocksdb::Status s =
        batch.Put(changes_, EncodeKey(c.sequence),
                  EncodeChange(ReplicatedChange{c, std::nullopt, last.request, last.usage}));
    if (!s.ok()) return FromRocks(s, "batch");
    if (c.kind == ChangeKind::kRequest && last.request.has_value()) {
      s = batch.Put(requests_, last.request->key, last.request->value);
      if (!s.ok()) return FromRocks(s, "batch");
    }
    rocksdb::WriteOptions options;
    options.sync = sync_;  // also makes every InstallTweets() before it durable (one WAL)
    if (absl::Status st = guard_.After(db_->Write(options, &batch), "install"); !st.ok()) return st;
    first_sequence_ = c.sequence;  // the copy's whole log is this one change
    last_sequence_ = c.sequence;
    return absl::OkStatus();
  }

  uint64_t ApproximateCount() const override {
    uint64_t count = 0;
    db_->GetIntProperty(tweets_, rocksdb::DB::Properties::kEstimateNumKeys, &count);
    return count;
  }

  uint64_t DiskBytes() const override {
    uint64_t sst = 0, wal = 0;
    db_->GetIntProperty(tweets_, rocksdb::DB::Properties::kTotalSstFilesSize, &sst);
    uint64_t changes_sst = 0;
    db_->GetIntProperty(changes_, rocksdb::DB::Properties::kTotalSstFilesSize, &changes_sst);
    db_->GetIntProperty(rocksdb::DB::Properties::kCurSizeAllMemTables, &wal);
    return sst + changes_sst + wal;
  }

 private:
  // Batched point lookups of `ids`; calls `each(i, status, value)` for every i.
  template <typename Each>
  void Lookup(std::span<const TweetId> ids, Each each) const {
    std::vector<std::string> keys;
    keys.reserve(ids.size());
    for (TweetId id : ids) keys.push_back(EncodeKey(id));
    std::vector<rocksdb::Slice> slices(keys.begin(), keys.end());
    std::vector<rocksdb::PinnableSlice> values(ids.size());
    std::vector<rocksdb::Status> statuses(ids.size());
    db_->MultiGet(rocksdb::ReadOptions(), tweets_, slices.size(), slices.data(), values.data(),
                  statuses.data());
    for (size_t i = 0; i < ids.size(); ++i) each(i, statuses[i], values[i]);
  }

  // Stores a record and logs it as change `sequence`, in `batch`.
  absl::Status PutRequest(rocksdb::WriteBatch& batch, uint64_t sequence, const StoredRequest& r) {
    if (auto s = batch.Put(requests_, r.key, r.value); !s.ok()) return FromRocks(s, "batch");
    const ReplicatedChange change{
        Change{sequence, ChangeKind::kRequest, 0, 0}, std::nullopt, r, {}};
    return FromRocks(batch.Put(changes_, EncodeKey(sequence), EncodeChange(change)), "batch");
  }

  // Adds a usage change's counts and logs it, in `batch`.
  absl::Status AddUsage(rocksdb::WriteBatch& batch, const ReplicatedChange& change) {
    if (absl::Status s = usage::AddToBatch(change.usage, usage_, batch); !s.ok()) return s;
    return FromRocks(batch.Put(changes_, EncodeKey(change.change.sequence), EncodeChange(change)),
                     "batch");
  }

  // Declared before db_: the DB uses the filter until it closes.
  std::unique_ptr<rocksdb::CompactionFilter> usage_filter_;
  const Clock& clock_;
  std::unique_ptr<rocksdb::DB> db_;
  rocksdb::ColumnFamilyHandle* tweets_;
  rocksdb::ColumnFamilyHandle* changes_;
  rocksdb::ColumnFamilyHandle* requests_;
  rocksdb::ColumnFamilyHandle* usage_;
  const bool sync_;
  WriteGuard guard_;
  // Writes are serialized by write_mu_; the sequences are atomics so that
  // readers need no lock. The log holds every change from first to last, or
  // none when first_sequence_ == last_sequence_ + 1.
  mutable absl::Mutex write_mu_;
  std::atomic<uint64_t> first_sequence_;
  std::atomic<uint64_t> last_sequence_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<TweetStore>> TweetStore::Open(const std::string& dir,
                                                             const StoreOptions& options) {
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(options.block_cache_bytes);
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(options.bloom_bits_per_key));
  table.cache_index_and_filter_blocks = true;
  table.pin_l0_filter_and_index_blocks_in_cache = true;
  table.format_version = 5;
  table.block_size = 16 * 1024;

  rocksdb::ColumnFamilyOptions tweets_cf;
  tweets_cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  tweets_cf.write_buffer_size = options.write_buffer_bytes;
  tweets_cf.level_compaction_dynamic_level_bytes = true;
  tweets_cf.compression = rocksdb::kLZ4Compression;
  tweets_cf.bottommost_compression = rocksdb::kZSTD;

  rocksdb::ColumnFamilyOptions changes_cf;  // small, short-lived values: no filter needed
  rocksdb::BlockBasedTableOptions changes_table;
  changes_table.block_cache = table.block_cache;
  changes_cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(changes_table));
  changes_cf.write_buffer_size = options.write_buffer_bytes / 4;
  changes_cf.compression = rocksdb::kLZ4Compression;

  rocksdb::DBOptions db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  db_options.max_background_jobs = 2;
  db_options.bytes_per_sync = 1 << 20;
  db_options.keep_log_file_num = 3;
  db_options.max_total_wal_size = options.write_buffer_bytes * 4;

  rocksdb::ColumnFamilyOptions requests_cf;  // a day of idempotent writes' records: small
  requests_cf.table_factory = changes_cf.table_factory;
  requests_cf.write_buffer_size = options.write_buffer_bytes / 8;
  requests_cf.compression = rocksdb::kLZ4Compression;

  // A cluster's usage series: a bucket per key and minute for a day, coarser ones for longer.
  rocksdb::ColumnFamilyOptions usage_cf;
  usage_cf.table_factory = changes_cf.table_factory;
  usage_cf.write_buffer_size = options.write_buffer_bytes / 8;
  usage_cf.compression = rocksdb::kLZ4Compression;
  usage_cf.merge_operator = usage::NewCountersMergeOperator();
  std::unique_ptr<rocksdb::CompactionFilter> usage_filter =
      usage::NewExpiryFilter(options.clock != nullptr ? *options.clock : SystemClock());
  usage_cf.compaction_filter = usage_filter.get();

  std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, tweets_cf},
      {"changes", changes_cf},
      {"requests", requests_cf},
      {"usage", usage_cf}};
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_options, dir, families, &handles, &raw);
  if (absl::Status st = FromRocks(s, StrCat("open ", dir)); !st.ok()) return st;
  std::unique_ptr<rocksdb::DB> db(raw);

  // The first and last change sequences: the smallest and largest keys of the
  // change log (the newest change is never trimmed, so last survives restarts).
  uint64_t first = 0, last = 0;
  {
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), handles[1]));
    it->SeekToLast();
    if (it->Valid()) last = DecodeKey(it->key());
    it->SeekToFirst();
    first = it->Valid() ? DecodeKey(it->key()) : last + 1;
    if (absl::Status st = FromRocks(it->status(), "read change log"); !st.ok()) {
      for (auto* h : handles) (void)db->DestroyColumnFamilyHandle(h);
      return st;
    }
  }
  return std::unique_ptr<TweetStore>(new RocksDbTweetStore(
      std::move(db), std::move(handles), dir, options, first, last, std::move(usage_filter)));
}

v1::ChangeRecord::Kind ChangeKindToProto(ChangeKind kind) {
  switch (kind) {
    case ChangeKind::kPut:
      return v1::ChangeRecord::KIND_PUT;
    case ChangeKind::kDelete:
      return v1::ChangeRecord::KIND_DELETE;
    case ChangeKind::kLikes:
      return v1::ChangeRecord::KIND_LIKES;
    case ChangeKind::kRequest:
      return v1::ChangeRecord::KIND_REQUEST;
    case ChangeKind::kUsage:
      return v1::ChangeRecord::KIND_USAGE;
  }
  return v1::ChangeRecord::KIND_UNSPECIFIED;
}

std::optional<ChangeKind> ChangeKindFromProto(v1::ChangeRecord::Kind kind) {
  switch (kind) {
    case v1::ChangeRecord::KIND_PUT:
      return ChangeKind::kPut;
    case v1::ChangeRecord::KIND_DELETE:
      return ChangeKind::kDelete;
    case v1::ChangeRecord::KIND_LIKES:
      return ChangeKind::kLikes;
    case v1::ChangeRecord::KIND_REQUEST:
      return ChangeKind::kRequest;
    case v1::ChangeRecord::KIND_USAGE:
      return ChangeKind::kUsage;
    default:
      return std::nullopt;
  }
}

absl::Status CheckLikesChange(int64_t value, bool add) {
  constexpr int64_t kMax = UINT32_MAX;
  if (add && (value < -kMax || value > kMax)) {
    return absl::InvalidArgumentError(StrCat("add must be an integer from -", kMax, " to ", kMax));
  }
  if (!add && (value < 0 || value > kMax)) {
    return absl::InvalidArgumentError(StrCat("set must be an integer from 0 to ", kMax));
  }
  return absl::OkStatus();
}

uint32_t ApplyLikes(uint32_t current, int64_t value, bool add) {
  constexpr int64_t kMax = UINT32_MAX;
  value = std::clamp<int64_t>(value, add ? -kMax : 0, kMax);
  return static_cast<uint32_t>(std::clamp<int64_t>(add ? current + value : value, 0, kMax));
}

}  // namespace tweetsearch::storage
