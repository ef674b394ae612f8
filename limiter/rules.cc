#include "limiter/rules.h"

#include <yaml-cpp/yaml.h>

#include <set>

#include "absl/strings/numbers.h"
#include "common/file_util.h"
#include "common/strings.h"

namespace tweetsearch::limiter {
namespace {

const std::set<std::string_view> kEndpoints = {"search", "ingest", "admin", "stream", "all"};

absl::Status Bad(const std::string& where, std::string_view why) {
  return absl::InvalidArgumentError(StrCat(where, ": ", why));
}

absl::StatusOr<RuleLimit> ParseLimit(const YAML::Node& node, const std::string& where,
                                     const std::string& default_name) {
  if (!node.IsMap()) return Bad(where, "a limit is a map such as {limit: 10, window: 1m}");
  RuleLimit r;
  r.limit.name = default_name;
  bool has_limit = false;
  for (const auto& entry : node) {
    if (!entry.first.IsScalar() || !entry.second.IsScalar()) {
      return Bad(where, "limit fields are plain values");
    }
    const std::string key = entry.first.Scalar();
    const std::string value = entry.second.Scalar();
    const std::string at = StrCat(where, ".", key);
    if (key == "name") {
      if (value.empty() || value.size() > 64) return Bad(at, "1 to 64 characters");
      r.limit.name = value;
    } else if (key == "limit") {
      if (!absl::SimpleAtoi(value, &r.limit.limit) || r.limit.limit == 0 ||
          r.limit.limit > (uint64_t{1} << 40)) {
        return Bad(at, "a whole number from 1 to 2^40");
      }
      has_limit = true;
    } else if (key == "window") {
      absl::StatusOr<int64_t> ms = ParseDuration(value);
      if (!ms.ok()) return Bad(at, AsStd(ms.status().message()));
      r.limit.window_ms = *ms;
    } else if (key == "algorithm") {
      absl::StatusOr<Algorithm> a = ParseAlgorithm(value);
      if (!a.ok()) return Bad(at, AsStd(a.status().message()));
      r.limit.algorithm = *a;
    } else if (key == "max_wait") {
      absl::StatusOr<int64_t> ms = ParseDuration(value);
      if (!ms.ok()) return Bad(at, AsStd(ms.status().message()));
      r.limit.max_wait_ms = *ms;
    } else if (key == "cost") {
      if (value != "units" && value != "requests") return Bad(at, "units or requests");
      r.per_request = value == "requests";
    } else if (key == "fail") {
      if (value == "share") {
        r.fail = FailMode::kShare;
      } else if (value == "open") {
        r.fail = FailMode::kOpen;
      } else if (value == "closed") {
        r.fail = FailMode::kClosed;
      } else {
        return Bad(at, "share, open or closed");
      }
    } else if (key == "shadow") {
      if (value != "true" && value != "false") return Bad(at, "true or false");
      r.limit.shadow = value == "true";
    } else {
      return Bad(at,
                 "unknown field (name, limit, window, algorithm, cost, max_wait, shadow, fail)");
    }
  }
  if (!has_limit) return Bad(where, "missing limit");
  if (r.limit.max_wait_ms > 0 && r.limit.algorithm != Algorithm::kLeakyBucketQueue) {
    return Bad(where, "max_wait applies to leaky_bucket_queue only");
  }
  // The algorithms compute with limit × window_ms as an integer; below 2^52 it is exact in the
  // doubles of Redis's Lua too (docs/limiter.md).
  if (static_cast<double>(r.limit.limit) * static_cast<double>(r.limit.window_ms) > 4.5e15) {
    return Bad(where, "limit × window (in ms) must stay under 4.5e15");
  }
  return r;
}

// "max_streams: N" (N from 0 to 100,000), for `*max_streams`; null where it is not allowed.
absl::Status ParseMaxStreams(const YAML::Node& node, const std::string& at,
                             std::optional<uint32_t>* max_streams) {
  if (max_streams == nullptr) return Bad(at, "streams need a key: no max_streams here");
  uint32_t n = 0;
  if (!node.IsScalar() || !absl::SimpleAtoi(AsAbsl(node.Scalar()), &n) || n > 100'000) {
    return Bad(at, "a whole number of streams from 0 to 100000");
  }
  *max_streams = n;
  return absl::OkStatus();
}

// endpoint → [limits], and with `max_streams` the key "max_streams".
absl::StatusOr<NameMap<RuleSet>> ParseEndpoints(const YAML::Node& node, const std::string& where,
                                                const std::string& owner,
                                                std::optional<uint32_t>* max_streams = nullptr) {
  NameMap<RuleSet> out;
  if (node.IsNull()) return out;
  if (!node.IsMap()) return Bad(where, "a map of endpoint → list of limits");
  std::set<std::string> names;
  for (const auto& entry : node) {
    if (!entry.first.IsScalar()) return Bad(where, "endpoint names are plain words");
    const std::string endpoint = entry.first.Scalar();
    const std::string at = StrCat(where, ".", endpoint);
    if (endpoint == "max_streams") {
      if (absl::Status s = ParseMaxStreams(entry.second, at, max_streams); !s.ok()) return s;
      continue;
    }
    if (!kEndpoints.contains(endpoint))
      return Bad(at, "endpoint must be search, ingest, admin, stream or all (or max_streams)");
    if (!entry.second.IsSequence()) return Bad(at, "a list of limits");
    if (entry.second.size() > kMaxLimitsPerSet) {
      return Bad(at, StrCat("at most ", kMaxLimitsPerSet, " limits per endpoint"));
    }
    RuleSet set;
    for (size_t i = 0; i < entry.second.size(); ++i) {
      absl::StatusOr<RuleLimit> limit = ParseLimit(entry.second[i], StrCat(at, "[", i, "]"),
                                                   StrCat(owner, "_", endpoint, "_", i));
      if (!limit.ok()) return limit.status();
      if (!names.insert(limit->limit.name).second) {
        return Bad(StrCat(at, "[", i, "]"),
                   StrCat("the name '", limit->limit.name, "' is used twice"));
      }
      set.max_window_ms = std::max(set.max_window_ms, StateLifetimeMs(limit->limit));
      set.limits.push_back(*std::move(limit));
    }
    out[endpoint] = std::move(set);
  }
  return out;
}

absl::StatusOr<NameMap<NameMap<RuleSet>>> ParseOwners(const YAML::Node& node,
                                                      const std::string& where,
                                                      NameMap<uint32_t>* max_streams) {
  NameMap<NameMap<RuleSet>> out;
  if (node.IsNull()) return out;
  if (!node.IsMap()) return Bad(where, "a map of name → endpoints");
  for (const auto& entry : node) {
    if (!entry.first.IsScalar()) return Bad(where, "names are plain words");
    const std::string name = entry.first.Scalar();
    std::optional<uint32_t> streams;
    absl::StatusOr<NameMap<RuleSet>> endpoints =
        ParseEndpoints(entry.second, StrCat(where, ".", name), name, &streams);
    if (!endpoints.ok()) return endpoints.status();
    out[name] = *std::move(endpoints);
    if (streams.has_value()) (*max_streams)[name] = *streams;
  }
  return out;
}

}  // namespace

std::optional<uint32_t> MaxStreams(const Rules& rules, std::string_view key_prefix,
                                   std::string_view tier) {
  if (auto k = rules.key_max_streams.find(key_prefix); k != rules.key_max_streams.end()) {
    return k->second;
  }
  auto t = rules.tier_max_streams.find(tier);
  if (t == rules.tier_max_streams.end() && !rules.tiers.contains(tier)) {
    t = rules.tier_max_streams.find(rules.default_tier);
  }
  if (t == rules.tier_max_streams.end()) return std::nullopt;
  return t->second;
}

absl::StatusOr<int64_t> ParseDuration(std::string_view text) {
  struct Unit {
    std::string_view suffix;
    int64_t ms;
  };
  static constexpr Unit kUnits[] = {
      {"ms", 1}, {"s", 1000}, {"m", 60'000}, {"h", 3'600'000}, {"d", 86'400'000}};
  int64_t multiplier = 1000;  // a bare number is seconds
  std::string_view number = text;
  for (const Unit& u : kUnits) {
    if (text.ends_with(u.suffix) && text.size() > u.suffix.size()) {
      const std::string_view rest = text.substr(0, text.size() - u.suffix.size());
      if (!rest.empty() && std::isdigit(static_cast<unsigned char>(rest.back()))) {
        number = rest;
        multiplier = u.ms;
        break;
      }
    }
  }
  int64_t value = 0;
  if (!absl::SimpleAtoi(AsAbsl(number), &value) || value <= 0 ||
      value > 366LL * 86'400'000 / multiplier) {
    return absl::InvalidArgumentError(
        StrCat("'", text, "' is not a duration such as 500ms, 1s, 1m, 1h, 1d (up to a year)"));
  }
  return value * multiplier;
}

absl::StatusOr<Rules> ParseRules(std::string_view yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(StrCat("not YAML: ", e.what()));
  }
  Rules rules;
  if (root.IsNull()) return rules;
  if (!root.IsMap()) return absl::InvalidArgumentError("the rules file must be a map");
  for (const auto& entry : root) {
    if (!entry.first.IsScalar()) return absl::InvalidArgumentError("top-level keys are words");
    const std::string key = entry.first.Scalar();
    if (key == "tiers") {
      auto tiers = ParseOwners(entry.second, "tiers", &rules.tier_max_streams);
      if (!tiers.ok()) return tiers.status();
      rules.tiers = *std::move(tiers);
    } else if (key == "keys") {
      auto keys = ParseOwners(entry.second, "keys", &rules.key_max_streams);
      if (!keys.ok()) return keys.status();
      rules.keys = *std::move(keys);
    } else if (key == "anonymous") {
      auto anonymous = ParseEndpoints(entry.second, "anonymous", "anonymous");
      if (!anonymous.ok()) return anonymous.status();
      rules.anonymous = *std::move(anonymous);
    } else if (key == "default_tier") {
      if (!entry.second.IsScalar()) return absl::InvalidArgumentError("default_tier: a tier name");
      rules.default_tier = entry.second.Scalar();
    } else {
      return absl::InvalidArgumentError(
          StrCat("unknown key '", key, "' (tiers, keys, anonymous, default_tier)"));
    }
  }
  if (!rules.default_tier.empty() && !rules.tiers.contains(rules.default_tier)) {
    return absl::InvalidArgumentError(
        StrCat("default_tier '", rules.default_tier, "' is not one of the tiers"));
  }
  return rules;
}

absl::StatusOr<Rules> LoadRulesFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<Rules> rules = ParseRules(*text);
  if (!rules.ok()) {
    return absl::InvalidArgumentError(StrCat(path, ": ", rules.status().message()));
  }
  return rules;
}

}  // namespace tweetsearch::limiter
