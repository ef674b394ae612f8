// Property test: the searcher against a brute-force scan.
//
// Random corpora (Zipf-like vocabulary, tags, mentions, repeated words, out-of-order ids) are
// indexed with small segments; random queries from the whole language run in every sort mode
// and are paged to the end. Every page, order, score and total is compared with a scan over the
// same analyzed tokens, at each stage of an index's life: mixed active and sealed segments,
// after deletes and likes changes, after sealing and compaction, and after save and reload.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <map>
#include <random>
#include <set>

#include "common/strings.h"
#include "indexer/index/index.h"
#include "indexer/index/pair_champions.h"
#include "indexer/query/doc_matcher.h"
#include "indexer/query/searcher.h"
#include "tests/testing/corpus.h"
#include "tests/testing/pareto.h"

namespace tweetsearch::query {
namespace {

constexpr int64_t kBaseMillis = 1238976000000;   // 2009-04-06
constexpr int64_t kStepMillis = 10 * 60 * 1000;  // ten minutes between tweets

const std::vector<std::string> kVocabulary = {
    "alpha",  "bravo",  "charlie", "delta", "echo",  "foxtrot",  "golf",  "hotel",
    "india",  "juliet", "kilo",    "lima",  "mike",  "november", "oscar", "papa",
    "quebec", "romeo",  "sierra",  "tango", "#news", "#fun",     "@ann",  "@bob",
    "the",    "to",     "be",      "or",    "not",   "cats"};
const std::vector<std::string> kUsers = {"ann", "bob", "cyd", "dee", "eve"};

struct OracleDoc {
  index::IndexDoc doc;
  std::vector<analysis::Token> tokens;  // text tokens, as indexed
  bool deleted = false;
};

class Oracle {
 public:
  explicit Oracle(const analysis::Analyzer& analyzer) : analyzer_(analyzer) {}

  void Add(const index::IndexDoc& doc) {
    OracleDoc d{doc, *analyzer_.Analyze(doc.text), false};
    docs_[doc.id] = std::move(d);
  }
  OracleDoc& at(TweetId id) { return docs_.at(id); }
  const std::map<TweetId, OracleDoc>& docs() const { return docs_; }

  // The number of results of `plan` under `watermark`.
  uint64_t Count(const Plan& plan, TweetId watermark) const {
    uint64_t n = 0;
    for (const auto& [id, d] : docs_) {
      n += !d.deleted && id <= watermark && d.doc.created_at_ms >= plan.since_ms &&
           !(plan.has_until() && d.doc.created_at_ms >= plan.until_ms) &&
           d.doc.likes >= plan.min_likes && Matches(plan.root, d);
    }
    return n;
  }

  // The results of `plan` per bucket of `buckets` (every visible tweet).
  std::vector<uint64_t> CountByTime(const Plan& plan, const TimeBuckets& buckets) const {
    std::vector<uint64_t> counts(buckets.count, 0);
    for (const auto& [id, d] : docs_) {
      const int64_t t = d.doc.created_at_ms;
      if (d.deleted || t < buckets.start_ms || t >= buckets.end_ms()) continue;
      if (t < plan.since_ms || (plan.has_until() && t >= plan.until_ms)) continue;
      if (d.doc.likes < plan.min_likes || !Matches(plan.root, d)) continue;
      ++counts[static_cast<size_t>((t - buckets.start_ms) / buckets.width_ms)];
    }
    return counts;
  }

  // Every result of `plan`, in the order of `sort`, with scores.
  std::vector<Hit> Run(const Plan& plan, SortMode sort, const CollectionStats& stats,
                       const SearchOptions& options) const {
    std::vector<Hit> hits;
    for (const auto& [id, d] : docs_) {
      if (d.deleted || id > options.watermark) continue;
      if (d.doc.created_at_ms < plan.since_ms ||
          (plan.has_until() && d.doc.created_at_ms >= plan.until_ms)) {
        continue;
      }
      if (d.doc.likes < plan.min_likes) continue;
      if (!Matches(plan.root, d)) continue;
      Hit h;
      h.id = id;
      h.likes = d.doc.likes;
      h.created_at_ms = d.doc.created_at_ms;
      h.score = Score(plan.root, d, stats, options.scoring) +
                StaticScore(options.scoring, d.doc.likes, d.doc.created_at_ms, options.now_ms);
      h.key = SortKey{sort == SortMode::kNewest      ? 0.0
                      : sort == SortMode::kBestMatch ? h.score
                                                     : static_cast<double>(h.likes),
                      id};
      hits.push_back(h);
    }
    std::sort(hits.begin(), hits.end(),
              [](const Hit& a, const Hit& b) { return Before(a.key, b.key); });
    return hits;
  }

 private:
  static std::vector<uint32_t> Positions(const OracleDoc& d, const std::string& term) {
    std::vector<uint32_t> p;
    for (const analysis::Token& t : d.tokens) {
      if (t.text == term) p.push_back(t.position);
    }
    if (term == index::FromTerm(d.doc.user_name) || term == index::LangTerm(d.doc.lang)) {
      p.push_back(0);
    }
    return p;
  }

  static bool Matches(const PlanNode& node, const OracleDoc& d) {
    switch (node.kind) {
      case PlanNode::Kind::kTerm:
        return !Positions(d, node.term).empty();
      case PlanNode::Kind::kPhrase: {
        for (uint32_t start : Positions(d, node.phrase_terms[0])) {
          bool all = true;
          for (size_t i = 1; i < node.phrase_terms.size() && all; ++i) {
            std::vector<uint32_t> p = Positions(d, node.phrase_terms[i]);
            all = std::find(p.begin(), p.end(), start + node.phrase_offsets[i]) != p.end();
          }
          if (all) return true;
        }
        return false;
      }
      case PlanNode::Kind::kAnd:
        for (const PlanNode& c : node.children) {
          if (!Matches(c, d)) return false;
        }
        for (const PlanNode& e : node.excluded) {
          if (Matches(e, d)) return false;
        }
        return true;
      case PlanNode::Kind::kOr:
        for (const PlanNode& c : node.children) {
          if (Matches(c, d)) return true;
        }
        return false;
      case PlanNode::Kind::kNothing:
        return false;
    }
    return false;
  }

  // The text score, summed in plan order, as the searcher promises.
  static double TermScore(const std::string& term, const OracleDoc& d, const CollectionStats& stats,
                          const ScoringParams& p) {
    const double tf = static_cast<double>(Positions(d, term).size());
    const uint64_t df = stats.doc_freq.at(tweetsearch::AsAbsl(term));
    return Idf(stats.num_docs, df) *
           TfPart(p, tf, static_cast<double>(d.tokens.size()), stats.avg_length);
  }

  static double Score(const PlanNode& node, const OracleDoc& d, const CollectionStats& stats,
                      const ScoringParams& p) {
    double s = 0;
    switch (node.kind) {
      case PlanNode::Kind::kTerm:
        return node.scored ? TermScore(node.term, d, stats, p) : 0;
      case PlanNode::Kind::kPhrase:
        for (const std::string& t : node.phrase_terms) s += TermScore(t, d, stats, p);
        return s;
      case PlanNode::Kind::kAnd:
        for (const PlanNode& c : node.children) s += Score(c, d, stats, p);
        return s;
      case PlanNode::Kind::kOr:
        for (const PlanNode& c : node.children) {
          if (Matches(c, d)) s += Score(c, d, stats, p);
        }
        return s;
      case PlanNode::Kind::kNothing:
        return 0;
    }
    return 0;
  }

  const analysis::Analyzer& analyzer_;
  std::map<TweetId, OracleDoc> docs_;
};

class QueryGenerator {
 public:
  explicit QueryGenerator(std::mt19937_64& rng) : rng_(rng) {}

  std::string Query() {
    std::string q = Expr(0);
    if (Chance(0.15)) q += " min_faves:" + std::to_string(Pick(6));
    if (Chance(0.15)) q += " since:2009-04-0" + std::to_string(6 + Pick(4));
    if (Chance(0.1)) q += " until:2009-04-1" + std::to_string(Pick(4));
    return q;
  }

 private:
  bool Chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  size_t Pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }
  std::string Word() { return kVocabulary[Zipf()]; }
  size_t Zipf() {
    const double u = std::uniform_real_distribution<double>(0, 1)(rng_);
    return std::min(kVocabulary.size() - 1,
                    static_cast<size_t>(std::pow(u, 2.0) * kVocabulary.size()));
  }
  std::string Expr(int depth) {
    const size_t choice = depth > 2 ? Pick(4) : Pick(9);
    switch (choice) {
      case 0:
      case 1:
      case 2:
        return Word();
      case 3:
        return Chance(0.5) ? "from:" + kUsers[Pick(kUsers.size())]
                           : "\"" + Word() + " " + Word() + "\"";
      case 4:
      case 5:
        return Expr(depth + 1) + " " + Expr(depth + 1);
      case 6:
        return "(" + Expr(depth + 1) + " OR " + Expr(depth + 1) + ")";
      case 7:
        return Expr(depth + 1) + " -" + Word();
      default:
        return Word() + " OR " + Word() + (Chance(0.5) ? " OR " + Word() : "");
    }
  }
  std::mt19937_64& rng_;
};

struct Corpus {
  std::vector<index::IndexDoc> docs;
};

Corpus MakeCorpus(std::mt19937_64& rng, size_t n) {
  std::vector<TweetId> ids;
  TweetId id = 1000;
  for (size_t i = 0; i < n; ++i) ids.push_back(id += 1 + rng() % 5);
  for (size_t i = 0; i + 1 < n; ++i) {
    if (rng() % 10 == 0) std::swap(ids[i], ids[i + 1]);  // some tweets arrive out of order
  }
  Corpus corpus;
  for (size_t i = 0; i < n; ++i) {
    std::string text;
    const size_t words = 1 + rng() % 12;
    for (size_t w = 0; w < words; ++w) {
      const double u = std::uniform_real_distribution<double>(0, 1)(rng);
      text += kVocabulary[std::min(kVocabulary.size() - 1,
                                   static_cast<size_t>(std::pow(u, 2.0) * kVocabulary.size()))];
      text += rng() % 7 == 0 ? ", " : " ";
    }
    const uint32_t likes =
        static_cast<uint32_t>(std::pow(2.0, static_cast<double>(rng() % 12))) - 1;
    corpus.docs.push_back(
        index::IndexDoc{ids[i], rng() % 5, kUsers[rng() % kUsers.size()], text,
                        kBaseMillis + static_cast<int64_t>(ids[i] - 1000) * kStepMillis / 3,
                        rng() % 4 ? "en" : "es", likes});
  }
  return corpus;
}

void ExpectSameHits(const std::vector<Hit>& got, const std::vector<Hit>& want,
                    const std::string& context) {
  ASSERT_EQ(got.size(), want.size()) << context;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].id, want[i].id) << context << " rank " << i;
    ASSERT_NEAR(got[i].score, want[i].score, 1e-9) << context << " rank " << i;
    ASSERT_EQ(got[i].likes, want[i].likes) << context;
  }
}

