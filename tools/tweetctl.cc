// tweetctl: the command-line client of a tweetsearch service (see docs/operations.md).
//
//   tweetctl ingest tweets.jsonl ../shared/data/sentiment140-20k.csv
//   tweetctl search 'love OR hate' --sort best_match --limit 5
//   tweetctl counts 'love OR hate' --granularity day --since -30d
//   tweetctl get 1234 | tweetctl delete 1234 | tweetctl likes 1234 --add 1
//   tweetctl keys create --owner ana --scopes search,ingest | keys list | keys revoke ts_1a2b
//   tweetctl status (the server at --server) | tweetctl status --topology cluster.yaml
//   tweetctl rebuild --topology cluster.yaml --index-partition 0 --replica a
//
// Server: --server or $TWEETSEARCH_SERVER (default http://127.0.0.1:8080). Key: --key or
// $TWEETSEARCH_KEY (default: the demo key).
// Cluster commands read the topology file (--topology or $TWEETSEARCH_TOPOLOGY) and talk to
// etcd and the processes directly.
// Exit codes: 0 done; 1 done, but some tweets were rejected (status: some process is not
// healthy); 2 bad usage or unreadable file; 3 server unreachable; 4 the server refused the
// request (the message says why).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "aggregator/api_keys.h"
#include "cluster/cluster_status.h"
#include "cluster/rebuild.h"
#include "cluster/topology.h"
#include "common/strings.h"
#include "net/http_client.h"
#include "net/sse_client.h"
#include "tools/ctl/ingest_source.h"

