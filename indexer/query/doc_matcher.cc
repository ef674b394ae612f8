#include "indexer/query/doc_matcher.h"

#include <algorithm>
#include <numeric>

#include "indexer/index/index.h"

namespace tweetsearch::query {

absl::StatusOr<AnalyzedTweet> AnalyzedTweet::Make(std::string_view text, std::string_view user_name,
                                                  std::string_view lang, int64_t created_at_ms,
                                                  uint32_t likes,
                                                  const analysis::Analyzer& analyzer) {
  thread_local std::vector<analysis::Token> tokens;  // reused: its strings keep their buffers
  tokens.clear();
  if (absl::Status s = analyzer.Analyze(text, &tokens); !s.ok()) return s;
  AnalyzedTweet out;
  out.terms_.reserve(tokens.size() + 2);
  for (analysis::Token& t : tokens) out.terms_[t.text].push_back(t.position);
  // As the index: from: and lang: terms at position 0, never part of a phrase.
  if (!user_name.empty()) out.terms_[index::FromTerm(user_name)].push_back(0);
  if (!lang.empty()) out.terms_[index::LangTerm(lang)].push_back(0);
  out.created_at_ms_ = created_at_ms;
  out.likes_ = likes;
  return out;
}

std::span<const uint32_t> AnalyzedTweet::positions(std::string_view term) const {
  auto it = terms_.find(AsAbsl(term));
  if (it == terms_.end()) return {};
  return it->second;
}

namespace {

bool PhraseMatches(const PlanNode& node, const AnalyzedTweet& tweet) {
  std::span<const uint32_t> first = tweet.positions(node.phrase_terms[0]);
  for (uint32_t start : first) {
    bool all = true;
    for (size_t i = 1; i < node.phrase_terms.size() && all; ++i) {
      std::span<const uint32_t> p = tweet.positions(node.phrase_terms[i]);
      all = std::binary_search(p.begin(), p.end(), start + node.phrase_offsets[i]);
    }
    if (all) return true;
  }
  return false;
}

}  // namespace

bool Matches(const PlanNode& node, const AnalyzedTweet& tweet) {
  switch (node.kind) {
    case PlanNode::Kind::kTerm:
      return tweet.has(node.term);
    case PlanNode::Kind::kPhrase:
      return !node.phrase_terms.empty() && PhraseMatches(node, tweet);
    case PlanNode::Kind::kAnd:
      return std::all_of(node.children.begin(), node.children.end(),
                         [&](const PlanNode& c) { return Matches(c, tweet); }) &&
             std::none_of(node.excluded.begin(), node.excluded.end(),
                          [&](const PlanNode& c) { return Matches(c, tweet); });
    case PlanNode::Kind::kOr:
      return std::any_of(node.children.begin(), node.children.end(),
                         [&](const PlanNode& c) { return Matches(c, tweet); });
    case PlanNode::Kind::kNothing:
      return false;
  }
  return false;
}

bool Matches(const Plan& plan, const AnalyzedTweet& tweet) {
  const int64_t created = tweet.created_at_ms();
  if (created < plan.since_ms || (plan.has_until() && created >= plan.until_ms)) return false;
  if (tweet.likes() < plan.min_likes) return false;
  return Matches(plan.root, tweet);
}

std::vector<std::string> AnchorTerms(const PlanNode& node,
                                     const std::function<uint64_t(std::string_view)>& rarity) {
  auto cost = [&](const std::vector<std::string>& terms) {
    uint64_t sum = 0;
    for (const std::string& t : terms) sum += rarity(t);
    return sum;
  };
  switch (node.kind) {
    case PlanNode::Kind::kTerm:
      return {node.term};
    case PlanNode::Kind::kPhrase: {
      if (node.phrase_terms.empty()) return {};
      auto rarest = std::min_element(
          node.phrase_terms.begin(), node.phrase_terms.end(),
          [&](const std::string& a, const std::string& b) { return rarity(a) < rarity(b); });
      return {*rarest};
    }
    case PlanNode::Kind::kAnd: {
      std::vector<std::string> best;
      uint64_t best_cost = 0;
      for (const PlanNode& child : node.children) {
        std::vector<std::string> terms = AnchorTerms(child, rarity);
        if (terms.empty()) return {};  // a child that matches nothing: so does the AND
        const uint64_t c = cost(terms);
        if (best.empty() || c < best_cost) {
          best = std::move(terms);
          best_cost = c;
        }
      }
      return best;
    }
    case PlanNode::Kind::kOr: {
      std::vector<std::string> all;
      for (const PlanNode& child : node.children) {
        std::vector<std::string> terms = AnchorTerms(child, rarity);
        all.insert(all.end(), std::make_move_iterator(terms.begin()),
                   std::make_move_iterator(terms.end()));
      }
      std::sort(all.begin(), all.end());
      all.erase(std::unique(all.begin(), all.end()), all.end());
      return all;
    }
    case PlanNode::Kind::kNothing:
      return {};
  }
  return {};
}

}  // namespace tweetsearch::query
