#include "indexer/query/plan.h"

#include <algorithm>
#include <optional>

#include "common/strings.h"
#include "indexer/index/index.h"

namespace tweetsearch::query {
namespace {

PlanNode NothingNode() {
  PlanNode node;
  node.kind = PlanNode::Kind::kNothing;
  return node;
}

class Planner {
 public:
  Planner(const analysis::Analyzer& analyzer, Plan* plan) : analyzer_(analyzer), plan_(plan) {}

  // Returns nullopt for a node that searches for nothing (all its words analyzed away).
  absl::StatusOr<std::optional<PlanNode>> Visit(const QueryNode& node, bool top_level_and) {
    using Kind = QueryNode::Kind;
    switch (node.kind) {
      case Kind::kWord:
      case Kind::kPhrase:
        return Text(node);
      case Kind::kFrom:
        return PlanNode{PlanNode::Kind::kTerm, index::FromTerm(node.text), false, {}, {}, {}, {}};
      case Kind::kLang:
        return PlanNode{PlanNode::Kind::kTerm, index::LangTerm(node.text), false, {}, {}, {}, {}};
      case Kind::kSince:
      case Kind::kUntil:
      case Kind::kMinFaves:
        if (!top_level_and) {
          return QueryError(
              "since:, until: and min_faves: must apply to the whole query, not inside "
              "OR or NOT",
              node.offset);
        }
        if (node.kind == Kind::kSince) plan_->since_ms = std::max(plan_->since_ms, node.value);
        if (node.kind == Kind::kUntil) plan_->until_ms = std::min(plan_->until_ms, node.value);
        if (node.kind == Kind::kMinFaves) {
          plan_->min_likes = std::max(plan_->min_likes, static_cast<uint32_t>(node.value));
        }
        return std::optional<PlanNode>();
      case Kind::kNot:
        return QueryError("NOT needs a positive term beside it in an AND (as in 'a -b')",
                          node.offset);
      case Kind::kOr: {
        PlanNode out{PlanNode::Kind::kOr, "", true, {}, {}, {}, {}};
        bool saw_nothing = false;  // an alternative that can match nothing was dropped
        for (const QueryNode& child : node.children) {
          if (child.kind == Kind::kNot) {
            return QueryError("NOT cannot be an alternative of OR; put it beside an AND",
                              child.offset);
          }
          absl::StatusOr<std::optional<PlanNode>> planned = Visit(child, false);
          if (!planned.ok()) return planned.status();
          if (!*planned) continue;
          if ((*planned)->kind == PlanNode::Kind::kNothing) {
            saw_nothing = true;
            continue;
          }
          if ((*planned)->kind == PlanNode::Kind::kOr) {
            for (PlanNode& grandchild : (*planned)->children)
              out.children.push_back(std::move(grandchild));
          } else {
            out.children.push_back(**std::move(planned));
          }
        }
        if (out.children.empty()) {
          if (saw_nothing) return NothingNode();
          return std::optional<PlanNode>();
        }
        if (out.children.size() == 1) return std::move(out.children[0]);
        return out;
      }
      case Kind::kAnd: {
        PlanNode out{PlanNode::Kind::kAnd, "", true, {}, {}, {}, {}};
        for (const QueryNode& child : node.children) {
          if (child.kind == Kind::kNot) {
            absl::StatusOr<std::optional<PlanNode>> negated = Visit(child.children[0], false);
            if (!negated.ok()) return negated.status();
            if (*negated) out.excluded.push_back(**std::move(negated));
            continue;
          }
          absl::StatusOr<std::optional<PlanNode>> planned = Visit(child, top_level_and);
          if (!planned.ok()) return planned.status();
          if (!*planned) continue;
          if ((*planned)->kind == PlanNode::Kind::kAnd) {
            for (PlanNode& c : (*planned)->children) out.children.push_back(std::move(c));
            for (PlanNode& e : (*planned)->excluded) out.excluded.push_back(std::move(e));
          } else {
            out.children.push_back(**std::move(planned));
          }
        }
        if (out.children.empty()) {
          if (!out.excluded.empty()) {
            return QueryError("NOT needs a positive term beside it in an AND (as in 'a -b')",
                              node.offset);
          }
          return std::optional<PlanNode>();
        }
        for (const PlanNode& c : out.children) {
          if (c.kind == PlanNode::Kind::kNothing) return NothingNode();
          // "a -a": a term both required and excluded.
          for (const PlanNode& e : out.excluded) {
            if (c.kind == PlanNode::Kind::kTerm && e.kind == PlanNode::Kind::kTerm &&
                c.term == e.term) {
              return NothingNode();
            }
          }
        }
        std::erase_if(out.excluded,
                      [](const PlanNode& e) { return e.kind == PlanNode::Kind::kNothing; });
        if (out.children.size() == 1 && out.excluded.empty()) return std::move(out.children[0]);
        return out;
      }
    }
    return absl::InternalError("unknown query node");
  }