namespace {

using nlohmann::json;
using tweetsearch::StrCat;
using tweetsearch::net::HttpClient;
using tweetsearch::net::HttpReply;
using tweetsearch::net::UrlEncode;

constexpr int kOk = 0, kSomeRejected = 1, kUsage = 2, kUnreachable = 3, kRefused = 4;

struct Globals {
  std::string server;      // --server, $TWEETSEARCH_SERVER, else http://127.0.0.1:8080
  std::string key;         // --key, $TWEETSEARCH_KEY, else the demo key
  std::string host, port;  // of `server`, once parsed
  std::string topology;    // --topology of the cluster commands, else $TWEETSEARCH_TOPOLOGY
};

// The outcome of one request: prints the problem and returns an exit code on failure.
int Checked(absl::StatusOr<HttpReply> r, const Globals& g, HttpReply* reply) {
  if (!r.ok()) {
    std::cerr << "tweetctl: cannot reach " << g.server << ": " << r.status().message() << "\n";
    return kUnreachable;
  }
  *reply = *std::move(r);
  if (reply->status >= 400) {
    json error = json::parse(reply->body, nullptr, false);
    std::string message = reply->body;
    if (!error.is_discarded() && error.contains("error")) {
      message = error["error"].value("message", reply->body);
    }
    std::cerr << "tweetctl: the server answered " << reply->status << ": " << message << "\n";
    return kRefused;
  }
  return kOk;
}

// Sends one request; prints the problem and returns an exit code on failure.
int Call(HttpClient& client, const Globals& g, std::string_view method, const std::string& target,
         std::string_view body, HttpReply* reply,
         const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  return Checked(client.Send(method, target, body, "application/json", g.key, headers), g, reply);
}

// A batch's Idempotency-Key: 128 random bits, in hex.
std::string BatchKey() {
  thread_local std::mt19937_64 bits{std::random_device{}()};
  char key[33];
  std::snprintf(key, sizeof key, "%016llx%016llx", static_cast<unsigned long long>(bits()),
                static_cast<unsigned long long>(bits()));
  return key;
}

// Sends one ingest batch, with an Idempotency-Key of its own. A 503 means storage was
// unavailable and nothing was stored; a broken connection may have lost the answer of a batch
// that was stored. Either way the batch is sent again under the same key (which stores nothing
// twice and answers as the first time), after the answer's Retry-After (1 to 30 s) or 1 s, up
// to 5 times.
int SendBatch(HttpClient& client, const Globals& g, std::string_view body, HttpReply* reply) {
  constexpr int kRetries = 5;
  const std::vector<std::pair<std::string, std::string>> headers = {
      {"Idempotency-Key", BatchKey()}};
  for (int attempt = 0;; ++attempt) {
    absl::StatusOr<HttpReply> r =
        client.Send("POST", "/v1/tweets?report=rejected", body, "application/json", g.key, headers);
    const bool lost = !r.ok() && absl::IsUnavailable(r.status());
    if ((!lost && (!r.ok() || r->status != 503)) || attempt == kRetries) {
      return Checked(std::move(r), g, reply);
    }
    int wait = 1;
    if (!lost && !absl::SimpleAtoi(r->headers["retry-after"], &wait)) wait = 1;
    wait = std::clamp(wait, 1, 30);
    std::cerr << "\ntweetctl: "
              << (lost ? "the connection broke (" + std::string(r.status().message()) + ")"
                       : std::string("the server answered 503 (storage unavailable, nothing "
                                     "stored)"))
              << "; sending the batch again in " << wait << " s\n";
    std::this_thread::sleep_for(std::chrono::seconds(wait));
  }
}

std::string Shorten(std::string text, size_t width) {
  for (char& c : text) {
    if (c == '\n' || c == '\t' || c == '\r') c = ' ';
  }
  if (text.size() <= width) return text;
  size_t cut = width - 1;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // UTF-8
  return text.substr(0, cut) + "…";
}

void PrintTweets(const json& results) {
  std::printf("%-20s  %-20s  %7s  %-15s  %s\n", "TWEET ID", "CREATED AT", "LIKES", "USER", "TEXT");
  for (const json& t : results) {
    std::printf("%-20s  %-20s  %7u  %-15s  %s\n", t.value("tweet_id", "").c_str(),
                (t.value("created_at", "").substr(0, 19) + "Z").c_str(), t.value("likes", 0u),
                Shorten(t.value("user_name", ""), 15).c_str(),
                Shorten(t.value("text", ""), 70).c_str());
  }
}

// Groups rejection messages: digits become '#', so "duplicate id 12" and "duplicate id 13" count
// as one reason.
std::string ReasonOf(const std::string& message) {
  std::string reason;
  for (char c : message.substr(0, 80)) {
    if (c >= '0' && c <= '9') {
      if (reason.empty() || reason.back() != '#') reason += '#';
    } else {
      reason += c;
    }
  }
  return reason;
}

int Ingest(const Globals& g, const std::vector<std::string>& files, size_t batch_lines,
           int parallel) {
  auto source = tweetsearch::ctl::IngestSource::Open(files, batch_lines, size_t{4} << 20);
  if (!source.ok()) {
    std::cerr << "tweetctl: " << source.status().message() << "\n";
    return kUsage;
  }
  const bool tty = isatty(STDERR_FILENO);
  // done_bytes: of the files, in batches the server answered (the progress bar's measure; the
  // source reads ahead of it).
  std::atomic<uint64_t> accepted{0}, rejected{0}, sent{0}, done_bytes{0};
  std::atomic<int> failure{kOk};
  absl::Mutex mu;
  std::map<std::string, uint64_t> reasons;
  std::vector<std::string> examples;
  const auto start = std::chrono::steady_clock::now();
  std::atomic<bool> done{false};

  auto sender = [&] {
    HttpClient client(g.host, g.port);
    while (failure.load() == kOk) {
      std::optional<tweetsearch::ctl::Batch> batch = (*source)->NextBatch();
      if (!batch.has_value()) return;
      HttpReply reply;
      if (int rc = SendBatch(client, g, batch->body, &reply); rc != kOk) {
        failure = rc;
        return;
      }
      json body = json::parse(reply.body, nullptr, false);
      if (body.is_discarded()) {
        std::cerr << "tweetctl: the server's answer is not JSON\n";
        failure = kRefused;
        return;
      }
      accepted += body.value("accepted", uint64_t{0});
      rejected += body.value("rejected", uint64_t{0});
      sent += batch->origins.size();
      done_bytes += batch->source_bytes;
      absl::MutexLock lock(&mu);
      for (const json& r : body["results"]) {
        const std::string message = r.value("error", "");
        ++reasons[ReasonOf(message)];
        const size_t line = r.value("line", size_t{1});
        if (examples.size() < 5 && line >= 1 && line <= batch->origins.size()) {
          examples.push_back(StrCat(batch->origins[line - 1], ": ", message));
        }
      }
    }
  };
  auto report = [&](bool final) {
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double rate = sent.load() / std::max(seconds, 1e-3);
    const uint64_t total = (*source)->total_bytes(), done_so_far = done_bytes.load();
    std::string line = StrCat(sent.load(), " tweets sent, ", static_cast<uint64_t>(rate), "/s");
    if (total > 0) {
      const double fraction =
          final && failure.load() == kOk ? 1.0 : std::min(1.0, double(done_so_far) / double(total));
      const int width = 30, filled = static_cast<int>(fraction * width);
      // No estimate until a batch came back: the first ones say nothing about the rate.
      const std::string eta =
          fraction > 0 ? StrCat(static_cast<int>(seconds * (1 - fraction) / fraction), " s")
                       : std::string("…");
      line = StrCat("[", std::string(filled, '#'), std::string(width - filled, '.'), "] ",
                    static_cast<int>(fraction * 100), "%  ", line,
                    final ? std::string() : StrCat(", ETA ", eta));
    }
    if (tty) {
      std::cerr << "\r" << line << "   " << (final ? "\n" : "") << std::flush;
    } else {
      std::cerr << line << "\n";
    }
  };
  std::thread progress([&] {
    auto last = std::chrono::steady_clock::now();
    while (!done.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const auto now = std::chrono::steady_clock::now();
      if (tty || now - last >= std::chrono::seconds(5)) {
        report(false);
        last = now;
      }
    }
  });
  std::vector<std::thread> senders;
  for (int i = 0; i < std::max(1, parallel); ++i) senders.emplace_back(sender);
  for (auto& t : senders) t.join();
  done = true;
  progress.join();
  report(true);

  const auto local = (*source)->local_rejects();
  for (const auto& r : local) {
    ++reasons[ReasonOf(r.reason)];
    if (examples.size() < 5) examples.push_back(StrCat(r.origin, ": ", r.reason));
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "accepted " << accepted.load() << ", rejected " << rejected.load() + local.size()
            << " in " << fmt::format("{:.1f}", seconds) << " s ("
            << static_cast<uint64_t>(accepted.load() / std::max(seconds, 1e-3)) << " tweets/s)\n";
  for (const auto& [reason, count] : reasons) std::cout << "  " << count << " × " << reason << "\n";
  for (const std::string& e : examples) std::cout << "  e.g. " << e << "\n";
  if (failure.load() != kOk) return failure.load();
  return rejected.load() + local.size() > 0 ? kSomeRejected : kOk;
}

int ExitCodeOf(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
      return kUsage;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return kUnreachable;
    default:
      return kRefused;
  }
}

std::string Thousands(uint64_t n) {
  std::string digits = StrCat(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

int Status(const tweetsearch::cluster::Topology& topology, bool as_json) {
  using tweetsearch::cluster::RoleName;
  absl::StatusOr<tweetsearch::cluster::ClusterStatus> status =
      tweetsearch::cluster::CollectStatus(topology);
  if (!status.ok()) {
    std::cerr << "tweetctl: " << status.status().message() << "\n";
    return ExitCodeOf(status.status());
  }
  bool healthy = true;
  json out = json::array();
  if (!as_json) {
    std::printf("%-10s  %-8s  %-4s  %-21s  %-6s  %-22s  %12s  %s\n", "ROLE", "NODE", "PART",
                "ADDRESS", "HEALTH", "STATE", "TWEETS", "DETAIL");
  }
  for (const tweetsearch::cluster::ProcessStatus& p : status->processes) {
    healthy = healthy && p.healthy;
    const std::string part = p.partition < 0 ? "-" : StrCat(p.partition);
    const char* health = p.healthy ? "ok" : !p.reachable ? "DOWN" : "DEGRADED";
    if (as_json) {
      out.push_back({{"role", RoleName(p.role)},
                     {"node", p.node},
                     {"partition", p.partition},
                     {"address", p.address},
                     {"member", p.member},
                     {"reachable", p.reachable},
                     {"healthy", p.healthy},
                     {"state", p.state},
                     {"tweets", p.tweets},
                     {"detail", p.detail}});
      continue;
    }
    std::printf(
        "%-10s  %-8s  %-4s  %-21s  %-6s  %-22s  %12s  %s\n", std::string(RoleName(p.role)).c_str(),
        p.node.c_str(), part.c_str(), p.address.c_str(), health,
        p.state.empty() ? "-" : p.state.c_str(),
        p.role == tweetsearch::cluster::Role::kAggregator ? "-" : Thousands(p.tweets).c_str(),
        p.detail.c_str());
  }
  if (as_json) {
    std::cout << json{{"processes", out}, {"problems", status->problems}}.dump(2) << "\n";
  } else {
    for (const std::string& problem : status->problems) std::cout << "PROBLEM: " << problem << "\n";
    if (healthy && status->problems.empty()) std::cout << "every process is healthy\n";
  }
  return healthy && status->problems.empty() ? kOk : kSomeRejected;
}

int Rebuild(const tweetsearch::cluster::Topology& topology,
            tweetsearch::cluster::RebuildOptions options) {
  const bool tty = isatty(STDERR_FILENO) != 0;
  auto last_line = std::chrono::steady_clock::now() - std::chrono::hours(1);
  std::string last_phase;
  auto report = [&](const tweetsearch::cluster::RebuildProgress& p) {
    const auto now = std::chrono::steady_clock::now();
    const bool phase_changed = p.phase != last_phase;
    if (!tty && !phase_changed && now - last_line < std::chrono::seconds(5)) return;
    last_line = now;
    if (phase_changed && p.phase == "loading") {
      std::cerr << (p.resumed ? "resuming" : "rebuilding") << " " << options.replica << ": "
                << Thousands(p.total) << " tweets listed by builder " << p.builder << "\n";
      if (p.partition_offline) {
        std::cerr << "no other replica of its partition serves: the partition is offline "
                     "(searches answer 503, or partial) until this rebuild ends\n";
      }
    }
    last_phase = p.phase;
    const double fraction = p.total == 0 ? 1.0 : std::min(1.0, double(p.done) / double(p.total));
    const int width = 30, filled = static_cast<int>(fraction * width);
    std::string bar = std::string(filled, '#') + std::string(width - filled, '.');
    std::string eta = "-";
    if (p.tweets_per_s > 0 && p.done < p.total) {
      eta = StrCat(static_cast<int64_t>(double(p.total - p.done) / p.tweets_per_s), " s");
    }
    std::fprintf(stderr, "%s[%s] %5.1f%%  %s/%s tweets  %s tweets/s  ETA %s  %s%s", tty ? "\r" : "",
                 bar.c_str(), fraction * 100, Thousands(p.done).c_str(), Thousands(p.total).c_str(),
                 Thousands(uint64_t(p.tweets_per_s)).c_str(), eta.c_str(), p.phase.c_str(),
                 tty ? "   " : "\n");
  };
  absl::Status s = tweetsearch::cluster::RunRebuild(topology, options, report);
  if (tty) std::cerr << "\n";
  if (!s.ok()) {
    std::cerr << "tweetctl: rebuild of " << options.replica << " failed: " << s.message() << "\n";
    return ExitCodeOf(s);
  }
  if (last_phase == "stopped") {
    std::cerr << "stopped as asked; " << options.replica
              << " keeps what it loaded: run the same command again to resume\n";
    return kOk;
  }
  std::cerr << options.replica << " is rebuilt, caught up and serving\n";
  return kOk;
}

// Each subcommand below registers its options and, as its callback, runs: CLI11 calls it once
// the whole command line is parsed, and it leaves its exit code in `*rc`.

// Splits --server into host and port; prints the problem and returns kUsage if it is not
// http://HOST:PORT.
int ResolveServer(Globals& g) {
  if (absl::Status s = tweetsearch::net::ParseServerUrl(g.server, &g.host, &g.port); !s.ok()) {
    std::cerr << "tweetctl: " << s.message() << "\n";
    return kUsage;
  }
  return kOk;
}

// One request to the service; on success prints what `print` makes of the answer.
int Request(Globals& g, std::string_view method, const std::string& target, std::string_view body,
            const std::function<void(const HttpReply&)>& print,
            const std::vector<std::pair<std::string, std::string>>& headers = {}) {
  if (int rc = ResolveServer(g); rc != kOk) return rc;
  HttpClient client(g.host, g.port);
  HttpReply reply;
  if (int rc = Call(client, g, method, target, body, &reply, headers); rc != kOk) return rc;
  print(reply);
  return kOk;
}

void AddIngest(CLI::App& app, Globals& g, int* rc) {
  struct Options {
    std::vector<std::string> files;
    size_t batch_lines = 2000;
    int parallel = 2;
  };
  auto o = std::make_shared<Options>();
  auto* ingest = app.add_subcommand(
      "ingest", "Bulk-ingest JSON Lines, v1.1 JSON or Sentiment140 CSV files ('-': stdin)");
  ingest->add_option("files", o->files, "Files")->required();
  ingest->add_option("--batch", o->batch_lines, "Tweets per request")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  ingest->add_option("--parallel", o->parallel, "Requests in flight")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  ingest->callback([&g, rc, o] {
    *rc = ResolveServer(g);
    if (*rc == kOk) *rc = Ingest(g, o->files, o->batch_lines, o->parallel);
  });
}

void PrintSearch(const HttpReply& reply, bool as_json) {
  if (as_json) {
    std::cout << reply.body << "\n";
    return;
  }
  json body = json::parse(reply.body);
  PrintTweets(body["results"]);
  std::printf("%zu shown of %s%s matches in %.2f ms\n", body["results"].size(),
              Thousands(body["total_hits"].get<uint64_t>()).c_str(),
              body.value("total_is_exact", true) ? "" : " or more", body["took_ms"].get<double>());
  if (!body["next_page_token"].is_null()) {
    std::cout << "next page: --page-token " << body["next_page_token"].get<std::string>() << "\n";
  }
}

void AddSearch(CLI::App& app, Globals& g, int* rc) {
  struct Options {
    std::string query, sort = "newest", page_token;
    int limit = 20;
    bool as_json = false, exact_total = false;
  };
  auto o = std::make_shared<Options>();
  auto* search = app.add_subcommand("search", "Search and print a table (or --json)");
  search->add_option("query", o->query, "Query")->required();
  search->add_option("--sort", o->sort, "newest, best_match or most_liked (or 0, 1, 2)")
      ->capture_default_str();
  search->add_option("--limit", o->limit, "Results")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  search->add_option("--page-token", o->page_token, "Continue from this token");
  search->add_flag("--json", o->as_json, "Print the server's JSON");
  search->add_flag("--exact-total", o->exact_total,
                   "Count every match (by default the count is exact up to 10,000)");
  search->callback([&g, rc, o] {
    std::string target =
        StrCat("/v1/search?search_terms=", UrlEncode(o->query),
               "&maximum_results_to_return=", o->limit, "&sort=", UrlEncode(o->sort));
    if (!o->page_token.empty()) target += "&page_token=" + UrlEncode(o->page_token);
    if (o->exact_total) target += "&exact_total=true";
    *rc = Request(g, "GET", target, {}, [&](const HttpReply& r) { PrintSearch(r, o->as_json); });
  });
}

// One line per bucket holding matches: its start, its count and a bar scaled to the largest.
void PrintCounts(const HttpReply& reply, bool as_json) {
  if (as_json) {
    std::cout << reply.body << "\n";
    return;
  }
  json body = json::parse(reply.body);
  uint64_t most = 0;
  size_t empty = 0;
  for (const json& b : body["counts"]) most = std::max(most, b["tweet_count"].get<uint64_t>());
  for (const json& b : body["counts"]) {
    const uint64_t n = b["tweet_count"];
    if (n == 0) {
      ++empty;
      continue;
    }
    const size_t bar = static_cast<size_t>((n * 40 + most - 1) / most);
    std::printf("%s  %10s  %s\n", b["start"].get<std::string>().c_str(), Thousands(n).c_str(),
                std::string(bar, '#').c_str());
  }
  std::printf("%s matches from %s to %s, per %s (%zu empty buckets not shown) in %.2f ms\n",
              Thousands(body["total_tweet_count"]).c_str(),
              body["since"].get<std::string>().c_str(), body["until"].get<std::string>().c_str(),
              body["granularity"].get<std::string>().c_str(), empty, body["took_ms"].get<double>());
}

void AddCounts(CLI::App& app, Globals& g, int* rc) {
  struct Options {
    std::string query, granularity = "hour", since, until;
    bool as_json = false;
  };
  auto o = std::make_shared<Options>();
  auto* counts =
      app.add_subcommand("counts", "Matches per minute, hour or day, with a bar chart (or --json)");
  counts->add_option("query", o->query, "Query")->required();
  counts->add_option("--granularity", o->granularity, "minute, hour or day")->capture_default_str();
  counts->add_option("--since", o->since,
                     "From (RFC 3339, Unix seconds, or back from now: -24h, -7d); default 7 "
                     "days before --until");
  counts->add_option("--until", o->until, "To (as --since); default now");
  counts->add_flag("--json", o->as_json, "Print the server's JSON");
  counts->callback([&g, rc, o] {
    std::string target = StrCat("/v1/counts?search_terms=", UrlEncode(o->query),
                                "&granularity=", UrlEncode(o->granularity));
    if (!o->since.empty()) target += "&since=" + UrlEncode(o->since);
    if (!o->until.empty()) target += "&until=" + UrlEncode(o->until);
    *rc = Request(g, "GET", target, {}, [&](const HttpReply& r) { PrintCounts(r, o->as_json); });
  });
}

// One stream event as a line: the tweet (or the delete), or with `as_json` the event's id, kind
// and data as one JSON object.
void PrintStreamEvent(const tweetsearch::net::SseEvent& e, bool as_json) {
  if (as_json) {
    json data = json::parse(e.data, nullptr, false);
    std::cout << json{{"id", e.id}, {"event", e.event}, {"data", data}}.dump() << std::endl;
    return;
  }
  json data = json::parse(e.data, nullptr, false);
  if (data.is_discarded()) return;
  if (e.event == "tweet") {
    std::printf("%-20s  %-15s  %s\n", (data.value("created_at", "").substr(0, 19) + "Z").c_str(),
                Shorten(data.value("user_name", ""), 15).c_str(),
                Shorten(data.value("text", ""), 90).c_str());
  } else if (e.event == "delete") {
    std::printf("deleted %s\n", data.value("tweet_id", "").c_str());
  } else if (e.event == "gap") {
    std::printf("(some events were lost: %s)\n", data.value("message", "").c_str());
  }
  std::fflush(stdout);
}

// Follows a stream, reconnecting after the last event received when the connection drops
// (backing off to 30 s), until --max-events, a refusal or an end the server gives a reason for.
int Stream(Globals& g, const std::string& query, std::string last_id, size_t max_events,
           bool as_json, bool reconnect) {
  if (int rc = ResolveServer(g); rc != kOk) return rc;
  const std::string target = "/v1/stream?search_terms=" + UrlEncode(query);
  size_t events = 0;
  int backoff_s = 1;
  for (;;) {
    HttpReply refused;
    absl::StatusOr<std::unique_ptr<tweetsearch::net::SseClient>> stream =
        tweetsearch::net::SseClient::Open(g.host, g.port, target, g.key, last_id,
                                          std::chrono::seconds(60), &refused);
    if (!stream.ok() && refused.status != 0) {
      json error = json::parse(refused.body, nullptr, false);
      std::cerr << "tweetctl: the server answered " << refused.status << ": "
                << (error.contains("error") ? error["error"].value("message", refused.body)
                                            : refused.body)
                << "\n";
      return kRefused;
    }
    while (stream.ok()) {
      absl::StatusOr<tweetsearch::net::SseEvent> e = (*stream)->Next();
      if (!e.ok()) break;
      backoff_s = 1;
      if (!e->id.empty()) last_id = e->id;
      if (e->event == "end") {
        json data = json::parse(e->data, nullptr, false);
        std::cerr << "tweetctl: the server ended the stream: "
                  << (data.contains("error") ? data["error"].value("message", e->data) : e->data)
                  << " (resume with --last-event-id " << last_id << ")\n";
        return kRefused;
      }
      if (e->event == "ready" && !as_json) continue;
      PrintStreamEvent(*e, as_json);
      if (e->event == "tweet" || e->event == "delete") {
        if (max_events > 0 && ++events >= max_events) return kOk;
      }
    }
    if (!reconnect) {
      std::cerr << "tweetctl: the stream ended (resume with --last-event-id " << last_id << ")\n";
      return kUnreachable;
    }
    std::cerr << "tweetctl: the stream dropped; reconnecting in " << backoff_s << " s\n";
    std::this_thread::sleep_for(std::chrono::seconds(backoff_s));
    backoff_s = std::min(30, backoff_s * 2);
  }
}

void AddStream(CLI::App& app, Globals& g, int* rc) {
  struct Options {
    std::string query, last_event_id;
    size_t max_events = 0;
    bool as_json = false, no_reconnect = false;
  };
  auto o = std::make_shared<Options>();
  auto* stream = app.add_subcommand(
      "stream", "Print new tweets matching a query as they arrive (and deletes of matches)");
  stream->add_option("query", o->query, "Query")->required();
  stream->add_option("--last-event-id", o->last_event_id,
                     "Resume after this event (as printed when a stream ends)");
  stream->add_option("--max-events", o->max_events, "Stop after this many tweets and deletes");
  stream->add_flag("--json", o->as_json, "Print each event as JSON (id, event, data)");
  stream->add_flag("--no-reconnect", o->no_reconnect, "Stop when the connection drops");
  stream->callback([&g, rc, o] {
    *rc = Stream(g, o->query, o->last_event_id, o->max_events, o->as_json, !o->no_reconnect);
  });
}

// get, delete and likes: one tweet by id.
void AddTweetCommands(CLI::App& app, Globals& g, int* rc) {
  struct Options {
    std::string id;
    std::optional<int64_t> set_likes, add_likes;
  };
  auto o = std::make_shared<Options>();
  auto* get = app.add_subcommand("get", "Show one tweet");
  get->add_option("id", o->id)->required();
  get->callback([&g, rc, o] {
    *rc = Request(g, "GET", "/v1/tweets/" + UrlEncode(o->id), {},
                  [](const HttpReply& r) { std::cout << json::parse(r.body).dump(2) << "\n"; });
  });
  auto* del = app.add_subcommand("delete", "Delete a tweet");
  del->add_option("id", o->id)->required();
  del->callback([&g, rc, o] {
    *rc = Request(g, "DELETE", "/v1/tweets/" + UrlEncode(o->id), {},
                  [&](const HttpReply&) { std::cout << "deleted " << o->id << "\n"; });
  });
  auto* likes = app.add_subcommand("likes", "Set or add to a tweet's likes");
  likes->add_option("id", o->id)->required();
  auto* set_opt = likes->add_option("--set", o->set_likes, "New value");
  auto* add_opt = likes->add_option("--add", o->add_likes, "Amount to add (may be negative)");
  set_opt->excludes(add_opt);
  likes->callback([&g, rc, o] {
    if (!o->set_likes && !o->add_likes) {
      std::cerr << "tweetctl: give --set N or --add N\n";
      *rc = kUsage;
      return;
    }
    const std::string body = o->set_likes ? StrCat("{\"set\":", *o->set_likes, "}")
                                          : StrCat("{\"add\":", *o->add_likes, "}");
    *rc = Request(g, "POST", "/v1/tweets/" + UrlEncode(o->id) + "/likes", body,
                  [&](const HttpReply& r) {
                    std::cout << o->id << " has " << json::parse(r.body)["likes"] << " likes\n";
                  });
  });
}

// A table of the keys, each column as wide as its widest cell.
void PrintKeys(const HttpReply& reply) {
  std::vector<std::vector<std::string>> rows = {
      {"PREFIX", "OWNER", "TIER", "SCOPES", "CREATED AT", "STATE"}};
  const json body = json::parse(reply.body);
  for (const json& k : body["keys"]) {
    std::string scope_names;
    for (const json& s : k["scopes"]) {
      scope_names += (scope_names.empty() ? "" : ",") + s.get<std::string>();
    }
    rows.push_back({k.value("prefix", ""), Shorten(k.value("owner", ""), 24), k.value("tier", ""),
                    scope_names, k.value("created_at", ""),
                    k.value("revoked", false) ? "revoked" : "active"});
  }
  std::vector<size_t> widths(rows[0].size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size() + 2, ' ');
    }
    std::cout << line << "\n";
  }
}

// keys create, keys list, keys revoke, and stats: the admin key's commands.
void AddAdminCommands(CLI::App& app, Globals& g, int* rc) {
  struct Options {
    std::string owner, tier = "free", scopes = "search", prefix, idempotency_key;
    // The Idempotency-Key header, when given: the command may then be run again safely.
    std::vector<std::pair<std::string, std::string>> Headers() const {
      if (idempotency_key.empty()) return {};
      return {{"Idempotency-Key", idempotency_key}};
    }
  };
  auto o = std::make_shared<Options>();
  constexpr const char* kOnceHelp =
      "Send this request's Idempotency-Key: the command run again with it makes no change "
      "(docs/api.md)";
  auto* keys = app.add_subcommand("keys", "Manage API keys (admin key needed)");
  keys->require_subcommand(1);
  auto* create = keys->add_subcommand("create", "Make a new key");
  create->add_option("--owner", o->owner)->required();
  create->add_option("--tier", o->tier)->capture_default_str();
  create->add_option("--scopes", o->scopes, "Comma-separated: search, ingest, admin")
      ->capture_default_str();
  create->add_option("--idempotency-key", o->idempotency_key, kOnceHelp);
  create->callback([&g, rc, o] {
    json scope_list = json::array();
    for (std::string_view rest = o->scopes; !rest.empty();) {
      const size_t comma = rest.find(',');
      scope_list.push_back(std::string(rest.substr(0, comma)));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    json body = {{"owner", o->owner}, {"tier", o->tier}, {"scopes", scope_list}};
    *rc = Request(
        g, "POST", "/v1/admin/keys", body.dump(),
        [](const HttpReply& r) {
          std::cout << json::parse(r.body)["key"].get<std::string>() << "\n";
        },
        o->Headers());
  });
  keys->add_subcommand("list", "List keys")->callback([&g, rc] {
    *rc = Request(g, "GET", "/v1/admin/keys", {}, PrintKeys);
  });
  auto* revoke = keys->add_subcommand("revoke", "Revoke a key by its prefix");
  revoke->add_option("prefix", o->prefix)->required();
  revoke->add_option("--idempotency-key", o->idempotency_key, kOnceHelp);
  revoke->callback([&g, rc, o] {
    *rc = Request(
        g, "DELETE", "/v1/admin/keys/" + UrlEncode(o->prefix), {},
        [&](const HttpReply&) { std::cout << "revoked " << o->prefix << "\n"; }, o->Headers());
  });
  app.add_subcommand("stats", "Index and storage figures (admin key)")->callback([&g, rc] {
    *rc = Request(g, "GET", "/v1/stats", {},
                  [](const HttpReply& r) { std::cout << json::parse(r.body).dump(2) << "\n"; });
  });
}

// The cluster topology of --topology (or $TWEETSEARCH_TOPOLOGY); prints the problem otherwise.
std::optional<tweetsearch::cluster::Topology> TopologyOf(const Globals& g) {
  if (g.topology.empty()) {
    std::cerr << "tweetctl: give --topology FILE (or set $TWEETSEARCH_TOPOLOGY)\n";
    return std::nullopt;
  }
  absl::StatusOr<tweetsearch::cluster::Topology> topology =
      tweetsearch::cluster::LoadTopology(g.topology);
  if (!topology.ok()) {
    std::cerr << "tweetctl: " << topology.status().message() << "\n";
    return std::nullopt;
  }
  return *std::move(topology);
}

// The status of the one-process server at --server: ready or not (no key needed), and with an
// admin key its figures. 0 if it is ready, 1 if not.
int ServerStatus(Globals& g, bool as_json) {
  if (int rc = ResolveServer(g); rc != kOk) return rc;
  HttpClient client(g.host, g.port);
  absl::StatusOr<HttpReply> ready = client.Send("GET", "/readyz", {}, "", "");
  if (!ready.ok()) {
    std::cerr << "tweetctl: cannot reach " << g.server << ": " << ready.status().message() << "\n";
    return kUnreachable;
  }
  const bool is_ready = ready->status == 200;
  absl::StatusOr<HttpReply> stats = client.Send("GET", "/v1/stats", {}, "", g.key);
  json figures =
      stats.ok() && stats->status == 200 ? json::parse(stats->body, nullptr, false) : json();
  if (as_json) {
    std::cout << json{{"server", g.server}, {"ready", is_ready}, {"stats", figures}}.dump(2)
              << "\n";
    return is_ready ? kOk : kSomeRejected;
  }
  std::printf("tweetsearchd at %s: %s\n", g.server.c_str(), is_ready ? "ready" : "NOT READY");
  if (!figures.is_object()) {
    std::printf("(its figures need an admin key: --key, or $TWEETSEARCH_KEY)\n");
    return is_ready ? kOk : kSomeRejected;
  }
  const json& p = figures["process"];
  std::printf("shape: %s, up %s s, ingest %s tweets/s (last 10 s)\n", p.value("shape", "?").c_str(),
              Thousands(p.value("uptime_s", uint64_t{0})).c_str(),
              Thousands(static_cast<uint64_t>(p.contains("ingest_per_second")
                                                  ? p["ingest_per_second"].value("last_10s", 0.0)
                                                  : 0.0))
                  .c_str());
  std::printf(
      "tweets: %s indexed, about %s stored; %s sealed segments, %s MiB of index in "
      "memory, %s damaged\n",
      Thousands(figures.value("indexed_documents", uint64_t{0})).c_str(),
      Thousands(figures.value("stored_tweets_estimate", uint64_t{0})).c_str(),
      Thousands(figures.value("sealed_segments", uint64_t{0})).c_str(),
      Thousands(figures.value("index_memory_bytes", uint64_t{0}) >> 20).c_str(),
      Thousands(figures.value("index_damaged_segments", uint64_t{0})).c_str());
  return is_ready ? kOk : kSomeRejected;
}

void AddStatus(CLI::App& app, Globals& g, int* rc) {
  auto as_json = std::make_shared<bool>(false);
  auto* status = app.add_subcommand(
      "status", "A cluster's processes (with --topology), or the one-process server at --server");
  status->add_option("--topology", g.topology,
                     "Cluster topology file (default: $TWEETSEARCH_TOPOLOGY)");
  status->add_flag("--json", *as_json, "Print JSON");
  status->callback([&g, rc, as_json] {
    if (g.topology.empty()) {
      *rc = ServerStatus(g, *as_json);
      return;
    }
    std::optional<tweetsearch::cluster::Topology> topology = TopologyOf(g);
    *rc = topology.has_value() ? Status(*topology, *as_json) : kUsage;
  });
}

// The node name of replica `replica` ("a", "b", "0", "1" or a node name) of index partition
// `partition`; prints the problem and returns nullopt if there is none.
std::optional<std::string> ReplicaNode(const tweetsearch::cluster::Topology& topology,
                                       int partition, const std::string& replica) {
  if (partition < 0 || static_cast<size_t>(partition) >= topology.index.size()) {
    std::cerr << "tweetctl: the topology has index partitions 0.." << topology.index.size() - 1
              << "\n";
    return std::nullopt;
  }
  const auto& replicas = topology.index[partition].replicas;
  int which = replica == "a" || replica == "0" ? 0 : replica == "b" || replica == "1" ? 1 : -1;
  for (size_t i = 0; i < replicas.size(); ++i) {
    if (replicas[i].node == replica) which = static_cast<int>(i);
  }
  if (which < 0 || static_cast<size_t>(which) >= replicas.size()) {
    std::cerr << "tweetctl: index partition " << partition << " has no replica \"" << replica
              << "\"\n";
    return std::nullopt;
  }
  return replicas[which].node;
}

void AddRebuild(CLI::App& app, Globals& g, int* rc) {
  struct Options {
    tweetsearch::cluster::RebuildOptions rebuild;
    int index_partition = -1;
    std::string replica;
  };
  auto o = std::make_shared<Options>();
  auto* rebuild =
      app.add_subcommand("rebuild", "Rebuild one index replica from the builder and storage");
  rebuild->add_option("--topology", g.topology,
                      "Cluster topology file (default: $TWEETSEARCH_TOPOLOGY)");
  rebuild->add_option("--index-partition", o->index_partition, "Index partition")->required();
  rebuild->add_option("--replica", o->replica, "Replica: a or b (0 or 1), or its node name")
      ->required();
  rebuild->add_option("--batch", o->rebuild.batch, "Tweets per batch")
      ->check(CLI::Range(1, 50000))
      ->capture_default_str();
  rebuild->add_flag("--force", o->rebuild.force, "Rebuild even a serving replica");
  rebuild->add_flag("--yes-take-offline", o->rebuild.take_offline,
                    "With --force: rebuild even the partition's only serving replica (its "
                    "searches fail or are partial until the rebuild ends)");
  rebuild->add_flag("--restart", o->rebuild.restart, "Begin again instead of resuming");
  rebuild->add_option("--stop-after", o->rebuild.stop_after,
                      "Load at most N tweets in this run, save, and stop (run again to resume)");
  rebuild->callback([&g, rc, o] {
    *rc = kUsage;
    std::optional<tweetsearch::cluster::Topology> topology = TopologyOf(g);
    if (!topology.has_value()) return;
    std::optional<std::string> node = ReplicaNode(*topology, o->index_partition, o->replica);
    if (!node.has_value()) return;
    o->rebuild.replica = *node;
    *rc = Rebuild(*topology, o->rebuild);
  });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tweetctl: client of a tweetsearch service"};
  app.require_subcommand(1);
  Globals g;
  const char* env_server = std::getenv("TWEETSEARCH_SERVER");
  const char* env_key = std::getenv("TWEETSEARCH_KEY");
  const char* env_topology = std::getenv("TWEETSEARCH_TOPOLOGY");
  g.server = env_server != nullptr ? env_server : "http://127.0.0.1:8080";
  g.key = env_key != nullptr ? env_key : std::string(tweetsearch::aggregator::kDemoKey);
  g.topology = env_topology != nullptr ? env_topology : "";
  app.add_option("--server", g.server, "http://HOST:PORT of the service")->capture_default_str();
  app.add_option("--key", g.key, "API key (default: $TWEETSEARCH_KEY, else the demo key)");
  int rc = kUsage;
  AddIngest(app, g, &rc);
  AddSearch(app, g, &rc);
  AddCounts(app, g, &rc);
  AddStream(app, g, &rc);
  AddTweetCommands(app, g, &rc);
  AddAdminCommands(app, g, &rc);
  AddStatus(app, g, &rc);
  AddRebuild(app, g, &rc);
  CLI11_PARSE(app, argc, argv);
  return rc;
}
