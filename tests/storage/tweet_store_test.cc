#include "storage/tweet_store.h"

#include <gtest/gtest.h>

#include "tests/testing/corpus.h"

namespace tweetsearch::storage {
namespace {

StoredTweet Tweet(TweetId id, std::string text) {
  StoredTweet t;
  t.id = id;
  t.user_id = id * 10;
  t.user_name = "user" + std::to_string(id);
  t.text = std::move(text);
  t.created_at_ms = 1700000000000 + static_cast<int64_t>(id);
  t.lang = "en";
  t.likes = static_cast<uint32_t>(id % 7);
  return t;
}

std::vector<Change> Changes(const TweetStore& store, uint64_t after) {
  std::vector<Change> out;
  EXPECT_TRUE(store
                  .ScanChanges(after,
                               [&](const Change& c) {
                                 out.push_back(c);
                                 return true;
                               })
                  .ok());
  return out;
}

TEST(TweetStoreTest, WritesReadsAndScansInIdOrder) {
  testing::TempDir dir;
  auto store = TweetStore::Open(dir.path());
  ASSERT_TRUE(store.ok()) << store.status();
  Mutation m;
  // Ids chosen so that little-endian order would differ from numeric order.
  for (TweetId id : {300u, 2u, 256u, 1u, 65536u})
    m.puts.push_back(Tweet(id, "text " + std::to_string(id)));
  auto seq = (*store)->Write(m);
  ASSERT_TRUE(seq.ok());
  EXPECT_EQ(*seq, 5u);

  auto got = (*store)->Get(256);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, Tweet(256, "text 256"));
  EXPECT_TRUE(absl::IsNotFound((*store)->Get(3).status()));

  std::vector<TweetId> ids = {1, 3, 65536};
  auto many = (*store)->MultiGet(ids);
  ASSERT_EQ(many.size(), 3u);
  EXPECT_TRUE(many[0].ok());
  EXPECT_TRUE(absl::IsNotFound(many[1].status()));
  EXPECT_EQ(many[2]->text, "text 65536");
  auto contains = (*store)->Contains(ids);
  ASSERT_TRUE(contains.ok());
  EXPECT_EQ(*contains, (std::vector<bool>{true, false, true}));

  std::vector<TweetId> scanned;
  ASSERT_TRUE((*store)
                  ->Scan(2, 300,
                         [&](const StoredTweet& t) {
                           scanned.push_back(t.id);
                           return true;
                         })
                  .ok());
  EXPECT_EQ(scanned, (std::vector<TweetId>{2, 256, 300}));
}

TEST(TweetStoreTest, DeletesAndLikesAreLoggedInOrderAndSurviveReopen) {
  testing::TempDir dir;
  {
    auto store = TweetStore::Open(dir.path());
    ASSERT_TRUE(store.ok());
    Mutation puts;
    puts.puts = {Tweet(10, "a"), Tweet(11, "b")};
    ASSERT_TRUE((*store)->Write(puts).ok());
    Mutation change;
    change.deletes = {10};
    change.likes = {{11, 99}};
    ASSERT_EQ(*(*store)->Write(change), 4u);
    Mutation missing;
    missing.likes = {{12, 1}};
    EXPECT_TRUE(absl::IsNotFound((*store)->Write(missing).status()));
    EXPECT_EQ((*store)->LastSequence(), 4u);
  }
  auto store = TweetStore::Open(dir.path());
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->LastSequence(), 4u);
  EXPECT_TRUE(absl::IsNotFound((*store)->Get(10).status()));
  EXPECT_EQ((*store)->Get(11)->likes, 99u);
  std::vector<Change> changes = Changes(**store, 0);
  ASSERT_EQ(changes.size(), 4u);
  EXPECT_EQ(changes[0].kind, ChangeKind::kPut);
  EXPECT_EQ(changes[2].kind, ChangeKind::kDelete);
  EXPECT_EQ(changes[2].id, 10u);
  EXPECT_EQ(changes[3].kind, ChangeKind::kLikes);
  EXPECT_EQ(changes[3].likes, 99u);
  EXPECT_EQ(Changes(**store, 2).size(), 2u);

