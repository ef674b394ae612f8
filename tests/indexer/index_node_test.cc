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

namespace tweetsearch {
namespace {

// Reads a storage replica's change log directly.
class LocalChangeSource final : public storage::ChangeSource {
 public:
  LocalChangeSource(storage::StorageNode& node, std::string reader)
      : node_(node), reader_(std::move(reader)) {}
  absl::StatusOr<std::vector<storage::ReplicatedChange>> ReadChanges(uint64_t after, size_t max,
                                                                     absl::Duration wait,
                                                                     uint64_t keeps) override {
    return node_.ReadChanges(after, max, std::min(wait, absl::Milliseconds(50)), reader_, keeps);
  }

 private:
  storage::StorageNode& node_;
  const std::string reader_;
};

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
  void SetUp() override {
    storage::StorageNodeOptions options;
    options.node = "s0a";
    options.data_dir = dir_.path() + "/s0a";
    options.store.sync_writes = false;
    absl::StatusOr<std::unique_ptr<storage::StorageNode>> node =
        storage::StorageNode::Open(options);
    ASSERT_TRUE(node.ok()) << node.status();
    storage_ = *std::move(node);
    ASSERT_TRUE(storage_
                    ->BecomePrimary(
                        1, nullptr, [] { return true; }, [] { return absl::OkStatus(); },
                        [] { return absl::OkStatus(); })
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
  indexer::BuilderNodeOptions options;
  options.node = "b0";
  options.index_partitions = 3;
  options.data_dir = dir_.path() + "/b0";
  options.poll_wait = absl::Milliseconds(50);
  options.sync_every = absl::ZeroDuration();
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

}  // namespace
}  // namespace tweetsearch