// How often the ranking of a page skipped documents, by sort mode: proof that early
// termination (kNewest) and pruning (kBestMatch, kMostLiked) really ran while the results
// stayed exact.
int g_pruned_pages[3] = {0, 0, 0};
// Segments whose champions alone decided a best-match page (champions.h).
int g_champion_cutoffs = 0;
// Segments whose tier postings alone decided a most-liked page (likes_tiers.h).
int g_tier_cutoffs = 0;
// Segments where best match of three common words passed over a match on one word's text.
int g_triple_walk_cutoffs = 0;
int g_sparse_alternative_cutoffs = 0;
// Segments whose best-match ranking scored the matches their count kept (rank_counted_up_to).
int g_counted_rankings = 0;
// Segments whose newest matches the count kept (newest_from_count).
int g_newest_from_counts = 0;
// Segments counted from the rows of a pair of the query's words (pair_champions.h).
int g_pair_rows_counts = 0;
// Segments passed over as holding two words of every match that never meet there.
int g_never_meeting_segments = 0;
// Sparse alternatives weighed only where the word beside their OR holds them.
int g_held_weighings = 0;
// CheckQuery calls so far: every other one ranks best match by walking the lists alone
// (rank_counted_up_to 0), so that both the walks and the ranking from the count are checked;
// the others cache no counts, or newest first (run first) would leave best match none to
// make, and half of those rank from the count only up to 3 matches (a segment counted in
// full, then walked). Every third weighs a sparse alternative's postings that the word beside
// its OR holds wherever the two seldom meet (weigh_held_from 0), however few.
int g_checks = 0;

// Runs `count` random queries in all sort modes, paging to the end, against the oracle.
// Runs `q` in every sort mode, page after page, against the oracle; counts it in *answered
// if it parses.
void CheckQuery(const index::Index& index, const Oracle& oracle, std::mt19937_64& rng,
                const std::string& q, const std::string& stage, int* answered) {
  const auto snapshot = index.Snapshot();
  absl::StatusOr<Plan> plan = PlanQuery(q, index.analyzer());
  if (!plan.ok()) return;
  ++*answered;
  const bool walk_only = g_checks % 2 == 1;
  const bool counted_then_walked = g_checks % 4 == 2;
  const bool weigh_held = g_checks % 3 == 1;
  ++g_checks;
  for (SortMode sort : {SortMode::kNewest, SortMode::kBestMatch, SortMode::kMostLiked}) {
    SearchOptions options;
    if (walk_only) {
      options.rank_counted_up_to = 0;
      options.newest_from_count = false;
    } else {
      options.cache_counts = false;
      if (counted_then_walked) options.rank_counted_up_to = 3;
    }
    if (weigh_held) options.weigh_held_from = 0;
    options.sort = sort;
    options.limit = static_cast<uint32_t>(1 + rng() % 25);
    options.now_ms = kBaseMillis + 3 * 24 * 3600 * 1000LL;
    options.exact_total = true;  // some corpora pass the default cap
    const CollectionStats stats = ComputeStats(*snapshot, *plan);
    const std::vector<Hit> want = oracle.Run(*plan, sort, stats, options);
    std::vector<Hit> got;
    for (int page = 0; page < 30; ++page) {  // pages beyond 30 add run time, not coverage
      absl::StatusOr<SearchResult> r = Search(*snapshot, *plan, options);
      ASSERT_TRUE(r.ok()) << r.status();
      const size_t remaining = want.size() - std::min(want.size(), got.size());
      const std::string context = stage + " q=[" + q +
                                  "] sort=" + std::to_string(static_cast<int>(sort)) + " page " +
                                  std::to_string(page) + (walk_only ? " (walks only)" : "") +
                                  (counted_then_walked ? " (counted, then walked)" : "");
      // Every match, on every page and in every mode.
      ASSERT_TRUE(r->total_is_exact) << context;
      ASSERT_EQ(r->total_hits, want.size()) << context;
      if (r->pruned) ++g_pruned_pages[static_cast<int>(sort)];
      g_champion_cutoffs += static_cast<int>(r->champion_cutoffs);
      g_tier_cutoffs += static_cast<int>(r->tier_cutoffs);
      g_triple_walk_cutoffs += static_cast<int>(r->triple_walk_cutoffs);
      g_sparse_alternative_cutoffs += static_cast<int>(r->sparse_alternative_cutoffs);
      g_counted_rankings += static_cast<int>(r->counted_rankings);
      g_newest_from_counts += static_cast<int>(r->newest_from_counts);
      g_pair_rows_counts += static_cast<int>(r->pair_rows_counts);
      g_never_meeting_segments += static_cast<int>(r->never_meeting_segments);
      g_held_weighings += static_cast<int>(r->held_weighings);
      ASSERT_EQ(r->hits.size(), std::min<size_t>(options.limit, remaining)) << context;
      got.insert(got.end(), r->hits.begin(), r->hits.end());
      if (r->hits.empty() || got.size() >= want.size()) break;
      options.after = r->hits.back().key;
    }
    const std::vector<Hit> want_prefix(want.begin(),
                                       want.begin() + std::min(want.size(), got.size()));
    if (got.size() < want.size()) {
      ASSERT_EQ(got.size(), 30u * options.limit);
    }
    ExpectSameHits(got, want_prefix,
                   stage + " q=[" + q + "] sort=" + std::to_string(static_cast<int>(sort)));
  }
}

// Runs every query of `queries` (all must parse) with CheckQuery over the index's segments,
// then again after compacting them into one.
void CheckInSegmentsAndCompacted(index::Index& index, const Oracle& oracle, std::mt19937_64& rng,
                                 const std::vector<std::string>& queries) {
  int answered = 0;
  for (const std::string& q : queries) CheckQuery(index, oracle, rng, q, "segments", &answered);
  ASSERT_TRUE(index.Compact().ok());
  for (const std::string& q : queries) CheckQuery(index, oracle, rng, q, "compacted", &answered);
  EXPECT_EQ(answered, 2 * static_cast<int>(queries.size()));
}

// After sealing: of the tweets `pick` selects, deletes one in `delete_one_in` and changes the
// likes of one in `change_one_in` of the rest, to 0–2 or far above every written count (the
// block bounds and tiers keep the likes a row was written with), in the index and the oracle.
template <typename Pick>
void DeleteOrChangeLikes(index::Index& index, Oracle& oracle, std::mt19937_64& rng,
                         const std::vector<index::IndexDoc>& docs, const Pick& pick,
                         uint64_t delete_one_in, uint64_t change_one_in) {
  for (const index::IndexDoc& d : docs) {
    if (!pick(d)) continue;
    if (rng() % delete_one_in == 0) {
      ASSERT_TRUE(index.Delete(d.id).ok());
      oracle.at(d.id).deleted = true;
    } else if (rng() % change_one_in == 0) {
      const uint32_t likes = rng() % 2 ? static_cast<uint32_t>(rng() % 3) : 5000 + rng() % 90000;
      ASSERT_TRUE(index.SetLikes(d.id, likes).ok());
      oracle.at(d.id).doc.likes = likes;
    }
  }
}

void CheckQueries(const index::Index& index, const Oracle& oracle, std::mt19937_64& rng, int count,
                  const std::string& stage) {
  QueryGenerator gen(rng);
  int answered = 0;
  for (int i = 0; i < count; ++i) CheckQuery(index, oracle, rng, gen.Query(), stage, &answered);
  EXPECT_GT(answered, count / 2) << "too many generated queries were rejected";
}

class OracleTest : public ::testing::TestWithParam<uint32_t> {};