  // A delete's change carries the tweet as it was (streams match deletes against it); a put's
  // the tweet as stored now, or none once deleted; without bodies, neither.
  auto read = (*store)->ReadChanges(0, 10, ChangeBodies::kInclude);
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->size(), 4u);
  EXPECT_FALSE((*read)[0].tweet.has_value());  // tweet 10, deleted since
  ASSERT_TRUE((*read)[2].tweet.has_value());
  EXPECT_EQ(*(*read)[2].tweet, Tweet(10, "a"));
  ASSERT_TRUE((*read)[1].tweet.has_value());
  EXPECT_EQ((*read)[1].tweet->likes, 99u);
  auto omitted = (*store)->ReadChanges(0, 10, ChangeBodies::kOmit);
  ASSERT_TRUE(omitted.ok());
  for (const ReplicatedChange& rc : *omitted) EXPECT_FALSE(rc.tweet.has_value());

  // A replica that applies the log records the same.
  testing::TempDir copy_dir;
  auto copy = TweetStore::Open(copy_dir.path());
  ASSERT_TRUE(copy.ok());
  ASSERT_TRUE((*copy)->Apply(*read).ok());
  auto copied = (*copy)->ReadChanges(2, 10, ChangeBodies::kInclude);
  ASSERT_TRUE(copied.ok());
  ASSERT_EQ(copied->size(), 2u);
  ASSERT_TRUE((*copied)[0].tweet.has_value());
  EXPECT_EQ((*copied)[0].tweet->text, "a");
}

TEST(TweetStoreTest, TrimKeepsTheNewestChangeSoSequencesNeverRestart) {
  testing::TempDir dir;
  {
    auto store = TweetStore::Open(dir.path());
    Mutation m;
    m.puts = {Tweet(1, "a"), Tweet(2, "b"), Tweet(3, "c")};
    ASSERT_TRUE((*store)->Write(m).ok());
    ASSERT_TRUE((*store)->TrimChanges(3).ok());
    EXPECT_TRUE(Changes(**store, 0).size() == 1);  // only change 3 is left
  }
  auto store = TweetStore::Open(dir.path());
  EXPECT_EQ((*store)->LastSequence(), 3u);
  Mutation m;
  m.puts = {Tweet(4, "d")};
  EXPECT_EQ(*(*store)->Write(m), 4u);
  std::vector<Change> after = Changes(**store, 3);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].id, 4u);
}

TEST(TweetStoreTest, TheFirstSequenceFollowsTrimsReopensAndInstalls) {
  testing::TempDir dir;
  {
    auto store = TweetStore::Open(dir.path());
    EXPECT_EQ((*store)->FirstSequence(), 1u);  // empty: the next change's sequence
    for (TweetId id = 1; id <= 10; ++id) {
      Mutation m;
      m.puts = {Tweet(id, "t")};
      ASSERT_TRUE((*store)->Write(m).ok());
    }
    EXPECT_EQ((*store)->FirstSequence(), 1u);
    ASSERT_TRUE((*store)->TrimChanges(6).ok());
    EXPECT_EQ((*store)->FirstSequence(), 7u);
    ASSERT_TRUE((*store)->TrimChanges(4).ok());  // never moves back
    EXPECT_EQ((*store)->FirstSequence(), 7u);

    auto old = (*store)->ReadChanges(5, 100, ChangeBodies::kInclude);
    EXPECT_TRUE(absl::IsFailedPrecondition(old.status())) << old.status();
    auto kept = (*store)->ReadChanges(6, 100, ChangeBodies::kInclude);
    ASSERT_TRUE(kept.ok()) << kept.status();
    ASSERT_EQ(kept->size(), 4u);
    EXPECT_EQ(kept->front().change.sequence, 7u);
    ASSERT_TRUE(kept->front().tweet.has_value());
    EXPECT_EQ(kept->front().tweet->id, 7u);
    auto ids_only = (*store)->ReadChanges(6, 100, ChangeBodies::kOmit);
    ASSERT_TRUE(ids_only.ok()) << ids_only.status();
    ASSERT_EQ(ids_only->size(), 4u);
    EXPECT_EQ(ids_only->front().change.id, 7u);
    EXPECT_FALSE(ids_only->front().tweet.has_value());
  }
  {
    auto store = TweetStore::Open(dir.path());
    EXPECT_EQ((*store)->FirstSequence(), 7u);
    EXPECT_EQ((*store)->LastSequence(), 10u);

    // A full copy: the log becomes the one change at the copy's sequence.
    ASSERT_TRUE((*store)->ClearForInstall().ok());
    EXPECT_EQ((*store)->FirstSequence(), 1u);
    const StoredTweet copied = Tweet(42, "copied");
    ASSERT_TRUE((*store)->InstallTweets({&copied, 1}).ok());
    ReplicatedChange last{Change{500, ChangeKind::kPut, 42, 0}, copied, std::nullopt, {}};
    ASSERT_TRUE((*store)->FinishInstall(last).ok());
    EXPECT_EQ((*store)->FirstSequence(), 500u);
    EXPECT_TRUE(absl::IsFailedPrecondition(
        (*store)->ReadChanges(10, 100, ChangeBodies::kInclude).status()));
  }
  auto store = TweetStore::Open(dir.path());
  EXPECT_EQ((*store)->FirstSequence(), 500u);
  EXPECT_EQ((*store)->LastSequence(), 500u);
  auto after = (*store)->ReadChanges(499, 100, ChangeBodies::kInclude);
  ASSERT_TRUE(after.ok()) << after.status();
  ASSERT_EQ(after->size(), 1u);
  EXPECT_EQ(after->front().change.id, 42u);
}

