// IndexNode and BuilderNode over a real storage replica (RocksDB in a
// temporary directory), read in-process instead of over gRPC: rebuilds that
// resume after a restart, replay of the changes made during a rebuild, and the
// builder's reverse map.
#include "indexer/server/index_node.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>
#include <thread>

#include "cluster/topology.h"
#include "common/strings.h"
#include "indexer/builder/builder_node.h"
#include "storage/storage_node.h"
#include "tests/testing/corpus.h"
#include "tests/testing/local_storage.h"

namespace tweetsearch {
namespace {

using testing::LocalChangeSource;

storage::StoredTweet MakeTweet(TweetId id) {
  return storage::StoredTweet{id,
                              id % 7,
                              StrCat("user", id % 7),
                              StrCat("rebuild test ", id),
                              1'700'000'000'000 + static_cast<int64_t>(id),
                              "en",
                              0};
}

class IndexNodeTest : public ::testing::Test {
 protected:
  // A reader that has not read for this long no longer holds back trimming.
  static constexpr absl::Duration kLiveWindow = absl::Milliseconds(200);
  // The storage replica's clock: its live-reader window runs only when a test moves it.
  ManualClock storage_clock_{1'700'000'000'000};

  void SetUp() override {
    storage::StorageNodeOptions options;
    options.node = "s0a";
    options.data_dir = dir_.path() + "/s0a";
    options.store.sync_writes = false;
    options.live_reader_window = kLiveWindow;
    options.change_retention = absl::ZeroDuration();  // these tests trim at once
    options.clock = &storage_clock_;
    absl::StatusOr<std::unique_ptr<storage::StorageNode>> node =
        storage::StorageNode::Open(options);
    ASSERT_TRUE(node.ok()) << node.status();
    storage_ = *std::move(node);
    ASSERT_TRUE(storage_
                    ->BecomePrimary(
                        1, nullptr, [] { return storage::LeaseStanding::kHeld; },
                        [] { return absl::OkStatus(); }, [] { return absl::OkStatus(); })
                    .ok());
  }

  void Put(TweetId first, int count) {
    storage::WriteOp op;
    for (int i = 0; i < count; ++i) op.puts.push_back(MakeTweet(first + i));
    absl::StatusOr<storage::WriteResult> r = storage_->Write(std::move(op));
    ASSERT_TRUE(r.ok()) << r.status();
  }

  std::vector<std::unique_ptr<storage::ChangeSource>> Sources(const std::string& reader) {
    std::vector<std::unique_ptr<storage::ChangeSource>> out;
    out.push_back(std::make_unique<LocalChangeSource>(*storage_, reader));
    return out;
  }

  std::unique_ptr<indexer::IndexNode> OpenIndex() {
    indexer::IndexNodeOptions options;
    options.node = "i0a";
    options.data_dir = dir_.path() + "/i0a";
    options.poll_wait = absl::Milliseconds(50);
    absl::StatusOr<std::unique_ptr<indexer::IndexNode>> node =
        indexer::IndexNode::Open(options, Sources("i0a"));
    EXPECT_TRUE(node.ok()) << node.status();
    return node.ok() ? *std::move(node) : nullptr;
  }

  // A builder that polls often and syncs after every batch.
  indexer::BuilderNodeOptions BuilderOptions(const std::string& name, uint32_t partitions) {
    indexer::BuilderNodeOptions options;
    options.node = name;
    options.index_partitions = partitions;
    options.data_dir = dir_.path() + "/" + name;
    options.poll_wait = absl::Milliseconds(50);
    options.sync_every = absl::ZeroDuration();
    return options;
  }