TEST_P(OracleTest, SearchEqualsBruteForceThroughTheIndexLifecycle) {
  std::mt19937_64 rng(GetParam());
  std::fill(std::begin(g_pruned_pages), std::end(g_pruned_pages), 0);
  g_counted_rankings = 0;
  index::IndexOptions options;
  options.segment_max_docs = std::vector<uint32_t>{40, 300, 1000}[GetParam() % 3];
  std::unique_ptr<index::Index> index = *index::Index::Create(options);
  Oracle oracle(index->analyzer());
  Corpus corpus = MakeCorpus(rng, 1400);
  // Half one by one, half in batches of random sizes.
  for (size_t i = 0; i < corpus.docs.size();) {
    const size_t n = i < 700 ? 1 : std::min<size_t>(1 + rng() % 300, corpus.docs.size() - i);
    std::span<const index::IndexDoc> batch(corpus.docs.data() + i, n);
    for (const absl::Status& s : index->AddBatch(batch)) ASSERT_TRUE(s.ok()) << s;
    for (const index::IndexDoc& d : batch) oracle.Add(d);
    i += n;
  }
  CheckQueries(*index, oracle, rng, 40, "fresh");

  // Deletes and likes changes, visible at once.
  for (const index::IndexDoc& d : corpus.docs) {
    if (rng() % 8 == 0) {
      ASSERT_TRUE(index->Delete(d.id).ok());
      oracle.at(d.id).deleted = true;
    } else if (rng() % 5 == 0) {
      const uint32_t likes = static_cast<uint32_t>(rng() % 3000);
      ASSERT_TRUE(index->SetLikes(d.id, likes).ok());
      oracle.at(d.id).doc.likes = likes;
    }
  }
  CheckQueries(*index, oracle, rng, 40, "after deletes");

  ASSERT_TRUE(index->Seal().ok());
  ASSERT_TRUE(index->Compact().ok());
  EXPECT_GT(index->Stats().sealed.bitmap_blocks, 0u);  // dense blocks are exercised too
  CheckQueries(*index, oracle, rng, 40, "compacted");

  // More tweets on top of the compacted segment, then save and reload.
  Corpus more = MakeCorpus(rng, 300);
  for (index::IndexDoc& d : more.docs) {
    d.id += 100000;
    ASSERT_TRUE(index->Add(d).ok());
    oracle.Add(d);
  }
  testing::TempDir dir;
  ASSERT_TRUE(index->Seal().ok());
  ASSERT_TRUE(index->Save(dir.path()).ok());
  absl::StatusOr<std::unique_ptr<index::Index>> loaded = index::Index::Open(options, dir.path());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  CheckQueries(**loaded, oracle, rng, 40, "reloaded");

  // Likes changed after the segments were written, some far beyond what they were written
  // with: the block bounds per likes band keep the old likes, so these rows must be found
  // apart from them.
  for (const index::IndexDoc& d : corpus.docs) {
    if (oracle.at(d.id).deleted || rng() % 6 != 0) continue;
    const uint32_t likes = rng() % 2 ? static_cast<uint32_t>(rng() % 5) : 20000 + rng() % 50000;
    ASSERT_TRUE((*loaded)->SetLikes(d.id, likes).ok());
    oracle.at(d.id).doc.likes = likes;
  }
  CheckQueries(**loaded, oracle, rng, 40, "likes changed after reload");

  // The comparisons above prove something only if pruning really ran, and if ANDs were
  // ranked from their counts as well as by walks.
  EXPECT_GT(g_pruned_pages[static_cast<int>(SortMode::kNewest)], 0);
  EXPECT_GT(g_pruned_pages[static_cast<int>(SortMode::kBestMatch)], 0);
  EXPECT_GT(g_counted_rankings, 0);
}

INSTANTIATE_TEST_SUITE_P(Seeds, OracleTest, ::testing::Range(1u, 7u));

// Adds `docs` to the index and the oracle in batches of `batch`.
void AddInBatches(index::Index& index, Oracle& oracle, std::span<const index::IndexDoc> docs,
                  size_t batch) {
  for (size_t i = 0; i < docs.size(); i += batch) {
    std::span<const index::IndexDoc> part = docs.subspan(i, std::min(batch, docs.size() - i));
    for (const absl::Status& s : index.AddBatch(part)) ASSERT_TRUE(s.ok()) << s;
    for (const index::IndexDoc& d : part) oracle.Add(d);
  }
}

// Best-match pruning over block bounds per likes band needs many blocks per list and likes
// spread over every band: 12,000 tweets with power-law likes, in segments of 3,000 and then
// compacted.
TEST(OracleTest, PruningOverLikesBandsOnPowerLawLikes) {
  std::mt19937_64 rng(21);
  std::fill(std::begin(g_pruned_pages), std::end(g_pruned_pages), 0);
  index::IndexOptions options;
  options.segment_max_docs = 3000;
  std::unique_ptr<index::Index> index = *index::Index::Create(options);
  Oracle oracle(index->analyzer());
  Corpus corpus = MakeCorpus(rng, 12000);
  for (index::IndexDoc& d : corpus.docs) d.likes = testing::ParetoLikes(rng);
  AddInBatches(*index, oracle, corpus.docs, 500);
  ASSERT_TRUE(index->Seal().ok());
  CheckQueries(*index, oracle, rng, 30, "segments");
  ASSERT_TRUE(index->Compact().ok());
  CheckQueries(*index, oracle, rng, 30, "compacted");
  EXPECT_GT(g_pruned_pages[static_cast<int>(SortMode::kBestMatch)], 0);
}

// Best match of one scored term walks its windows best bound first, in batches
// (RunWindowsByBound): common words of lists of many blocks, tweets long enough for the
// rounded length codes, words repeated up to seven times (every band term-frequency class),
// power-law likes, with filters and exclusions, in many segments and in one.
TEST(OracleTest, BestMatchOfOneTermByWindowBoundsOnLongRepetitiveTweets) {
  std::mt19937_64 rng(33);
  std::fill(std::begin(g_pruned_pages), std::end(g_pruned_pages), 0);
  index::IndexOptions options;
  options.segment_max_docs = 8000;
  std::unique_ptr<index::Index> index = *index::Index::Create(options);
  Oracle oracle(index->analyzer());
  Corpus corpus = MakeCorpus(rng, 30000);
  for (index::IndexDoc& d : corpus.docs) {
    d.likes = testing::ParetoLikes(rng);
    for (size_t extra = rng() % 50; extra-- > 0;) {  // up to ~60 words
      d.text += " " + kVocabulary[rng() % kVocabulary.size()];
    }
    const std::string& word = kVocabulary[rng() % 8];
    for (size_t repeats = rng() % 4 == 0 ? rng() % 7 : 0; repeats-- > 0;) d.text += " " + word;
  }
  AddInBatches(*index, oracle, corpus.docs, 1000);
  ASSERT_TRUE(index->Seal().ok());
  std::vector<std::string> queries;
  for (size_t w = 0; w < 8; ++w) {
    queries.push_back(kVocabulary[w]);
    queries.push_back(kVocabulary[w] + " lang:en");
    queries.push_back(kVocabulary[w] + " -" + kVocabulary[w + 1] + " min_faves:3");
    queries.push_back(kVocabulary[w] + " from:" + kUsers[w % kUsers.size()]);
  }
  CheckInSegmentsAndCompacted(*index, oracle, rng, queries);
  EXPECT_GT(g_pruned_pages[static_cast<int>(SortMode::kBestMatch)], 0);
}

// Best match over champions (champions.h): lists of more than kChampionMinPostings postings
// in segments of 12,000 tweets, power-law likes, repeated words; likes changed after sealing
// (champions and others, some far beyond every written like count) and deletes; every shape of
// query, paged; in segments and compacted. The champions must have decided some best-match
// pages alone, and the tier postings some most-liked pages of ANDs, phrases and nested shapes.
TEST(OracleTest, BestMatchOverChampionsEqualsBruteForce) {
  std::mt19937_64 rng(45);
  std::fill(std::begin(g_pruned_pages), std::end(g_pruned_pages), 0);
  g_champion_cutoffs = 0;
  g_tier_cutoffs = 0;
  index::IndexOptions options;
  options.segment_max_docs = 12000;
  std::unique_ptr<index::Index> index = *index::Index::Create(options);
  Oracle oracle(index->analyzer());
  Corpus corpus = MakeCorpus(rng, 36000);
  for (index::IndexDoc& d : corpus.docs) {
    d.likes = testing::ParetoLikes(rng);
    const std::string& word = kVocabulary[rng() % 6];
    for (size_t repeats = rng() % 5 == 0 ? rng() % 4 : 0; repeats-- > 0;) d.text += " " + word;
  }
  AddInBatches(*index, oracle, corpus.docs, 2000);
  ASSERT_TRUE(index->Seal().ok());
  DeleteOrChangeLikes(
      *index, oracle, rng, corpus.docs, [](const auto&) { return true; }, 40, 60);
  std::vector<std::string> queries;
  for (size_t w = 0; w < 5; ++w) {
    const std::string& a = kVocabulary[w];
    const std::string& b = kVocabulary[w + 1];
    queries.push_back(a);
    queries.push_back(a + " lang:es");
    queries.push_back(a + " " + b);
    queries.push_back(a + " OR " + b);
    queries.push_back(a + " -" + b);
    queries.push_back("\"" + a + " " + b + "\"");
    queries.push_back("(" + a + " OR " + b + ") " + kVocabulary[w + 2]);
    queries.push_back(a + " OR from:" + kUsers[w]);
  }
  CheckInSegmentsAndCompacted(*index, oracle, rng, queries);
  EXPECT_GT(g_champion_cutoffs, 0);
  EXPECT_GT(g_tier_cutoffs, 0);
}

