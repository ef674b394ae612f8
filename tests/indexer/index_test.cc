#include "indexer/index/index.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "common/file_util.h"
#include "indexer/query/searcher.h"
#include "tests/testing/corpus.h"

namespace tweetsearch::index {
namespace {

IndexDoc Doc(TweetId id, std::string text, uint32_t likes = 0, std::string user = "alice") {
  return IndexDoc{id,   1,    std::move(user), std::move(text), static_cast<int64_t>(id) * 1000,
                  "en", likes};
}

std::vector<TweetId> Newest(const Index& index, std::string_view q, uint32_t limit = 100) {
  absl::StatusOr<query::Plan> plan = query::PlanQuery(q, index.analyzer());
  EXPECT_TRUE(plan.ok()) << plan.status();
  query::SearchOptions options;
  options.limit = limit;
  absl::StatusOr<query::SearchResult> r = query::Search(*index.Snapshot(), *plan, options);
  EXPECT_TRUE(r.ok()) << r.status();
  std::vector<TweetId> ids;
  for (const query::Hit& h : r->hits) ids.push_back(h.id);
  return ids;
}

std::unique_ptr<Index> MakeIndex(uint32_t segment_docs) {
  IndexOptions options;
  options.segment_max_docs = segment_docs;
  return *Index::Create(options);
}

TEST(IndexTest, AddDeleteLikesAcrossSealing) {
  auto index = MakeIndex(4);
  for (TweetId id = 1; id <= 10; ++id) {
    ASSERT_TRUE(index->Add(Doc(id, id % 2 ? "odd cat" : "even cat")).ok());
  }
  EXPECT_EQ(index->Snapshot()->segments.size(), 3u);  // two sealed of 4, one active with 2
  EXPECT_EQ(index->Add(Doc(3, "dup")).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(Newest(*index, "cat"), (std::vector<TweetId>{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}));
  ASSERT_TRUE(index->Delete(9).ok());  // active segment
  ASSERT_TRUE(index->Delete(2).ok());  // sealed segment
  EXPECT_EQ(index->Delete(2).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(index->Delete(77).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Newest(*index, "odd"), (std::vector<TweetId>{7, 5, 3, 1}));
  EXPECT_EQ(*index->AddLikes(3, 5), 5u);
  EXPECT_EQ(*index->AddLikes(3, -50), 0u);
  EXPECT_EQ(*index->SetLikes(3, 42), 42u);
  EXPECT_EQ(index->SetLikes(2, 1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Newest(*index, "cat min_faves:40"), (std::vector<TweetId>{3}));
  EXPECT_EQ(Newest(*index, "from:ALICE odd", 2), (std::vector<TweetId>{7, 5}));
}

TEST(IndexTest, ADeletedTweetMayBeIndexedAgain) {
  auto index = MakeIndex(3);
  for (TweetId id = 1; id <= 4; ++id) ASSERT_TRUE(index->Add(Doc(id, "old text")).ok());
  ASSERT_TRUE(index->Delete(2).ok());  // sealed
  ASSERT_TRUE(index->Delete(4).ok());  // active
  ASSERT_TRUE(index->Add(Doc(2, "new text")).ok());
  ASSERT_TRUE(index->Add(Doc(4, "new text")).ok());
  EXPECT_EQ(index->Add(Doc(4, "again")).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(Newest(*index, "new"), (std::vector<TweetId>{4, 2}));
  EXPECT_EQ(Newest(*index, "old"), (std::vector<TweetId>{3, 1}));
  ASSERT_TRUE(index->Seal().ok());  // the old copies of 2 and 4 are now in sealed segments
  EXPECT_EQ(*index->SetLikes(2, 7), 7u);
  EXPECT_EQ(*index->SetLikes(4, 9), 9u);
  EXPECT_EQ(Newest(*index, "new min_faves:8"), (std::vector<TweetId>{4}));
  ASSERT_TRUE(index->Compact().ok());
  EXPECT_EQ(Newest(*index, "text"), (std::vector<TweetId>{4, 3, 2, 1}));
  ASSERT_TRUE(index->Delete(2).ok());
  EXPECT_EQ(Newest(*index, "text"), (std::vector<TweetId>{4, 3, 1}));
}

TEST(IndexTest, CompactionReclaimsDeletedTweets) {
  auto index = MakeIndex(8);
  for (TweetId id = 1; id <= 40; ++id) ASSERT_TRUE(index->Add(Doc(id, "word")).ok());
  for (TweetId id = 1; id <= 40; id += 2) ASSERT_TRUE(index->Delete(id).ok());
  ASSERT_TRUE(index->Seal().ok());
  EXPECT_EQ(index->Stats().sealed_segments, 5u);
  ASSERT_TRUE(index->Compact().ok());
  IndexStats stats = index->Stats();
  EXPECT_EQ(stats.sealed_segments, 1u);
  EXPECT_EQ(stats.documents, 20u);
  EXPECT_EQ(stats.sealed.postings, 60u);  // "word", "from:alice" and "lang:en" per tweet
  EXPECT_EQ(Newest(*index, "word", 3), (std::vector<TweetId>{40, 38, 36}));
  EXPECT_EQ(index->Delete(3).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(index->Delete(40).ok());
  EXPECT_EQ(Newest(*index, "word", 1), (std::vector<TweetId>{38}));
}

TEST(IndexTest, SaveAndOpenRestoresSealedSegments) {
  testing::TempDir dir;
  auto index = MakeIndex(5);
  for (TweetId id = 1; id <= 12; ++id) ASSERT_TRUE(index->Add(Doc(id, "hello world")).ok());
  ASSERT_TRUE(index->Delete(4).ok());
  ASSERT_TRUE(index->SetLikes(7, 99).ok());
  ASSERT_TRUE(index->Save(dir.path()).ok());  // two sealed segments; 11 and 12 stay unsaved
  IndexOptions options;
  options.segment_max_docs = 5;
  absl::StatusOr<std::unique_ptr<Index>> opened = Index::Open(options, dir.path());
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(Newest(**opened, "hello"), (std::vector<TweetId>{10, 9, 8, 7, 6, 5, 3, 2, 1}));
  EXPECT_EQ(Newest(**opened, "hello min_faves:99"), (std::vector<TweetId>{7}));
  ASSERT_TRUE((*opened)->Add(Doc(11, "hello again")).ok());
  EXPECT_EQ(Newest(**opened, "hello", 1), (std::vector<TweetId>{11}));
  // A compacted index saved again drops the old files.
  ASSERT_TRUE((*opened)->Seal().ok());
  ASSERT_TRUE((*opened)->Compact().ok());
  ASSERT_TRUE((*opened)->Save(dir.path()).ok());
  absl::StatusOr<std::unique_ptr<Index>> again = Index::Open(options, dir.path());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->Stats().sealed_segments, 1u);
  EXPECT_EQ(Newest(**again, "hello", 2), (std::vector<TweetId>{11, 10}));
  EXPECT_EQ(Index::Open(options, dir.path() + "/none").status().code(),
            absl::StatusCode::kNotFound);
  // Opening with other analyzer options would make its terms unreachable: refused.
  IndexOptions stemming = options;
  stemming.analyzer.stem_language = "english";
  EXPECT_EQ(Index::Open(stemming, dir.path()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    names.push_back(f.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// An index whose sealed segments are files in `dir`.
IndexOptions InDirectory(const std::string& dir, uint32_t segment_docs) {
  IndexOptions options;
  options.segment_max_docs = segment_docs;
  options.directory = dir;
  return options;
}

TEST(IndexTest, SegmentsOfADirectoryIndexAreFilesServedMapped) {
  testing::TempDir dir;
  const IndexOptions options = InDirectory(dir.path(), 5);
  std::unique_ptr<Index> index = *Index::Create(options);
  for (TweetId id = 1; id <= 12; ++id) ASSERT_TRUE(index->Add(Doc(id, "hello world")).ok());
  // Sealing wrote each segment's file; nothing is durable until Save names them.
  EXPECT_EQ(FilesIn(dir.path()), (std::vector<std::string>{"seg-000001.tss", "seg-000002.tss"}));
  EXPECT_GT(index->Stats().mapped_bytes, 0u);
  ASSERT_TRUE(index->Delete(4).ok());
  ASSERT_TRUE(index->SetLikes(7, 99).ok());
  ASSERT_TRUE(index->Save(dir.path()).ok());
  // Both segments changed (4 is in the first, 7 in the second): an updates file each.
  EXPECT_EQ(FilesIn(dir.path()),
            (std::vector<std::string>{"MANIFEST", "seg-000001.tss", "seg-000001.upd-000003",
                                      "seg-000002.tss", "seg-000002.upd-000004"}));
  ASSERT_TRUE(index->Save(dir.path()).ok());  // nothing changed: nothing rewritten
  EXPECT_EQ(FilesIn(dir.path()).size(), 5u);
  ASSERT_TRUE(index->SetLikes(9, 5).ok());
  ASSERT_TRUE(index->Save(dir.path()).ok());  // a newer generation replaces the old one
  EXPECT_EQ(FilesIn(dir.path()),
            (std::vector<std::string>{"MANIFEST", "seg-000001.tss", "seg-000001.upd-000003",
                                      "seg-000002.tss", "seg-000002.upd-000005"}));

  absl::StatusOr<std::unique_ptr<Index>> opened = Index::Open(options, dir.path());
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(Newest(**opened, "hello"), (std::vector<TweetId>{10, 9, 8, 7, 6, 5, 3, 2, 1}));
  EXPECT_EQ(Newest(**opened, "hello min_faves:99"), (std::vector<TweetId>{7}));
  EXPECT_EQ(Newest(**opened, "hello min_faves:5"), (std::vector<TweetId>{9, 7}));
  const IndexStats stats = (*opened)->Stats();
  EXPECT_EQ(stats.sealed_segments, 2u);
  EXPECT_GT(stats.mapped_bytes, 0u);
  EXPECT_EQ(stats.damaged_segments, 0u);
  // New segments of the opened index go to its directory, after the numbers already used.
  for (TweetId id = 13; id <= 17; ++id) ASSERT_TRUE((*opened)->Add(Doc(id, "hello")).ok());
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/seg-000006.tss"));
  // A file a crash left behind (sealed but never named by a manifest) is removed by Save.
  ASSERT_TRUE(WriteFileAtomically(dir.path() + "/seg-000099.tss", "left over").ok());
  ASSERT_TRUE((*opened)->Compact().ok());
  ASSERT_TRUE((*opened)->Save(dir.path()).ok());
  EXPECT_EQ(FilesIn(dir.path()), (std::vector<std::string>{"MANIFEST", "seg-000007.tss"}));
  EXPECT_EQ(Newest(**Index::Open(options, dir.path()), "hello", 3),
            (std::vector<TweetId>{17, 16, 15}));
}

TEST(IndexTest, OpeningRemovesWhatACrashLeftHalfWrittenOrUnnamed) {
  testing::TempDir dir;
  const IndexOptions options = InDirectory(dir.path(), 5);
  {
    std::unique_ptr<Index> index = *Index::Create(options);
    for (TweetId id = 1; id <= 7; ++id) ASSERT_TRUE(index->Add(Doc(id, "hello")).ok());
    ASSERT_TRUE(index->Seal().ok());  // as a checkpoint does
    ASSERT_TRUE(index->Save(dir.path()).ok());
  }
  // A seal or merge killed while writing (.tmp), and one killed before the next Save.
  ASSERT_TRUE(WriteFileAtomically(dir.path() + "/seg-000042.tss.tmp", "half").ok());
  ASSERT_TRUE(WriteFileAtomically(dir.path() + "/seg-000043.tss", "unnamed").ok());
  const std::vector<std::string> saved = {"MANIFEST", "seg-000001.tss", "seg-000002.tss"};
  absl::StatusOr<std::unique_ptr<Index>> opened = Index::Open(options, dir.path());
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(FilesIn(dir.path()), saved);
  EXPECT_EQ(Newest(**opened, "hello", 2), (std::vector<TweetId>{7, 6}));
}

TEST(IndexTest, AnIndexOfAnOlderFormatIsRebuiltNotMisread) {
  testing::TempDir dir;
  // v1: whole segments on the heap; v2: segment files whose skip entries have no likes bands;
  // v3: bands without term frequencies, lengths capped at 15.
  for (const char* version : {"v1", "v2", "v3"}) {
    ASSERT_TRUE(WriteFileAtomically(dir.path() + "/MANIFEST",
                                    std::string("tweetsearch-index-manifest ") + version +
                                        "\nanalyzer x\nseg-000001.tss\n")
                    .ok());
    EXPECT_EQ(Index::Open({}, dir.path()).status().code(), absl::StatusCode::kNotFound) << version;
  }
}

TEST(IndexTest, ADamagedSegmentFailsTheQueriesThatReachItAndIsCounted) {
  testing::TempDir dir;
  const IndexOptions options = InDirectory(dir.path(), 400);
  {
    std::unique_ptr<Index> index = *Index::Create(options);
    for (TweetId id = 1; id <= 800; ++id) {
      ASSERT_TRUE(index->Add(Doc(id, id % 2 ? "odd words here" : "even words")).ok());
    }
    ASSERT_TRUE(index->Save(dir.path()).ok());
  }
  // Damage the postings (section 17) of the older segment.
  const std::string path = dir.path() + "/seg-000001.tss";
  std::string file = *ReadFile(path);
  uint64_t offset, length;
  std::memcpy(&offset, file.data() + 16 + 16 * 32 + 8, 8);
  std::memcpy(&length, file.data() + 16 + 16 * 32 + 16, 8);
  file[offset + length / 2] = static_cast<char>(file[offset + length / 2] ^ 0x22);
  ASSERT_TRUE(WriteFileAtomically(path, file).ok());

  absl::StatusOr<std::unique_ptr<Index>> opened = Index::Open(options, dir.path());
  ASSERT_TRUE(opened.ok()) << opened.status();  // opening does not read the postings
  EXPECT_EQ((*opened)->Stats().damaged_segments, 0u);
  absl::StatusOr<query::Plan> plan = query::PlanQuery("words", (*opened)->analyzer());
  query::SearchOptions search;
  search.limit = 1000;
  search.sort = query::SortMode::kBestMatch;
  absl::StatusOr<query::SearchResult> r = query::Search(*(*opened)->Snapshot(), *plan, search);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  EXPECT_NE(r.status().message().find("seg-000001.tss"), std::string::npos);
  EXPECT_EQ((*opened)->Stats().damaged_segments, 1u);
  // Newest first stops in the newer, intact segment and is still answered.
  EXPECT_EQ(Newest(**opened, "words", 3), (std::vector<TweetId>{800, 799, 798}));
  // Merging would copy garbage: refused, and the index is left as it was.
  EXPECT_EQ((*opened)->Compact().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ((*opened)->Stats().sealed_segments, 2u);
}

// The postings of a segment's long lists among its most liked tweets (likes_tiers.h): built by
// whoever writes the segment, and after loading in the background (opening reads no
// postings); most liked ANDs are then decided by them.
TEST(IndexTest, TierPostingsAreBuiltWhenASegmentIsWrittenAndAfterItIsLoaded) {
  testing::TempDir dir;
  IndexOptions options = InDirectory(dir.path(), 4096);
  options.background_merges = true;
  auto tier_postings = [](const Index& index) -> const TierPostings* {
    for (const auto& segment : index.Snapshot()->segments) {
      if (segment->newest_first()) return segment->tier_postings();  // the sealed one
    }
    ADD_FAILURE() << "no sealed segment";
    return nullptr;
  };
  // One most liked AND page over the segment: how many segments the tier decided.
  auto tier_cutoffs = [](const Index& index) {
    absl::StatusOr<query::Plan> plan = query::PlanQuery("common word", index.analyzer());
    EXPECT_TRUE(plan.ok());
    query::SearchOptions search;
    search.sort = query::SortMode::kMostLiked;
    search.limit = 5;
    absl::StatusOr<query::SearchResult> r = query::Search(*index.Snapshot(), *plan, search);
    EXPECT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->hits.size(), 5u);
    return r.ok() ? r->tier_cutoffs : 0;
  };
  {
    std::unique_ptr<Index> index = *Index::Create(options);
    for (TweetId id = 1; id <= 4096; ++id) {
      // Likes spread from 0 to 4095, so a tier of a 32nd of the rows exists.
      ASSERT_TRUE(index->Add(Doc(id, "common word", static_cast<uint32_t>(id * 7919 % 4096))).ok());
    }
    index->WaitForMerges();
    ASSERT_NE(tier_postings(*index), nullptr);
    EXPECT_NE(tier_postings(*index)->Find("common"), nullptr);
    EXPECT_EQ(tier_cutoffs(*index), 1u);
    ASSERT_TRUE(index->Save(dir.path()).ok());
  }
  std::unique_ptr<Index> opened = *Index::Open(options, dir.path());
  opened->WaitForMerges();
  ASSERT_NE(tier_postings(*opened), nullptr);
  EXPECT_EQ(tier_cutoffs(*opened), 1u);
}

TEST(IndexTest, RejectsAbsurdSegmentSizes) {
  IndexOptions options;
  options.segment_max_docs = 0;
  EXPECT_EQ(Index::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.segment_max_docs = kMaxSegmentDocs + 1;
  EXPECT_EQ(Index::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(IndexTest, AddBatchReportsEachTweetAndCrossesSegments) {
  auto index = MakeIndex(4);
  std::vector<IndexDoc> docs;
  for (TweetId id = 1; id <= 11; ++id) docs.push_back(Doc(id, "batch word " + std::to_string(id)));
  docs.push_back(Doc(3, "duplicate of three"));
  docs.push_back(Doc(20, "bad \xC0 utf8"));
  docs.push_back(Doc(21, ""));  // no words: stored, findable by from:
  std::vector<absl::Status> results = index->AddBatch(docs);
  ASSERT_EQ(results.size(), docs.size());
  for (size_t i = 0; i < 11; ++i) EXPECT_TRUE(results[i].ok()) << i << results[i];
  EXPECT_EQ(results[11].code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(results[12].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(results[13].ok());
  EXPECT_EQ(Newest(*index, "batch", 3), (std::vector<TweetId>{11, 10, 9}));
  EXPECT_EQ(Newest(*index, "\"word 7\""), (std::vector<TweetId>{7}));
  EXPECT_EQ(Newest(*index, "from:alice -batch"), (std::vector<TweetId>{21}));
  EXPECT_EQ(index->Stats().documents, 12u);
  EXPECT_EQ(index->Stats().sealed_segments, 3u);
}

TEST(IndexTest, RejectsInvalidUtf8WithoutLosingOtherTweets) {
  auto index = MakeIndex(100);
  ASSERT_TRUE(index->Add(Doc(1, "fine")).ok());
  EXPECT_EQ(index->Add(Doc(2, "bad \xFF")).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(index->Add(Doc(3, "fine too")).ok());
  EXPECT_EQ(Newest(*index, "fine"), (std::vector<TweetId>{3, 1}));
}

}  // namespace
}  // namespace tweetsearch::index
