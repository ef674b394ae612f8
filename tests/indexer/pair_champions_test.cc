#include "indexer/index/pair_champions.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>

#include "indexer/index/packed_docs.h"
#include "indexer/index/sealed_segment.h"
#include "indexer/query/scoring.h"
#include "tests/testing/pareto.h"

namespace tweetsearch::index {
namespace {

bool Beats(const PairPoint& q, const PairPoint& p) {
  return q.tf_first >= p.tf_first && q.tf_second >= p.tf_second && q.length <= p.length &&
         q.likes >= p.likes;
}

TEST(PairChampionsTest, SkylineKeepsExactlyThePointsNothingBeats) {
  std::mt19937 rng(3);
  std::vector<PairPoint> points;
  for (int i = 0; i < 3000; ++i) {
    points.push_back({testing::ParetoLikes(rng), static_cast<uint16_t>(1 + rng() % 4),
                      static_cast<uint16_t>(1 + rng() % 4), static_cast<uint16_t>(1 + rng() % 40)});
  }
  const std::vector<PairPoint> sky = PairSkyline(points);
  ASSERT_FALSE(sky.empty());
  for (const PairPoint& p : points) {
    EXPECT_TRUE(
        std::any_of(sky.begin(), sky.end(), [&](const PairPoint& q) { return Beats(q, p); }));
  }
  for (size_t i = 0; i < sky.size(); ++i) {
    for (size_t j = 0; j < sky.size(); ++j) {
      if (i != j) {
        EXPECT_FALSE(Beats(sky[j], sky[i])) << i << " " << j;
      }
    }
  }
}

TEST(PairChampionsTest, WordsAreTheDenseOnesDensestFirst) {
  const std::vector<std::string> words =
      PairWords(200000, {{3000, "b"}, {3125, "c"}, {3124, "d"}, {9000, "a"}, {2047, "e"}});
  EXPECT_EQ(words, (std::vector<std::string>{"a", "c"}));  // at least 200000 / 64 = 3125
  std::vector<std::pair<uint32_t, std::string>> many;
  for (uint32_t i = 0; i < 200; ++i) many.emplace_back(5000 + i, "w" + std::to_string(i));
  const std::vector<std::string> densest = PairWords(10000, many);
  ASSERT_EQ(densest.size(), kMaxPairWords);
  EXPECT_EQ(densest.front(), "w199");
}

// A segment of random tweets holding three common words (with repeats), power-law likes and
// lengths past the text table: for every pair, the champions are matches of both words, and
// under weights the selection never saw the best match outside them scores at most the best
// point of the rest's skyline; a pair with every match a champion has no rest.
TEST(PairChampionsTest, TheRestsSkylineBoundsEveryOtherMatchUnderAnyWeights) {
  std::mt19937 rng(5);
  SealedSegmentBuilder builder;
  const std::vector<std::string> words = {"alpha", "bravo", "charlie", "delta"};
  const std::vector<uint32_t> shares = {3, 4, 6, 40};  // delta: 1 in 40, and rarely with charlie
  constexpr uint32_t kDocs = 60000;
  std::vector<uint16_t> lengths;
  std::vector<uint32_t> likes;
  std::vector<std::array<uint32_t, 4>> tfs;
  for (uint32_t i = 0; i < kDocs; ++i) {
    lengths.push_back(static_cast<uint16_t>(1 + rng() % 300));
    likes.push_back(testing::ParetoLikes(rng));
    const DocId doc = builder.AddDoc({TweetId{kDocs - i}, 0, 1, 0, lengths.back(), likes.back()});
    std::array<uint32_t, 4>& tf = tfs.emplace_back();
    for (size_t w = 0; w < words.size(); ++w) {
      if (rng() % shares[w] != 0 || (w == 3 && tf[2] != 0 && rng() % 50 != 0)) continue;
      tf[w] = rng() % 6 ? 1 : 1 + rng() % 5;
      std::vector<uint32_t> positions;
      for (uint32_t p = 0; p < tf[w]; ++p) positions.push_back(p * 4 + static_cast<uint32_t>(w));
      builder.AddPosting(words[w], doc, positions);
    }
  }
  auto segment = builder.Build();
  const auto pairs = BuildPairChampions(*segment, segment->VisibleDocs(), words);
  ASSERT_NE(pairs, nullptr);
  bool some_rest = false, all_champions = false;
  for (size_t a = 0; a < words.size(); ++a) {
    for (size_t b = 0; b < words.size(); ++b) {
      bool swapped = true;
      const PairChampionList* pair = pairs->Find(words[a], words[b], &swapped);
      if (a == b) {
        EXPECT_EQ(pair, nullptr);
        continue;
      }
      ASSERT_NE(pair, nullptr);
      EXPECT_EQ(swapped, b < a);
      const size_t first = std::min(a, b), second = std::max(a, b);
      std::vector<DocId> matches;
      for (DocId d = 0; d < kDocs; ++d) {
        if (tfs[d][first] != 0 && tfs[d][second] != 0) matches.push_back(d);
      }
      ASSERT_TRUE(std::is_sorted(pair->docs.begin(), pair->docs.end()));
      ASSERT_LE(pair->docs.size(), 4 * kPairChampionsPerWeight);
      for (DocId d : pair->docs) ASSERT_TRUE(std::binary_search(matches.begin(), matches.end(), d));
      EXPECT_EQ(pair->rest.empty(), pair->docs.size() == matches.size()) << a << " " << b;
      some_rest |= !pair->rest.empty();
      all_champions |= pair->rest.empty() && !matches.empty();
      for (int trial = 0; trial < 20; ++trial) {
        query::ScoringParams p;
        p.k1 = 0.5 + (rng() % 100) / 50.0;
        p.b = (rng() % 100) / 100.0;
        p.popularity_weight = (rng() % 100) / 25.0;
        const double idf_first = 0.1 + (rng() % 100) / 10.0,
                     idf_second = 0.1 + (rng() % 100) / 10.0;
        const double avg = 5 + rng() % 50;
        auto score = [&](uint32_t tf1, uint32_t tf2, uint32_t length, uint32_t l) {
          return idf_first * query::TfPart(p, tf1, length, avg) +
                 idf_second * query::TfPart(p, tf2, length, avg) +
                 p.popularity_weight * query::Popularity(p, l);
        };
        double rest = -1, best_point = -1;
        for (DocId d : matches) {
          if (std::binary_search(pair->docs.begin(), pair->docs.end(), d)) continue;
          rest = std::max(rest, score(tfs[d][first], tfs[d][second], lengths[d], likes[d]));
        }
        for (const PairPoint& q : pair->rest) {
          best_point = std::max(best_point, score(q.tf_first, q.tf_second, q.length, q.likes));
        }
        if (rest >= 0) {
          EXPECT_LE(rest, best_point * (1 + 1e-12)) << a << " " << b << " trial " << trial;
        }
      }
    }
  }
  EXPECT_TRUE(some_rest);
  EXPECT_TRUE(all_champions);  // charlie and delta rarely meet
  EXPECT_GT(pairs->MemoryBytes(), 0u);
  // Each word's repeats: exactly its postings of frequency 2 or more, with their frequency,
  // length (255 for longer tweets) and likes band; as a bitmap for the commonest words, a
  // list for the others.
  bool some_bitmap = false, some_list = false;
  for (size_t w = 0; w < words.size(); ++w) {
    const Repeats* repeats = pairs->RepeatsOf(words[w]);
    ASSERT_NE(repeats, nullptr);
    some_bitmap |= !repeats->bits.empty();
    some_list |= !repeats->docs.empty();
    size_t at = 0, found = 0;
    for (DocId d = 0; d < kDocs; ++d) {
      const RepeatPoint* q = repeats->Find(d, &at);
      ASSERT_EQ(q != nullptr, tfs[d][w] >= 2) << words[w] << " " << d;
      if (q == nullptr) continue;
      ++found;
      EXPECT_EQ(q->tf, tfs[d][w]);
      EXPECT_EQ(q->length, std::min<uint32_t>(lengths[d], 255));
      EXPECT_EQ(q->band, LikesBand(likes[d]));
    }
    EXPECT_EQ(found, repeats->size()) << words[w];
    EXPECT_GT(found, 0u) << words[w];
  }
  EXPECT_TRUE(some_bitmap);
  EXPECT_TRUE(some_list);
  EXPECT_EQ(pairs->RepeatsOf("echo"), nullptr);
}

// Repeats of `rows` rows holding each DocId with probability `share`, with random points.
Repeats RandomRepeats(std::mt19937& rng, DocId rows, double share) {
  Repeats r;
  std::bernoulli_distribution holds(share);
  for (DocId d = 0; d < rows; ++d) {
    if (!holds(rng)) continue;
    r.docs.push_back(d);
    r.points.push_back({static_cast<uint8_t>(2 + rng() % 254), static_cast<uint8_t>(rng() % 256),
                        static_cast<uint8_t>(rng() % kLikesBands)});
  }
  r.Compact(rows);
  return r;
}

TEST(PairChampionsTest, RepeatsReadAWindowAtATimeAgreeWithFind) {
  std::mt19937 rng(11);
  constexpr DocId kRows = 5 * 4096 + 1000;  // the last window is partial
  // A bitmap (one row in 5), a list (one in 300), and a list with no row in some windows.
  std::vector<Repeats> repeats = {RandomRepeats(rng, kRows, 0.2),
                                  RandomRepeats(rng, kRows, 1.0 / 300),
                                  RandomRepeats(rng, kRows, 1.0 / 5000)};
  ASSERT_FALSE(repeats[0].bits.empty());
  ASSERT_TRUE(repeats[1].bits.empty());
  const std::array<const Repeats*, 3> words = {&repeats[0], &repeats[1], &repeats[2]};
  RepeatsWindow window(words, 4096);
  std::array<size_t, 3> at{};
  size_t loaded = 0, masked_out = 0;
  for (DocId from = 0; from < kRows; from += 4096) {
    const DocId end = std::min<DocId>(kRows, from + 4096);
    std::vector<uint64_t> rows((end - from + 63) / 64);
    auto bits = [&rng] { return uint64_t{rng()} << 32 | rng(); };
    for (uint64_t& w : rows) w = bits() & bits();  // about a quarter of the rows asked for
    window.Load(from, rows);
    for (DocId d = from; d < end; ++d) {
      const size_t i = d - from;
      const bool asked = (rows[i / 64] >> (i % 64) & 1) != 0;
      const RepeatPoint* any = nullptr;
      for (size_t t = 0; t < words.size(); ++t) {
        const RepeatPoint* p = words[t]->Find(d, &at[t]);
        if (p == nullptr) continue;
        any = p;
        if (asked) {
          EXPECT_EQ(window.tf(t, i), p->tf) << "word " << t << " row " << d;
        }
      }
      const bool repeated = (window.repeated(i / 64) >> (i % 64) & 1) != 0;
      ASSERT_EQ(repeated, asked && any != nullptr) << "row " << d;
      masked_out += !asked && any != nullptr;
      if (!repeated) continue;
      ++loaded;
      for (size_t t = 0; t < words.size(); ++t) {
        size_t from_start = 0;
        if (words[t]->Find(d, &from_start) == nullptr) {
          EXPECT_EQ(window.tf(t, i), 1) << "word " << t << " row " << d;
        }
      }
      EXPECT_EQ(window.length(i), any->length);
      EXPECT_EQ(window.band(i), any->band);
    }
  }
  EXPECT_GT(loaded, 1000u);
  EXPECT_GT(masked_out, 1000u);
}

// Find from its place over a list of repeats, asked about rows far apart (it gallops past
// many repeats at once) and near each other, rows it holds and rows it lacks: the answer is
// the row's point or null, as a binary search of the whole list says.
TEST(PairChampionsTest, RepeatsFoundAfterLongAndShortStepsAgreeWithABinarySearch) {
  std::mt19937 rng(5);
  constexpr DocId kRows = 400000;
  const Repeats repeats = RandomRepeats(rng, kRows, 1.0 / 40);
  ASSERT_TRUE(repeats.bits.empty());
  for (int trial = 0; trial < 20; ++trial) {
    const DocId most_step = trial < 10 ? 40u * (1u << trial) : 1 + rng() % 64;
    size_t at = 0, held = 0, asked = 0;
    for (DocId d = rng() % most_step; d < kRows; d += 1 + rng() % most_step) {
      // Every other question is a row the list holds, where there is one ahead.
      if (asked % 2 == 1) {
        const auto next = std::lower_bound(repeats.docs.begin(), repeats.docs.end(), d);
        if (next != repeats.docs.end()) d = *next;
      }
      ++asked;
      const auto it = std::lower_bound(repeats.docs.begin(), repeats.docs.end(), d);
      const bool holds = it != repeats.docs.end() && *it == d;
      const RepeatPoint* p = repeats.Find(d, &at);
      ASSERT_EQ(p != nullptr, holds) << "row " << d << " trial " << trial;
      if (holds) {
        ++held;
        EXPECT_EQ(p, &repeats.points[static_cast<size_t>(it - repeats.docs.begin())]);
      }
    }
    EXPECT_GT(held, 0u) << "trial " << trial;
  }
}

// A pair's rows as PackedDocs: random lists of every length around a block's (128) and gaps
// from 0 to millions, read back through cursors bounded below random ends, stepping, skipping,
// in batches and filtering candidates, each checked against the plain list.
TEST(PackedDocsTest, CursorsReadBackTheDocIdsGivenBelowTheirEnd) {
  std::mt19937 rng(7);
  for (int round = 0; round < 200; ++round) {
    const uint32_t n = round < 8 ? std::array<uint32_t, 8>{0, 1, 2, 127, 128, 129, 256, 257}[round]
                                 : static_cast<uint32_t>(rng() % 3000);
    const uint32_t spread = std::array<uint32_t, 4>{1, 3, 60, 5000000}[rng() % 4];
    std::vector<DocId> docs;
    PackedDocs::Writer writer;
    uint64_t d = rng() % 5;
    for (uint32_t i = 0; i < n && d < kEndDoc - 1; ++i) {
      docs.push_back(static_cast<DocId>(d));
      writer.Add(static_cast<DocId>(d));
      d += 1 + rng() % spread;
    }
    const PackedDocs packed = std::move(writer).Finish();
    ASSERT_EQ(packed.size(), docs.size());
    const DocId end = rng() % 3 == 0 || docs.empty() ? kEndDoc : docs[rng() % docs.size()] + 1;
    std::vector<DocId> below;
    for (DocId x : docs) {
      if (x < end) below.push_back(x);
    }
    const std::string context = "round " + std::to_string(round);
    // Stepping.
    std::vector<DocId> got;
    for (auto c = packed.Open(end); c->doc() != kEndDoc; c->Next()) got.push_back(c->doc());
    ASSERT_EQ(got, below) << context;
    // Skipping to random targets, some on DocIds of the list.
    auto c = packed.Open(end);
    DocId target = 0;
    while (true) {
      const uint64_t step = rng() % 2 == 0 ? rng() % (uint64_t{spread} * 4 + 2) : 0;
      target = static_cast<DocId>(std::min<uint64_t>(target + step, kEndDoc - 1));
      if (rng() % 3 == 0 && !below.empty()) target = std::max(target, below[rng() % below.size()]);
      c->Advance(target);
      const auto it = std::lower_bound(below.begin(), below.end(), target);
      ASSERT_EQ(c->doc(), it == below.end() ? kEndDoc : *it) << context << " target " << target;
      if (c->doc() == kEndDoc) break;
      target = c->doc() + 1;
    }
    // Batches of random sizes below random ends.
    c = packed.Open(end);
    got.clear();
    uint64_t batch_end = 0;
    while (c->doc() != kEndDoc) {
      batch_end = std::min<uint64_t>(kEndDoc, batch_end + 1 + rng() % (uint64_t{spread} * 300));
      DocId out[300];
      const size_t max = 1 + rng() % 300;
      const size_t m = c->NextDocs(static_cast<DocId>(batch_end), out, max);
      got.insert(got.end(), out, out + m);
      ASSERT_TRUE(m == max || c->doc() >= batch_end) << context;
    }
    ASSERT_EQ(got, below) << context;
    // Filtering ascending candidates, half of them DocIds of the list.
    for (bool keep : {true, false}) {
      c = packed.Open(end);
      std::vector<DocId> candidates;
      for (DocId x : docs) {
        if (rng() % 2 == 0) candidates.push_back(x);
        if (rng() % 2 == 0) candidates.push_back(x + 1);
      }
      candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
      std::vector<DocId> want;
      for (DocId x : candidates) {
        if (std::binary_search(below.begin(), below.end(), x) == keep) want.push_back(x);
      }
      const size_t kept = c->Filter(candidates.data(), candidates.size(), keep);
      candidates.resize(kept);
      ASSERT_EQ(candidates, want) << context << " keep " << keep;
    }
  }
}

}  // namespace
}  // namespace tweetsearch::index
