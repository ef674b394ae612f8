#include "indexer/index/sealed_segment.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "common/file_util.h"
#include "common/snowflake.h"
#include "indexer/index/active_segment.h"
#include "indexer/index/likes_tiers.h"
#include "indexer/index/merged_docs.h"
#include "indexer/index/section_file.h"
#include "tests/testing/corpus.h"
#include "tests/testing/pareto.h"

namespace tweetsearch::index {
namespace {

// A segment of `n` docs where doc i (by id i+1) contains "all", "even" if i is even, and
// "x{i % 3}" twice (positions 1 and 2).
std::unique_ptr<SealedSegment> BuildSample(uint32_t n) {
  SealedSegmentBuilder builder;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t doc = builder.AddDoc(
        {TweetId{i + 1}, 1000 + i, 7, PackLang("en"), static_cast<uint16_t>(3 + i % 5), i});
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

// Likes as the generator draws them: P(likes >= x) ~ x^-1.1, up to 2,000,000.
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

TEST(SealedSegmentTest, LikesTiersHoldEveryTweetAboveTheirThresholds) {
  // Power-law likes, many above the one-byte column (kept in its overflow table).
  std::mt19937 rng(9);
  SealedSegmentBuilder builder;
  constexpr uint32_t kDocs = 20000;
  for (uint32_t i = 0; i < kDocs; ++i) {
    builder.AddDoc({TweetId{i + 1}, 0, 1, 0, 5, testing::ParetoLikes(rng, 2e6)});
  }
  auto segment = builder.Build();
  const Columns& c = segment->columns();
  const std::span<const LikesTier> tiers = segment->likes_tiers();
  ASSERT_GE(tiers.size(), 3u);
  for (size_t t = 0; t < tiers.size(); ++t) {
    std::vector<DocId> want;
    for (DocId d = 0; d < kDocs; ++d) {
      if (c.BaseLikes(d) >= tiers[t].min_likes) want.push_back(d);
    }
    ASSERT_EQ(tiers[t].docs, want) << "tier " << t;
    // About 32 * 4^t tweets (more with ties at the threshold), never beyond an eighth.
    EXPECT_GE(want.size(), 32u << (2 * t));
    EXPECT_LE(want.size(), kDocs / 8);
    EXPECT_GT(tiers[t].min_likes, 0u);
    if (t > 0) {
      EXPECT_LT(tiers[t].min_likes, tiers[t - 1].min_likes);
    }
  }
  EXPECT_GT(tiers[0].min_likes, 255u);  // the top tier comes from the overflow table

  // Rows whose likes change are listed apart, ascending; the tiers keep the written likes.
  segment->mutable_columns().SetLikes(70, 5);
  segment->mutable_columns().SetLikes(3, 1000000);
  std::vector<DocId> changed;
  c.ChangedLikesRows(&changed);
  EXPECT_EQ(changed, (std::vector<DocId>{3, 70}));
}

TEST(SealedSegmentTest, BandLengthCodesRoundDownToTheirFloor) {
  for (uint32_t length = 1; length < 300; ++length) {
    const uint8_t code = BandLengthCode(length);
    ASSERT_GE(code, 1);
    ASSERT_LE(kBandLengthFloor[code], length);
    if (code + 1u < kBandLengthFloor.size()) {
      ASSERT_GT(kBandLengthFloor[code + 1], length);
    }
    if (length <= 22) {
      ASSERT_EQ(kBandLengthFloor[code], length);
    }
  }
}

TEST(SealedSegmentTest, BlockBoundsHoldEveryPostingsLikesBandLengthAndFrequency) {
  // Power-law likes over every band, lengths 1 to 70 (past the exact length codes), a term in
  // ~60% of docs (bitmap blocks), one in ~5%, and term frequencies 1 to 6.
  std::mt19937 rng(11);
  SealedSegmentBuilder builder;
  constexpr uint32_t kDocs = 30000;
  for (uint32_t i = 0; i < kDocs; ++i) {
    const uint32_t likes = testing::ParetoLikes(rng, 2e6);
    const auto length = static_cast<uint16_t>(1 + rng() % 70);
    const uint32_t doc = builder.AddDoc({TweetId{i + 1}, 0, 1, 0, length, likes});
    const uint32_t positions[] = {0, 3, 7, 9, 12, 20};
    const size_t tf = rng() % 10 == 0 ? 2 + rng() % 5 : 1;
    if (rng() % 100 < 60) builder.AddPosting("common", doc, std::span(positions, tf));
    if (rng() % 100 < 5) builder.AddPosting("rare", doc, std::span(positions, tf));
  }
  auto segment = builder.Build();
  const Columns& c = segment->columns();
  for (const char* term : {"common", "rare"}) {
    SCOPED_TRACE(term);
    // Every posting lies inside the bounds of its block and of its list.
    std::unique_ptr<PostingCursor> cursor = segment->OpenTerm(term, kDocs);
    const PostingBound list = cursor->list_bound();
    std::vector<int> seen_bands;
    std::array<uint32_t, kLikesBands> shortest, most_tf{};
    shortest.fill(UINT32_MAX);
    for (; cursor->doc() != kEndDoc; cursor->Next()) {
      const DocId d = cursor->doc();
      const int band = LikesBand(c.BaseLikes(d));
      const uint32_t length = c.length(d), tf = cursor->freq();
      for (const PostingBound& b : {cursor->block_bound(), list}) {
        ASSERT_NE(b.band_length[band], kBandEmpty) << d;
        ASSERT_LE(b.band_length[band], length) << d;
        ASSERT_GE(b.band_tf[band], std::min<uint32_t>(tf, kBandManyTf)) << d;
        ASSERT_LE(b.min_length, length);
        ASSERT_GE(b.max_tf, tf);
        if (tf > 1) {
          ASSERT_LE(b.min_length_repeated, length);
        }
      }
      seen_bands.push_back(band);
      shortest[band] = std::min(shortest[band], length);
      most_tf[band] = std::max(most_tf[band], tf);
    }
    // The bounds are tight: a band is marked only where a posting is, and the list's band
    // lengths and frequencies are those of its postings, rounded as their codes say.
    for (int band = 0; band < kLikesBands; ++band) {
      const bool seen = std::find(seen_bands.begin(), seen_bands.end(), band) != seen_bands.end();
      EXPECT_EQ(list.band_length[band] != kBandEmpty, seen) << band;
      if (!seen) continue;
      EXPECT_EQ(list.band_length[band], kBandLengthFloor[BandLengthCode(shortest[band])]) << band;
      EXPECT_EQ(list.band_tf[band], std::min<uint32_t>(most_tf[band], kBandManyTf)) << band;
    }
    if (std::string_view(term) == "common") {
      EXPECT_GE(*std::max_element(seen_bands.begin(), seen_bands.end()), 10);
    }

    // Shallow moves name the block that holds the postings from the target on, without
    // moving the cursor.
    std::unique_ptr<PostingCursor> shallow = segment->OpenTerm(term, kDocs);
    std::unique_ptr<PostingCursor> walker = segment->OpenTerm(term, kDocs);
    const DocId first = shallow->doc();
    for (DocId target = 0; target < kDocs; target += 1 + static_cast<DocId>(rng() % 700)) {
      const DocId last = shallow->ShallowAdvance(target);
      ASSERT_EQ(shallow->doc(), first);
      walker->Advance(target);
      if (walker->doc() == kEndDoc) {
        ASSERT_EQ(last, kEndDoc) << target;
        break;
      }
      ASSERT_GE(last, walker->doc()) << target;
      // The block of walker's posting is the shallow block: same last DocId and bounds.
      ASSERT_EQ(walker->block_last_doc(), last) << target;
      ASSERT_EQ(walker->block_bound().band_length, shallow->shallow_bound().band_length);
      ASSERT_EQ(walker->block_bound().band_tf, shallow->shallow_bound().band_tf);
      uint32_t bands = 0;  // shallow_bands() names the bands the bound holds a posting of
      for (int band = 0; band < kLikesBands; ++band) {
        if (shallow->shallow_bound().band_length[band] != kBandEmpty) bands |= 1u << band;
      }
      ASSERT_EQ(shallow->shallow_bands(), bands) << target;
    }
  }
}

TEST(SealedSegmentTest, DenseBlocksAreBitmapsAndCursorsAgreeWithTheirDocs) {
  // "dense" in ~45% of 3000 docs (a dense list: one bitmap), "sparse" in ~3% (packed gaps),
  // "mixed" in ~45% of the newest 300 and ~0.2% of the others (a bitmap block, then a packed
  // one), with frequencies and positions that depend on the doc, so rank mistakes show.
  std::mt19937 rng(5);
  SealedSegmentBuilder builder;
  std::vector<bool> dense(3000), sparse(3000), mixed(3000);
  for (uint32_t i = 0; i < 3000; ++i) {
    const uint32_t doc = builder.AddDoc({TweetId{i + 1}, 0, 1, 0, 20, 0});
    dense[i] = rng() % 100 < 45;
    sparse[i] = rng() % 100 < 3;
    mixed[i] = rng() % 1000 < (i < 2700 ? 2 : 450);
    const uint32_t positions[] = {i % 7, i % 7 + 5, i % 7 + 9};
    if (dense[i]) builder.AddPosting("dense", doc, std::span(positions, 1 + i % 3));
    if (sparse[i]) builder.AddPosting("sparse", doc, std::span(positions, 1 + i % 3));
    if (mixed[i]) builder.AddPosting("mixed", doc, std::span(positions, 1 + i % 3));
  }
  auto segment = builder.Build();
  EXPECT_GT(segment->stats().bitmap_blocks, 0u);
  // A dense list's DocIds take a bitmap of the segment's 3000 DocIds (375 bytes) instead of
  // its blocks' 11 bitmaps (one more byte each, at most); a mixed list keeps its blocks.
  EXPECT_TRUE(segment->DenseList("dense"));
  EXPECT_FALSE(segment->DenseList("sparse"));
  EXPECT_FALSE(segment->DenseList("mixed"));
  {
    // A term in one tweet of ten is stored as bitmaps too (a block spanning at most 32 DocIds
    // per posting is one), though its packed gaps would take less room: 300 postings, three
    // blocks.
    SealedSegmentBuilder tenth;
    for (uint32_t i = 0; i < 3000; ++i) {
      const uint32_t doc = tenth.AddDoc({TweetId{i + 1}, 0, 1, 0, 20, 0});
      const uint32_t position = 0;
      if (i % 10 == 0) tenth.AddPosting("tenth", doc, std::span(&position, 1));
    }
    EXPECT_EQ(tenth.Build()->stats().bitmap_blocks, 3u);
  }
  // One tweet in 25 is dense enough (512 postings, four blocks); one in 40 is not: its packed
  // gaps are kept.
  for (const auto& [every, bitmaps] : {std::pair{25u, 4u}, std::pair{40u, 0u}}) {
    SealedSegmentBuilder sparse_builder;
    for (uint32_t i = 0; i < 512 * every; ++i) {
      const uint32_t doc = sparse_builder.AddDoc({TweetId{i + 1}, 0, 1, 0, 20, 0});
      const uint32_t position = 0;
      if (i % every == 0) sparse_builder.AddPosting("word", doc, std::span(&position, 1));
    }
    EXPECT_EQ(sparse_builder.Build()->stats().bitmap_blocks, bitmaps) << "one in " << every;
  }
  // DocId d holds tweet 3000 - d, built from i = 2999 - d.
  auto expected = [&](const std::vector<bool>& has) {
    std::vector<DocId> docs;
    for (DocId d = 0; d < 3000; ++d) {
      if (has[2999 - d]) docs.push_back(d);
    }
    return docs;
  };
  for (auto [term, has] :
       {std::pair{"dense", &dense}, std::pair{"sparse", &sparse}, std::pair{"mixed", &mixed}}) {
    const std::vector<DocId> want = expected(*has);
    std::unique_ptr<PostingCursor> c = segment->OpenTerm(term, 3000);
    std::vector<DocId> got;
    for (; c->doc() != kEndDoc; c->Next()) {
      got.push_back(c->doc());
      const uint32_t i = 2999 - c->doc();
      ASSERT_EQ(c->freq(), 1 + i % 3) << term;
      ASSERT_EQ(c->positions()[0], i % 7) << term;
    }
    ASSERT_EQ(got, want) << term;
    // Filled into bitmaps of random windows (not aligned to words or blocks), from the start
    // and from random places, the DocIds are the same; a cursor moved by Next() in between
    // stays in step.
    for (int trial = 0; trial < 50; ++trial) {
      std::unique_ptr<PostingCursor> b = segment->OpenTerm(term, 3000);
      if (trial > 0) b->Advance(rng() % 3000);
      std::vector<DocId> filled;
      const auto first = std::lower_bound(want.begin(), want.end(), b->doc());
      DocId from = b->doc() == kEndDoc ? 3000 : b->doc() - std::min<DocId>(b->doc(), rng() % 9);
      while (from < 3000) {
        DocId end = std::min<DocId>(3000, from + 1 + rng() % 700);
        // Some windows end on a block's last posting: the cursor then stands on it, in the
        // block it ends.
        const size_t last = std::min<size_t>(want.size() - 1, 128 * (rng() % 12) + 127);
        if (rng() % 3 == 0 && want[last] > from) end = want[last];
        std::vector<uint64_t> words((end - from + 63) / 64 + 1, 0);
        words.back() = 0xA5;  // a word past the window is left alone
        b->FillBits(from, end, words.data());
        ASSERT_EQ(words.back(), 0xA5u) << term;
        for (DocId d = from; d < end; ++d) {
          if ((words[(d - from) / 64] >> ((d - from) % 64)) & 1) filled.push_back(d);
        }
        ASSERT_GE(b->doc(), end) << term;
        if (b->doc() != kEndDoc) {
          ASSERT_EQ(b->freq(), 1 + (2999 - b->doc()) % 3) << term;
          ASSERT_EQ(b->ordinal(),
                    std::lower_bound(want.begin(), want.end(), b->doc()) - want.begin())
              << term;
        }
        from = end;
        if (b->doc() != kEndDoc && rng() % 2 == 0) {
          filled.push_back(b->doc());
          from = b->doc() + 1;
          b->Next();
        }
      }
      ASSERT_EQ(filled, std::vector<DocId>(first, want.end())) << term << " trial " << trial;
    }
    // AndBits keeps in random words the bits of a window's DocIds the list holds (or does not
    // hold), counting those left, in windows aligned to words (as counting uses) or not, and
    // moves the cursor as FillBits does.
    for (int trial = 0; trial < 60; ++trial) {
      std::unique_ptr<PostingCursor> c = segment->OpenTerm(term, 3000);
      if (trial > 0) c->Advance(rng() % 3000);
      DocId from = c->doc() == kEndDoc ? 3000 : c->doc() - std::min<DocId>(c->doc(), rng() % 9);
      if (trial % 2 == 0) from &= ~DocId{63};
      while (from < 3000) {
        const DocId end = std::min<DocId>(3000, from + 1 + rng() % 900);
        const size_t n = (end - from + 63) / 64;
        std::vector<uint64_t> words(n + 1);
        for (uint64_t& w : words)
          w = (uint64_t{rng()} << 32 | rng()) | (rng() % 4 == 0 ? ~0ull : 0);
        const std::vector<uint64_t> before = words;
        const DocId at = c->doc();  // postings before it are not held
        const bool keep = rng() % 2 == 0;
        const uint64_t left = c->AndBits(from, end, words.data(), keep);
        ASSERT_EQ(words.back(), before.back()) << term;  // a word past the window is left alone
        uint64_t set = 0;
        for (size_t i = 0; i < 64 * n; ++i) {
          const DocId d = from + static_cast<DocId>(i);
          const bool held = d >= at && d < end && std::binary_search(want.begin(), want.end(), d);
          const bool was = (before[i / 64] >> (i % 64)) & 1, is = (words[i / 64] >> (i % 64)) & 1;
          ASSERT_EQ(is, was && held == keep) << term << " DocId " << d << " keep " << keep
                                             << " from " << from << " end " << end << " at " << at;
          set += is;
        }
        ASSERT_EQ(left, set) << term;
        const auto next = std::lower_bound(want.begin(), want.end(), std::max(at, end));
        ASSERT_EQ(c->doc(), next == want.end() ? kEndDoc : *next) << term;
        if (c->doc() != kEndDoc) {
          ASSERT_EQ(c->freq(), 1 + (2999 - c->doc()) % 3) << term;
        }
        from = end;
      }
    }
    // Random advances land on the first DocId >= target, with the right frequency.
    for (int trial = 0; trial < 200; ++trial) {
      std::unique_ptr<PostingCursor> a = segment->OpenTerm(term, 3000);
      DocId target = 0;
      while (true) {
        target += 1 + rng() % 40;
        a->Advance(target);
        const auto it = std::lower_bound(want.begin(), want.end(), target);
        if (it == want.end()) {
          ASSERT_EQ(a->doc(), kEndDoc);
          break;
        }
        ASSERT_EQ(a->doc(), *it) << term;
        ASSERT_LE(a->doc(), a->block_last_doc());
        ASSERT_EQ(a->freq(), 1 + (2999 - a->doc()) % 3) << term;
        target = a->doc();
        if (rng() % 3 == 0) {
          a->Next();
          const auto next = std::upper_bound(want.begin(), want.end(), target);
          ASSERT_EQ(a->doc(), next == want.end() ? kEndDoc : *next) << term;
          if (a->doc() == kEndDoc) break;
          ASSERT_EQ(a->positions()[0], (2999 - a->doc()) % 7) << term;
          target = a->doc();
        }
      }
    }
  }
  // Batches: NextDocs copies the postings below a random end, a random number at a time;
  // Filter keeps the candidates a list holds (or does not), mixed with Advance and Next, and
  // a frequency read after it, and the place in the list, belong to the posting the cursor
  // stands on.
  for (auto [term, has] :
       {std::pair{"dense", &dense}, std::pair{"sparse", &sparse}, std::pair{"mixed", &mixed}}) {
    const std::vector<DocId> want = expected(*has);
    for (int trial = 0; trial < 50; ++trial) {
      std::unique_ptr<PostingCursor> c = segment->OpenTerm(term, 3000);
      std::vector<DocId> copied(128);
      std::vector<DocId> got;
      const DocId end = 1 + rng() % 3000;
      while (true) {
        const size_t n = c->NextDocs(end, copied.data(), 1 + rng() % 128);
        if (n == 0) break;
        got.insert(got.end(), copied.begin(), copied.begin() + static_cast<ptrdiff_t>(n));
      }
      const auto below = std::lower_bound(want.begin(), want.end(), end);
      ASSERT_EQ(got, std::vector<DocId>(want.begin(), below)) << term << " end " << end;
      ASSERT_EQ(c->doc(), below == want.end() ? kEndDoc : *below) << term;
    }
    for (int trial = 0; trial < 100; ++trial) {
      const bool keep = trial % 2 == 0;
      std::unique_ptr<PostingCursor> c = segment->OpenTerm(term, 3000);
      DocId next = 0;  // no DocId below it is asked about again
      while (next < 3000) {
        std::vector<DocId> asked;
        for (DocId d = next + rng() % 3; d < 3000 && asked.size() < 1 + rng() % 100;) {
          asked.push_back(d);
          d += 1 + rng() % (rng() % 4 == 0 ? 200 : 6);
        }
        if (asked.empty()) break;
        std::vector<DocId> kept = asked, expect;
        kept.resize(c->Filter(kept.data(), kept.size(), keep));
        for (DocId d : asked) {
          if (std::binary_search(want.begin(), want.end(), d) == keep) expect.push_back(d);
        }
        ASSERT_EQ(kept, expect) << term << " trial " << trial;
        const auto at = std::lower_bound(want.begin(), want.end(), asked.back());
        ASSERT_EQ(c->doc(), at == want.end() ? kEndDoc : *at) << term << " trial " << trial;
        if (c->doc() == kEndDoc) break;
        ASSERT_EQ(c->freq(), 1 + (2999 - c->doc()) % 3) << term;
        ASSERT_EQ(c->ordinal(), at - want.begin()) << term;  // its place in the list
        next = asked.back() + 1;
        if (rng() % 3 == 0) {
          c->Advance(std::max(c->doc(), next + static_cast<DocId>(rng() % 50)));
          if (c->doc() == kEndDoc) break;
          next = c->doc();
        }
      }
    }
  }
  // And the same after a save and load.
  testing::TempDir dir;
  ASSERT_TRUE(segment->Save(dir.path() + "/d.tss").ok());
  absl::StatusOr<std::unique_ptr<SealedSegment>> loaded =
      SealedSegment::Load(dir.path() + "/d.tss");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(Ids(**loaded, "dense"), Ids(*segment, "dense"));
}

// MergedDocs over one to four lists of every kind (a dense list, bitmap and packed blocks, a
// list of a few postings), each cursor started somewhere in its list, read in batches of random
// sizes below a random end: the union of what the cursors had left below the end, ascending,
// each DocId once.
TEST(SealedSegmentTest, MergedDocsIsTheUnionOfItsListsAscendingEachOnce) {
  std::mt19937 rng(17);
  SealedSegmentBuilder builder;
  const std::vector<std::pair<std::string, uint32_t>> words = {
      {"dense", 450}, {"tenth", 100}, {"sparse", 30}, {"rare", 2}, {"mixed", 0}};
  std::map<std::string, std::vector<DocId>> docs_of;
  for (uint32_t i = 0; i < 5000; ++i) {
    const uint32_t doc = builder.AddDoc({TweetId{i + 1}, 0, 1, 0, 20, 0});
    const uint32_t position = 0;
    for (const auto& [word, per_thousand] : words) {
      const uint32_t share = word == "mixed" ? (i < 4500 ? 3 : 450) : per_thousand;
      if (rng() % 1000 < share) builder.AddPosting(word, doc, std::span(&position, 1));
    }
  }
  auto segment = builder.Build();
  ASSERT_TRUE(segment->DenseList("dense"));
  for (const auto& [word, share] : words) {
    std::unique_ptr<PostingCursor> c = segment->OpenTerm(word, segment->VisibleDocs());
    ASSERT_NE(c, nullptr) << word;
    for (; c->doc() != kEndDoc; c->Next()) docs_of[word].push_back(c->doc());
  }
  for (int round = 0; round < 300; ++round) {
    std::vector<std::unique_ptr<PostingCursor>> cursors;
    std::vector<PostingCursor*> raw;
    const DocId end = static_cast<DocId>(rng() % 5200);
    std::set<DocId> expected;
    const size_t lists = 1 + rng() % 4;
    for (size_t l = 0; l < lists; ++l) {
      const std::string& word = words[rng() % words.size()].first;
      cursors.push_back(segment->OpenTerm(word, segment->VisibleDocs()));
      const DocId start = static_cast<DocId>(rng() % 5000);
      if (rng() % 3 != 0) cursors.back()->Advance(start);
      const DocId from = cursors.back()->doc();
      for (const DocId d : docs_of[word]) {
        if (d >= from && d < end) expected.insert(d);
      }
      raw.push_back(cursors.back().get());
    }
    MergedDocs merged(raw, end);
    std::vector<DocId> got;
    std::vector<DocId> batch(300);
    while (size_t n = merged.Next(batch.data(), 1 + rng() % 300)) {
      got.insert(got.end(), batch.begin(), batch.begin() + static_cast<std::ptrdiff_t>(n));
    }
    EXPECT_EQ(got, std::vector<DocId>(expected.begin(), expected.end())) << "round " << round;
    EXPECT_EQ(merged.Next(batch.data(), 300), 0u);
  }
}

TEST(SealedSegmentTest, FilesOfFormatVersions5And6AreStillRead) {
  // Version 7 added the champions' lengths and likes bands (a record says whether it keeps
  // them: champions_test.cc reads one without) and version 6 dense lists, and nothing else: a
  // version 6 file is a version 7 file without those, a version 5 file one without dense lists
  // either, under older magics. Indexes saved before stay usable without a rebuild.
  SealedSegmentBuilder builder;
  for (uint32_t i = 0; i < 20000; ++i) {
    const uint32_t doc = builder.AddDoc({TweetId{i + 1}, 0, 1, 0, 20, 0});
    const uint32_t position = 0;
    if (i % 40 == 0) builder.AddPosting("sparse", doc, std::span(&position, 1));
    if (i % 997 == 0) builder.AddPosting("rare", doc, std::span(&position, 1));
  }
  auto segment = builder.Build();
  ASSERT_FALSE(segment->DenseList("sparse"));
  testing::TempDir dir;
  const std::string path = dir.path() + "/v7.tss";
  ASSERT_TRUE(segment->Save(path).ok());
  const std::string v7 = *ReadFile(path);
  ASSERT_EQ(v7.substr(0, 8), "TSSEG007");
  constexpr uint32_t kSections = 18;
  absl::StatusOr<SectionFile> sections = ReadSectionFile(v7, "TSSEG007", kSections, {});
  ASSERT_TRUE(sections.ok()) << sections.status();
  std::string older;
  for (const char* magic : {"TSSEG006", "TSSEG005"}) {
    SectionFileWriter writer(magic, kSections);
    for (uint32_t tag = 1; tag <= kSections; ++tag) writer.Add(sections->sections[tag]);
    older.clear();
    for (std::string_view piece : writer.Pieces()) older.append(piece);
    const std::string older_path = dir.path() + "/" + magic + ".tss";
    ASSERT_TRUE(WriteFileAtomically(older_path, older).ok());
    absl::StatusOr<std::unique_ptr<SealedSegment>> loaded = SealedSegment::Load(older_path);
    ASSERT_TRUE(loaded.ok()) << magic << ": " << loaded.status();
    EXPECT_TRUE((*loaded)->VerifyAll().ok()) << magic;
    for (const char* term : {"sparse", "rare"}) {
      EXPECT_EQ(Ids(**loaded, term), Ids(*segment, term)) << magic << " " << term;
      EXPECT_EQ(Ids(**loaded, term).size(), segment->DocFreq(term)) << magic << " " << term;
    }
  }
  // Any other magic is refused.
  older.replace(0, 8, "TSSEG004");
  ASSERT_TRUE(WriteFileAtomically(dir.path() + "/v4.tss", older).ok());
  EXPECT_EQ(SealedSegment::Load(dir.path() + "/v4.tss").status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(SealedSegmentTest, ColumnsReadBackEveryValue) {
  // Rows shaped to reach every encoding: snowflake and arbitrary ids, created_at equal to the
  // id's time or not, many users, a few languages, likes below, at and above the overflow mark.
  std::mt19937_64 rng(5);
  SealedSegmentBuilder builder;
  std::vector<SealedSegmentBuilder::Row> rows;
  for (uint32_t i = 0; i < 5000; ++i) {
    const int64_t millis = 1'600'000'000'000 + i * 3;
    SealedSegmentBuilder::Row r{};
    r.id = i % 7 == 0 ? rng() >> 1 : SnowflakeLowerBound(millis) | (i % 4096);
    r.created_at_ms = i % 5 == 0 ? static_cast<int64_t>(rng() % 4'000'000'000'000) : millis;
    r.user_id = i % 3 == 0 ? rng() : 1 + i % 50;
    r.lang = PackLang(i % 11 == 0 ? "ja" : "en");
    r.length = static_cast<uint16_t>(rng() % 300);
    r.likes = i % 13 == 0 ? static_cast<uint32_t>(rng()) : static_cast<uint32_t>(i % 260);
    rows.push_back(r);
    builder.AddDoc(r);
  }
  const std::unique_ptr<SealedSegment> segment = builder.Build();
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.id > b.id; });
  const Columns& c = segment->columns();
  for (DocId d = 0; d < rows.size(); ++d) {
    ASSERT_EQ(c.tweet_id(d), rows[d].id) << d;
    ASSERT_EQ(c.created_at_ms(d), rows[d].created_at_ms) << d;
    ASSERT_EQ(c.user_id(d), rows[d].user_id) << d;
    ASSERT_EQ(c.lang(d), rows[d].lang) << d;
    ASSERT_EQ(c.length(d), rows[d].length) << d;
    ASSERT_EQ(c.likes(d), rows[d].likes) << d;
    ASSERT_GE(c.range_max_likes(d), rows[d].likes) << d;
    ASSERT_GE(c.range_max_created_at_ms(d), rows[d].created_at_ms) << d;
    ASSERT_EQ(segment->Find(rows[d].id), std::optional<DocId>(d));
  }
  // Changed likes come from the overlay, and only ever raise the range bounds.
  segment->mutable_columns().SetLikes(10, 7);
  segment->mutable_columns().SetLikes(11, 4'000'000'000u);
  EXPECT_EQ(c.likes(10), 7u);
  EXPECT_EQ(c.likes(11), 4'000'000'000u);
  EXPECT_EQ(c.range_max_likes(11), std::max(4'000'000'000u, c.range_max_likes(11)));
  EXPECT_EQ(c.likes(12), rows[12].likes);
}

TEST(SealedSegmentTest, UpdatesFilesCarryLikesAndDeletes) {
  testing::TempDir dir;
  auto segment = BuildSample(300);
  segment->mutable_columns().SetLikes(0, 12345);
  segment->mutable_columns().SetLikes(7, 3);
  segment->mutable_columns().MarkDeleted(5);
  const std::string path = dir.path() + "/s.tss";
  ASSERT_TRUE(segment->Save(path).ok());
  absl::StatusOr<std::unique_ptr<SealedSegment>> loaded = SealedSegment::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE((*loaded)->mapped());
  // The file holds the segment as sealed; the changes travel in the updates file.
  EXPECT_EQ((*loaded)->columns().likes(0), segment->columns().BaseLikes(0));
  EXPECT_FALSE((*loaded)->columns().deleted(5));
  const std::string updates = segment->EncodeUpdates();
  ASSERT_TRUE((*loaded)->ApplyUpdates(updates, "u").ok());
  EXPECT_EQ((*loaded)->columns().likes(0), 12345u);
  EXPECT_EQ((*loaded)->columns().likes(7), 3u);
  EXPECT_TRUE((*loaded)->columns().deleted(5));
  EXPECT_EQ((*loaded)->num_live_docs(), 299u);
  for (std::string_view term : {"all", "even", "x0", "x1", "x2"}) {
    EXPECT_EQ(Ids(**loaded, term), Ids(*segment, term)) << term;
  }
  EXPECT_EQ((*loaded)->stats().postings, segment->stats().postings);
  // A damaged or foreign updates file is refused.
  std::string bad = updates;
  bad[12] = static_cast<char>(bad[12] ^ 1);
  EXPECT_EQ((*loaded)->ApplyUpdates(bad, "u").code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ((*loaded)->ApplyUpdates(BuildSample(299)->EncodeUpdates(), "u").code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ((*loaded)->ApplyUpdates(updates.substr(0, 20), "u").code(),
            absl::StatusCode::kDataLoss);
}

// Where the postings section of a segment file starts and how long it is (from the header).
std::pair<size_t, size_t> PostingsSection(const std::string& file) {
  constexpr uint32_t kPostingsTag = 17;
  uint64_t offset, length;
  std::memcpy(&offset, file.data() + 16 + (kPostingsTag - 1) * 32 + 8, 8);
  std::memcpy(&length, file.data() + 16 + (kPostingsTag - 1) * 32 + 16, 8);
  return {offset, length};
}

TEST(SealedSegmentTest, CorruptOrTruncatedFilesAreReportedNotServed) {
  testing::TempDir dir;
  auto segment = BuildSample(3000);
  const std::string path = dir.path() + "/s.tss";
  ASSERT_TRUE(segment->Save(path).ok());
  const std::string good = *ReadFile(path);
  const auto [postings, postings_length] = PostingsSection(good);
  const std::vector<std::string> terms = {"all", "even", "x0", "x1", "x2"};
  // Flip one bit at many places. Outside the postings, opening fails; inside, opening is
  // cheap and succeeds, and the first query reading the damaged chunk gets DataLoss (never
  // garbage), as does a full verification. Never a crash.
  size_t lazily_caught = 0;
  for (size_t pos = 0; pos < good.size(); pos += 1 + good.size() / 211) {
    std::string bad = good;
    bad[pos] = static_cast<char>(bad[pos] ^ 0x10);
    ASSERT_TRUE(WriteFileAtomically(path, bad).ok());
    absl::StatusOr<std::unique_ptr<SealedSegment>> loaded = SealedSegment::Load(path);
    const bool in_postings = pos >= postings && pos < postings + postings_length;
    if (!in_postings) {
      // Padding between sections is covered by the whole-file checksum only.
      if (loaded.ok()) {
        EXPECT_EQ((*loaded)->VerifyAll().code(), absl::StatusCode::kDataLoss) << "flip at " << pos;
      } else {
        EXPECT_EQ(loaded.status().code(), absl::StatusCode::kDataLoss) << "flip at " << pos;
      }
      continue;
    }
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    for (const std::string& term : terms) (void)(*loaded)->OpenTerm(term, 3000);
    EXPECT_EQ((*loaded)->Health().code(), absl::StatusCode::kDataLoss) << "flip at " << pos;
    EXPECT_NE((*loaded)->Health().message().find("s.tss"), std::string::npos);
    lazily_caught += !(*loaded)->Health().ok();
    EXPECT_EQ((*loaded)->VerifyAll().code(), absl::StatusCode::kDataLoss) << "flip at " << pos;
  }
  EXPECT_GT(lazily_caught, 0u);
  for (size_t len :
       {size_t{0}, size_t{5}, size_t{40}, size_t{4096}, good.size() / 2, good.size() - 1}) {
    ASSERT_TRUE(WriteFileAtomically(path, good.substr(0, len)).ok());
    EXPECT_EQ(SealedSegment::Load(path).status().code(), absl::StatusCode::kDataLoss) << len;
  }
  ASSERT_TRUE(WriteFileAtomically(path, good).ok());
  absl::StatusOr<std::unique_ptr<SealedSegment>> intact = SealedSegment::Load(path);
  ASSERT_TRUE(intact.ok());
  EXPECT_TRUE((*intact)->VerifyAll().ok());
  for (const std::string& term : terms) EXPECT_EQ(Ids(**intact, term), Ids(*segment, term));
  EXPECT_EQ(SealedSegment::Load(dir.path() + "/none").status().code(), absl::StatusCode::kNotFound);
}

// A document of the merge/seal tests: its terms and positions follow from its id, with lists
// long enough for several blocks, bitmap blocks and repeated terms.
struct SampleDoc {
  TweetId id;
  std::vector<std::pair<std::string, std::vector<uint32_t>>> terms;
};

SampleDoc MakeDoc(TweetId id) {
  SampleDoc d{id, {{"all", {0}}}};
  d.terms.push_back({"m" + std::to_string(id % 7), {1}});
  if (id % 3 == 0) d.terms.push_back({"three", {2, 5, 9}});
  if (id % 250 == 0) d.terms.push_back({"rare" + std::to_string(id % 1000), {3}});
  return d;
}

SealedSegmentBuilder::Row RowOf(TweetId id) {
  return {id,
          static_cast<int64_t>(1000 + id),
          id % 13,
          PackLang(id % 2 ? "en" : "fr"),
          static_cast<uint16_t>(4 + id % 9),
          static_cast<uint32_t>(id * 37 % 1000)};
}

void AddTo(SealedSegmentBuilder& builder, TweetId id) {
  const uint32_t doc = builder.AddDoc(RowOf(id));
  for (const auto& [term, positions] : MakeDoc(id).terms) builder.AddPosting(term, doc, positions);
}

std::string Collect(std::string* out, std::span<const std::string_view> pieces) {
  out->clear();
  for (std::string_view p : pieces) out->append(p);
  return *out;
}

TEST(SealedSegmentTest, AMergeWritesTheFileABuildOfItsLiveDocumentsWould) {
  // Two sources with interleaved ids (tweets imported out of order) and one older, with
  // deletes in each; the merge must read their lists side by side.
  std::vector<std::vector<TweetId>> ids(3);
  for (TweetId id = 1000; id < 4000; ++id) ids[id % 2].push_back(id);
  for (TweetId id = 1; id < 600; ++id) ids[2].push_back(id);
  std::vector<std::unique_ptr<SealedSegment>> sources;
  for (const auto& group : ids) {
    SealedSegmentBuilder builder;
    for (TweetId id : group) AddTo(builder, id);
    sources.push_back(builder.Build());
  }
  SealedSegmentBuilder expected_builder;
  std::vector<const SealedSegment*> views;
  for (auto& source : sources) {
    views.push_back(source.get());
    for (DocId d = 0; d < source->num_docs(); ++d) {
      const TweetId id = source->columns().tweet_id(d);
      if (id % 11 == 0) {
        source->mutable_columns().MarkDeleted(d);
      } else {
        AddTo(expected_builder, id);
      }
    }
  }
  const std::string expected = expected_builder.Encode();
  std::string merged;
  std::vector<std::vector<DocId>> doc_maps;
  ASSERT_TRUE(MergeSegments(views, &doc_maps, [&](std::span<const std::string_view> pieces) {
                Collect(&merged, pieces);
                return absl::OkStatus();
              }).ok());
  EXPECT_TRUE(merged == expected) << "merged " << merged.size() << " bytes, built "
                                  << expected.size();
  // The maps send each live document to its new place and dropped ones nowhere.
  auto segment = SealedSegment::FromBytes(FileBytes::FromBytes(merged), "m", false);
  ASSERT_TRUE(segment.ok());
  for (size_t s = 0; s < sources.size(); ++s) {
    for (DocId d = 0; d < sources[s]->num_docs(); ++d) {
      const TweetId id = sources[s]->columns().tweet_id(d);
      if (id % 11 == 0) {
        EXPECT_EQ(doc_maps[s][d], kEndDoc);
      } else {
        ASSERT_NE(doc_maps[s][d], kEndDoc);
        EXPECT_EQ((*segment)->columns().tweet_id(doc_maps[s][d]), id);
      }
    }
  }
}

TEST(SealedSegmentTest, ACancelledMergeWritesNothing) {
  SealedSegmentBuilder builder;
  for (TweetId id = 1; id < 500; ++id) AddTo(builder, id);
  auto source = builder.Build();
  const SealedSegment* views[] = {source.get()};
  std::vector<std::vector<DocId>> doc_maps;
  const std::atomic<bool> cancel{true};
  bool written = false;
  const absl::Status status = MergeSegments(
      views, &doc_maps,
      [&](std::span<const std::string_view>) {
        written = true;
        return absl::OkStatus();
      },
      &cancel);
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(written);
}

TEST(SealedSegmentTest, SealingAnActiveSegmentWritesTheFileABuildWould) {
  ActiveSegment active(4096);
  SealedSegmentBuilder expected_builder;
  // Arrival order is not id order: every tenth tweet is an old one imported late.
  std::vector<TweetId> arrivals;
  for (TweetId id = 5000; id < 7000; ++id) arrivals.push_back(id % 10 == 0 ? id - 4000 : id);
  for (TweetId id : arrivals) {
    const SealedSegmentBuilder::Row row = RowOf(id);
    IndexDoc doc;
    doc.id = id;
    doc.user_id = row.user_id;
    doc.created_at_ms = row.created_at_ms;
    doc.lang = id % 2 ? "en" : "fr";
    doc.likes = row.likes;
    const DocId d = active.AddRow(doc, row.length);
    for (const auto& [term, positions] : MakeDoc(id).terms) {
      const NewPosting posting{d, positions};
      active.AppendPostings(term, active.HashForWriter(term), std::span(&posting, 1));
    }
    if (id % 13 == 0) {
      active.mutable_columns().MarkDeleted(d);
    } else {
      AddTo(expected_builder, id);
    }
  }
  active.Publish();
  std::vector<std::string_view> terms;
  active.ForEachTerm([&](std::string_view term, PostingCursor&) { terms.push_back(term); });
  std::string sealed;
  std::vector<DocId> doc_map;
  ASSERT_TRUE(EncodeSegment(active, terms, &doc_map, [&](std::span<const std::string_view> pieces) {
                Collect(&sealed, pieces);
                return absl::OkStatus();
              }).ok());
  const std::string expected = expected_builder.Encode();
  EXPECT_TRUE(sealed == expected) << "sealed " << sealed.size() << " bytes, built "
                                  << expected.size();
  ASSERT_EQ(doc_map.size(), arrivals.size());
  EXPECT_EQ(doc_map[arrivals.size() - 1], 0u);  // 6999, the newest, comes first
}

}  // namespace
}  // namespace tweetsearch::index