// Most liked and best match of an AND (of words and ORs of words) whose rarest child (a word,
// or an OR's words together) is sparse (fewer postings than one per 64 tweets) walk every
// match in batches of that child's postings (ForEachSparseAndMatch), and count them on the
// way: rare words in 24,000 tweets with power-law likes, some of their likes changed after
// sealing (far above or below every written count) and some deleted; with exclusions and
// filters; in segments and in one. Best match must have pruned some pages.
TEST(OracleTest, SparseAndsEqualBruteForce) {
  std::mt19937_64 rng(57);
  std::fill(std::begin(g_pruned_pages), std::end(g_pruned_pages), 0);
  index::IndexOptions options;
  options.segment_max_docs = 8000;
  std::unique_ptr<index::Index> index = *index::Index::Create(options);
  Oracle oracle(index->analyzer());
  Corpus corpus = MakeCorpus(rng, 24000);
  for (index::IndexDoc& d : corpus.docs) {
    d.likes = testing::ParetoLikes(rng);
    if (rng() % 120 == 0) d.text += " zulu";
    if (rng() % 90 == 0 || (d.text.ends_with("zulu") && rng() % 3 == 0)) d.text += " yankee";
    if (rng() % 4 == 0) d.text += " xray";
    if (rng() % 300 == 0 || (d.text.find("zulu") != std::string::npos && rng() % 4 == 0)) {
      d.text += " whisky";
    }
    if (rng() % 400 == 0) d.text += " victor";
  }
  AddInBatches(*index, oracle, corpus.docs, 1000);
  ASSERT_TRUE(index->Seal().ok());
  DeleteOrChangeLikes(
      *index, oracle, rng, corpus.docs,
      [](const index::IndexDoc& d) { return d.text.find("zulu") != std::string::npos; }, 10, 6);
  const std::vector<std::string> queries = {
      "zulu yankee", "yankee zulu -xray", "zulu yankee lang:es", "zulu yankee min_faves:3",
      "zulu " + kVocabulary[0], "zulu yankee -" + kVocabulary[1], "zulu xray yankee",
      "(xray OR yankee) zulu", "(" + kVocabulary[0] + " OR xray) zulu -yankee",
      "zulu (yankee OR nowhere) lang:en", "(zulu OR nowhere) yankee",
      // an OR of sparse words leads
      "(zulu OR whisky) xray", "(whisky OR victor) " + kVocabulary[0] + " -xray",
      "(zulu OR victor OR whisky) (yankee OR xray)", "(victor OR whisky) xray lang:en"};
  CheckInSegmentsAndCompacted(*index, oracle, rng, queries);
  EXPECT_GT(g_pruned_pages[static_cast<int>(SortMode::kBestMatch)], 0);
}

// Indexes `tweets` tweets with power-law likes, each extended by `extend`, in segments of
// `segment_tweets`, and seals them; returns the corpus.
template <typename Extend>
Corpus IndexPowerLawTweets(std::mt19937_64& rng, uint32_t tweets, uint32_t segment_tweets,
                           const Extend& extend, std::unique_ptr<index::Index>* index,
                           std::unique_ptr<Oracle>* oracle) {
  index::IndexOptions options;
  options.segment_max_docs = segment_tweets;
  *index = *index::Index::Create(options);
  *oracle = std::make_unique<Oracle>((*index)->analyzer());
  Corpus corpus = MakeCorpus(rng, tweets);
  for (index::IndexDoc& d : corpus.docs) {
    d.likes = testing::ParetoLikes(rng);
    extend(d);
  }
  AddInBatches(**index, **oracle, corpus.docs, 5000);
  EXPECT_TRUE((*index)->Seal().ok());
  return corpus;
}

// Indexes one segment of 200,000 tweets (IndexPowerLawTweets), deletes and changes likes among
// those `pick` selects (DeleteOrChangeLikes), and checks every query of `queries` against
// brute force, each answered.
template <typename Extend, typename Pick>
void CheckOneSealedSegment(std::mt19937_64& rng, const Extend& extend, const Pick& pick,
                           const std::vector<std::string>& queries) {
  std::unique_ptr<index::Index> index;
  std::unique_ptr<Oracle> oracle;
  Corpus corpus = IndexPowerLawTweets(rng, 200000, 200000, extend, &index, &oracle);
  DeleteOrChangeLikes(*index, *oracle, rng, corpus.docs, pick, 20, 10);
  int answered = 0;
  for (const std::string& q : queries) CheckQuery(*index, *oracle, rng, q, "sealed", &answered);
  EXPECT_EQ(answered, static_cast<int>(queries.size()));
}

// Most liked of queries holding a phrase with a word no tweet of the segment holds (such as a
// misspelt word, or a host the tweets hold only as a link): such a phrase matches nothing there,
// so the tier postings still serve the query (TierCovers), as an OR's alternative, an exclusion or
// beside an AND, and must decide some pages; a phrase that can match is walked as before.
// Power-law likes, likes changed after sealing and deletes; in segments and compacted.
TEST(OracleTest, MostLikedOverTierPostingsPassesOverPhrasesThatCannotMatch) {
  std::mt19937_64 rng(97);
  std::unique_ptr<index::Index> index;
  std::unique_ptr<Oracle> oracle;
  Corpus corpus = IndexPowerLawTweets(
      rng, 36000, 12000,
      [&](index::IndexDoc& d) {
        if (rng() % 50 == 0) d.text += " https://site2.example.com/p";
      },
      &index, &oracle);
  DeleteOrChangeLikes(
      *index, *oracle, rng, corpus.docs, [](const auto&) { return true; }, 40, 60);
  const std::string& a = kVocabulary[0];
  const std::string& b = kVocabulary[1];
  const std::vector<std::string> cannot_match = {
      "(" + a + " OR \"zyzzyva " + a + "\") " + b,
      a + " -\"" + b + " zyzzyva\"",
      "\"site2 example.com\" OR " + b,
      a + " \"quux " + b + "\" OR " + b,
  };
  g_tier_cutoffs = 0;
  CheckInSegmentsAndCompacted(*index, *oracle, rng, cannot_match);
  EXPECT_GT(g_tier_cutoffs, 0);
  // A phrase of words the tweets hold, and the host as a URL: walked, and still right.
  CheckInSegmentsAndCompacted(
      *index, *oracle, rng,
      {"\"" + a + " " + b + "\" OR " + kVocabulary[2], a + " OR https://site2.example.com"});
}

// Best match of ORs whose lists are sparse but long enough to have champions (at least 1,024
// postings and fewer than one per 64 tweets: one segment of 200,000 tweets): every champion,
// every posting of a list no longer than champions are (whisky, about 200) and every match of
// two words is offered, then the words' rest bounds must decide some pages alone
// (RunOrChampions); a sparse word or a common one (xray, a pair word) goes over the sparse
// word's champions and xray's repeats instead (RunOrOverRepeats). Power-law likes, likes
// changed after sealing far above and below every written count, deletes.
TEST(OracleTest, BestMatchOfSparseOrsOverChampionsEqualsBruteForce) {
  std::mt19937_64 rng(61);
  g_champion_cutoffs = 0;
  const std::vector<std::string> queries = {"zulu OR yankee", "yankee OR zulu OR xray",
                                            "zulu OR whisky", "whisky OR yankee",
                                            "zulu OR xray",   "xray OR yankee"};
  CheckOneSealedSegment(
      rng,
      [&](index::IndexDoc& d) {
        if (rng() % 80 == 0) d.text += rng() % 4 == 0 ? " zulu zulu" : " zulu";
        if (rng() % 90 == 0) d.text += " yankee";
        if (rng() % 4 == 0) d.text += " xray";
        if (rng() % 1000 == 0) d.text += " whisky";
      },
      [](const index::IndexDoc& d) {
        return d.text.find("zulu") != std::string::npos ||
               d.text.find("yankee") != std::string::npos;
      },
      queries);
  EXPECT_GT(g_champion_cutoffs, 0);
}

// Power-law likes and three common words, often repeated, in a third, a fifth and a tenth of
// 60,000 tweets (zulu, yankee, xray); with `sparse_word`, whisky in about one in 100. Indexed
// in segments of 30,000 and sealed; then deletes and likes changes (DeleteOrChangeLikes) among
// the tweets `pick` selects.
template <typename Pick>
void IndexCommonWords(std::mt19937_64& rng, bool sparse_word, const Pick& pick,
                      std::unique_ptr<index::Index>* index, std::unique_ptr<Oracle>* oracle) {
  index::IndexOptions options;
  options.segment_max_docs = 30000;
  *index = *index::Index::Create(options);
  *oracle = std::make_unique<Oracle>((*index)->analyzer());
  Corpus corpus = MakeCorpus(rng, 60000);
  for (index::IndexDoc& d : corpus.docs) {
    d.likes = testing::ParetoLikes(rng);
    for (const auto& [word, share] : {std::pair{"zulu", 3}, {"yankee", 5}, {"xray", 10}}) {
      if (rng() % share != 0) continue;
      d.text += std::string(" ") + word;
      if (rng() % 6 == 0) d.text += std::string(" ") + word;
    }
    if (sparse_word && rng() % 100 == 0) d.text += " whisky";
    if (sparse_word && rng() % 300 == 0) d.text += " victor";
  }
  AddInBatches(**index, **oracle, corpus.docs, 5000);
  ASSERT_TRUE((*index)->Seal().ok());
  DeleteOrChangeLikes(**index, **oracle, rng, corpus.docs, pick, 20, 10);
}

bool Holds(const index::IndexDoc& d, const char* word) {
  return d.text.find(word) != std::string::npos;
}

// Newest first of ANDs led by a sparse word or a sparse OR of words (fewer postings than one
// per 64 tweets), whose count keeps their newest matches instead of a walk of the lists
// (newest_from_count): pages of 1–25 cut the count's matches at random places, later pages
// walk from their keys, and every other query walks only. Exclusions, filters, deletes and
// likes changed after sealing; in two segments and in one.
TEST(OracleTest, NewestFirstOfSparseAndsFromTheirCountsEqualsBruteForce) {
  std::mt19937_64 rng(79);
  std::unique_ptr<index::Index> index;
  std::unique_ptr<Oracle> oracle;
  IndexCommonWords(
      rng, /*sparse_word=*/true, [](const index::IndexDoc& d) { return Holds(d, "whisky"); },
      &index, &oracle);
  const std::vector<std::string> queries = {"whisky xray",
                                            "zulu whisky -yankee",
                                            "xray whisky lang:en",
                                            "whisky yankee min_faves:2",
                                            "whisky zulu yankee xray",
                                            "(zulu OR yankee) whisky",
                                            "whisky -xray"};
  g_newest_from_counts = 0;
  CheckInSegmentsAndCompacted(*index, *oracle, rng, queries);
  EXPECT_GT(g_newest_from_counts, 0);
  // Led by an OR of two sparse words (whisky in one tweet of 100, victor in one of 300): the
  // count's batches merge their lists (MergedDocs).
  const std::vector<std::string> or_led = {
      "(whisky OR victor) xray", "(victor OR whisky) zulu -yankee",
      "yankee (whisky OR victor) lang:en", "(whisky OR victor) zulu xray min_faves:2"};
  g_newest_from_counts = 0;
  CheckInSegmentsAndCompacted(*index, *oracle, rng, or_led);
  EXPECT_GT(g_newest_from_counts, 0);
}

