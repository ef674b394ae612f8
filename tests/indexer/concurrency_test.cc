// One writer, many readers: readers query while the writer appends, seals and deletes, and
// every answer must be a consistent prefix of what was written (after leveldb's skiplist test).
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "indexer/index/index.h"
#include "indexer/query/searcher.h"
#include "tests/testing/corpus.h"

namespace tweetsearch::index {
namespace {

// Tweet i (id i+1) says "common" and "w{i % 7}", so which tweets match is known in advance.
IndexDoc Doc(uint64_t i) {
  return IndexDoc{i + 1, 1, "writer", "common w" + std::to_string(i % 7), 0, "en", 0};
}

// Small segments and merges of four, on the merge thread, into files: many seals and merges.
IndexOptions MergingOptions(const std::string& dir) {
  IndexOptions options;
  options.segment_max_docs = 512;
  options.directory = dir;
  options.background_merges = true;
  options.merge.merge_factor = 4;
  options.merge.floor_docs = 512;
  options.merge_bytes_per_second = 0;
  return options;
}

class ConcurrencyTest : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(Merging, ConcurrencyTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Background" : "Inline"; });

TEST_P(ConcurrencyTest, ReadersSeeConsistentPrefixesWhileTheWriterAppendsAndSeals) {
  testing::TempDir dir;
  IndexOptions options = GetParam() ? MergingOptions(dir.path()) : IndexOptions{};
  options.segment_max_docs = 512;  // seal often
  std::unique_ptr<Index> index = *Index::Create(options);
  constexpr uint64_t kDocs = 20000;
  std::atomic<uint64_t> written{0};
  std::atomic<bool> done{false};
  std::atomic<int> failures{0};

  std::thread writer([&] {
    for (uint64_t i = 0; i < kDocs; ++i) {
      if (!index->Add(Doc(i)).ok()) failures.fetch_add(1);
      written.store(i + 1, std::memory_order_release);
    }
    done.store(true, std::memory_order_release);
  });

  auto reader = [&](int seed) {
    absl::StatusOr<query::Plan> common = query::PlanQuery("common", index->analyzer());
    absl::StatusOr<query::Plan> w3 = query::PlanQuery("w3", index->analyzer());
    ASSERT_TRUE(common.ok() && w3.ok());
    uint64_t last_total = 0;
    for (int round = 0; !done.load(std::memory_order_acquire) || round < 5; ++round) {
      const uint64_t before = written.load(std::memory_order_acquire);
      auto snapshot = index->Snapshot();
      query::SearchOptions all;
      all.exact_total = true;
      all.limit = 5;
      absl::StatusOr<query::SearchResult> r = query::Search(*snapshot, *common, all);
      ASSERT_TRUE(r.ok());
      const uint64_t total = r->total_hits;
      // A prefix: at least what was written before the snapshot, never more than exists.
      if (total < before || total > kDocs || total < last_total) failures.fetch_add(1);
      // Newest first: the top hit is the newest visible tweet, and ids count down.
      if (!r->hits.empty() && r->hits[0].id != total) failures.fetch_add(1);
      for (size_t i = 1; i < r->hits.size(); ++i) {
        if (r->hits[i].id != r->hits[i - 1].id - 1) failures.fetch_add(1);
      }
      last_total = total;
      // A second query sees at least the prefix the first saw (the active segment of a
      // snapshot may have grown since), and only tweets that contain its word.
      query::SearchOptions some;
      some.sort = round % 2 ? query::SortMode::kBestMatch : query::SortMode::kMostLiked;
      some.exact_total = true;
      some.limit = 3;
      absl::StatusOr<query::SearchResult> r3 = query::Search(*snapshot, *w3, some);
      ASSERT_TRUE(r3.ok());
      auto w3_count = [](uint64_t n) { return n / 7 + (n % 7 > 3 ? 1 : 0); };
      const uint64_t after = written.load(std::memory_order_acquire);
      if (r3->total_hits < w3_count(total) || r3->total_hits > w3_count(after + 1)) {
        failures.fetch_add(1);
      }
      for (const query::Hit& h : r3->hits) {
        if ((h.id - 1) % 7 != 3) failures.fetch_add(1);
      }
      if (seed == 0 && round % 50 == 0) std::this_thread::yield();
    }
  };
  std::vector<std::thread> readers;
  for (int i = 0; i < 3; ++i) readers.emplace_back(reader, i);
  writer.join();
  for (auto& t : readers) t.join();
  EXPECT_EQ(failures.load(), 0);
  index->WaitForMerges();
  EXPECT_EQ(index->Stats().documents, kDocs);
  if (GetParam()) {
    EXPECT_GT(index->Stats().merges, 0u);
  }
}

// Deletes and likes changes race the merge thread's seals and merges: a change made to a
// segment while it is being merged must reach the merged segment.
TEST(MergeConcurrencyTest, ChangesMadeDuringMergesAreCarriedOver) {
  testing::TempDir dir;
  std::unique_ptr<Index> index = *Index::Create(MergingOptions(dir.path()));
  constexpr uint64_t kDocs = 30000;
  std::atomic<uint64_t> written{0};
  std::atomic<int> failures{0};
  std::thread writer([&] {
    for (uint64_t i = 0; i < kDocs; ++i) {
      if (!index->Add(Doc(i)).ok()) failures.fetch_add(1);
      written.store(i + 1, std::memory_order_release);
    }
  });
  // Tweet id ≡ 0 (mod 5) is deleted, id ≡ 1 (mod 5) gets `id` likes, soon after it is written.
  std::thread changer([&] {
    for (uint64_t id = 1; id <= kDocs; ++id) {
      while (written.load(std::memory_order_acquire) < id) std::this_thread::yield();
      if (id % 5 == 0 && !index->Delete(id).ok()) failures.fetch_add(1);
      if (id % 5 == 1 && !index->SetLikes(id, static_cast<uint32_t>(id)).ok()) {
        failures.fetch_add(1);
      }
    }
  });
  std::thread reader([&] {
    absl::StatusOr<query::Plan> plan = query::PlanQuery("common", index->analyzer());
    for (int round = 0; written.load(std::memory_order_acquire) < kDocs; ++round) {
      query::SearchOptions o;
      o.sort = round % 2 ? query::SortMode::kMostLiked : query::SortMode::kNewest;
      o.limit = 10;
      absl::StatusOr<query::SearchResult> r = query::Search(*index->Snapshot(), *plan, o);
      if (!r.ok()) failures.fetch_add(1);
      for (const query::Hit& h : r->hits) {
        if (h.likes != (h.id % 5 == 1 ? h.id : 0) && h.likes != 0) failures.fetch_add(1);
      }
    }
  });
  writer.join();
  changer.join();
  reader.join();
  index->WaitForMerges();
  EXPECT_EQ(failures.load(), 0);
  const IndexStats stats = index->Stats();
  EXPECT_GT(stats.merges, 0u);  // seals and merges on the merge thread (some seals inline)
  // Four segments of a tier at most wait for a merge: few segments remain.
  EXPECT_LE(stats.sealed_segments, 12u);

  auto total = [&](std::string_view q) {
    absl::StatusOr<query::Plan> plan = query::PlanQuery(q, index->analyzer());
    query::SearchOptions o;
    o.exact_total = true;
    o.limit = 1;
    return query::Search(*index->Snapshot(), *plan, o)->total_hits;
  };
  EXPECT_EQ(total("common"), kDocs - kDocs / 5);
  EXPECT_EQ(total("common min_faves:1"), kDocs / 5);
  EXPECT_EQ(total("common min_faves:25000"), 1000u);  // 25001, 25006, ... 29996
  // Reopened from its files (after Save), it is the same index.
  ASSERT_TRUE(index->Seal().ok());
  ASSERT_TRUE(index->Save(dir.path()).ok());
  index.reset();
  index = *Index::Open(MergingOptions(dir.path()), dir.path());
  EXPECT_EQ(total("common"), kDocs - kDocs / 5);
  EXPECT_EQ(total("common min_faves:25000"), 1000u);
}

TEST(LikesConcurrencyTest, LikesAndDeletesAreVisibleToTheNextQuery) {
  std::unique_ptr<Index> index = *Index::Create(IndexOptions{});
  for (uint64_t i = 0; i < 100; ++i) ASSERT_TRUE(index->Add(Doc(i)).ok());
  absl::StatusOr<query::Plan> plan = query::PlanQuery("common", index->analyzer());
  query::SearchOptions liked;
  liked.sort = query::SortMode::kMostLiked;
  liked.limit = 1;
  std::thread writer([&] {
    for (uint32_t v = 1; v <= 200; ++v) ASSERT_TRUE(index->SetLikes(50, v).ok());
  });
  writer.join();
  absl::StatusOr<query::SearchResult> r = query::Search(*index->Snapshot(), *plan, liked);
  ASSERT_EQ(r->hits.size(), 1u);
  EXPECT_EQ(r->hits[0].id, 50u);
  EXPECT_EQ(r->hits[0].likes, 200u);
  ASSERT_TRUE(index->Delete(50).ok());
  r = query::Search(*index->Snapshot(), *plan, liked);
  EXPECT_NE(r->hits[0].id, 50u);
}

}  // namespace
}  // namespace tweetsearch::index
