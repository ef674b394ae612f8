#include "indexer/index/sealed_segment.h"

#include <gtest/gtest.h>

#include <fstream>

#include "common/file_util.h"
#include "tests/testing/corpus.h"

namespace tweetsearch::index {
namespace {

// A segment of `n` docs where doc i (by id i+1) contains "all", "even" if i is even, and
// "x{i % 3}" twice (positions 1 and 2).
std::unique_ptr<SealedSegment> BuildSample(uint32_t n) {
  SealedSegmentBuilder builder;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t doc = builder.AddDoc({TweetId{i + 1}, 1000 + i, 7, PackLang("en"),
                                         static_cast<uint16_t>(3 + i % 5), i});
    const uint32_t zero[] = {0};
    builder.AddPosting("all", doc, zero);
    if (i % 2 == 0) builder.AddPosting("even", doc, zero);
    const uint32_t twice[] = {1, 2};
    builder.AddPosting("x" + std::to_string(i % 3), doc, twice);
  }
  return builder.Build();
}

std::vector<TweetId> Ids(const Segment& segment, std::string_view term) {
  std::vector<TweetId> ids;
  std::unique_ptr<PostingCursor> c = segment.OpenTerm(term, segment.VisibleDocs());
  if (c == nullptr) return ids;
  for (; c->doc() != kEndDoc; c->Next()) ids.push_back(segment.columns().tweet_id(c->doc()));
  return ids;
}

TEST(SealedSegmentTest, DocsAreNewestFirstAndListsDecode) {
  auto segment = BuildSample(1000);
  ASSERT_EQ(segment->num_docs(), 1000u);
  EXPECT_EQ(segment->columns().tweet_id(0), 1000u);
  EXPECT_EQ(segment->MaxTweetId(), 1000u);
  std::vector<TweetId> all = Ids(*segment, "all");
  ASSERT_EQ(all.size(), 1000u);
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], 1000 - i);
  EXPECT_EQ(Ids(*segment, "even").size(), 500u);
  EXPECT_EQ(segment->DocFreq("x1"), 333u);
  EXPECT_EQ(segment->OpenTerm("nope", 1000), nullptr);
  EXPECT_EQ(*segment->Find(500), 500u);  // id 500 is DocId 1000 - 500
  EXPECT_FALSE(segment->Find(5000).has_value());
}

TEST(SealedSegmentTest, AdvanceSkipsBlocksAndPositionsDecode) {
  auto segment = BuildSample(1000);
  std::unique_ptr<PostingCursor> c = segment->OpenTerm("x0", 1000);
  ASSERT_NE(c, nullptr);
  c->Advance(700);
  ASSERT_NE(c->doc(), kEndDoc);
  EXPECT_GE(c->doc(), 700u);
  EXPECT_EQ((segment->columns().tweet_id(c->doc()) - 1) % 3, 0u);
  EXPECT_EQ(c->freq(), 2u);
  EXPECT_EQ(std::vector<uint32_t>(c->positions().begin(), c->positions().end()),
            (std::vector<uint32_t>{1, 2}));
  EXPECT_LE(c->doc(), c->block_last_doc());
  EXPECT_EQ(c->block_bound().max_tf, 2u);
  EXPECT_EQ(c->list_bound().min_length, 3u);
  c->Advance(1000);
  EXPECT_EQ(c->doc(), kEndDoc);
}

TEST(SealedSegmentTest, SaveLoadKeepsEverythingIncludingLikesAndDeletes) {
  testing::TempDir dir;
  auto segment = BuildSample(300);
  segment->columns().SetLikes(0, 12345);
  segment->columns().MarkDeleted(5);
  const std::string path = dir.path() + "/s.tss";
  ASSERT_TRUE(segment->Save(path).ok());
  absl::StatusOr<std::unique_ptr<SealedSegment>> loaded = SealedSegment::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->columns().likes(0), 12345u);
  EXPECT_TRUE((*loaded)->columns().deleted(5));
  EXPECT_EQ((*loaded)->num_live_docs(), 299u);
  for (std::string_view term : {"all", "even", "x0", "x1", "x2"}) {
    EXPECT_EQ(Ids(**loaded, term), Ids(*segment, term)) << term;
  }
  EXPECT_EQ((*loaded)->stats().postings, segment->stats().postings);
}

TEST(SealedSegmentTest, CorruptOrTruncatedFilesAreReportedNotServed) {
  testing::TempDir dir;
  auto segment = BuildSample(300);
  const std::string path = dir.path() + "/s.tss";
  ASSERT_TRUE(segment->Save(path).ok());
  const std::string good = *ReadFile(path);
  // Flip one bit at many places, and cut the file at many lengths: never OK, never a crash.
  for (size_t pos = 0; pos < good.size(); pos += 1 + good.size() / 97) {
    std::string bad = good;
    bad[pos] = static_cast<char>(bad[pos] ^ 0x10);
    ASSERT_TRUE(WriteFileAtomically(path, bad).ok());
    absl::StatusOr<std::unique_ptr<SealedSegment>> loaded = SealedSegment::Load(path);
    EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss) << "flip at " << pos;
  }
  for (size_t len : {size_t{0}, size_t{5}, size_t{40}, good.size() / 2, good.size() - 1}) {
    ASSERT_TRUE(WriteFileAtomically(path, good.substr(0, len)).ok());
    EXPECT_EQ(SealedSegment::Load(path).status().code(), absl::StatusCode::kDataLoss) << len;
  }
  EXPECT_EQ(SealedSegment::Load(dir.path() + "/none").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tweetsearch::index
