// StorageNode replication in one process: two real replicas (RocksDB in a
// temporary directory) joined by an in-process peer that can be cut off. Full
// copies to a replica the log no longer reaches, a copy cut off by a crash,
// and the log cap against live readers.
#include "storage/storage_node.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <functional>

#include "common/strings.h"
#include "tests/testing/corpus.h"
#include "tests/testing/local_storage.h"

namespace tweetsearch {
namespace {

using storage::StorageNode;
using storage::StoredTweet;
constexpr storage::ChangeBodies kWithTweets = storage::ChangeBodies::kInclude;

StoredTweet MakeTweet(TweetId id) {
  return StoredTweet{id,
                     id % 11,
                     StrCat("user", id % 11),
                     StrCat("replica test ", id),
                     1'700'000'000'000 + static_cast<int64_t>(id),
                     "en",
                     static_cast<uint32_t>(id % 5)};
}

class StorageNodeTest : public ::testing::Test {
 protected:
  std::unique_ptr<StorageNode> Open(const std::string& name, uint64_t max_log_changes = 50'000'000,
                                    absl::Duration live_window = absl::Seconds(30),
                                    absl::Duration in_sync_validity = absl::Seconds(4),
                                    absl::Duration retention = absl::ZeroDuration()) {
    storage::StorageNodeOptions options;
    options.node = name;
    options.data_dir = dir_.path() + "/" + name;
    options.store.sync_writes = false;
    options.allow_single_replica = true;
    options.max_log_changes = max_log_changes;
    options.live_reader_window = live_window;
    options.change_retention = retention;  // most tests trim at once
    options.in_sync_validity = in_sync_validity;
    options.copy_batch = 128;  // several chunks per copy
    options.readers = {"i0a"};
    options.clock = &clock_;
    absl::StatusOr<std::unique_ptr<StorageNode>> node = StorageNode::Open(options);
    EXPECT_TRUE(node.ok()) << node.status();
    return node.ok() ? *std::move(node) : nullptr;
  }

  // Makes `node` primary with `epoch`, replicating to `peer` (may be null), its lease standing
  // as `standing` says.
  void Promote(
      StorageNode& node, uint64_t epoch, storage::StoragePeer* peer,
      std::function<storage::LeaseStanding()> standing = [] {
        return storage::LeaseStanding::kHeld;
      }) {
    ASSERT_TRUE(node.BecomePrimary(
                        epoch, peer, std::move(standing),
                        [this] {
                          peer_stale_ = true;
                          return absl::OkStatus();
                        },
                        [this] {
                          peer_stale_ = false;
                          return absl::OkStatus();
                        })
                    .ok());
  }

  void Put(StorageNode& primary, TweetId first, int count) {
    storage::WriteOp op;
    for (int i = 0; i < count; ++i) op.puts.push_back(MakeTweet(first + i));
    absl::StatusOr<storage::WriteResult> r = primary.Write(std::move(op));
    ASSERT_TRUE(r.ok()) << r.status();
  }

  void Delete(StorageNode& primary, TweetId id) {
    storage::WriteOp op;
    op.delete_id = id;
    ASSERT_TRUE(primary.Write(std::move(op)).ok());
  }

  // Every tweet of `node`, through a snapshot (id order).
  static std::vector<StoredTweet> All(StorageNode& node) {
    absl::StatusOr<std::unique_ptr<storage::StoreSnapshot>> snapshot = node.SnapshotFor("");
    EXPECT_TRUE(snapshot.ok()) << snapshot.status();
    std::vector<StoredTweet> out;
    if (!snapshot.ok()) return out;
    for (;;) {
      absl::StatusOr<std::vector<StoredTweet>> next = (*snapshot)->Next(500);
      EXPECT_TRUE(next.ok());
      if (!next.ok() || next->empty()) break;
      out.insert(out.end(), next->begin(), next->end());
    }
    return out;
  }