  static bool WaitFor(const std::function<bool()>& done) {
    for (int i = 0; i < 500; ++i) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

  // Matches counted, and found by paging through newest-first results.
  static uint64_t Matches(const indexer::IndexNode& node, const std::string& query) {
    query::SearchOptions options;
    options.exact_total = true;
    absl::StatusOr<indexer::PartitionResult> r = node.Search(query, options);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return 0;
    uint64_t paged = 0;
    query::SearchOptions page;
    page.limit = 100;
    for (;;) {
      absl::StatusOr<indexer::PartitionResult> p = node.Search(query, page);
      if (!p.ok() || p->result.hits.empty()) break;
      paged += p->result.hits.size();
      page.after = p->result.hits.back().key;
    }
    EXPECT_EQ(paged, r->result.total_hits) << query;
    return r->result.total_hits;
  }

  testing::TempDir dir_;
  std::unique_ptr<storage::StorageNode> storage_;
};

TEST_F(IndexNodeTest, ARebuildResumesAfterARestartAndReplaysWhatChangedMeanwhile) {
  Put(1000, 1000);
  const uint64_t start = storage_->LastSequence();
  std::unique_ptr<indexer::IndexNode> node = OpenIndex();
  ASSERT_NE(node, nullptr);
  ASSERT_TRUE(node->BeginRebuild({start}).ok());
  // Written after the rebuild's starting point: a new tweet and a delete of a
  // tweet the rebuild loads. Both must come from the log replay.
  Put(5000, 1);
  storage::WriteOp del;
  del.delete_id = 1001;
  ASSERT_TRUE(storage_->Write(std::move(del)).ok());

  std::vector<storage::StoredTweet> tweets;
  for (TweetId id = 1000; id < 2000; ++id) tweets.push_back(MakeTweet(id));
  ASSERT_TRUE(node->AddTweets(std::span(tweets).first(400), 1399, /*checkpoint=*/true).ok());
  ASSERT_TRUE(node->AddTweets(std::span(tweets).subspan(400, 100), 1499).ok());  // not saved
  node.reset();  // a crash would lose the unsaved 100; the restart resumes after 1399

  node = OpenIndex();
  ASSERT_NE(node, nullptr);
  indexer::IndexNodeStatus status = node->Status();
  EXPECT_EQ(status.state, indexer::IndexState::kRebuilding);
  EXPECT_GE(status.rebuild_through, 1399u);
  EXPECT_GE(status.documents, 400u);
  EXPECT_EQ(status.applied, std::vector<uint64_t>{start});
  node->Start();  // tailing waits while rebuilding
  ASSERT_TRUE(node->AddTweets(std::span(tweets).subspan(400), 1999).ok());
  // Not serving yet: searches are refused rather than answered incompletely.
  EXPECT_TRUE(absl::IsUnavailable(node->Search("test", {}).status()));
  EXPECT_TRUE(absl::IsUnavailable(node->Stats("test").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(node->BeginRebuild({1, 2})));  // one storage partition
  ASSERT_TRUE(node->FinishRebuild().ok());
  ASSERT_TRUE(WaitFor([&] { return node->Status().state == indexer::IndexState::kServing; }));
  ASSERT_TRUE(node->WaitApplied(0, storage_->LastSequence(), absl::Seconds(5)));
  EXPECT_EQ(Matches(*node, "test"), 1000u);  // 1,000 loaded + 1 new - 1 deleted
  EXPECT_EQ(Matches(*node, "5000"), 1u);
  EXPECT_EQ(Matches(*node, "1001"), 0u);
  EXPECT_TRUE(absl::IsFailedPrecondition(node->FinishRebuild()));  // not rebuilding any more

  node.reset();  // a clean restart serves from its checkpoint, not rebuilding
  node = OpenIndex();
  node->Start();
  ASSERT_TRUE(WaitFor([&] { return node->Status().state == indexer::IndexState::kServing; }));
  EXPECT_EQ(Matches(*node, "test"), 1000u);
}

// Front doors keep best match's collection statistics while a partition's generation stays
// (cluster/stats_cache.h): it moves with every change that adds or deletes a tweet, and with
// nothing else that the log carries (likes, usage counts).
TEST_F(IndexNodeTest, TheGenerationMovesWhenTweetsComeOrGoAndOnlyThen) {
  std::unique_ptr<indexer::IndexNode> node = OpenIndex();
  node->Start();
  ASSERT_TRUE(WaitFor([&] { return node->Status().state == indexer::IndexState::kServing; }));
  const uint64_t empty = node->Generation();
  Put(1, 10);  // one change
  ASSERT_TRUE(WaitFor([&] { return node->Generation() > empty; }));
  EXPECT_EQ(Matches(*node, "rebuild"), 10u);
  const uint64_t ten = node->Generation();

  auto applied = [&] { return node->Status().applied.at(0); };
  const uint64_t before = applied();
  storage::WriteOp likes;
  likes.likes = storage::LikesChange{3, 5, true};
  ASSERT_TRUE(storage_->Write(std::move(likes)).ok());
  storage::WriteOp usage;
  usage.usage.push_back(usage::Increment{"key", 1'699'999'980, {}});
  ASSERT_TRUE(storage_->Write(std::move(usage)).ok());
  ASSERT_TRUE(WaitFor([&] { return applied() >= before + 2; }));
  EXPECT_EQ(node->Generation(), ten);

  storage::WriteOp gone;
  gone.delete_id = 4;
  ASSERT_TRUE(storage_->Write(std::move(gone)).ok());
  ASSERT_TRUE(WaitFor([&] { return node->Generation() > ten; }));
  EXPECT_EQ(Matches(*node, "rebuild"), 9u);
}

TEST_F(IndexNodeTest, ATrimmedLogAsksForARebuild) {
  Put(1000, 50);
  // Nothing reads yet, and no readers are configured: the log may be trimmed
  // down to its newest change.
  ASSERT_TRUE(storage_->TrimLog().ok());
  std::unique_ptr<indexer::IndexNode> node = OpenIndex();
  node->Start();
  EXPECT_TRUE(WaitFor([&] { return node->Status().state == indexer::IndexState::kNeedsRebuild; }));
  EXPECT_TRUE(absl::IsFailedPrecondition(node->AddTweets({}, 0)));  // BeginRebuild first
}

TEST_F(IndexNodeTest, TheBuilderListsEachPartitionsLiveIdsInOrder) {
  Put(1000, 3000);
  storage::WriteOp del;
  del.delete_id = 1500;
  ASSERT_TRUE(storage_->Write(std::move(del)).ok());
  const indexer::BuilderNodeOptions options = BuilderOptions("b0", 3);
  auto open = [&] {
    absl::StatusOr<std::unique_ptr<indexer::BuilderNode>> b =
        indexer::BuilderNode::Open(options, Sources("b0"));
    EXPECT_TRUE(b.ok()) << b.status();
    return b.ok() ? *std::move(b) : nullptr;
  };
  std::unique_ptr<indexer::BuilderNode> builder = open();
  builder->Start();
  ASSERT_TRUE(WaitFor([&] {
    indexer::BuilderNodeStatus s = builder->Status();
    return s.state == indexer::BuilderState::kServing && s.applied[0] == storage_->LastSequence();
  }));
  uint64_t total = 0;
  std::set<TweetId> seen;
  for (uint32_t p = 0; p < 3; ++p) {
    std::vector<TweetId> ids;
    TweetId after = 0;
    for (;;) {  // small pages, to exercise resuming after an id
      absl::StatusOr<indexer::IdPage> page = builder->PartitionIds(p, after, 97);
      ASSERT_TRUE(page.ok()) << page.status();
      ids.insert(ids.end(), page->ids.begin(), page->ids.end());
      if (page->done) break;
      ASSERT_FALSE(page->ids.empty());
      after = page->ids.back();
    }
    EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
    for (TweetId id : ids) {
      EXPECT_EQ(cluster::IndexPartitionOf(id, 3), p) << id;
      seen.insert(id);
    }
    absl::StatusOr<uint64_t> count = builder->PartitionCount(p);
    ASSERT_TRUE(count.ok());
    EXPECT_EQ(*count, ids.size());
    total += ids.size();
  }
  EXPECT_EQ(total, 2999u);
  EXPECT_FALSE(seen.contains(1500));
  EXPECT_TRUE(absl::IsInvalidArgument(builder->PartitionIds(3, 0, 10).status()));

  // Restarted, it resumes from its saved cursor: a later delete is applied
  // once, nothing is listed twice.
  builder.reset();
  storage::WriteOp del2;
  del2.delete_id = 1600;
  ASSERT_TRUE(storage_->Write(std::move(del2)).ok());
  builder = open();
  builder->Start();
  ASSERT_TRUE(WaitFor([&] { return builder->Status().applied[0] == storage_->LastSequence(); }));
  uint64_t after_restart = 0;
  for (uint32_t p = 0; p < 3; ++p) after_restart += *builder->PartitionCount(p);
  EXPECT_EQ(after_restart, 2998u);
}

TEST_F(IndexNodeTest, TheBuilderSyncsWhatItAppliedOnlyAsItsClockMoves) {
  // What is synced is what the builder tells storage it no longer needs: it
  // follows what was applied once sync_every (1 ms here) has passed on the
  // builder's clock, which only this test moves.
  Put(1000, 100);
  ManualClock clock(1'700'000'000'000);
  indexer::BuilderNodeOptions options = BuilderOptions("b0", 2);
  options.sync_every = absl::Milliseconds(1);
  options.clock = &clock;
  absl::StatusOr<std::unique_ptr<indexer::BuilderNode>> opened =
      indexer::BuilderNode::Open(options, Sources("b0"));
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::unique_ptr<indexer::BuilderNode> builder = *std::move(opened);
  builder->Start();
  auto applied_all = [&] { return builder->Status().applied[0] == storage_->LastSequence(); };
  ASSERT_TRUE(WaitFor(applied_all));
  EXPECT_EQ(builder->Status().synced[0], 0u);
  Put(2000, 10);  // another round of applying: still no sync
  ASSERT_TRUE(WaitFor(applied_all));
  EXPECT_EQ(builder->Status().synced[0], 0u);
  clock.AdvanceMillis(1);  // its next round (at most poll_wait away) syncs all it applied
  const uint64_t synced = storage_->LastSequence();
  ASSERT_TRUE(WaitFor([&] { return builder->Status().synced[0] == synced; }));
  Put(3000, 10);  // and not again until the clock moves
  ASSERT_TRUE(WaitFor(applied_all));
  EXPECT_EQ(builder->Status().synced[0], synced);
  EXPECT_GT(storage_->LastSequence(), synced);
}

TEST_F(IndexNodeTest, ABuilderBeyondTheLogResyncsFromAStorageSnapshot) {
  Put(1000, 2000);
  const indexer::BuilderNodeOptions options = BuilderOptions("b1", 2);
  {
    // The builder follows the log, then is away while the log moves on.
    absl::StatusOr<std::unique_ptr<indexer::BuilderNode>> first =
        indexer::BuilderNode::Open(options, Sources("b1"));
    ASSERT_TRUE(first.ok()) << first.status();
    (*first)->Start();
    ASSERT_TRUE(
        WaitFor([&] { return (*first)->Status().state == indexer::BuilderState::kServing; }));
  }
  auto source = std::make_unique<LocalChangeSource>(*storage_, "b1");
  LocalChangeSource* b1_source = source.get();
  std::vector<std::unique_ptr<storage::ChangeSource>> sources;
  sources.push_back(std::move(source));
  // Meanwhile a delete, and the log trimmed past the builder's cursor: its map
  // still lists 1500, which the resync must drop.
  storage::WriteOp del;
  del.delete_id = 1500;
  ASSERT_TRUE(storage_->Write(std::move(del)).ok());
  Put(9000, 1);
  storage_clock_.AdvanceMillis(absl::ToInt64Milliseconds(kLiveWindow) + 1);  // b1 is gone
  ASSERT_TRUE(storage_->TrimLog().ok());  // down to the newest change
  b1_source->FailSnapshots(1);            // the first snapshot breaks off: the resync starts again
  absl::StatusOr<std::unique_ptr<indexer::BuilderNode>> opened =
      indexer::BuilderNode::Open(options, std::move(sources));
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::unique_ptr<indexer::BuilderNode> builder = *std::move(opened);
  builder->Start();
  ASSERT_TRUE(WaitFor([&] {
    indexer::BuilderNodeStatus s = builder->Status();
    return s.state == indexer::BuilderState::kServing && s.resyncs == 1;
  })) << indexer::BuilderStateName(builder->Status().state);
  auto listed = [&] {
    std::set<TweetId> ids;
    for (uint32_t p = 0; p < 2; ++p) {
      absl::StatusOr<indexer::IdPage> page = builder->PartitionIds(p, 0, 100'000);
      EXPECT_TRUE(page.ok() && page->done);
      if (page.ok()) ids.insert(page->ids.begin(), page->ids.end());
    }
    return ids;
  };
  std::set<TweetId> ids = listed();
  EXPECT_EQ(ids.size(), 2000u);
  EXPECT_FALSE(ids.contains(1500));
  EXPECT_TRUE(ids.contains(9000));
  EXPECT_TRUE(ids.contains(1000) && ids.contains(2999));

  // After the snapshot it follows the log again.
  Put(7000, 1);
  storage::WriteOp del2;
  del2.delete_id = 1000;
  ASSERT_TRUE(storage_->Write(std::move(del2)).ok());
  ASSERT_TRUE(WaitFor([&] { return builder->Status().applied[0] == storage_->LastSequence(); }));
  ids = listed();
  EXPECT_EQ(ids.size(), 2000u);
  EXPECT_TRUE(ids.contains(7000));
  EXPECT_FALSE(ids.contains(1000));
}

}  // namespace
}  // namespace tweetsearch