// Best match of sparse ANDs of middling words, none of them a pair word, with lead points
// (at least 1,024 postings and fewer than one per 64 tweets: one segment of 200,000 tweets):
// a match is bounded on the rarest word's points before the columns while the count is open
// (the first page), and the lead's postings before the other lists are read once the count
// is cached (later pages). Power-law likes, likes changed after sealing far above and below
// every written count, deletes. Fails if either bound is too low (checked).
TEST(OracleTest, BestMatchOfSparseAndsOverLeadPointsEqualsBruteForce) {
  std::mt19937_64 rng(71);
  std::fill(std::begin(g_pruned_pages), std::end(g_pruned_pages), 0);
  const std::vector<std::string> queries = {"whisky victor", "victor whisky -xray",
                                            "whisky victor lang:en", "whisky victor min_faves:3",
                                            "victor whisky tango"};
  CheckOneSealedSegment(
      rng,
      [&](index::IndexDoc& d) {
        const bool whisky = rng() % 100 == 0;
        if (whisky) d.text += rng() % 5 == 0 ? " whisky whisky" : " whisky";
        if (rng() % 150 == 0 || (whisky && rng() % 2 == 0)) d.text += " victor";
        if (rng() % 4 == 0) d.text += " xray";
        if (rng() % 120 == 0) d.text += " tango";
      },
      [](const index::IndexDoc& d) { return Holds(d, "whisky") && Holds(d, "victor"); }, queries);
  EXPECT_GT(g_pruned_pages[static_cast<int>(SortMode::kBestMatch)], 0);
}

// CheckOneSealedSegment over 200,000 tweets: whisky in about one in 90 (a fifth of those
// twice), zulu in a third and yankee in a fifth (pair words, often repeated), and with
// `victor`, victor in one in 400 (not a pair word); with `xray`, xray in one in 12 (a pair
// word, a quarter of those twice); changed likes and deletes among the tweets of whisky and
// zulu (of whisky and xray, with `xray`).
void CheckSparseWordBesidePairWords(std::mt19937_64& rng, bool victor,
                                    const std::vector<std::string>& queries, bool xray = false) {
  CheckOneSealedSegment(
      rng,
      [&](index::IndexDoc& d) {
        if (rng() % 90 == 0) d.text += rng() % 5 == 0 ? " whisky whisky" : " whisky";
        if (rng() % 3 == 0) d.text += rng() % 4 == 0 ? " zulu zulu" : " zulu";
        if (rng() % 5 == 0) d.text += rng() % 3 == 0 ? " yankee yankee yankee" : " yankee";
        if (victor && rng() % 400 == 0) d.text += " victor";
        if (xray && rng() % 12 == 0) d.text += rng() % 4 == 0 ? " xray xray" : " xray";
      },
      [xray](const index::IndexDoc& d) {
        return Holds(d, "whisky") && Holds(d, xray ? "xray" : "zulu");
      },
      queries);
}

// Best match of sparse ANDs whose rarest word has champions, beside common words, over the
// common words' repeats (RunSparseAndChampions): one segment of 200,000 tweets, whisky in
// about one in 90 (1,024 postings or more, fewer than one per 64 tweets, so it has champions
// and leads), zulu and yankee common and often repeated (pair words, with repeats). The
// lead's champions, then its postings among the repeats, then the rest's skyline with the
// common words once must decide some pages alone; others walk the rest. Power-law likes,
// likes changed after sealing far above and below every written count, deletes among the
// matches.
TEST(OracleTest, BestMatchOfSparseAndsOverChampionsAndRepeatsEqualsBruteForce) {
  std::mt19937_64 rng(63);
  g_champion_cutoffs = 0;
  const std::vector<std::string> queries = {"whisky zulu",
                                            "zulu whisky -yankee",
                                            "whisky zulu yankee",
                                            "yankee whisky lang:en",
                                            "whisky zulu min_faves:3",
                                            "whisky yankee from:" + kUsers[0],
                                            "whisky " + kVocabulary[0]};
  CheckSparseWordBesidePairWords(rng, /*victor=*/false, queries);
  EXPECT_GT(g_champion_cutoffs, 0);
}

// The same over a sparse word beside an OR of common words (`whisky (zulu OR yankee)`): the
// OR's commonest pair word (zulu) bounds a match as if the tweet held it, at frequency 1
// outside its repeats; its other alternatives (yankee, and victor, not a pair word) are
// looked up: the lead's postings they hold are offered on their own bound, and the others get
// none of their text. Fails if the postings they hold get none either, and if yankee's get
// none outside its repeats (both checked). An OR rarer than the lead goes to the sparse AND's
// walk.
TEST(OracleTest, BestMatchOfSparseAndsBesideOrsOverChampionsAndRepeatsEqualsBruteForce) {
  std::mt19937_64 rng(65);
  g_champion_cutoffs = 0;
  const std::vector<std::string> queries = {
      "whisky (zulu OR yankee)",         "(yankee OR zulu) whisky -victor",
      "whisky (zulu OR yankee) lang:en", "(zulu OR yankee) whisky min_faves:3",
      "whisky (zulu OR victor)",         "whisky (yankee OR from:" + kUsers[0] + ")",
      "zulu (whisky OR victor)"};
  CheckSparseWordBesidePairWords(rng, /*victor=*/true, queries);
  EXPECT_GT(g_champion_cutoffs, 0);
}

// The same where the word beside the OR seldom holds the sparse alternative (xray, a pair
// word in about one tweet in 12, fewer than one in 8 of whisky's): whisky's postings are
// weighed only where xray holds them (SearchOptions::weigh_held_from, 0 in every third check
// here), else offered one by one, with the same results. Fails if the postings weighed are
// not exactly those xray holds (checked).
TEST(OracleTest, BestMatchOfAnOrWithASparseAlternativeSeldomBesideItsWordEqualsBruteForce) {
  std::mt19937_64 rng(103);
  g_held_weighings = 0;
  const std::vector<std::string> queries = {"(whisky OR zulu) xray",
                                            "(zulu OR whisky) xray -victor",
                                            "(whisky OR victor OR yankee) xray",
                                            "xray (whisky OR zulu) lang:en",
                                            "(whisky OR yankee) xray min_faves:3",
                                            "(yankee OR whisky) xray from:" + kUsers[0]};
  CheckSparseWordBesidePairWords(rng, /*victor=*/true, queries, /*xray=*/true);
  EXPECT_GT(g_held_weighings, 0);
}

// The same where every alternative is sparse and seldom beside the word, but not the OR as
// a whole (whisky in about one in 90 tweets, victor in one in 100, together above one in 64;
// xray in one in 12): every match would be offered, so the count the segment owes keeps them
// and they are ranked from it (RankCountedBestMatch), not looked up in xray's list again.
// Fails if that ranking does not run (counted).
TEST(OracleTest, BestMatchOfAnOrOfSparseAlternativesRankedFromItsCountEqualsBruteForce) {
  std::mt19937_64 rng(107);
  g_counted_rankings = 0;
  const std::vector<std::string> queries = {
      "(whisky OR victor) xray", "(victor OR whisky) xray -" + kVocabulary[0],
      "xray (whisky OR victor) lang:en", "(whisky OR victor) xray min_faves:3",
      "(whisky OR victor) xray -zulu"};
  CheckOneSealedSegment(
      rng,
      [&](index::IndexDoc& d) {
        if (rng() % 90 == 0) d.text += rng() % 5 == 0 ? " whisky whisky" : " whisky";
        if (rng() % 100 == 0) d.text += " victor";
        if (rng() % 3 == 0) d.text += rng() % 4 == 0 ? " zulu zulu" : " zulu";
        if (rng() % 12 == 0) d.text += rng() % 4 == 0 ? " xray xray" : " xray";
      },
      [](const index::IndexDoc& d) {
        return (Holds(d, "whisky") || Holds(d, "victor")) && Holds(d, "xray");
      },
      queries);
  EXPECT_GT(g_counted_rankings, 0);
}

// Best match of two common words (`a b`, with filters and exclusions, and `a OR b`) over
// their pair champions (RunPairChampions): three words in a third to a tenth of 60,000
// tweets, often repeated, power-law likes; some of the pairs' matches deleted and some likes
// changed after sealing, far above and below every written count; in two segments and in
// one. The pairs' rest bounds must decide some pages alone (no query here has one scored
// word, and no OR here has a sparse word, so no other champions can).
TEST(OracleTest, BestMatchOfCommonPairsOverPairChampionsEqualsBruteForce) {
  std::mt19937_64 rng(67);
  g_champion_cutoffs = 0;
  std::unique_ptr<index::Index> index;
  std::unique_ptr<Oracle> oracle;
  IndexCommonWords(
      rng, /*sparse_word=*/false,
      [](const index::IndexDoc& d) { return Holds(d, "zulu") && Holds(d, "yankee"); }, &index,
      &oracle);
  const std::vector<std::string> queries = {"zulu yankee",
                                            "yankee zulu -xray",
                                            "xray zulu lang:es",
                                            "zulu yankee min_faves:3",
                                            "yankee xray from:" + kUsers[0],
                                            "zulu OR yankee",
                                            "xray OR zulu"};
  CheckInSegmentsAndCompacted(*index, *oracle, rng, queries);
  EXPECT_GT(g_champion_cutoffs, 0);
}