 private:
  absl::StatusOr<std::optional<PlanNode>> Text(const QueryNode& node) {
    std::vector<analysis::Token> tokens;
    if (absl::Status s = analyzer_.Analyze(node.text, &tokens); !s.ok()) {
      return QueryError(AsStd(s.message()), node.offset);
    }
    if (tokens.empty()) return std::optional<PlanNode>();
    if (tokens.size() == 1) {
      return PlanNode{PlanNode::Kind::kTerm, tokens[0].text, true, {}, {}, {}, {}};
    }
    PlanNode phrase{PlanNode::Kind::kPhrase, "", true, {}, {}, {}, {}};
    for (const analysis::Token& t : tokens) {
      phrase.phrase_terms.push_back(t.text);
      phrase.phrase_offsets.push_back(t.position - tokens[0].position);
    }
    return phrase;
  }

  const analysis::Analyzer& analyzer_;
  Plan* plan_;
};

}  // namespace

absl::StatusOr<Plan> MakePlan(const QueryNode& query, const analysis::Analyzer& analyzer) {
  Plan plan;
  Planner planner(analyzer, &plan);
  absl::StatusOr<std::optional<PlanNode>> root = planner.Visit(query, /*top_level_and=*/true);
  if (!root.ok()) return root.status();
  if (!*root) {
    return absl::InvalidArgumentError(
        "query has nothing to search for: add a word, #tag, @mention, from: or lang:");
  }
  plan.root = **std::move(root);
  return plan;
}

absl::StatusOr<Plan> PlanQuery(std::string_view query, const analysis::Analyzer& analyzer,
                               const QueryLimits& limits) {
  absl::StatusOr<QueryNode> parsed = Parse(query, limits);
  if (!parsed.ok()) return parsed.status();
  return MakePlan(*parsed, analyzer);
}

std::string ToString(const PlanNode& node) {
  switch (node.kind) {
    case PlanNode::Kind::kTerm:
      return node.scored ? node.term : StrCat("[", node.term, "]");
    case PlanNode::Kind::kPhrase: {
      std::string out = "\"";
      for (size_t i = 0; i < node.phrase_terms.size(); ++i) {
        StrAppend(&out, i ? " " : "", node.phrase_terms[i], "@", node.phrase_offsets[i]);
      }
      return out + "\"";
    }
    case PlanNode::Kind::kNothing:
      return "NOTHING";
    case PlanNode::Kind::kAnd:
    case PlanNode::Kind::kOr: {
      std::string out = node.kind == PlanNode::Kind::kAnd ? "(AND" : "(OR";
      for (const PlanNode& c : node.children) StrAppend(&out, " ", ToString(c));
      for (const PlanNode& e : node.excluded) StrAppend(&out, " -", ToString(e));
      return out + ")";
    }
  }
  return "?";
}

}  // namespace tweetsearch::query
