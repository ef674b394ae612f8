#include "aggregator/http/api_handler.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "aggregator/http/json_writer.h"
#include "aggregator/http/web_assets.h"
#include "aggregator/idempotency.h"
#include "aggregator/tweet_json.h"
#include "common/strings.h"
#include "common/utf8.h"

namespace tweetsearch::aggregator {
namespace {

namespace http = boost::beast::http;
using json = nlohmann::ordered_json;

using Params = std::vector<std::pair<std::string, std::string>>;

constexpr std::string_view kJson = "application/json";

// Beast in Boost 1.74 speaks boost::string_view.
boost::beast::string_view Bsv(std::string_view s) { return {s.data(), s.size()}; }

std::string Dump(const json& value) {
  // Stored text is valid UTF-8; `replace` only guards against a bug turning into a throw.
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

HttpResponse MakeResponse(http::status status, const HttpRequest& request, std::string body,
                          std::string_view content_type = kJson) {
  HttpResponse response(status, request.version());
  response.set(http::field::server, "tweetsearch");
  response.set(http::field::content_type, Bsv(content_type));
  response.keep_alive(request.keep_alive());
  response.body() = std::move(body);
  response.prepare_payload();
  return response;
}

// What an ingest that stored nothing because storage was unavailable advises: about one
// failover (a lease, 5 s by default).
constexpr int kIngestRetryAfterSeconds = 5;

HttpResponse Error(const absl::Status& status, const HttpRequest& request) {
  return ErrorResponse(status, request.version(), request.keep_alive());
}

// The API key of an "X-Api-Key: <key>" or "Authorization: Bearer <key>" header.
std::optional<std::string> HeaderApiKey(const HttpRequest& request) {
  if (auto it = request.find("X-Api-Key"); it != request.end()) return std::string(it->value());
  if (auto it = request.find(http::field::authorization); it != request.end()) {
    std::string_view value(it->value().data(), it->value().size());
    if (value.starts_with("Bearer ")) return std::string(value.substr(7));
  }
  return std::nullopt;
}

// The API key: the api_dev_key (or key) parameter, else an X-Api-Key header, else
// "Authorization: Bearer <key>".
std::string ApiKeyOf(const HttpRequest& request, const Params& params) {
  for (const auto& [name, value] : params) {
    if (name == "api_dev_key" || name == "key") return value;
  }
  return HeaderApiKey(request).value_or("");
}

const std::string* Param(const Params& params, std::initializer_list<std::string_view> names) {
  for (std::string_view name : names) {
    for (const auto& [n, v] : params) {
      if (n == name) return &v;
    }
  }
  return nullptr;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

absl::StatusOr<std::string> PercentDecode(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '+') {
      out += ' ';
    } else if (in[i] == '%') {
      if (i + 2 >= in.size()) {
        return absl::InvalidArgumentError(StrCat("truncated %-escape at byte ", i));
      }
      const int hi = HexValue(in[i + 1]), lo = HexValue(in[i + 2]);
      if (hi < 0 || lo < 0) return absl::InvalidArgumentError(StrCat("bad %-escape at byte ", i));
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += in[i];
    }
  }
  return out;
}

// The next non-empty segment of `*rest`, which it consumes ("/a//b": "a", then "b"); empty at
// the end.
std::string_view NextSegment(std::string_view* rest) {
  while (!rest->empty() && rest->front() == '/') rest->remove_prefix(1);
  const size_t end = std::min(rest->find('/'), rest->size());
  const std::string_view segment = rest->substr(0, end);
  rest->remove_prefix(end);
  return segment;
}

// A small JSON body (likes, keys): at most 64 KiB and kMaxJsonDepth deep, else discarded.
json ParseSmallJson(const std::string& text) {
  if (!CheckJsonBounds(text, 64 * 1024).ok()) return json(json::value_t::discarded);
  return json::parse(text, nullptr, false);
}

HttpResponse NotFound(const HttpRequest& request) {
  const std::string_view target(request.target().data(), request.target().size());
  const std::string_view path = target.substr(0, target.find('?'));
  return Error(absl::NotFoundError(StrCat("no such path: ", SanitizeUtf8(path.substr(0, 100)))),
               request);
}

absl::Status NotAnInteger(std::string_view name) {
  return absl::InvalidArgumentError(StrCat(name, " must be a decimal integer"));
}

HttpResponse MethodNotAllowed(const HttpRequest& request, std::string_view allow) {
  HttpResponse response =
      MakeResponse(http::status::method_not_allowed, request,
                   Dump(json{{"error",
                              {{"code", "method_not_allowed"},
                               {"message", StrCat("use ", allow, " on this path")}}}}));
  response.set(http::field::allow, Bsv(allow));
  return response;
}

// A time for /v1/usage and /v1/counts, in Unix milliseconds: RFC 3339, Unix seconds, "now",
// or "-<n><s|m|h|d>" before `now_ms`.
absl::StatusOr<int64_t> ParseTimeParam(std::string_view name, std::string_view text,
                                       int64_t now_ms) {
  auto bad = [&] {
    return absl::InvalidArgumentError(StrCat(
        "'", name, "' must be RFC 3339, Unix seconds, now, or a span back such as -24h, -7d"));
  };
  if (text == "now") return now_ms;
  if (text.size() >= 3 && text[0] == '-') {
    const int64_t n = ParseDecimal<int64_t>(text.substr(1, text.size() - 2)).value_or(-1);
    if (n < 0 || n > 100'000'000) return bad();
    switch (text.back()) {
      case 's':
        return now_ms - n * 1000;
      case 'm':
        return now_ms - n * 60'000;
      case 'h':
        return now_ms - n * 3'600'000;
      case 'd':
        return now_ms - n * 86'400'000;
      default:
        return bad();
    }
  }
  if (!text.empty() && absl::ascii_isdigit(static_cast<unsigned char>(text[0]))) {
    if (const std::optional<int64_t> seconds = ParseDecimal<int64_t>(text)) {
      if (*seconds > 100'000'000'000) return bad();
      return *seconds * 1000;
    }
  }
  absl::StatusOr<int64_t> ms = ParseRfc3339(text);
  if (!ms.ok()) return bad();
  return *ms;
}

// InvalidArgument naming the first parameter of `params` that is neither in `known` (names by
// space) nor a key, and listing those it may be.
absl::Status CheckParamsKnown(const Params& params, std::string_view known) {
  const std::vector<absl::string_view> names =
      absl::StrSplit(AsAbsl(known), ' ', absl::SkipEmpty());
  for (const auto& [name, value] : params) {
    if (name == "api_dev_key" || name == "key" ||
        std::find(names.begin(), names.end(), AsAbsl(name)) != names.end()) {
      continue;
    }
    return absl::InvalidArgumentError(
        StrCat("unknown parameter '", name.substr(0, 64), "'; this endpoint takes ",
               AsStd(absl::StrJoin(names, ", ")), names.empty() ? "" : ", ", "api_dev_key"));
  }
  return absl::OkStatus();
}

// Sets *flag from the boolean parameter `name` if present (true/1, false/0).
absl::Status ReadFlag(const Params& params, const char* name, bool* flag) {
  const std::string* value = Param(params, {name});
  if (value == nullptr) return absl::OkStatus();
  if (*value != "true" && *value != "1" && *value != "false" && *value != "0") {
    return absl::InvalidArgumentError(StrCat(name, " must be true or false"));
  }
  *flag = *value == "true" || *value == "1";
  return absl::OkStatus();
}

// GET /v1/counts: search_terms (q), granularity, since, until (times as ParseTimeParam reads
// them), allow_partial.
absl::StatusOr<CountsRequest> ParseCountsRequest(const Params& params, int64_t now_ms,
                                                 std::string_view key) {
  CountsRequest counts;
  counts.api_dev_key = key;
  const std::string* terms = Param(params, {"search_terms", "q"});
  if (terms == nullptr || terms->empty()) {
    return absl::InvalidArgumentError("search_terms is required");
  }
  counts.search_terms = *terms;
  if (const std::string* granularity = Param(params, {"granularity"})) {
    absl::StatusOr<Granularity> g = ParseGranularity(*granularity);
    if (!g.ok()) return g.status();
    counts.granularity = *g;
  }
  for (auto [name, field] :
       {std::pair{"since", &counts.since_ms}, std::pair{"until", &counts.until_ms}}) {
    const std::string* text = Param(params, {name});
    if (text == nullptr) continue;
    absl::StatusOr<int64_t> t = ParseTimeParam(name, *text, now_ms);
    if (!t.ok()) return t.status();
    *field = *t;
  }
  if (absl::Status s = ReadFlag(params, "allow_partial", &counts.allow_partial); !s.ok()) return s;
  return counts;
}

json CountsJson(const CountsResponse& r, Granularity granularity) {
  json data = json::array();
  for (uint32_t i = 0; i < r.buckets.count; ++i) {
    data.push_back(json{{"start", FormatRfc3339(r.buckets.start_of(i))},
                        {"end", FormatRfc3339(r.buckets.start_of(i + 1))},
                        {"tweet_count", r.counts[i]}});
  }
  json out{{"granularity", GranularityName(granularity)},
           {"since", FormatRfc3339(r.buckets.start_ms)},
           {"until", FormatRfc3339(r.buckets.end_ms())},
           {"total_tweet_count", r.total},
           {"counts", std::move(data)},
           {"took_ms", std::round(r.took_ms * 100) / 100},
           {"partial", !r.missing_partitions.empty()}};
  if (!r.missing_partitions.empty()) out["missing_partitions"] = r.missing_partitions;
  return out;
}

// A JSON integer that fits int64_t (FrontDoor::Likes checks the range); nullopt for anything
// else, 2^64-1 included.
std::optional<int64_t> Int64Of(const json& value) {
  if (value.is_number_unsigned()) {
    const uint64_t n = value.get<uint64_t>();
    if (n > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(n);
  }
  if (!value.is_number_integer()) return std::nullopt;
  return value.get<int64_t>();
}

// ,"highlighted_text":[plain, match, plain, match, ..., plain]: the text cut at the spans, so
// that a client marks the odd entries without counting characters.
void AppendHighlightedText(std::string* out, std::string_view text,
                           const std::vector<TextSpan>& spans) {
  *out += ",\"highlighted_text\":[";
  size_t at = 0;
  for (const TextSpan& span : spans) {
    AppendJsonString(out, text.substr(at, span.begin - at));
    *out += ',';
    AppendJsonString(out, text.substr(span.begin, span.end - span.begin));
    *out += ',';
    at = span.end;
  }
  AppendJsonString(out, text.substr(at));
  *out += ']';
}

json CountersJson(const usage::Counters& c) {
  json limited_by = json::object();
  for (const auto& [name, n] : c.limited_by) limited_by[SanitizeUtf8(name)] = n;
  json out = {{"requests", c.requests()}, {"served", c.served}, {"limited", c.limited},
              {"rejected", c.rejected},   {"failed", c.failed}, {"limited_by", limited_by},
              {"searches", c.searches}};
  if (c.searches > 0) {
    out["search_latency_ms"] = {
        {"mean", static_cast<double>(c.search_latency_us_sum) / 1000.0 / c.searches},
        {"p50", c.SearchLatencyQuantileMs(0.5)},
        {"p99", c.SearchLatencyQuantileMs(0.99)}};
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseQueryString(
    std::string_view target) {
  std::vector<std::pair<std::string, std::string>> params;
  const size_t q = target.find('?');
  if (q == std::string_view::npos) return params;
  std::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    size_t amp = rest.find('&');
    std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    absl::StatusOr<std::string> name = PercentDecode(pair.substr(0, eq));
    if (!name.ok()) return name.status();
    absl::StatusOr<std::string> value =
        PercentDecode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1));
    if (!value.ok()) {
      return absl::InvalidArgumentError(
          StrCat("parameter '", *name, "': ", value.status().message()));
    }
    params.emplace_back(*std::move(name), *std::move(value));
  }
  return params;
}

HttpResponse ErrorResponse(const absl::Status& status, unsigned version, bool keep_alive) {
  HttpResponse response(static_cast<http::status>(HttpStatusFor(status)), version);
  response.set(http::field::server, "tweetsearch");
  response.set(http::field::content_type, Bsv(kJson));
  response.keep_alive(keep_alive);
  // Unavailable is passing (storage failing over, etcd away): say when to try again.
  if (status.code() == absl::StatusCode::kUnavailable) {
    response.set(http::field::retry_after, StrCat(kIngestRetryAfterSeconds));
  }
  response.body() = Dump(json{
      {"error",
       {{"code", ErrorCodeName(status)}, {"message", SanitizeUtf8(AsStd(status.message()))}}}});
  response.prepare_payload();
  return response;
}

// Where an endpoint runs: inline on the network threads (answers from memory), or on the
// worker pool (it may wait on disk, or run long).
enum class RunOn : uint8_t {
  kNetwork,
  kWorkers,
  kWorkersForBestMatch,  // searches: best match may take milliseconds on common words
};

// What a handler gets: the request, the path's {…} segments, and for API calls the query
// parameters and the caller's key.
struct ApiHandler::Call {
  const HttpRequest& request;
  CallContext* context;
  std::string_view route = "other";    // the row's name; a handler may change it (not_found)
  bool api = false;                    // the row's `api`
  std::vector<std::string_view> args;  // the pattern's {…} segments, in order
  QueryParams params;                  // API calls only
  std::string key;                     // API calls only: api_dev_key, key or a header
  std::unique_ptr<LiveStream>* stream = nullptr;  // where a stream opened is handed over
};

// One row of the route table.
struct ApiHandler::Route {
  std::string_view name;     // for metrics and usage: fixed, never a raw path
  http::verb method;         // http::verb::unknown: any method
  std::string_view pattern;  // "/v1/tweets/{id}/likes": a {…} segment matches any one segment
  bool api;                  // parses the query and the key; counted in the usage series
  RunOn run_on;
  HttpResponse (ApiHandler::*handle)(Call&) const;
  // API rows: the query parameters the endpoint reads, by space (api_dev_key and key are
  // every endpoint's); any other is refused, so that a misspelt one is not silently ignored.
  std::string_view params = {};
  // The handler answering later (HandleAsync), if the endpoint has one.
  void (ApiHandler::*start)(Call&, Answer) const = nullptr;
};

// A call answered later (HandleAsync): what its handler and its answer need meanwhile.
struct ApiHandler::PendingCall {
  PendingCall(std::shared_ptr<const HttpRequest> r, std::string_view client_ip, Answer answer)
      : request(std::move(r)),
        call{*request, &context, "other", false, {}, {}, {}, nullptr},
        done(std::move(answer)) {
    context.client_ip = std::string(client_ip);
  }

  const std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  const std::shared_ptr<const HttpRequest> request;
  CallContext context;
  Call call;
  Answer done;
  std::atomic<bool> answered{false};
};

// Adding an endpoint is one row here and one handler. Rows sharing a path list each method;
// another method on that path answers 405 with their methods in Allow.
const ApiHandler::Route ApiHandler::kRoutes[] = {
    {"healthz", http::verb::unknown, "/healthz", false, RunOn::kNetwork, &ApiHandler::Healthz},
    {"readyz", http::verb::unknown, "/readyz", false, RunOn::kNetwork, &ApiHandler::Readyz},
    {"metrics", http::verb::unknown, "/metrics", false, RunOn::kNetwork, &ApiHandler::MetricsPage},
    {"web", http::verb::get, "/", false, RunOn::kNetwork, &ApiHandler::WebFilePage},
    {"web", http::verb::get, "/index.html", false, RunOn::kNetwork, &ApiHandler::WebFilePage},
    {"web", http::verb::get, "/dashboard", false, RunOn::kNetwork, &ApiHandler::WebFilePage},
    {"web", http::verb::get, "/dashboard.html", false, RunOn::kNetwork, &ApiHandler::WebFilePage},
    {"web", http::verb::get, "/assets/{file}", false, RunOn::kNetwork, &ApiHandler::WebFilePage},
    {"web", http::verb::get, "/v1/web-config", false, RunOn::kNetwork, &ApiHandler::WebConfig},
    {"search", http::verb::get, "/v1/search", true, RunOn::kWorkersForBestMatch,
     &ApiHandler::Search,
     "search_terms q maximum_results_to_return limit sort page_token highlight allow_partial "
     "exact_total",
     &ApiHandler::StartSearch},
    {"ingest", http::verb::post, "/v1/tweets", true, RunOn::kWorkers, &ApiHandler::Ingest,
     "report"},
    {"get", http::verb::get, "/v1/tweets/{id}", true, RunOn::kWorkers, &ApiHandler::GetTweet},
    {"delete", http::verb::delete_, "/v1/tweets/{id}", true, RunOn::kWorkers,
     &ApiHandler::DeleteTweet},
    {"likes", http::verb::post, "/v1/tweets/{id}/likes", true, RunOn::kWorkers, &ApiHandler::Likes,
     "set add"},
    {"admin_keys", http::verb::get, "/v1/admin/keys", true, RunOn::kWorkers, &ApiHandler::ListKeys},
    {"admin_keys", http::verb::post, "/v1/admin/keys", true, RunOn::kWorkers,
     &ApiHandler::CreateKey},
    {"admin_keys", http::verb::delete_, "/v1/admin/keys/{id}", true, RunOn::kWorkers,
     &ApiHandler::RevokeKey},
    {"counts", http::verb::get, "/v1/counts", true, RunOn::kWorkers, &ApiHandler::Counts,
     "search_terms q granularity since until allow_partial"},
    {"stream", http::verb::get, "/v1/stream", true, RunOn::kWorkers, &ApiHandler::Stream,
     "search_terms q last_event_id"},
    {"usage", http::verb::get, "/v1/usage", true, RunOn::kWorkers, &ApiHandler::Usage,
     "from to resolution"},
    {"stats", http::verb::get, "/v1/stats", true, RunOn::kWorkers, &ApiHandler::Stats},
};

namespace {

std::string_view PathOf(const HttpRequest& request) {
  const std::string_view target(request.target().data(), request.target().size());
  return target.substr(0, target.find('?'));
}

// Whether `path` matches `pattern`, segment by segment (empty segments are skipped, so
// "/v1/tweets/" is "/v1/tweets"); appends the {…} segments to `*args` unless it is null. No
// allocation but the arguments': every request is matched against the table.
bool MatchPath(std::string_view pattern, std::string_view path,
               std::vector<std::string_view>* args) {
  if (!path.starts_with('/')) return false;
  for (;;) {
    const std::string_view want = NextSegment(&pattern), have = NextSegment(&path);
    if (want.empty() || have.empty()) return want.empty() && have.empty();
    if (want.starts_with('{')) {
      if (args != nullptr) args->push_back(have);
    } else if (want != have) {
      return false;
    }
  }
}

// The JSON answer of a search (written directly: the hot path of the API).
std::string SearchResponseJson(const SearchResponse& result, query::SortMode sort) {
  std::string body = "{\"results\":[";
  body.reserve(512 * result.hits.size() + 256);
  for (size_t i = 0; i < result.hits.size(); ++i) {
    if (i > 0) body += ',';
    const SearchHit& h = result.hits[i];
    AppendTweetJson(&body, *h.tweet, h.hit.likes, /*with_score=*/true, h.hit.score);
    if (i < result.highlights.size()) {
      body.pop_back();  // the object's '}'
      AppendHighlightedText(&body, h.tweet->text, result.highlights[i]);
      body += '}';
    }
  }
  body += "],\"next_page_token\":";
  if (result.next_page_token.empty()) {
    body += "null";
  } else {
    AppendJsonString(&body, result.next_page_token);
  }
  StrAppend(&body, ",\"took_ms\":", result.took_ms, ",\"total_hits\":", result.total_hits,
            ",\"total_is_exact\":", result.total_is_exact ? "true" : "false", ",\"sort\":\"",
            SortModeName(sort), "\",\"partial\":", result.partial() ? "true" : "false");
  if (result.partial()) {
    body += ",\"missing_partitions\":[";
    for (size_t i = 0; i < result.missing_partitions.size(); ++i) {
      StrAppend(&body, i == 0 ? "" : ",", result.missing_partitions[i]);
    }
    body += ']';
  }
  body += '}';
  return body;
}

// The scopes of a key to create: {"scopes": ["search", ...]}, search alone when absent.
absl::StatusOr<uint8_t> ScopesOf(const json& body) {
  auto it = body.find("scopes");
  if (it == body.end()) return static_cast<uint8_t>(Scope::kSearch);
  if (!it->is_array()) return absl::InvalidArgumentError("scopes must be an array");
  uint8_t scopes = 0;
  for (const json& s : *it) {
    if (!s.is_string()) return absl::InvalidArgumentError("scopes are strings");
    absl::StatusOr<Scope> scope = ParseScope(s.get<std::string>());
    if (!scope.ok()) return scope.status();
    scopes |= static_cast<uint8_t>(*scope);
  }
  return scopes;
}

// The span and resolution of /v1/usage: ?from= (default an hour before ?to=), ?to= (default
// now), ?resolution= (default auto). The key is the caller's business.
absl::StatusOr<UsageRequest> ParseUsageRequest(const Params& params, int64_t now_s) {
  UsageRequest request;
  request.to_s = now_s;
  if (const std::string* to = Param(params, {"to"})) {
    absl::StatusOr<int64_t> t = ParseTimeParam("to", *to, now_s * 1000);
    if (!t.ok()) return t.status();
    request.to_s = *t / 1000;
  }
  request.from_s = request.to_s - 3600;
  if (const std::string* from = Param(params, {"from"})) {
    absl::StatusOr<int64_t> t = ParseTimeParam("from", *from, now_s * 1000);
    if (!t.ok()) return t.status();
    request.from_s = *t / 1000;
  }
  if (const std::string* resolution = Param(params, {"resolution"});
      resolution != nullptr && *resolution != "auto") {
    absl::StatusOr<usage::Resolution> r = usage::ParseResolution(*resolution);
    if (!r.ok()) return r.status();
    request.resolution = *r;
  }
  return request;
}

json UsageJson(const UsageResponse& series, const UsageRequest& request) {
  usage::Counters totals;
  json points = json::array();
  for (const usage::Point& p : series.points) {
    totals.Add(p.counters);
    json point = CountersJson(p.counters);
    point["start"] = FormatRfc3339(p.start_s * 1000);
    points.push_back(std::move(point));
  }
  return {{"key", series.key_id},
          {"resolution", usage::ResolutionName(series.resolution)},
          {"bucket_seconds", usage::BucketSeconds(series.resolution)},
          {"from", FormatRfc3339(request.from_s * 1000)},
          {"to", FormatRfc3339(request.to_s * 1000)},
          {"totals", CountersJson(totals)},
          {"points", std::move(points)}};
}

// /v1/stats: the process's `status` and the engine's figures.
json StatsJson(const EngineStats& s, json status) {
  json storage_partitions = json::array();
  for (const StoragePartitionStats& p : s.storage_partitions) {
    storage_partitions.push_back({{"partition", p.partition},
                                  {"has_primary", p.has_primary},
                                  {"epoch", p.epoch},
                                  {"secondary_in_sync", p.secondary_in_sync},
                                  {"single_replica_writes", p.single_replica_writes}});
  }
  json out = {{"process", std::move(status)},
              {"indexed_documents", s.indexed_documents},
              {"index_memory_bytes", s.index_memory_bytes},
              {"index_mapped_bytes", s.index_mapped_bytes},
              {"index_damaged_segments", s.index_damaged_segments},
              {"sealed_segments", s.sealed_segments},
              {"stored_tweets_estimate", s.stored_tweets_estimate},
              {"storage_disk_bytes", s.storage_disk_bytes},
              {"tweets_ingested", s.tweets_ingested},
              {"tweets_rejected", s.tweets_rejected},
              {"last_change", s.last_change},
              {"checkpoint_change", s.checkpoint_change}};
  if (!storage_partitions.empty()) out["storage_partitions"] = std::move(storage_partitions);
  return out;
}

}  // namespace

ApiHandler::ApiHandler(FrontDoor& door, Metrics& metrics) : door_(door), metrics_(metrics) {}

const ApiHandler::Route* ApiHandler::Find(const HttpRequest& request, const Route** path_match) {
  const std::string_view path = PathOf(request);
  for (const Route& endpoint : kRoutes) {
    if (!MatchPath(endpoint.pattern, path, nullptr)) continue;
    if (endpoint.method == http::verb::unknown || endpoint.method == request.method()) {
      return &endpoint;
    }
    if (*path_match == nullptr) *path_match = &endpoint;
  }
  return nullptr;
}

std::string ApiHandler::AllowedMethods(std::string_view path) {
  std::string allow;
  for (const Route& endpoint : kRoutes) {
    if (!MatchPath(endpoint.pattern, path, nullptr)) continue;
    const boost::beast::string_view method = http::to_string(endpoint.method);
    StrAppend(&allow, allow.empty() ? "" : ", ", std::string_view(method.data(), method.size()));
  }
  return allow;
}

bool ApiHandler::MayBlock(const HttpRequest& request, bool best_match_inline) {
  const Route* path_match = nullptr;
  const Route* endpoint = Find(request, &path_match);
  if (endpoint == nullptr) return false;  // 404 and 405 answer at once
  switch (endpoint->run_on) {
    case RunOn::kNetwork:
      return false;
    case RunOn::kWorkers:
      return true;
    case RunOn::kWorkersForBestMatch:
      if (best_match_inline) return false;
      break;
  }
  const std::string_view target(request.target().data(), request.target().size());
  if (target.find("sort=") == std::string_view::npos) return false;
  absl::StatusOr<QueryParams> params = ParseQueryString(target);
  if (!params.ok()) return false;
  const std::string* sort = Param(*params, {"sort"});
  return sort != nullptr &&
         ParseSortMode(*sort).value_or(query::SortMode::kNewest) == query::SortMode::kBestMatch;
}

HttpResponse ApiHandler::Handle(const HttpRequest& request, std::string_view client_ip,
                                std::unique_ptr<LiveStream>* stream) const {
  const auto start = std::chrono::steady_clock::now();
  HttpResponse response;
  CallContext context;
  context.client_ip = std::string(client_ip);
  Call call{request, &context, "other", false, {}, {}, {}, stream};
  try {
    response = Dispatch(call);
  } catch (const std::exception& e) {
    // The one catch-all of a request: a bug answers 500 instead of taking the process down.
    response = Error(absl::InternalError(StrCat("internal error: ", e.what())), request);
  }
  Finish(call, start, response);
  return response;
}

void ApiHandler::HandleAsync(std::shared_ptr<const HttpRequest> request, std::string_view client_ip,
                             Answer done) const {
  auto pending = std::make_shared<PendingCall>(std::move(request), client_ip, std::move(done));
  auto answer = [this, pending](HttpResponse response) {
    if (pending->answered.exchange(true)) return;
    Finish(pending->call, pending->start, response);
    std::move(pending->done)(std::move(response));
  };
  HttpResponse response;
  try {
    const Route* row = Routed(pending->call, &response);
    if (row != nullptr && row->start != nullptr) return (this->*row->start)(pending->call, answer);
    if (row != nullptr) response = (this->*row->handle)(pending->call);
  } catch (const std::exception& e) {
    // As in Handle(); a handler that answered before it threw has answered.
    response = Error(absl::InternalError(StrCat("internal error: ", e.what())), *pending->request);
  }
  answer(std::move(response));
}

void ApiHandler::Finish(Call& call, std::chrono::steady_clock::time_point start,
                        HttpResponse& response) const {
  CallContext& context = *call.context;
  for (const auto& [name, value] : context.headers) response.set(Bsv(name), Bsv(value));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  metrics_.RecordRequest("http", call.route, response.result_int(),
                         std::chrono::duration<double>(elapsed).count());
  if (usage_ != nullptr && call.api) {
    // A call refused before authentication is counted for its key all the same.
    if (context.key_id.empty()) context.key_id = door_.KeyIdOf(call.key);
    RecordUsage(usage_, context, call.route == "search", response.result_int(), elapsed);
  }
}

const ApiHandler::Route* ApiHandler::Routed(Call& call, HttpResponse* refusal) const {
  const HttpRequest& request = call.request;
  const Route* path_match = nullptr;
  const Route* endpoint = Find(request, &path_match);
  if (endpoint == nullptr && path_match == nullptr) {
    call.route = "not_found";
    *refusal = NotFound(request);
    return nullptr;
  }
  const Route& row = endpoint != nullptr ? *endpoint : *path_match;
  call.route = row.name;
  call.api = row.api;
  if (row.api) {
    const std::string_view target(request.target().data(), request.target().size());
    absl::StatusOr<QueryParams> params = ParseQueryString(target);
    call.key = ApiKeyOf(request, params.ok() ? *params : QueryParams());
    if (!params.ok()) {
      *refusal = Error(params.status(), request);
      return nullptr;
    }
    call.params = *std::move(params);
  }
  if (endpoint == nullptr) {
    *refusal = MethodNotAllowed(request, AllowedMethods(PathOf(request)));
    return nullptr;
  }
  if (row.api) {
    if (absl::Status s = CheckParamsKnown(call.params, row.params); !s.ok()) {
      *refusal = Error(s, request);
      return nullptr;
    }
  }
  (void)MatchPath(row.pattern, PathOf(request), &call.args);  // it matched in Find
  return endpoint;
}

HttpResponse ApiHandler::Dispatch(Call& call) const {
  HttpResponse refusal;
  const Route* row = Routed(call, &refusal);
  if (row == nullptr) return refusal;
  return (this->*row->handle)(call);
}

HttpResponse ApiHandler::Healthz(Call& call) const {
  return MakeResponse(http::status::ok, call.request, "ok\n", "text/plain");
}

HttpResponse ApiHandler::Readyz(Call& call) const {
  const bool ready = ready_.load(std::memory_order_acquire);
  return MakeResponse(ready ? http::status::ok : http::status::service_unavailable, call.request,
                      ready ? "ready\n" : "not ready\n", "text/plain");
}

HttpResponse ApiHandler::MetricsPage(Call& call) const {
  std::string body;
  metrics_.Render(&body);
  for (const auto& extra : extra_metrics_) extra(&body);
  RenderEngineMetrics(door_.backend().Stats(), &body);
  if (std::optional<StreamHubStats> streams = door_.backend().StreamStats()) {
    RenderStreamMetrics(*streams, &body);
  }
  if (usage_ != nullptr) RenderUsageMetrics(usage_->Stats(), &body);
  return MakeResponse(http::status::ok, call.request, std::move(body),
                      "text/plain; version=0.0.4; charset=utf-8");
}

HttpResponse ApiHandler::WebFilePage(Call& call) const {
  const WebFile* file = FindWebFile(PathOf(call.request));
  if (file == nullptr) {
    call.route = "not_found";
    return NotFound(call.request);
  }
  HttpResponse response =
      MakeResponse(http::status::ok, call.request, std::string(file->body), file->content_type);
  // The page talks to this server only, and runs no script but its own files.
  response.set("Content-Security-Policy",
               "default-src 'self'; img-src 'self' data:; object-src 'none'; "
               "base-uri 'none'; frame-ancestors 'none'");
  response.set("X-Content-Type-Options", "nosniff");
  response.set("Referrer-Policy", "no-referrer");
  response.set(http::field::cache_control, "no-cache");
  return response;
}

HttpResponse ApiHandler::WebConfig(Call& call) const {
  // What the page needs before the user types a key: the demo key, while it is valid.
  const bool demo = !door_.KeyIdOf(kDemoKey).empty();
  return MakeResponse(http::status::ok, call.request,
                      Dump(json{{"demo_key", demo ? json(kDemoKey) : json(nullptr)},
                                {"max_results", kMaxResults}}));
}

namespace {

// A search's parameters, or InvalidArgument.
absl::StatusOr<SearchRequest> ReadSearchRequest(
    const std::vector<std::pair<std::string, std::string>>& params, const std::string& key) {
  SearchRequest search;
  search.api_dev_key = key;
  const std::string* terms = Param(params, {"search_terms", "q"});
  if (terms == nullptr || terms->empty()) {
    return absl::InvalidArgumentError("search_terms is required");
  }
  search.search_terms = *terms;
  if (const std::string* limit = Param(params, {"maximum_results_to_return", "limit"})) {
    const std::optional<uint32_t> n = ParseDecimal<uint32_t>(*limit);
    search.maximum_results_to_return = n.value_or(0);
    if (search.maximum_results_to_return == 0 || search.maximum_results_to_return > kMaxResults) {
      return absl::InvalidArgumentError(
          StrCat("maximum_results_to_return must be a number from 1 to ", kMaxResults));
    }
  }
  if (const std::string* sort = Param(params, {"sort"})) {
    absl::StatusOr<query::SortMode> mode = ParseSortMode(*sort);
    if (!mode.ok()) return mode.status();
    search.sort = *mode;
  }
  if (const std::string* token = Param(params, {"page_token"})) search.page_token = *token;
  for (auto [name, flag] : {std::pair{"highlight", &search.highlight},
                            std::pair{"allow_partial", &search.allow_partial},
                            std::pair{"exact_total", &search.exact_total}}) {
    if (absl::Status s = ReadFlag(params, name, flag); !s.ok()) return s;
  }
  return search;
}

}  // namespace

HttpResponse ApiHandler::Search(Call& call) const {
  const HttpRequest& request = call.request;
  absl::StatusOr<SearchRequest> search = ReadSearchRequest(call.params, call.key);
  if (!search.ok()) return Error(search.status(), request);
  absl::StatusOr<SearchResponse> result = door_.Search(*search, call.context);
  if (!result.ok()) return Error(result.status(), request);
  return MakeResponse(http::status::ok, request, SearchResponseJson(*result, search->sort));
}

void ApiHandler::StartSearch(Call& call, Answer done) const {
  const HttpRequest& request = call.request;
  absl::StatusOr<SearchRequest> search = ReadSearchRequest(call.params, call.key);
  if (!search.ok()) return std::move(done)(Error(search.status(), request));
  // `request` lives as long as `done` (it holds the pending call).
  door_.StartSearch(*search, call.context,
                    [&request, sort = search->sort,
                     done = std::move(done)](absl::StatusOr<SearchResponse> result) mutable {
                      HttpResponse response;
                      try {
                        response = result.ok() ? MakeResponse(http::status::ok, request,
                                                              SearchResponseJson(*result, sort))
                                               : Error(result.status(), request);
                      } catch (const std::exception& e) {
                        // On the backend's thread, where nothing above would catch it.
                        response = Error(absl::InternalError(StrCat("internal error: ", e.what())),
                                         request);
                      }
                      std::move(done)(std::move(response));
                    });
}

HttpResponse ApiHandler::Counts(Call& call) const {
  const HttpRequest& request = call.request;
  absl::StatusOr<CountsRequest> counts =
      ParseCountsRequest(call.params, door_.backend().clock().NowUnixMillis(), call.key);
  if (!counts.ok()) return Error(counts.status(), request);
  absl::StatusOr<CountsResponse> result = door_.Counts(*counts, call.context);
  if (!result.ok()) return Error(result.status(), request);
  return MakeResponse(http::status::ok, request, Dump(CountsJson(*result, counts->granularity)));
}

HttpResponse ApiHandler::Stream(Call& call) const {
  const HttpRequest& request = call.request;
  if (call.stream == nullptr) {
    return Error(absl::FailedPreconditionError("streams are served on a connection"), request);
  }
  StreamRequest stream;
  stream.api_dev_key = call.key;
  const std::string* terms = Param(call.params, {"search_terms", "q"});
  if (terms == nullptr || terms->empty()) {
    return Error(absl::InvalidArgumentError("search_terms is required"), request);
  }
  stream.search_terms = *terms;
  // EventSource sends Last-Event-ID when it reconnects; a first connection may name one too.
  if (auto it = request.find("Last-Event-ID"); it != request.end()) {
    stream.last_event_id = std::string(it->value());
  } else if (const std::string* id = Param(call.params, {"last_event_id"})) {
    stream.last_event_id = *id;
  }
  absl::StatusOr<std::unique_ptr<LiveStream>> live = door_.OpenStream(stream, call.context);
  if (!live.ok()) return Error(live.status(), request);
  *call.stream = *std::move(live);
  HttpResponse response(http::status::ok, request.version());
  response.set(http::field::server, "tweetsearch");
  response.set(http::field::content_type, "text/event-stream; charset=utf-8");
  response.set(http::field::cache_control, "no-cache");
  response.set("X-Accel-Buffering", "no");  // proxies: pass each event on at once
  response.keep_alive(false);               // the body runs until the stream ends
  return response;
}

namespace {

// A write's Idempotency-Key header into the call: at most one, and a valid key.
absl::Status TakeIdempotencyKey(const HttpRequest& request, CallContext* context) {
  const size_t headers = request.count("Idempotency-Key");
  if (headers == 0) return absl::OkStatus();
  if (headers > 1) return absl::InvalidArgumentError("more than one Idempotency-Key header");
  const auto value = request["Idempotency-Key"];
  context->idempotency_key.assign(value.data(), value.size());
  return CheckIdempotencyKey(context->idempotency_key);
}

}  // namespace

HttpResponse ApiHandler::Ingest(Call& call) const {
  const HttpRequest& request = call.request;
  if (absl::Status s = TakeIdempotencyKey(request, call.context); !s.ok()) {
    return Error(s, request);
  }
  const std::string& body = request.body();
  // Counted before anything is parsed (a newline count runs at memory speed).
  if (const size_t newlines = std::count(body.begin(), body.end(), '\n');
      newlines > kMaxIngestTweets) {
    HttpResponse response = Error(TooManyTweets(newlines), request);
    response.result(http::status::payload_too_large);
    return response;
  }
  std::vector<absl::StatusOr<NewTweet>> lines;
  std::vector<size_t> line_numbers;
  size_t start = 0, number = 0;
  while (start < body.size()) {
    size_t end = body.find('\n', start);
    if (end == std::string::npos) end = body.size();
    std::string_view line(body.data() + start, end - start);
    ++number;
    start = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    lines.push_back(ParseTweetJson(line));
    line_numbers.push_back(number);
  }
  if (lines.empty()) {
    return Error(absl::InvalidArgumentError(
                     "the body has no tweets: send JSON Lines, one tweet object per line"),
                 request);
  }
  absl::StatusOr<IngestResponse> result = door_.Ingest(call.key, std::move(lines), call.context);
  if (!result.ok()) return Error(result.status(), request);
  const std::string* report = Param(call.params, {"report"});
  const bool only_rejections = report != nullptr && *report == "rejected";
  json results = json::array();
  for (size_t i = 0; i < result->outcomes.size(); ++i) {
    const IngestOutcome& o = result->outcomes[i];
    if (o.status.ok()) {
      if (!only_rejections) {
        results.push_back(
            {{"line", line_numbers[i]}, {"status", "accepted"}, {"tweet_id", StrCat(o.id)}});
      }
    } else {
      results.push_back({{"line", line_numbers[i]},
                         {"status", "rejected"},
                         {"code", ErrorCodeName(o.status)},
                         {"error", SanitizeUtf8(AsStd(o.status.message()))}});
    }
  }
  json out = {{"accepted", result->accepted},
              {"rejected", result->rejected},
              {"results", std::move(results)}};
  // Nothing stored because storage was unavailable (past the front door's own retries): a 503
  // the client retries later, with the same per-line report.
  const bool unavailable =
      result->accepted == 0 &&
      std::any_of(result->outcomes.begin(), result->outcomes.end(),
                  [](const IngestOutcome& o) { return absl::IsUnavailable(o.status); });
  if (!unavailable) return MakeResponse(http::status::ok, request, Dump(out));
  out["error"] = {{"code", "unavailable"},
                  {"message", "no tweet was stored: storage is unavailable; retry later"}};
  HttpResponse response = MakeResponse(http::status::service_unavailable, request, Dump(out));
  response.set(http::field::retry_after, StrCat(kIngestRetryAfterSeconds));
  return response;
}

HttpResponse ApiHandler::GetTweet(Call& call) const {
  absl::StatusOr<TweetId> id = ParseTweetId(call.args[0]);
  if (!id.ok()) return Error(id.status(), call.request);
  absl::StatusOr<storage::StoredTweet> tweet = door_.Get(call.key, *id, call.context);
  if (!tweet.ok()) return Error(tweet.status(), call.request);
  std::string body;
  AppendTweetJson(&body, *tweet, tweet->likes, /*with_score=*/false, 0);
  return MakeResponse(http::status::ok, call.request, std::move(body));
}

HttpResponse ApiHandler::DeleteTweet(Call& call) const {
  absl::StatusOr<TweetId> id = ParseTweetId(call.args[0]);
  if (!id.ok()) return Error(id.status(), call.request);
  if (absl::Status s = TakeIdempotencyKey(call.request, call.context); !s.ok()) {
    return Error(s, call.request);
  }
  if (absl::Status s = door_.Delete(call.key, *id, call.context); !s.ok()) {
    return Error(s, call.request);
  }
  return MakeResponse(http::status::ok, call.request,
                      Dump(json{{"deleted", true}, {"tweet_id", StrCat(*id)}}));
}

HttpResponse ApiHandler::Likes(Call& call) const {
  const HttpRequest& request = call.request;
  absl::StatusOr<TweetId> id = ParseTweetId(call.args[0]);
  if (!id.ok()) return Error(id.status(), request);
  if (absl::Status s = TakeIdempotencyKey(request, call.context); !s.ok()) return Error(s, request);
  // {"set": N} or {"add": N} in the body, or ?set=N / ?add=N.
  std::optional<int64_t> set, add;
  if (!request.body().empty()) {
    json body = ParseSmallJson(request.body());
    if (body.is_discarded() || !body.is_object()) {
      return Error(absl::InvalidArgumentError(
                       "the body must be a JSON object such as {\"set\": 10} or {\"add\": 1}"),
                   request);
    }
    for (const auto& [name, target_value] : {std::pair{"set", &set}, std::pair{"add", &add}}) {
      if (auto it = body.find(name); it != body.end()) {
        *target_value = Int64Of(*it);
        if (!target_value->has_value()) return Error(NotAnInteger(name), request);
      }
    }
  }
  for (const auto& [name, target_value] : {std::pair{"set", &set}, std::pair{"add", &add}}) {
    if (const std::string* v = Param(call.params, {name})) {
      *target_value = ParseDecimal<int64_t>(*v);
      if (!target_value->has_value()) return Error(NotAnInteger(name), request);
    }
  }
  if (set.has_value() == add.has_value()) {
    return Error(absl::InvalidArgumentError("give exactly one of set or add"), request);
  }
  absl::StatusOr<uint32_t> likes =
      door_.Likes(call.key, *id, set.has_value() ? *set : *add, add.has_value(), call.context);
  if (!likes.ok()) return Error(likes.status(), request);
  return MakeResponse(http::status::ok, request,
                      Dump(json{{"tweet_id", StrCat(*id)}, {"likes", *likes}}));
}

HttpResponse ApiHandler::ListKeys(Call& call) const {
  absl::StatusOr<std::vector<ApiKey>> keys = door_.ListKeys(call.key, call.context);
  if (!keys.ok()) return Error(keys.status(), call.request);
  json list = json::array();
  for (const ApiKey& k : *keys) {
    json scopes = json::array();
    for (Scope s : {Scope::kSearch, Scope::kIngest, Scope::kAdmin}) {
      if (k.Allows(s)) scopes.push_back(ScopeName(s));
    }
    list.push_back({{"id", k.id},
                    {"prefix", k.prefix},
                    {"owner", k.owner},
                    {"tier", k.tier},
                    {"scopes", scopes},
                    {"created_at", FormatRfc3339(k.created_at_ms)},
                    {"revoked", k.revoked}});
  }
  return MakeResponse(http::status::ok, call.request, Dump(json{{"keys", list}}));
}

HttpResponse ApiHandler::CreateKey(Call& call) const {
  const HttpRequest& request = call.request;
  if (absl::Status s = TakeIdempotencyKey(request, call.context); !s.ok()) {
    return Error(s, request);
  }
  json body = ParseSmallJson(request.body());
  if (body.is_discarded() || !body.is_object() || !body.contains("owner") ||
      !body["owner"].is_string()) {
    return Error(absl::InvalidArgumentError(
                     "the body must be {\"owner\": ..., \"tier\": ..., \"scopes\": [...]}"),
                 request);
  }
  absl::StatusOr<uint8_t> scopes = ScopesOf(body);
  if (!scopes.ok()) return Error(scopes.status(), request);
  std::string tier = body.value("tier", "free");
  std::string chosen;
  if (auto it = body.find("key"); it != body.end()) {
    if (!it->is_string()) {
      return Error(absl::InvalidArgumentError("key must be a string"), request);
    }
    chosen = it->get<std::string>();
  }
  absl::StatusOr<std::string> created = door_.CreateKey(call.key, body["owner"].get<std::string>(),
                                                        tier, *scopes, call.context, chosen);
  if (!created.ok()) return Error(created.status(), request);
  return MakeResponse(http::status::created, request,
                      Dump(json{{"key", *created}, {"prefix", created->substr(0, 10)}}));
}

HttpResponse ApiHandler::RevokeKey(Call& call) const {
  if (absl::Status s = TakeIdempotencyKey(call.request, call.context); !s.ok()) {
    return Error(s, call.request);
  }
  if (absl::Status s = door_.RevokeKey(call.key, call.args[0], call.context); !s.ok()) {
    return Error(s, call.request);
  }
  return MakeResponse(http::status::ok, call.request, Dump(json{{"revoked", call.args[0]}}));
}

HttpResponse ApiHandler::Usage(Call& call) const {
  const HttpRequest& request = call.request;
  const int64_t now_s = door_.backend().clock().NowUnixMillis() / 1000;
  absl::StatusOr<UsageRequest> usage_request = ParseUsageRequest(call.params, now_s);
  if (!usage_request.ok()) return Error(usage_request.status(), request);
  // The caller's key comes from api_dev_key or a header, and then ?key= names the series;
  // a lone ?key= is the caller's key, asking for its own series.
  const std::string* dev_key = Param(call.params, {"api_dev_key"});
  const std::string* series_key = Param(call.params, {"key"});
  std::optional<std::string> credentials =
      dev_key != nullptr ? std::optional<std::string>(*dev_key) : HeaderApiKey(request);
  if (credentials.has_value()) {
    if (series_key != nullptr) usage_request->key = *series_key;
  } else if (series_key != nullptr) {
    credentials = *series_key;
  }
  absl::StatusOr<UsageResponse> series =
      door_.Usage(credentials.value_or(""), *usage_request, call.context);
  if (!series.ok()) return Error(series.status(), request);
  return MakeResponse(http::status::ok, request, Dump(UsageJson(*series, *usage_request)));
}

HttpResponse ApiHandler::Stats(Call& call) const {
  if (absl::StatusOr<ApiKey> k =
          door_.Authorize(call.key, Scope::kAdmin, Endpoint::kAdmin, 1, call.context);
      !k.ok()) {
    return Error(k.status(), call.request);
  }
  const EngineStats s = door_.backend().Stats();
  json status = {{"status", ready_.load(std::memory_order_acquire) ? "ready" : "not ready"},
                 {"shape", s.storage_partitions.empty() ? "one process" : "cluster"},
                 {"uptime_s", std::chrono::duration_cast<std::chrono::seconds>(
                                  std::chrono::steady_clock::now() - started_)
                                  .count()}};
  if (ingest_rate_ != nullptr) {
    status["ingest_per_second"] = {{"last_10s", ingest_rate_->PerSecond(10'000)},
                                   {"last_60s", ingest_rate_->PerSecond(60'000)}};
  }
  if (usage_ != nullptr) {
    const usage::RecorderStats u = usage_->Stats();
    status["usage"] = {
        {"recorded", u.recorded}, {"flushes", u.flushes}, {"flush_errors", u.flush_errors}};
  }
  return MakeResponse(http::status::ok, call.request, Dump(StatsJson(s, std::move(status))));
}

}  // namespace tweetsearch::aggregator