// Best match of `(a OR b) c` over the pair champions of each common alternative with c
// (RunOrAndChampions): the corpus above with a sparse word (whisky, about 300 tweets per
// segment of 30,000, below one in 64); every match holding it or two common alternatives
// is offered, the matches of two common alternatives are walked over the lists' bits
// (WalkThreeWords, some passed over on one word's text), and the pairs' rest bounds must
// decide some pages alone. Deletes and likes
// changed after sealing among the matches of two words; in two segments and in one.
TEST(OracleTest, BestMatchOfAnOrAndACommonWordOverPairChampionsEqualsBruteForce) {
  std::mt19937_64 rng(69);
  g_champion_cutoffs = 0;
  std::unique_ptr<index::Index> index;
  std::unique_ptr<Oracle> oracle;
  IndexCommonWords(
      rng, /*sparse_word=*/true,
      [](const index::IndexDoc& d) {
        return Holds(d, "xray") && (Holds(d, "zulu") || Holds(d, "whisky"));
      },
      &index, &oracle);
  const std::vector<std::string> queries = {"(zulu OR yankee) xray",
                                            "(whisky OR zulu) xray",
                                            "(whisky OR yankee OR zulu) xray -" + kVocabulary[0],
                                            "xray (yankee OR whisky) lang:en",
                                            "(xray OR yankee) zulu min_faves:2",
                                            "(zulu OR yankee OR xray) " + kVocabulary[0]};
  g_triple_walk_cutoffs = 0;
  g_counted_rankings = 0;
  CheckInSegmentsAndCompacted(*index, *oracle, rng, queries);
  EXPECT_GT(g_champion_cutoffs, 0);
  EXPECT_GT(g_triple_walk_cutoffs, 0);
  EXPECT_GT(g_counted_rankings, 0);
}

// The same where a sparse alternative has champions (whisky, one tweet in 90 of one segment of
// 200,000; victor, one in 400, has none): its matches with the common word are weighed as the
// sparse AND of the two (its champions, its postings among the common word's repeats or
// holding another alternative, looked up), and its other postings' rest bound must pass over
// them on some pages; victor's matches are all offered. Fails if a posting holding another
// alternative gets none of its text, and if the common word's text outside its repeats is
// left out of the rest bound (both checked).
TEST(OracleTest, BestMatchOfAnOrWithASparseAlternativeOverItsChampionsEqualsBruteForce) {
  std::mt19937_64 rng(101);
  g_sparse_alternative_cutoffs = 0;
  const std::vector<std::string> queries = {"(whisky OR zulu) yankee",
                                            "(zulu OR whisky) yankee -victor",
                                            "(whisky OR zulu OR victor) yankee",
                                            "yankee (whisky OR zulu) lang:en",
                                            "(whisky OR yankee) zulu min_faves:3",
                                            "(yankee OR whisky) zulu from:" + kUsers[0]};
  CheckSparseWordBesidePairWords(rng, /*victor=*/true, queries);
  EXPECT_GT(g_sparse_alternative_cutoffs, 0);
}

// Best match of three common words whose every two form a pair (RunTripleOfPairs): the
// corpus above; the three pairs' champions are offered, then every match of the three is met
// over the lists' bits, and most are passed over on the rarest word's text and the most the
// other two can add. Filters, exclusions, deletes and likes changed after sealing among the
// matches of the three; in two segments and in one.
TEST(OracleTest, BestMatchOfThreeCommonWordsOverTheirPairsEqualsBruteForce) {
  std::mt19937_64 rng(73);
  g_triple_walk_cutoffs = 0;
  std::unique_ptr<index::Index> index;
  std::unique_ptr<Oracle> oracle;
  IndexCommonWords(
      rng, /*sparse_word=*/false,
      [](const index::IndexDoc& d) {
        return Holds(d, "xray") && Holds(d, "zulu") && Holds(d, "yankee");
      },
      &index, &oracle);
  const std::vector<std::string> queries = {
      "zulu yankee xray", "xray zulu yankee -" + kVocabulary[0], "yankee xray zulu lang:en",
      "zulu xray yankee min_faves:3", "xray yankee zulu from:" + kUsers[1]};
  g_counted_rankings = 0;
  CheckInSegmentsAndCompacted(*index, *oracle, rng, queries);
  EXPECT_GT(g_triple_walk_cutoffs, 0);
  EXPECT_GT(g_counted_rankings, 0);
}

// The same where a third of the tweets are the three words and at most two more (some
// repeating one of them): their text differs little, so their likes decide the top k, and the
// walk's bound for a range of matches that repeat none of the words (the least length a match
// can have, the range's largest likes) is close to the k-th score. Checks the walk's bounds on
// repeating matches (their frequencies, length and band read a window at a time) and on those
// ranges.
TEST(OracleTest, BestMatchOfThreeCommonWordsInShortTweetsEqualsBruteForce) {
  std::mt19937_64 rng(83);
  g_triple_walk_cutoffs = 0;
  index::IndexOptions options;
  options.segment_max_docs = 30000;
  std::unique_ptr<index::Index> index = *index::Index::Create(options);
  auto oracle = std::make_unique<Oracle>(index->analyzer());
  Corpus corpus = MakeCorpus(rng, 60000);
  const std::array<std::string, 3> words = {"zulu", "yankee", "xray"};
  for (index::IndexDoc& d : corpus.docs) {
    d.likes = testing::ParetoLikes(rng);
    if (rng() % 3 != 0) {
      if (rng() % 4 == 0) d.text += " " + words[rng() % 3];
      continue;
    }
    std::array<std::string, 3> order = words;
    std::shuffle(order.begin(), order.end(), rng);
    d.text = order[0] + " " + order[1] + " " + order[2];
    if (rng() % 5 == 0) d.text += " " + words[rng() % 3];
    for (size_t extra = rng() % 3; extra > 0; --extra)
      d.text += " " + kVocabulary[rng() % kVocabulary.size()];
  }
  AddInBatches(*index, *oracle, corpus.docs, 5000);
  ASSERT_TRUE(index->Seal().ok());
  DeleteOrChangeLikes(
      *index, *oracle, rng, corpus.docs,
      [](const index::IndexDoc& d) { return Holds(d, "xray") && Holds(d, "zulu"); }, 20, 10);
  const std::vector<std::string> queries = {
      "zulu yankee xray", "xray zulu yankee -" + kVocabulary[3], "yankee xray zulu lang:en",
      "zulu xray yankee min_faves:3"};
  CheckInSegmentsAndCompacted(*index, *oracle, rng, queries);
  EXPECT_GT(g_triple_walk_cutoffs, 0);
}

// ANDs holding two common words that seldom meet (amber, cobalt and scarlet each in a sixth of
// 60,000 tweets, each two of them together in about one tweet in 180: rows of more than one
// block in a segment), whose pairs keep their rows (kPairRowsShare): the count reads the rows
// of the rarest such pair in place of its two lists, beside a third word, an OR, exclusions
// and filters. Deletes and likes changed after sealing among those rows; in two segments and
// in one. Every sort mode, page and total equals brute force, and some counts must have read
// a pair's rows; so must some of ORs of those words beside another (the union of the pairs'
// rows), and of ORs of those words and a sparse one (quartz).
TEST(OracleTest, AndsOfWordsThatSeldomMeetAreCountedFromTheirPairsRows) {
  std::mt19937_64 rng(89);
  const std::array<std::string, 3> topics = {"amber", "cobalt", "scarlet"};
  std::unique_ptr<index::Index> index;
  std::unique_ptr<Oracle> oracle;
  Corpus corpus = IndexPowerLawTweets(
      rng, 60000, 30000,
      [&](index::IndexDoc& d) {
        if (rng() % 2 == 0) d.text += " " + topics[rng() % 3];
        if (rng() % 20 == 0) d.text += " " + topics[rng() % 3];
        if (rng() % 3 == 0) d.text += " zulu";
        if (rng() % 5 == 0) d.text += " yankee";
        if (rng() % 200 == 0) d.text += " quartz";  // sparse: a few hundred tweets
      },
      &index, &oracle);
  const auto pairs = index->Snapshot()->segments.front()->pair_champions();
  ASSERT_NE(pairs, nullptr);
  bool swapped = false;
  const index::PairChampionList* pair = pairs->Find("amber", "cobalt", &swapped);
  ASSERT_NE(pair, nullptr);
  ASSERT_TRUE(pair->rows.has_value());
  EXPECT_EQ(pair->rows->size(), pair->matches);
  ASSERT_FALSE(pairs->Find("amber", "zulu", &swapped)->rows.has_value());
  DeleteOrChangeLikes(
      *index, *oracle, rng, corpus.docs,
      [&](const index::IndexDoc& d) {
        return std::count_if(topics.begin(), topics.end(),
                             [&](const std::string& t) { return Holds(d, t.c_str()); }) >= 2;
      },
      5, 3);
  const std::vector<std::string> queries = {"amber cobalt",
                                            "cobalt amber zulu",
                                            "amber zulu scarlet -yankee",
                                            "scarlet cobalt (zulu OR yankee)",
                                            "amber cobalt scarlet",
                                            "zulu amber scarlet lang:en",
                                            "cobalt scarlet min_faves:3",
                                            "amber cobalt from:" + kUsers[2],
                                            "(amber scarlet) OR (cobalt yankee zulu)"};
  g_pair_rows_counts = 0;
  CheckInSegmentsAndCompacted(*index, *oracle, rng, queries);
  EXPECT_GT(g_pair_rows_counts, 0);
  // An OR whose every word makes rows with a term of the AND: counted from their union.
  const std::vector<std::string> ors = {
      "(amber OR cobalt) scarlet", "(cobalt OR scarlet) amber -zulu",
      "(amber OR scarlet) cobalt yankee", "(amber OR zulu) cobalt"};
  g_pair_rows_counts = 0;
  CheckInSegmentsAndCompacted(*index, *oracle, rng, ors);
  EXPECT_GT(g_pair_rows_counts, 0);
  // An OR of such words and a sparse one: the sparse word's postings that the term's list
  // holds join the union.
  const std::vector<std::string> with_sparse = {
      "(amber OR quartz) cobalt", "(quartz OR scarlet) amber -zulu",
      "(cobalt OR quartz OR scarlet) amber yankee", "(scarlet OR quartz) cobalt min_faves:2"};
  g_pair_rows_counts = 0;
  CheckInSegmentsAndCompacted(*index, *oracle, rng, with_sparse);
  EXPECT_GT(g_pair_rows_counts, 0);
}