  // Adds `add` likes to tweet `id` under idempotency key `key` with `fingerprint`.
  absl::StatusOr<storage::WriteResult> AddLikes(StorageNode& primary, TweetId id, int64_t add,
                                                const std::string& key,
                                                const std::string& fingerprint) {
    storage::WriteOp op;
    op.likes = storage::LikesChange{id, add, true};
    op.request_key = key;
    op.record = storage::WriteRecord{};
    op.record->fingerprint = fingerprint;
    op.record->created_at_ms = clock_.NowUnixMillis();
    return primary.Write(std::move(op));
  }

  // Stores an ingest's record alone: its plan (`ids`), or its final answer with `done`.
  absl::StatusOr<storage::WriteResult> IngestRecord(StorageNode& primary, const std::string& key,
                                                    std::vector<TweetId> ids, bool done) {
    storage::WriteOp op;
    op.request_key = key;
    op.record = storage::WriteRecord{};
    op.record->fingerprint = "f";
    op.record->created_at_ms = clock_.NowUnixMillis();
    op.record->done = done;
    op.record->ids = std::move(ids);
    if (done) op.record->outcomes.resize(op.record->ids.size());
    return primary.Write(std::move(op));
  }

  // Adds `increments` to the partition's usage series, idempotent under `key` unless it is
  // empty.
  absl::StatusOr<storage::WriteResult> AddUsage(StorageNode& primary, const std::string& key,
                                                std::vector<usage::Increment> increments) {
    storage::WriteOp op;
    op.usage = std::move(increments);
    if (!key.empty()) {
      op.request_key = key;
      op.record = storage::WriteRecord{};
      op.record->fingerprint = key;
      op.record->created_at_ms = clock_.NowUnixMillis();
    }
    return primary.Write(std::move(op));
  }

  // Requests served for `key_id` in the bucket of `resolution` at kMinute.
  static uint64_t Served(const StorageNode& node, const std::string& key_id,
                         usage::Resolution resolution) {
    absl::StatusOr<std::vector<usage::Point>> points =
        node.QueryUsage(key_id, resolution, kMinute, kMinute + 1, 10);
    EXPECT_TRUE(points.ok()) << points.status();
    return points.ok() && points->size() == 1 ? points->front().counters.served : 0;
  }

  static usage::Counters ServedCounters(uint64_t n) {
    usage::Counters c;
    c.served = n;
    return c;
  }

