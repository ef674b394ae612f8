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