// Best match of ANDs of common words ranked from their counts (rank_counted_up_to): with the
// limit at 0 or below a segment's matches (about 500 and 1,900 here, in one segment of 30,000
// tweets) the lists are walked, the counter having stopped keeping matches past the limit;
// with the default limit the pages are ranked from the count. Each way every page equals
// brute force. Deletes and likes changed after sealing among the matches.
TEST(OracleTest, AnAndIsRankedFromItsCountOnlyWhereItsMatchesFitTheLimit) {
  std::mt19937_64 rng(77);
  std::unique_ptr<index::Index> index;
  std::unique_ptr<Oracle> oracle;
  Corpus corpus = IndexPowerLawTweets(
      rng, 30000, 30000,
      [&](index::IndexDoc& d) {
        if (rng() % 3 == 0) d.text += rng() % 4 == 0 ? " zulu zulu" : " zulu";
        if (rng() % 5 == 0) d.text += " yankee";
        if (rng() % 4 == 0) d.text += rng() % 3 == 0 ? " xray xray xray" : " xray";
      },
      &index, &oracle);
  DeleteOrChangeLikes(
      *index, *oracle, rng, corpus.docs, [](const index::IndexDoc& d) { return Holds(d, "xray"); },
      20, 10);
  const auto snapshot = index->Snapshot();
  const std::vector<std::string> queries = {
      "zulu yankee xray", "(zulu OR yankee) xray -" + kVocabulary[0], "xray zulu lang:en"};
  for (const std::string& q : queries) {
    absl::StatusOr<Plan> plan = PlanQuery(q, index->analyzer());
    ASSERT_TRUE(plan.ok()) << plan.status();
    for (const size_t limit : {size_t{0}, size_t{10}, kTrackTotalHitsUpTo}) {
      SearchOptions options;
      options.sort = SortMode::kBestMatch;
      options.now_ms = kBaseMillis + 3 * 24 * 3600 * 1000LL;
      options.exact_total = true;
      options.cache_counts = false;  // every page counts, so every page may rank from it
      options.rank_counted_up_to = limit;
      const std::vector<Hit> want =
          oracle->Run(*plan, SortMode::kBestMatch, ComputeStats(*snapshot, *plan), options);
      const std::string context = q + " limit " + std::to_string(limit);
      ASSERT_GT(want.size(), 100u) << context;
      std::vector<Hit> got;
      int pages = 0, counted = 0;
      while (got.size() < want.size() && pages < 200) {
        absl::StatusOr<SearchResult> r = Search(*snapshot, *plan, options);
        ASSERT_TRUE(r.ok()) << r.status();
        ASSERT_EQ(r->total_hits, want.size()) << context;
        ++pages;
        counted += static_cast<int>(r->counted_rankings);
        if (r->hits.empty()) break;
        got.insert(got.end(), r->hits.begin(), r->hits.end());
        options.after = r->hits.back().key;
      }
      ExpectSameHits(got, want, context);
      // (A page that a pair's champions decide alone counts nothing before CountTotal.)
      EXPECT_EQ(counted > 0, limit >= want.size()) << context;
    }
  }
}

// Common words two of which never meet (zulu, yankee and whisky, each in about a third of
// 60,000 tweets, never two together): no pair of them is missing, but their pairs have no
// match, so a segment has none for an AND of two of them, or of one and an OR of the others
// (TwoWordsNeverMeet), in every sort mode; totals zero. The counts of an OR of them beside a
// word they do meet equal brute force too.
TEST(OracleTest, CommonWordsTwoOfWhichNeverMeetMatchNothing) {
  std::mt19937_64 rng(75);
  std::unique_ptr<index::Index> index;
  std::unique_ptr<Oracle> oracle;
  IndexPowerLawTweets(
      rng, 60000, 30000,
      [&](index::IndexDoc& d) {
        const uint64_t pick = rng() % 3;
        if (pick == 0) d.text += rng() % 5 == 0 ? " zulu zulu" : " zulu";
        if (pick == 1) d.text += " yankee";
        if (pick == 2) d.text += " whisky";
        if (rng() % 4 == 0) d.text += " xray";
      },
      &index, &oracle);
  const std::vector<std::string> queries = {"zulu yankee xray",
                                            "xray yankee zulu -whisky",
                                            "zulu yankee",
                                            "yankee zulu lang:en",
                                            "(yankee OR whisky) zulu",
                                            "xray (zulu OR yankee) whisky -a",
                                            "(yankee OR xray) zulu",
                                            "zulu xray",
                                            "yankee OR zulu"};
  g_never_meeting_segments = 0;
  CheckInSegmentsAndCompacted(*index, *oracle, rng, queries);
  EXPECT_GT(g_never_meeting_segments, 0);
  // Only an OR none of whose words meets the word: passed over in every segment.
  g_never_meeting_segments = 0;
  CheckInSegmentsAndCompacted(*index, *oracle, rng, {"(yankee OR whisky) zulu"});
  EXPECT_GT(g_never_meeting_segments, 0);
}

// Totals of ANDs of two common words, whose lower bound (the rows both hold, less the
// segment's deletes) comes from their pair champions: 40,000 tweets, two words in about half
// of them (about 10,000 matches, around the default cap of 10,000), a third in a quarter;
// some deleted; the cap must hold exactly, with and without deletes and watermarks.
TEST(OracleTotalsTest, TotalsOfCommonPairsEqualBruteForce) {
  std::mt19937_64 rng(71);
  index::IndexOptions options;
  options.segment_max_docs = 40000;
  std::unique_ptr<index::Index> index = *index::Index::Create(options);
  Oracle oracle(index->analyzer());
  Corpus corpus = MakeCorpus(rng, 40000);
  std::vector<TweetId> ids;
  for (index::IndexDoc& d : corpus.docs) {
    if (rng() % 2 == 0) d.text += " zulu";
    if (rng() % 2 == 0) d.text += " yankee";
    if (rng() % 4 == 0) d.text += " xray";
    ids.push_back(d.id);
  }
  AddInBatches(*index, oracle, corpus.docs, 5000);
  ASSERT_TRUE(index->Seal().ok());
  ASSERT_NE(index->Snapshot()->segments.front()->pair_champions(), nullptr);
  const std::vector<std::string> queries = {"zulu yankee", "yankee zulu", "zulu xray",
                                            "xray yankee lang:en", "zulu yankee -xray"};
  auto check = [&](const std::string& stage) {
    const auto snapshot = index->Snapshot();
    for (const std::string& q : queries) {
      for (int round = 0; round < 4; ++round) {
        absl::StatusOr<Plan> plan = PlanQuery(q, index->analyzer());
        ASSERT_TRUE(plan.ok());
        SearchOptions options;
        options.sort = static_cast<SortMode>(round % 3);
        if (round == 3) options.watermark = ids[rng() % ids.size()];
        const uint64_t want = oracle.Count(*plan, options.watermark);
        const std::string context = stage + " q=[" + q + "] round " + std::to_string(round);
        absl::StatusOr<SearchResult> r = Search(*snapshot, *plan, options);
        ASSERT_TRUE(r.ok()) << r.status();
        ASSERT_EQ(r->total_is_exact, want <= kTrackTotalHitsUpTo) << context;
        ASSERT_EQ(r->total_hits, std::min(want, kTrackTotalHitsUpTo)) << context;
      }
    }
  };
  check("sealed");
  // Deletes among the matches: the bound must fall below the cap before the count does.
  for (const index::IndexDoc& d : corpus.docs) {
    if (rng() % 40 == 0) {
      ASSERT_TRUE(index->Delete(d.id).ok());
      oracle.at(d.id).deleted = true;
    }
  }
  check("deleted");
}

// Compares exact totals (exact_total, and the default cap) with the brute-force count.
void CheckTotals(const index::Index& index, const Oracle& oracle, std::mt19937_64& rng,
                 const std::vector<TweetId>& ids, const std::string& stage) {
  QueryGenerator gen(rng);
  const auto snapshot = index.Snapshot();
  std::vector<std::string> queries = {"zulu",
                                      "zulu alpha",
                                      "alpha zulu -bravo",
                                      "zulu OR cats",
                                      "\"alpha bravo\" zulu",
                                      "zulu -alpha",
                                      "cats OR zulu -the"};
  while (queries.size() < 40) queries.push_back(gen.Query());
  for (const std::string& q : queries) {
    absl::StatusOr<Plan> plan = PlanQuery(q, index.analyzer());
    if (!plan.ok()) continue;
    SearchOptions options;
    options.sort = static_cast<SortMode>(rng() % 3);
    options.exact_total = true;
    if (rng() % 3 == 0) options.watermark = ids[rng() % ids.size()];
    const uint64_t want = oracle.Count(*plan, options.watermark);
    const std::string context =
        stage + " q=[" + q + "] watermark " + std::to_string(options.watermark);
    absl::StatusOr<SearchResult> r = Search(*snapshot, *plan, options);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->total_is_exact) << context;
    ASSERT_EQ(r->total_hits, want) << context;
    options.exact_total = false;
    r = Search(*snapshot, *plan, options);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->total_is_exact, want <= kTrackTotalHitsUpTo) << context;
    ASSERT_EQ(r->total_hits, std::min(want, kTrackTotalHitsUpTo)) << context;
  }
}