// Records of idempotent writes: written with a write's changes and logged after them, applied
// from the log by another replica, carried by a full copy, and dropped by the caller's rule.
TEST(TweetStoreTest, RequestRecordsAreLoggedAppliedCopiedAndDropped) {
  testing::TempDir dir;
  auto primary = TweetStore::Open(dir.path() + "/a");
  auto replica = TweetStore::Open(dir.path() + "/b");
  ASSERT_TRUE(primary.ok() && replica.ok());
  Mutation m;
  m.puts = {Tweet(1, "one")};
  m.requests = {{"k1/a", "old"}, {"k1/b", "new"}};
  ASSERT_TRUE((*primary)->Write(m).ok());
  Mutation alone;  // a record without a change of its own
  alone.requests = {{"k2/c", "plan"}};
  ASSERT_EQ(*(*primary)->Write(alone), 4u);
  EXPECT_EQ(*(*primary)->GetRequest("k1/b"), std::optional<std::string>("new"));
  EXPECT_EQ(*(*primary)->GetRequest("k1/z"), std::nullopt);

  auto log = (*primary)->ReadChanges(0, 100, ChangeBodies::kOmit);
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_EQ(log->size(), 4u);
  EXPECT_EQ((*log)[0].change.kind, ChangeKind::kPut);
  EXPECT_EQ((*log)[1].change.kind, ChangeKind::kRequest);
  EXPECT_EQ((*log)[1].request, (StoredRequest{"k1/a", "old"}));
  EXPECT_EQ((*log)[3].request, (StoredRequest{"k2/c", "plan"}));
  ASSERT_TRUE((*replica)->Apply(*log).ok());
  EXPECT_EQ(*(*replica)->GetRequest("k2/c"), std::optional<std::string>("plan"));
  EXPECT_EQ(*(*replica)->GetRequest("k1/a"), std::optional<std::string>("old"));

  // A full copy of the primary into a cleared third store carries every record.
  auto copy = TweetStore::Open(dir.path() + "/c");
  Mutation stale;
  stale.requests = {{"gone/x", "cleared by the copy"}};
  ASSERT_TRUE((*copy)->Write(stale).ok());
  ASSERT_TRUE((*copy)->ClearForInstall().ok());
  auto snapshot = (*primary)->Snapshot();
  ASSERT_TRUE(snapshot.ok());
  std::vector<StoredRequest> records;
  for (;;) {
    auto next = (*snapshot)->NextRequests(2);
    ASSERT_TRUE(next.ok());
    if (next->empty()) break;
    ASSERT_TRUE((*copy)->InstallRequests(*next).ok());
    records.insert(records.end(), next->begin(), next->end());
  }
  EXPECT_EQ(records.size(), 3u);
  ASSERT_TRUE((*copy)->FinishInstall((*snapshot)->last()).ok());
  EXPECT_EQ(*(*copy)->GetRequest("k1/b"), std::optional<std::string>("new"));
  EXPECT_EQ(*(*copy)->GetRequest("gone/x"), std::nullopt);

  auto dropped = (*primary)->DropRequests([](std::string_view v) { return v == "old"; });
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(*dropped, 1u);
  EXPECT_EQ(*(*primary)->GetRequest("k1/a"), std::nullopt);
  EXPECT_EQ(*(*primary)->GetRequest("k1/b"), std::optional<std::string>("new"));
}

TEST(TweetStoreTest, OpenFailsCleanlyOnAFile) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/not-a-dir";
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  auto store = TweetStore::Open(path);
  EXPECT_FALSE(store.ok());
}

}  // namespace
}  // namespace tweetsearch::storage