  static constexpr int64_t kMinute = 1'700'000'000 / 60 * 60;  // of clock_'s start
  testing::TempDir dir_;
  ManualClock clock_{1'700'000'000'000};  // the replicas' windows are measured on it
  bool peer_stale_ = false;
};

TEST_F(StorageNodeTest, AReplicaOnAReplacedDiskGetsAFullCopyThenTheLog) {
  constexpr absl::Duration kValidity = absl::Milliseconds(200);
  std::unique_ptr<StorageNode> a =
      Open("s0a", /*max_log_changes=*/100, absl::Seconds(30), kValidity);
  std::unique_ptr<StorageNode> b = Open("s0b");
  testing::LocalStoragePeer to_b(b.get());
  Promote(*a, 1, &to_b);
  ASSERT_TRUE(a->CatchUpPeer().ok());  // nothing to do: b counts as in sync now
  ASSERT_TRUE(a->Status().peer_in_sync);
  for (int i = 0; i < 5; ++i) Put(*a, 1000 + i * 100, 100);
  EXPECT_EQ(b->LastSequence(), a->LastSequence());

  // b's disk is replaced while a writes alone and trims past b's position.
  to_b.Reconnect(nullptr);
  b.reset();
  std::filesystem::remove_all(dir_.path() + "/s0b");
  for (int i = 5; i < 12; ++i) Put(*a, 1000 + i * 100, 100);
  Delete(*a, 1010);
  EXPECT_TRUE(peer_stale_);
  EXPECT_GT(a->Status().single_replica_writes, 0u);
  ASSERT_TRUE(a->TrimLog().ok());
  ASSERT_GT(a->Status().first_sequence, 1u) << "the cap should have trimmed the log";

  b = Open("s0b");
  ASSERT_EQ(b->LastSequence(), 0u);
  to_b.Reconnect(b.get());
  ASSERT_TRUE(a->CatchUpPeer().ok());
  const storage::StorageNodeStatus status = a->Status();
  EXPECT_TRUE(status.peer_in_sync);
  EXPECT_FALSE(peer_stale_);
  EXPECT_EQ(status.copies_sent, 1u);
  EXPECT_EQ(status.tweets_copied, 1199u);
  EXPECT_GT(to_b.install_calls(), 3u);  // several chunks
  EXPECT_EQ(b->LastSequence(), a->LastSequence());
  EXPECT_EQ(All(*b), All(*a));
  EXPECT_EQ(All(*b).size(), 1199u);

  // b's log starts at the copy: older positions are trimmed there, newer ones
  // read as on the primary.
  EXPECT_TRUE(absl::IsFailedPrecondition(
      b->ReadChanges(1, 10, absl::ZeroDuration(), "", 0, kWithTweets).status()));
  Put(*a, 50'000, 3);  // replicated as usual now
  EXPECT_EQ(b->LastSequence(), a->LastSequence());
  absl::StatusOr<std::vector<storage::ReplicatedChange>> tail =
      b->ReadChanges(a->LastSequence() - 4, 10, absl::ZeroDuration(), "", 0, kWithTweets);
  ASSERT_TRUE(tail.ok()) << tail.status();
  ASSERT_EQ(tail->size(), 4u);
  EXPECT_EQ((*tail)[3].change.id, 50'002u);
  ASSERT_TRUE((*tail)[3].tweet.has_value());
  EXPECT_EQ(*(*tail)[3].tweet, MakeTweet(50'002));

  // b loses its disk again, silently (no write in between): the primary's
  // periodic word finds out, marks it stale, and copies it again.
  to_b.Reconnect(nullptr);
  b.reset();
  std::filesystem::remove_all(dir_.path() + "/s0b");
  b = Open("s0b");
  to_b.Reconnect(b.get());
  clock_.AdvanceMillis(absl::ToInt64Milliseconds(kValidity));
  EXPECT_TRUE(absl::IsDataLoss(a->CatchUpPeer()));
  EXPECT_TRUE(peer_stale_);
  EXPECT_FALSE(a->Status().peer_in_sync);
  ASSERT_TRUE(a->CatchUpPeer().ok());
  EXPECT_EQ(a->Status().copies_sent, 2u);
  EXPECT_FALSE(peer_stale_);
  EXPECT_EQ(All(*b), All(*a));

  // b unreachable while nothing is written: out of sync, but not stale (it
  // lacks nothing); back, it is in sync again without a copy.
  to_b.Reconnect(nullptr);
  clock_.AdvanceMillis(absl::ToInt64Milliseconds(kValidity));
  EXPECT_TRUE(absl::IsUnavailable(a->CatchUpPeer()));
  EXPECT_FALSE(a->Status().peer_in_sync);
  EXPECT_FALSE(peer_stale_);
  to_b.Reconnect(b.get());
  ASSERT_TRUE(a->CatchUpPeer().ok());
  EXPECT_TRUE(a->Status().peer_in_sync);
  EXPECT_EQ(a->Status().copies_sent, 2u);

  // b, promoted with a higher epoch, holds every write.
  a->StepDown();
  Promote(*b, 2, nullptr);
  absl::StatusOr<StoredTweet> last = b->MultiGet(std::vector<TweetId>{50'002})[0];
  ASSERT_TRUE(last.ok());
  EXPECT_FALSE(b->MultiGet(std::vector<TweetId>{1010})[0].ok());
}

TEST_F(StorageNodeTest, ACopyCutOffByACrashIsClearedAtRestartAndRefusedMeanwhile) {
  std::unique_ptr<StorageNode> b = Open("s0b");
  storage::InstallChunk chunk;
  chunk.sequence = 40;
  chunk.begin = true;
  chunk.tweets = {MakeTweet(1), MakeTweet(2)};
  ASSERT_TRUE(b->Install(3, "s0a", chunk).ok());
  EXPECT_TRUE(b->Status().installing);
  // Not a state of the partition yet: reads are refused, so callers go to the
  // primary.
  EXPECT_TRUE(absl::IsUnavailable(b->MultiGet(std::vector<TweetId>{1})[0].status()));
  EXPECT_TRUE(absl::IsUnavailable(
      b->ReadChanges(0, 10, absl::ZeroDuration(), "", 0, kWithTweets).status()));
  EXPECT_TRUE(absl::IsUnavailable(b->SnapshotFor("b0").status()));
  // A chunk of another copy, or from a stale primary, is refused.
  storage::InstallChunk other;
  other.sequence = 41;
  EXPECT_TRUE(absl::IsAborted(b->Install(3, "s0a", other).status()));
  chunk.begin = false;
  EXPECT_TRUE(absl::IsFailedPrecondition(b->Install(2, "s0a", chunk).status()));

  b.reset();  // the primary died mid-copy; b restarts
  b = Open("s0b");
  EXPECT_FALSE(b->Status().installing);
  EXPECT_EQ(b->LastSequence(), 0u);
  EXPECT_FALSE(std::filesystem::exists(dir_.path() + "/s0b/INSTALLING"));

  // A copy given up for the log: replication from sequence 1 clears it first.
  chunk.begin = true;
  ASSERT_TRUE(b->Install(3, "s0a", chunk).ok());
  storage::ReplicatedChange put{
      storage::Change{1, storage::ChangeKind::kPut, 7, 0}, MakeTweet(7), std::nullopt, {}};
  absl::StatusOr<uint64_t> replicated =
      b->Replicate(3, "s0a", std::span(&put, 1), /*synced_through=*/1);
  ASSERT_TRUE(replicated.ok()) << replicated.status();
  EXPECT_EQ(*replicated, 1u);
  EXPECT_FALSE(b->Status().installing);
  EXPECT_TRUE(b->MultiGet(std::vector<TweetId>{7})[0].ok());
  EXPECT_TRUE(absl::IsNotFound(b->MultiGet(std::vector<TweetId>{1})[0].status()));
}

TEST_F(StorageNodeTest, DeletesCarryTheirTweetOnBothReplicasAndTheLogKeepsTheRetention) {
  // Did: a primary with a 10-minute retention replicating to its secondary; 300 tweets, one
  // deleted; trims with the clock at 9 minutes, then past 10 minutes, and a reader that keeps
  // nothing back. Checked: the delete's change carries the deleted tweet on both replicas (a
  // stream reading the log can match it); no change younger than the retention is trimmed,
  // and the older ones are once it has passed.
  std::unique_ptr<StorageNode> a =
      Open("s0a", 50'000'000, absl::Seconds(30), absl::Seconds(4), absl::Minutes(10));
  std::unique_ptr<StorageNode> b = Open("s0b");
  testing::LocalStoragePeer to_b(b.get());
  Promote(*a, 1, &to_b);
  ASSERT_TRUE(a->CatchUpPeer().ok());
  Put(*a, 1000, 300);
  Delete(*a, 1007);
  for (StorageNode* node : {a.get(), b.get()}) {
    absl::StatusOr<std::vector<storage::ReplicatedChange>> last = node->ReadChanges(
        node->LastSequence() - 1, 1, absl::ZeroDuration(), "", 0, storage::ChangeBodies::kInclude);
    ASSERT_TRUE(last.ok() && last->size() == 1u) << last.status();
    EXPECT_EQ((*last)[0].change.kind, storage::ChangeKind::kDelete);
    ASSERT_TRUE((*last)[0].tweet.has_value()) << "the delete does not carry its tweet";
    EXPECT_EQ((*last)[0].tweet->id, 1007u);
    EXPECT_EQ((*last)[0].tweet->text, MakeTweet(1007).text);
  }
  // The reader i0a says it needs nothing: only the retention holds the log.
  ASSERT_TRUE(a->ReadChanges(a->LastSequence(), 1, absl::ZeroDuration(), "i0a", a->LastSequence(),
                             storage::ChangeBodies::kOmit)
                  .ok());
  ASSERT_TRUE(a->TrimLog().ok());  // notes the time of the changes so far
  Put(*a, 5000, 10);               // newer changes
  clock_.AdvanceMillis(9 * 60 * 1000);
  ASSERT_TRUE(a->TrimLog().ok());
  EXPECT_LE(a->Status().first_sequence, 1u) << "changes younger than the retention were trimmed";
  clock_.AdvanceMillis(2 * 60 * 1000);
  ASSERT_TRUE(a->TrimLog().ok());
  EXPECT_EQ(a->Status().first_sequence, 302u) << "the changes older than the retention stay";
}

TEST_F(StorageNodeTest, TheLogCapNeverCutsOffALiveReader) {
  std::unique_ptr<StorageNode> a =
      Open("s0a", /*max_log_changes=*/100, /*live_window=*/absl::Milliseconds(300));
  Promote(*a, 1, nullptr);
  Put(*a, 1000, 50);
  // A reader that reads now, far behind what the cap would keep.
  ASSERT_TRUE(a->ReadChanges(10, 5, absl::ZeroDuration(), "i0a", 10, kWithTweets).ok());
  for (int i = 0; i < 5; ++i) Put(*a, 2000 + i * 100, 100);
  ASSERT_TRUE(a->TrimLog().ok());
  EXPECT_LE(a->Status().first_sequence, 11u) << "a live reader was cut off";
  absl::StatusOr<std::vector<storage::ReplicatedChange>> read =
      a->ReadChanges(10, 1000, absl::ZeroDuration(), "i0a", 10, kWithTweets);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->front().change.sequence, 11u);

  // It keeps reading, slowly: the log stays behind it, not further.
  ASSERT_TRUE(a->ReadChanges(400, 5, absl::ZeroDuration(), "i0a", 400, kWithTweets).ok());
  ASSERT_TRUE(a->TrimLog().ok());
  EXPECT_EQ(a->Status().first_sequence, 401u);

  // Once it has not read for longer than the window, the cap applies.
  clock_.AdvanceMillis(301);
  ASSERT_TRUE(a->TrimLog().ok());
  EXPECT_EQ(a->Status().first_sequence, a->LastSequence() - 100 + 1);
  EXPECT_TRUE(absl::IsFailedPrecondition(
      a->ReadChanges(400, 5, absl::ZeroDuration(), "i0a", 400, kWithTweets).status()));
}

TEST_F(StorageNodeTest, ASecondaryServesReadsOnlyWhileItsPrimaryCallsItInSync) {
  std::unique_ptr<StorageNode> b = Open("s0b");
  auto read = [&](uint64_t after) {
    return b->ReadChanges(after, 10, absl::ZeroDuration(), "i0a", after, kWithTweets).status();
  };
  auto get = [&](TweetId id) { return b->MultiGet(std::vector<TweetId>{id})[0].status(); };
  // Restarted, it does not know whether it lacks writes: readers go elsewhere.
  EXPECT_TRUE(absl::IsUnavailable(read(0)));
  EXPECT_TRUE(absl::IsUnavailable(get(7)));
  storage::ReplicatedChange put{
      storage::Change{1, storage::ChangeKind::kPut, 7, 0}, MakeTweet(7), std::nullopt, {}};
  ASSERT_TRUE(b->Replicate(1, "s0a", std::span(&put, 1), /*synced_through=*/1).ok());
  EXPECT_TRUE(read(0).ok());
  EXPECT_TRUE(get(7).ok());
  // In sync, but behind a reader that has read further elsewhere.
  EXPECT_TRUE(absl::IsUnavailable(read(5)));
  // The primary wrote without it.
  ASSERT_TRUE(b->Replicate(1, "s0a", {}, /*synced_through=*/0).ok());
  EXPECT_TRUE(absl::IsUnavailable(read(0)));
  EXPECT_TRUE(absl::IsUnavailable(get(7)));
  // Told again, it serves until the word is older than in_sync_validity.
  ASSERT_TRUE(b->Replicate(1, "s0a", {}, /*synced_through=*/1).ok());
  EXPECT_TRUE(read(0).ok());
  std::unique_ptr<StorageNode> c =
      Open("s0c", 50'000'000, absl::Seconds(30), /*in_sync_validity=*/absl::Milliseconds(50));
  ASSERT_TRUE(c->Replicate(1, "s0a", std::span(&put, 1), /*synced_through=*/1).ok());
  EXPECT_TRUE(c->MultiGet(std::vector<TweetId>{7})[0].ok());
  clock_.AdvanceMillis(49);
  EXPECT_TRUE(c->MultiGet(std::vector<TweetId>{7})[0].ok());
  clock_.AdvanceMillis(1);
  EXPECT_TRUE(absl::IsUnavailable(c->MultiGet(std::vector<TweetId>{7})[0].status()));
  // As primary it is the authority: it serves, and readers wait there.
  Promote(*b, 2, nullptr);
  absl::StatusOr<std::vector<storage::ReplicatedChange>> changes =
      b->ReadChanges(1, 10, absl::ZeroDuration(), "i0a", 1, kWithTweets);
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_TRUE(changes->empty());
  EXPECT_TRUE(get(7).ok());
}

TEST_F(StorageNodeTest, APrimaryWhoseLeaseEtcdLeftUnrenewedWritesOnlyWithItsSecondary) {
  std::unique_ptr<StorageNode> a = Open("s0a");
  std::unique_ptr<StorageNode> b = Open("s0b");
  testing::LocalStoragePeer to_b(b.get());
  std::atomic<storage::LeaseStanding> standing{storage::LeaseStanding::kHeld};
  Promote(*a, 1, &to_b, [&] { return standing.load(); });
  ASSERT_TRUE(a->CatchUpPeer().ok());
  Put(*a, 1000, 10);

  // etcd stopped answering and the lease ran out: writes go on with the secondary.
  standing = storage::LeaseStanding::kSilent;
  Put(*a, 2000, 10);
  EXPECT_EQ(b->LastSequence(), a->LastSequence());
  EXPECT_EQ(a->Status().single_replica_writes, 0u);

  // Never without it, although single-replica writes are on: nothing is written or marked.
  to_b.Reconnect(nullptr);
  const uint64_t before = a->LastSequence();
  storage::WriteOp alone;
  alone.puts.push_back(MakeTweet(3000));
  absl::StatusOr<storage::WriteResult> refused = a->Write(std::move(alone));
  EXPECT_TRUE(absl::IsUnavailable(refused.status())) << refused.status();
  EXPECT_EQ(a->LastSequence(), before);
  EXPECT_FALSE(peer_stale_);
  EXPECT_TRUE(a->is_primary());

  // The secondary was promoted meanwhile (it reached etcd): it refuses the old epoch, and the
  // old primary steps down without writing.
  to_b.Reconnect(b.get());
  Promote(*b, 2, nullptr);
  storage::WriteOp fenced;
  fenced.puts.push_back(MakeTweet(4000));
  refused = a->Write(std::move(fenced));
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_FALSE(a->is_primary());
  EXPECT_EQ(a->LastSequence(), before);

  // etcd answered that the lease expired: a primary steps down at its next write.
  std::unique_ptr<StorageNode> c = Open("s1a");
  Promote(*c, 1, nullptr, [] { return storage::LeaseStanding::kLost; });
  storage::WriteOp lost;
  lost.puts.push_back(MakeTweet(5000));
  EXPECT_TRUE(absl::IsFailedPrecondition(c->Write(std::move(lost)).status()));
  EXPECT_FALSE(c->is_primary());
}

// A likes change with an idempotency key counts once: its record is replicated with it, carried
// by a full copy, and answers the retry on the replica promoted after a failover. An ingest's
// plan is kept until its final answer replaces it; nothing replaces a final answer.
TEST_F(StorageNodeTest, AnIdempotentWriteIsAnsweredFromItsRecordAfterACopyAndAFailover) {
  std::unique_ptr<StorageNode> a = Open("s0a", /*max_log_changes=*/10);
  std::unique_ptr<StorageNode> b = Open("s0b");
  testing::LocalStoragePeer to_b(b.get());
  Promote(*a, 1, &to_b);
  ASSERT_TRUE(a->CatchUpPeer().ok());
  Put(*a, 7, 1);  // 2 likes

  absl::StatusOr<storage::WriteResult> first = AddLikes(*a, 7, 5, "k/like", "f1");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->likes, 7u);
  EXPECT_FALSE(first->replayed);
  const uint64_t last = a->LastSequence();
  absl::StatusOr<storage::WriteResult> retry = AddLikes(*a, 7, 5, "k/like", "f1");
  ASSERT_TRUE(retry.ok());
  EXPECT_TRUE(retry->replayed);
  ASSERT_TRUE(retry->record.has_value());
  EXPECT_EQ(retry->record->likes, 7u);
  EXPECT_EQ(a->LastSequence(), last);
  // Another request under the key gets the stored record, whose fingerprint tells it apart.
  absl::StatusOr<storage::WriteResult> other = AddLikes(*a, 7, 1, "k/like", "f2");
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(other->replayed);
  EXPECT_EQ(other->record->fingerprint, "f1");

  // An ingest's plan stays until its final answer; a later plan gets the first one.
  ASSERT_FALSE(IngestRecord(*a, "k/ingest", {100, 101}, false)->replayed);
  absl::StatusOr<storage::WriteResult> plan = IngestRecord(*a, "k/ingest", {200, 201}, false);
  ASSERT_TRUE(plan->replayed);
  EXPECT_EQ(plan->record->ids, (std::vector<TweetId>{100, 101}));
  // A final answer for another request does not replace the plan.
  storage::WriteOp foreign;
  foreign.request_key = "k/ingest";
  foreign.record = storage::WriteRecord{};
  foreign.record->fingerprint = "another request";
  foreign.record->done = true;
  absl::StatusOr<storage::WriteResult> refused = a->Write(std::move(foreign));
  ASSERT_TRUE(refused.ok() && refused->replayed);
  EXPECT_EQ(refused->record->fingerprint, "f");
  EXPECT_FALSE(refused->record->done);
  ASSERT_FALSE(IngestRecord(*a, "k/ingest", {100, 101}, true)->replayed);
  absl::StatusOr<storage::WriteResult> done = IngestRecord(*a, "k/ingest", {300, 301}, true);
  ASSERT_TRUE(done->replayed);
  EXPECT_TRUE(done->record->done);
  EXPECT_EQ(done->record->ids, (std::vector<TweetId>{100, 101}));

  // b loses its disk while a writes on and trims; the full copy carries the records.
  to_b.Reconnect(nullptr);
  b.reset();
  std::filesystem::remove_all(dir_.path() + "/s0b");
  Put(*a, 1000, 20);
  ASSERT_TRUE(a->TrimLog().ok());
  b = Open("s0b");
  to_b.Reconnect(b.get());
  ASSERT_TRUE(a->CatchUpPeer().ok());
  ASSERT_EQ(a->Status().copies_sent, 1u);

  // Failover: the retry on b is answered from the record and counts nothing.
  a->StepDown();
  Promote(*b, 2, nullptr);
  retry = AddLikes(*b, 7, 5, "k/like", "f1");
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_TRUE(retry->replayed);
  EXPECT_EQ(retry->record->likes, 7u);
  EXPECT_EQ(b->MultiGet(std::vector<TweetId>{7})[0]->likes, 7u);

  // A day later the record is gone (and the hourly sweep drops it): the key is free again.
  clock_.AdvanceMillis(storage::kWriteRecordTtlMs);
  ASSERT_TRUE(b->TrimLog().ok());
  retry = AddLikes(*b, 7, 5, "k/like", "f1");
  ASSERT_TRUE(retry.ok());
  EXPECT_FALSE(retry->replayed);
  EXPECT_EQ(retry->likes, 12u);
}

TEST_F(StorageNodeTest, UsageCountsAreAddedOnceReplicatedCopiedAndKeptThroughAFailover) {
  std::unique_ptr<StorageNode> a = Open("s0a", /*max_log_changes=*/10);
  std::unique_ptr<StorageNode> b = Open("s0b");
  testing::LocalStoragePeer to_b(b.get());
  Promote(*a, 1, &to_b);
  ASSERT_TRUE(a->CatchUpPeer().ok());

  const std::vector<usage::Increment> first = {{"k1", kMinute, ServedCounters(3)},
                                               {"all", kMinute, ServedCounters(3)}};
  absl::StatusOr<storage::WriteResult> written = AddUsage(*a, "usage/door1-1/0", first);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_FALSE(written->replayed);
  // Sent again (its answer was lost): counted once.
  const uint64_t last = a->LastSequence();
  written = AddUsage(*a, "usage/door1-1/0", first);
  ASSERT_TRUE(written.ok());
  EXPECT_TRUE(written->replayed);
  EXPECT_EQ(a->LastSequence(), last);
  for (usage::Resolution r : usage::kResolutions) {
    EXPECT_EQ(Served(*a, "k1", r), 3u) << usage::ResolutionName(r);
    EXPECT_EQ(Served(*b, "k1", r), 3u) << usage::ResolutionName(r);  // replicated
  }
  EXPECT_EQ(*b->UsageKeys(), (std::vector<std::string>{"all", "k1"}));

  // b loses its disk; a counts on and trims its log, its last change a usage change (made
  // without a record). The full copy carries the buckets, and that last change, with which
  // the copy's log begins, is not counted again.
  to_b.Reconnect(nullptr);
  b.reset();
  std::filesystem::remove_all(dir_.path() + "/s0b");
  Put(*a, 1000, 20);
  ASSERT_TRUE(AddUsage(*a, "", {{"k1", kMinute, ServedCounters(4)}}).ok());
  ASSERT_TRUE(a->TrimLog().ok());
  b = Open("s0b");
  to_b.Reconnect(b.get());
  ASSERT_TRUE(a->CatchUpPeer().ok());
  ASSERT_EQ(a->Status().copies_sent, 1u);
  EXPECT_EQ(Served(*b, "k1", usage::Resolution::kMinute), 7u);
  EXPECT_EQ(Served(*b, "all", usage::Resolution::kHour), 3u);

  // Failover: a retry of the first batch on b counts nothing; b counts on.
  a->StepDown();
  Promote(*b, 2, nullptr);
  written = AddUsage(*b, "usage/door1-1/0", first);
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_TRUE(written->replayed);
  ASSERT_TRUE(AddUsage(*b, "usage/door1-2/0", {{"k1", kMinute + 60, ServedCounters(1)}}).ok());
  EXPECT_EQ(Served(*b, "k1", usage::Resolution::kMinute), 7u);
  EXPECT_EQ(Served(*b, "k1", usage::Resolution::kHour), 8u);

  // Two days on, minute buckets are past their retention (and the hourly sweep drops them);
  // the day bucket stays.
  clock_.AdvanceMillis(48 * 3600 * 1000);
  ASSERT_TRUE(b->TrimLog().ok());
  EXPECT_EQ(Served(*b, "k1", usage::Resolution::kMinute), 0u);
  EXPECT_EQ(Served(*b, "k1", usage::Resolution::kDay), 8u);
}

}  // namespace
}  // namespace tweetsearch
