// http_bench: an HTTP load generator for the front door, on loopback.
//
//   http_bench --port 8080 ingest --tweets 1000000 --batch 5000 --connections 4
//   http_bench --port 8080 search --duration 20 --connections 8 --kind "2-word AND"
//
// Closed loop: each connection sends its next request when the previous answer arrived. One
// thread runs every connection (async Beast), so the generator takes one core at most; on a
// 2-core machine the server gets the other (docs/benchmarks.md says how the runs were made).
// Ingest bodies are generated before the clock starts, from the same synthetic generator (same
// seed, same vocabulary) as the service's sample, and search queries from that vocabulary with
// the engine benchmark's mixes.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/query_mix.h"
#include "common/synthetic.h"
#include "net/http_client.h"

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

struct Request {
  http::verb method;
  std::string target;
  std::string body;
  uint64_t weight = 1;          // tweets in an ingest body
  std::string idempotency_key;  // sent as Idempotency-Key when not empty
};

struct Totals {
  uint64_t requests = 0, errors = 0, weight = 0;
  std::vector<double> latency_us;
  std::string first_error;
  // With --timeline: each answer's time since the start (s) and latency (us; -1: an error).
  bool keep_timeline = false;
  Clock::time_point start;
  std::vector<std::pair<double, double>> timeline;
  void Note(double us) {
    if (keep_timeline)
      timeline.emplace_back(std::chrono::duration<double>(Clock::now() - start).count(), us);
  }
};

// One kept-alive connection that sends requests[next++] until they run out or time is up.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(net::io_context& ioc, const tcp::endpoint& endpoint,
             const std::vector<Request>& requests, size_t* next, bool cycle,
             Clock::time_point deadline, const std::string& key, Totals* totals)
      : stream_(ioc),
        endpoint_(endpoint),
        requests_(requests),
        next_(next),
        cycle_(cycle),
        deadline_(deadline),
        key_(key),
        totals_(totals) {}

  void Start() {
    stream_.async_connect(endpoint_, [self = shared_from_this()](beast::error_code ec) {
      if (ec) {
        self->totals_->errors++;
        self->totals_->first_error = "connect: " + ec.message();
        return;
      }
      beast::error_code ignored;
      self->stream_.socket().set_option(tcp::no_delay(true), ignored);
      self->Send();
    });
  }

 private:
  void Send() {
    if (Clock::now() >= deadline_) return;
    if (*next_ >= requests_.size()) {
      if (!cycle_) return;
      *next_ = 0;
    }
    const Request& r = requests_[(*next_)++];
    weight_ = r.weight;
    request_ = {};
    request_.method(r.method);
    request_.target(r.target);
    request_.version(11);
    request_.set(http::field::host, "127.0.0.1");
    request_.set("X-Api-Key", key_);
    if (!r.idempotency_key.empty()) request_.set("Idempotency-Key", r.idempotency_key);
    request_.keep_alive(true);
    if (!r.body.empty()) {
      request_.set(http::field::content_type, "application/x-ndjson");
      request_.body() = r.body;
    }
    request_.prepare_payload();
    sent_ = Clock::now();
    http::async_write(stream_, request_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->Fail("write: " + ec.message());
      self->response_ = {};
      self->parser_.emplace();
      self->parser_->body_limit(size_t{1} << 30);
      http::async_read(
          self->stream_, self->buffer_, *self->parser_, [self](beast::error_code ec, size_t) {
            if (ec) return self->Fail("read: " + ec.message());
            const double us =
                std::chrono::duration<double, std::micro>(Clock::now() - self->sent_).count();
            const int status = self->parser_->get().result_int();
            self->totals_->requests++;
            self->totals_->Note(status == 200 ? us : -1);
            if (status == 200) {
              self->totals_->weight += self->weight_;
              self->totals_->latency_us.push_back(us);
            } else {
              self->totals_->errors++;
              if (self->totals_->first_error.empty()) {
                self->totals_->first_error =
                    std::to_string(status) + " " + self->parser_->get().body().substr(0, 200);
              }
            }
            self->Send();
          });
    });
  }

  void Fail(const std::string& what) {
    totals_->Note(-1);
    totals_->errors++;
    if (totals_->first_error.empty()) totals_->first_error = what;
  }

  beast::tcp_stream stream_;
  tcp::endpoint endpoint_;
  const std::vector<Request>& requests_;
  size_t* next_;
  bool cycle_;
  Clock::time_point deadline_;
  std::string key_;
  Totals* totals_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> request_;
  http::response<http::string_body> response_;
  std::optional<http::response_parser<http::string_body>> parser_;
  Clock::time_point sent_;
  uint64_t weight_ = 1;
};

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
  return v[k];
}

