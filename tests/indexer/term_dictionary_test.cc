#include "indexer/index/term_dictionary.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace tweetsearch::index {
namespace {

std::map<std::string, TermDictionary::Entry> SampleTerms(size_t n) {
  std::mt19937 rng(11);
  std::map<std::string, TermDictionary::Entry> terms;
  const std::vector<std::string> stems = {"#tag", "from:user", "lang:", "love", "lo", "", "東京"};
  while (terms.size() < n) {
    std::string t = stems[rng() % stems.size()] + std::to_string(rng() % 5000);
    terms[t] = {};
  }
  uint32_t offset = 0;
  for (auto& [t, e] : terms) {
    e.doc_freq = 1 + rng() % 1000;
    e.offset = offset;
    offset += rng() % 300;  // repeated offsets (0 steps) are allowed
  }
  return terms;
}

TermDictionary Build(const std::map<std::string, TermDictionary::Entry>& terms) {
  TermDictionary::Builder builder;
  for (const auto& [t, e] : terms) builder.Add(t, e);
  return builder.Finish();
}

TEST(TermDictionaryTest, FindsEveryTermAndNothingElse) {
  for (size_t n : {1u, 15u, 16u, 17u, 1000u}) {
    const auto terms = SampleTerms(n);
    const TermDictionary d = Build(terms);
    ASSERT_EQ(d.size(), n);
    for (const auto& [t, e] : terms) {
      std::optional<TermDictionary::Entry> found = d.Find(t);
      ASSERT_TRUE(found.has_value()) << t;
      EXPECT_EQ(found->doc_freq, e.doc_freq);
      EXPECT_EQ(found->offset, e.offset);
      EXPECT_FALSE(d.Find(t + "x").has_value() && !terms.contains(t + "x"));
    }
    EXPECT_FALSE(d.Find("").has_value() && !terms.contains(""));
    EXPECT_FALSE(d.Find("\xFF\xFF").has_value());
    std::vector<std::string> walked;
    d.ForEach([&](std::string_view t, TermDictionary::Entry) { walked.emplace_back(t); });
    std::vector<std::string> want;
    for (const auto& [t, e] : terms) want.push_back(t);
    EXPECT_EQ(walked, want);
  }
  EXPECT_FALSE(TermDictionary().Find("x").has_value());
}

// Lookups bisect the blocks by the first 8 bytes of their first terms and compare whole terms
// only where those tie: runs of blocks sharing 8 bytes or more, terms of exactly 8 bytes or
// fewer, bytes 0x00 and 0xFF, and absent terms between and beside the blocks all find what a
// sorted map finds.
TEST(TermDictionaryTest, FindsTermsWhoseFirstEightBytesTie) {
  std::mt19937 rng(5);
  std::map<std::string, TermDictionary::Entry> terms;
  const std::vector<std::string> stems = {"https://site",
                                          "https://sit",
                                          "from:use",
                                          "from:user",
                                          "abcdefgh",
                                          "abcdefg",
                                          std::string("ab\0", 3),
                                          "\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF",
                                          "z"};
  while (terms.size() < 3000) {
    std::string t = stems[rng() % stems.size()];
    if (rng() % 4 != 0) t += std::to_string(rng() % 4000);
    terms[t] = {static_cast<uint32_t>(1 + rng() % 100), 0};
  }
  uint32_t offset = 0;
  for (auto& [t, e] : terms) e.offset = offset += 7;  // in term order, as the builder needs
  const TermDictionary d = Build(terms);
  for (const auto& [t, e] : terms) {
    const std::optional<TermDictionary::Entry> found = d.Find(t);
    ASSERT_TRUE(found.has_value()) << t;
    EXPECT_EQ(found->doc_freq, e.doc_freq) << t;
    EXPECT_EQ(found->offset, e.offset) << t;
    for (const std::string& absent : {t + '\0', t + "0x", t.substr(0, t.size() - 1)}) {
      EXPECT_EQ(d.Find(absent).has_value(), terms.contains(absent)) << absent;
    }
  }
  EXPECT_FALSE(d.Find("").has_value());
  EXPECT_FALSE(d.Find("\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF").has_value());
  EXPECT_EQ(d.memory_bytes(), (terms.size() + kTermsPerBlock - 1) / kTermsPerBlock * 8);
}

// The lookups in lockstep over several dictionaries (empty, small, large, sharing prefixes)
// answer as a Find in each.
TEST(TermDictionaryTest, LocateInEachAnswersAsFindInEach) {
  std::vector<std::map<std::string, TermDictionary::Entry>> vocabularies = {
      {}, SampleTerms(1), SampleTerms(17), SampleTerms(300), SampleTerms(3000)};
  std::vector<TermDictionary> dictionaries;
  for (const auto& v : vocabularies) dictionaries.push_back(Build(v));
  std::vector<const TermDictionary*> pointers;
  for (const TermDictionary& d : dictionaries) pointers.push_back(&d);
  std::vector<std::string> targets = {"", "a", "#tag", "zzzz", "\xFF"};
  for (const auto& [t, e] : vocabularies.back()) {
    targets.push_back(t);
    targets.push_back(t + "0");
  }
  std::vector<std::optional<TermDictionary::Entry>> found(pointers.size());
  size_t hits = 0;
  for (const std::string& target : targets) {
    TermDictionary::LocateInEach(pointers, target, found);
    for (size_t i = 0; i < pointers.size(); ++i) {
      const std::optional<TermDictionary::Entry> want = dictionaries[i].Find(target);
      ASSERT_EQ(found[i].has_value(), want.has_value()) << i << " " << target;
      if (!want) continue;
      ++hits;
      EXPECT_EQ(found[i]->doc_freq, want->doc_freq);
      EXPECT_EQ(found[i]->offset, want->offset);
    }
  }
  EXPECT_GT(hits, vocabularies.back().size());  // present in the others too, not only the last
}

TEST(TermDictionaryTest, FrontCodingIsCompact) {
  const auto terms = SampleTerms(1000);
  size_t plain = 0;
  for (const auto& [t, e] : terms) plain += t.size() + 4 + 8;  // string, offset, two numbers
  EXPECT_LT(Build(terms).bytes(), plain / 2);
}

TEST(TermDictionaryTest, PartsFromAFileAreChecked) {
  const TermDictionary d = Build(SampleTerms(100));
  ASSERT_TRUE(TermDictionary::FromParts(d.blob(), d.block_offsets(), d.size()).ok());
  EXPECT_FALSE(TermDictionary::FromParts(d.blob(), d.block_offsets(), d.size() + 1).ok());
  EXPECT_FALSE(TermDictionary::FromParts(d.blob().substr(0, d.blob().size() - 1), d.block_offsets(),
                                         d.size())
                   .ok());
  std::vector<uint32_t> swapped(d.block_offsets().begin(), d.block_offsets().end());
  std::swap(swapped[1], swapped[2]);
  EXPECT_FALSE(TermDictionary::FromParts(d.blob(), swapped, d.size()).ok());
  // Any damaged byte is either rejected or still decodes within bounds; never a crash. A
  // view taken without the per-term checks (its checksum vouches for it) stays in bounds too.
  for (size_t i = 0; i < d.blob().size(); i += 3) {
    std::string blob(d.blob());
    blob[i] = static_cast<char>(blob[i] ^ 0x5A);
    absl::StatusOr<TermDictionary> damaged =
        TermDictionary::FromParts(blob, d.block_offsets(), d.size());
    if (damaged.ok()) damaged->Find("love42");
    absl::StatusOr<TermDictionary> viewed =
        TermDictionary::ViewParts(blob, d.block_offsets(), d.size());
    ASSERT_TRUE(viewed.ok());
    viewed->Find("love42");
    viewed->Locate("#tag7", 100);
    viewed->ForEach([](std::string_view, TermDictionary::Entry) {});
  }
}

TEST(TermDictionaryTest, LocateGivesWhereEachListEnds) {
  const auto terms = SampleTerms(100);  // six full blocks and one of four
  const TermDictionary d = Build(terms);
  for (auto it = terms.begin(); it != terms.end(); ++it) {
    const auto next = std::next(it);
    std::optional<TermDictionary::Located> found = d.Locate(it->first, 999'999);
    ASSERT_TRUE(found.has_value()) << it->first;
    EXPECT_EQ(found->entry.offset, it->second.offset);
    EXPECT_EQ(found->end, next == terms.end() ? 999'999u : next->second.offset) << it->first;
  }
  EXPECT_FALSE(d.Locate("zzz-not-there", 5).has_value());
}

}  // namespace
}  // namespace tweetsearch::index