// 40,000 tweets in segments of up to 15,000 (several counting windows each), one in 1,500
// holding the rare word "zulu" and one in 8 deleted once indexed; `edit` may change each tweet
// before it is indexed. *ids are the tweets' ids.
template <typename Edit>
void IndexManyWindows(std::mt19937_64& rng, const Edit& edit, std::unique_ptr<index::Index>* index,
                      std::unique_ptr<Oracle>* oracle, std::vector<TweetId>* ids) {
  index::IndexOptions options;
  options.segment_max_docs = 15000;
  *index = *index::Index::Create(options);
  *oracle = std::make_unique<Oracle>((*index)->analyzer());
  Corpus corpus = MakeCorpus(rng, 40000);
  for (index::IndexDoc& d : corpus.docs) {
    if (rng() % 1500 == 0) d.text += " zulu";
    edit(d);
    ids->push_back(d.id);
    (*oracle)->Add(d);
  }
  for (size_t i = 0; i < corpus.docs.size(); i += 1000) {
    std::span<const index::IndexDoc> batch(corpus.docs.data() + i,
                                           std::min<size_t>(1000, corpus.docs.size() - i));
    for (const absl::Status& s : (*index)->AddBatch(batch)) ASSERT_TRUE(s.ok()) << s;
  }
  for (const index::IndexDoc& d : corpus.docs) {
    if (rng() % 8 == 0) {
      ASSERT_TRUE((*index)->Delete(d.id).ok());
      (*oracle)->at(d.id).deleted = true;
    }
  }
}

// Totals are counted over bitmaps of DocId windows (counter.h): a corpus large enough for
// several windows per segment, with a rare word whose windows are far apart.
TEST(OracleTotalsTest, TotalsEqualBruteForceAcrossManyWindows) {
  std::mt19937_64 rng(11);
  std::unique_ptr<index::Index> index;
  std::unique_ptr<Oracle> oracle;
  std::vector<TweetId> ids;
  ASSERT_NO_FATAL_FAILURE(IndexManyWindows(
      rng, [](index::IndexDoc&) {}, &index, &oracle, &ids));
  CheckTotals(*index, *oracle, rng, ids, "as indexed");
  ASSERT_TRUE(index->Seal().ok());
  ASSERT_TRUE(index->Compact().ok());
  ASSERT_EQ(index->Stats().sealed_segments, 1u);
  CheckTotals(*index, *oracle, rng, ids, "compacted");
}

// Compares counts over time with the brute-force counts per bucket: buckets of an hour, a day,
// a week and an odd width, starting before, inside and after the corpus.
void CheckCountsOverTime(const index::Index& index, const Oracle& oracle, std::mt19937_64& rng,
                         int64_t first_ms, int64_t last_ms, const std::string& stage) {
  QueryGenerator gen(rng);
  const auto snapshot = index.Snapshot();
  std::vector<std::string> queries = {"zulu",
                                      "the",
                                      "cats OR zulu",
                                      "the -cats",
                                      "\"alpha bravo\"",
                                      "the since:2009-05-01 until:2009-06-01"};
  while (queries.size() < 30) queries.push_back(gen.Query());
  const int64_t widths[] = {3'600'000, 86'400'000, 7 * 86'400'000, 7 * 60'000 + 13};
  uint64_t counted = 0;
  for (const std::string& q : queries) {
    absl::StatusOr<Plan> plan = PlanQuery(q, index.analyzer());
    if (!plan.ok()) continue;
    TimeBuckets buckets;
    buckets.width_ms = widths[rng() % 4];
    const int64_t span = last_ms - first_ms;
    buckets.start_ms = first_ms - span / 10 + static_cast<int64_t>(rng() % (span + span / 5));
    buckets.count = static_cast<uint32_t>(
        1 + rng() % std::min<int64_t>(kMaxTimeBuckets, span / buckets.width_ms + 2));
    const std::vector<uint64_t> want = oracle.CountByTime(*plan, buckets);
    absl::StatusOr<std::vector<uint64_t>> got = CountOverTime(*snapshot, *plan, buckets);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(*got, want) << stage << " q=[" << q << "] start " << buckets.start_ms << " width "
                          << buckets.width_ms << " count " << buckets.count;
    for (uint64_t n : want) counted += n;
  }
  EXPECT_GT(counted, 1000u) << "the buckets should hold matches";
}

// Counts over time read the column tweet by tweet only in 64-tweet ranges whose created_at
// bounds straddle a bucket boundary: tweets are written out of time order (and some with a
// created_at far from their id's), so ranges straddle and segments overlap in time.
TEST(OracleCountsTest, CountsOverTimeEqualBruteForce) {
  std::mt19937_64 rng(5);
  int64_t first_ms = std::numeric_limits<int64_t>::max(), last_ms = 0;
  std::unique_ptr<index::Index> index;
  std::unique_ptr<Oracle> oracle;
  std::vector<TweetId> ids;
  // One tweet in 20 is stamped an hour before to 198 hours after its id's time.
  auto shift = [&](index::IndexDoc& d) {
    if (rng() % 20 == 0) d.created_at_ms += (static_cast<int64_t>(rng() % 200) - 1) * 3'600'000;
    first_ms = std::min(first_ms, d.created_at_ms);
    last_ms = std::max(last_ms, d.created_at_ms);
  };
  ASSERT_NO_FATAL_FAILURE(IndexManyWindows(rng, shift, &index, &oracle, &ids));
  CheckCountsOverTime(*index, *oracle, rng, first_ms, last_ms, "as indexed");
  ASSERT_TRUE(index->Seal().ok());
  ASSERT_TRUE(index->Compact().ok());
  ASSERT_EQ(index->Stats().sealed_segments, 1u);
  CheckCountsOverTime(*index, *oracle, rng, first_ms, last_ms, "compacted");

  // Refused: no buckets, too many, a width that is not positive.
  const auto snapshot = index->Snapshot();
  const Plan plan = *PlanQuery("the", index->analyzer());
  for (TimeBuckets bad : {TimeBuckets{0, 60'000, 0}, TimeBuckets{0, 60'000, kMaxTimeBuckets + 1},
                          TimeBuckets{0, 0, 10}, TimeBuckets{0, -60'000, 10},
                          TimeBuckets{0, 400 * int64_t{86'400'000}, 10},
                          TimeBuckets{std::numeric_limits<int64_t>::max() - 5, 60'000, 10},
                          TimeBuckets{std::numeric_limits<int64_t>::min(), 60'000, 10}}) {
    EXPECT_TRUE(absl::IsInvalidArgument(CountOverTime(*snapshot, plan, bad).status()));
  }
}

// Streams match each new tweet alone (doc_matcher.h): the same tweets as the searcher, for
// every query of the language, and every match holds one of the query's anchor terms (the
// terms a stream's query is filed under).
TEST(OracleTest, OneTweetMatcherAgreesWithTheSearcher) {
  std::mt19937_64 rng(11);
  index::IndexOptions options;
  options.segment_max_docs = 700;
  auto index = *index::Index::Create(options);
  const Corpus corpus = MakeCorpus(rng, 3000);
  std::vector<AnalyzedTweet> analyzed;
  for (const index::IndexDoc& d : corpus.docs) {
    ASSERT_TRUE(index->Add(d).ok());
    analyzed.push_back(*AnalyzedTweet::Make(d, index->analyzer()));
  }
  const auto snapshot = index->Snapshot();
  QueryGenerator gen(rng);
  int answered = 0, nonempty = 0;
  for (int i = 0; i < 300; ++i) {
    const std::string q = gen.Query();
    absl::StatusOr<Plan> plan = PlanQuery(q, index->analyzer());
    if (!plan.ok()) continue;
    ++answered;
    SearchOptions search;
    search.sort = SortMode::kNewest;
    search.limit = kMaxLimit;
    std::set<TweetId> want;
    for (;;) {
      absl::StatusOr<SearchResult> r = Search(*snapshot, *plan, search);
      ASSERT_TRUE(r.ok()) << r.status();
      for (const Hit& h : r->hits) want.insert(h.id);
      if (r->hits.size() < search.limit) break;
      search.after = r->hits.back().key;
    }
    const CollectionStats stats = ComputeStats(*snapshot, *plan);
    auto df = [&](std::string_view term) -> uint64_t {
      auto it = stats.doc_freq.find(AsAbsl(term));
      return it == stats.doc_freq.end() ? 0 : it->second;
    };
    const std::vector<std::string> anchors = AnchorTerms(plan->root, df);
    std::set<TweetId> got;
    for (size_t j = 0; j < corpus.docs.size(); ++j) {
      if (!Matches(*plan, analyzed[j])) continue;
      got.insert(corpus.docs[j].id);
      EXPECT_TRUE(std::any_of(anchors.begin(), anchors.end(),
                              [&](const std::string& t) { return analyzed[j].has(t); }))
          << "q=[" << q << "] matched tweet " << corpus.docs[j].id << " holds no anchor term";
    }
    ASSERT_EQ(got, want) << "q=[" << q << "]";
    nonempty += !want.empty();
  }
  EXPECT_GT(answered, 150);
  EXPECT_GT(nonempty, 100);
}

}  // namespace
}  // namespace tweetsearch::query