// Per `slot` seconds: answers/s, p50, p99 and max latency of the answered, errors.
void PrintTimeline(std::vector<std::pair<double, double>> timeline, double slot) {
  std::cout << "timeline (per " << slot
            << " s): from_s requests_per_s p50_ms p99_ms max_ms errors\n";
  std::sort(timeline.begin(), timeline.end());
  size_t i = 0;
  for (double from = 0; i < timeline.size(); from += slot) {
    std::vector<double> latencies;
    uint64_t errors = 0;
    for (; i < timeline.size() && timeline[i].first < from + slot; ++i) {
      if (timeline[i].second < 0)
        ++errors;
      else
        latencies.push_back(timeline[i].second);
    }
    const double max =
        latencies.empty() ? 0 : *std::max_element(latencies.begin(), latencies.end());
    std::cout << from << " " << static_cast<uint64_t>(latencies.size() / slot) << " "
              << Percentile(latencies, 0.50) / 1000 << " " << Percentile(latencies, 0.99) / 1000
              << " " << max / 1000 << " " << errors << "\n";
  }
}

Totals Run(const std::string& host, uint16_t port, const std::string& key,
           const std::vector<Request>& requests, int connections, bool cycle, double seconds,
           bool timeline, double* elapsed) {
  net::io_context ioc;
  const tcp::endpoint endpoint(net::ip::make_address(host), port);
  Totals totals;
  size_t next = 0;
  const auto start = Clock::now();
  totals.keep_timeline = timeline;
  totals.start = start;
  const auto deadline = seconds > 0 ? start + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(seconds))
                                    : Clock::time_point::max();
  for (int i = 0; i < connections; ++i) {
    std::make_shared<Connection>(ioc, endpoint, requests, &next, cycle, deadline, key, &totals)
        ->Start();
  }
  ioc.run();
  *elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  return totals;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"HTTP load generator for tweetsearch"};
  app.require_subcommand(1);
  std::string host = "127.0.0.1", key = "demo-key-0123456789";
  uint16_t port = 8080;
  int connections = 4;
  app.add_option("--host", host)->capture_default_str();
  app.add_option("--port", port)->capture_default_str();
  app.add_option("--key", key)->capture_default_str();
  app.add_option("--connections", connections)->capture_default_str();

  uint64_t tweets = 1'000'000, seed = 1;
  size_t batch = 5000;
  auto* ingest = app.add_subcommand("ingest", "Bulk ingest synthetic tweets");
  ingest->add_option("--tweets", tweets)->capture_default_str();
  ingest->add_option("--batch", batch, "Tweets per request")->capture_default_str();
  ingest->add_option("--seed", seed, "Generator seed (1 = the service's sample)")
      ->capture_default_str();
  uint32_t node = 0;
  ingest
      ->add_option("--node", node,
                   "Snowflake node bits of the ids, 0 to 1023 (runs with different nodes never "
                   "share an id)")
      ->capture_default_str();
  bool idempotency_keys = false;
  ingest->add_flag("--idempotency-keys", idempotency_keys,
                   "Send each request with an Idempotency-Key of its own");

  double duration = 20;
  size_t queries = 2000;
  std::string kind = "2-word AND", sort = "0";
  int limit = 20;
  auto* search = app.add_subcommand("search", "Search with a query mix");
  search->add_option("--duration", duration, "Seconds")->capture_default_str();
  search->add_option("--queries", queries, "Distinct queries, cycled")->capture_default_str();
  search->add_option("--kind", kind, "1 word, 2-word AND, 3-word AND, 2-word OR, mixed")
      ->capture_default_str();
  search->add_option("--sort", sort)->capture_default_str();
  double timeline = 0;
  search->add_option("--timeline", timeline,
                     "Also print p50/p99/max and errors per this many seconds (0: no)");
  search->add_option("--limit", limit)->capture_default_str();
  std::string dump_targets;
  search->add_option("--dump-targets", dump_targets,
                     "Write the request targets to this file (for bench/wrk_search.lua) and exit");
  CLI11_PARSE(app, argc, argv);

  std::vector<Request> requests;
  tweetsearch::SyntheticOptions options;
  options.seed = seed;
  options.node = node;
  tweetsearch::SyntheticTweetGenerator generator(options);
  if (*ingest) {
    for (uint64_t done = 0; done < tweets;) {
      Request r{http::verb::post, "/v1/tweets?report=rejected", "", 0, ""};
      if (idempotency_keys)
        r.idempotency_key =
            "bench-" + std::to_string(::getpid()) + "-" + std::to_string(requests.size());
      for (; r.weight < batch && done < tweets; ++r.weight, ++done) {
        tweetsearch::SyntheticTweet t = generator.Next();
        nlohmann::json line = {{"id", std::to_string(t.id)},
                               {"user_id", t.user_id},
                               {"user_name", t.user_name},
                               {"text", t.text},
                               {"created_at", t.created_at_ms},
                               {"lang", t.lang},
                               {"likes", t.likes}};
        r.body += line.dump();
        r.body += '\n';
      }
      requests.push_back(std::move(r));
    }
  } else {
    std::vector<std::string> words;
    for (size_t rank = 0; rank < 5000; ++rank) words.push_back(generator.Word(rank));
    bool found = false;
    for (const auto& k : tweetsearch::bench::MakeQueries(words, queries, 7)) {
      if (k.name != kind) continue;
      found = true;
      for (const std::string& q : k.queries) {
        requests.push_back({http::verb::get,
                            "/v1/search?search_terms=" + tweetsearch::net::UrlEncode(q) + "&sort=" +
                                sort + "&maximum_results_to_return=" + std::to_string(limit),
                            "", 1, ""});
      }
    }
    if (!found) {
      std::cerr << "unknown --kind " << kind << "\n";
      return 2;
    }
  }

  if (!dump_targets.empty()) {
    std::ofstream out(dump_targets);
    for (const Request& r : requests) out << r.target << "\n";
    return out ? 0 : 1;
  }
  double elapsed = 0;
  Totals t = Run(host, port, key, requests, connections, /*cycle=*/!*ingest, *ingest ? 0 : duration,
                 timeline > 0, &elapsed);
  if (timeline > 0) PrintTimeline(t.timeline, timeline);
  const double p50 = Percentile(t.latency_us, 0.50), p99 = Percentile(t.latency_us, 0.99);
  if (*ingest) {
    std::cout << "ingest: " << t.weight << " tweets in " << elapsed
              << " s = " << static_cast<uint64_t>(t.weight / elapsed) << " tweets/s; " << t.requests
              << " requests of " << batch << ", p50 " << p50 / 1000 << " ms, p99 " << p99 / 1000
              << " ms, " << connections << " connections, " << t.errors << " errors\n";
  } else {
    std::cout << "search (" << kind << ", sort " << sort << ", top " << limit
              << "): " << static_cast<uint64_t>(t.requests / elapsed) << " requests/s, p50 " << p50
              << " us, p99 " << p99 << " us, " << connections << " connections, " << t.errors
              << " errors\n";
  }
  if (!t.first_error.empty()) std::cout << "first error: " << t.first_error << "\n";
  return t.errors == 0 ? 0 : 1;
}
