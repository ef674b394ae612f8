// ApiHandler: turns one HTTP request into one HTTP response, for the front door's JSON API.
//
// It knows routes, parameters, JSON bodies and status codes; the FrontDoor does the work, and
// HttpServer does the networking. Keeping it free of sockets lets tests call it directly.
// The API is documented in docs/api.md.
//
// Thread-safety: Handle() may be called from any thread.
#ifndef TWEETSEARCH_AGGREGATOR_HTTP_API_HANDLER_H_
#define TWEETSEARCH_AGGREGATOR_HTTP_API_HANDLER_H_

#include <atomic>
#include <boost/beast/http.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "aggregator/front_door.h"
#include "aggregator/metrics.h"
#include "usage/usage_recorder.h"

namespace tweetsearch::aggregator {

using HttpRequest = boost::beast::http::request<boost::beast::http::string_body>;
using HttpResponse = boost::beast::http::response<boost::beast::http::string_body>;

// Percent-decoded query parameters of a request target, in order ("+" decodes to a space).
// InvalidArgument for a malformed escape.
absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ParseQueryString(
    std::string_view target);

class ApiHandler {
 public:
  // `door` and `metrics` must outlive the handler.
  ApiHandler(FrontDoor& door, Metrics& metrics);

  // `client_ip` is the peer's address (limits on requests without a key use it). A stream
  // (GET /v1/stream) opened with `stream` given is handed over there, with the answer's head
  // (200, its headers, no body): the caller then writes the head and the stream's events
  // (sse.h). Without `stream`, a stream request is refused.
  HttpResponse Handle(const HttpRequest& request, std::string_view client_ip = {},
                      std::unique_ptr<LiveStream>* stream = nullptr) const;

  // Handle(), answered through `done`, once. A search is answered when the backend has its
  // answer (Backend::StartSearch): in a cluster on the thread the index partitions answer on,
  // so no thread waits for them; every other request is answered here. `done` must not block.
  using Answer = absl::AnyInvocable<void(HttpResponse) &&>;
  void HandleAsync(std::shared_ptr<const HttpRequest> request, std::string_view client_ip,
                   Answer done) const;

  // Whether Handle() may block on disk (ingest, deletes, likes, admin) or run long (best-match
  // searches, unless `best_match_inline`: a cluster's front door waits on the index servers
  // for them, as for any search): the server runs those on its worker pool and the rest
  // inline on the network threads. Read from the route table, as Handle() routes.
  static bool MayBlock(const HttpRequest& request, bool best_match_inline = false);

  // /readyz answers 503 until this is set, and again after it is cleared (shutdown).
  void set_ready(bool ready) { ready_.store(ready, std::memory_order_release); }

  // Counts every API call in the usage series; null (the default) counts nothing. Not
  // thread-safe: set before serving.
  void set_usage(usage::UsageRecorder* usage) { usage_ = usage; }

  // The ingest rate /v1/stats reports; null reports none. Not thread-safe: set before serving.
  void set_ingest_rate(const RateMeter* rate) { ingest_rate_ = rate; }

  // More series for /metrics (the limiter's, the HTTP server's). Not thread-safe: add before
  // serving.
  void add_extra_metrics(std::function<void(std::string*)> extra) {
    extra_metrics_.push_back(std::move(extra));
  }

 private:
  using QueryParams = std::vector<std::pair<std::string, std::string>>;
  struct Call;
  struct Route;
  struct PendingCall;
  // The route table, one row per method and path (api_handler.cc).
  static const Route kRoutes[];

  // The row for `request`, or null; then `*path_match` is the first row whose path matched
  // with another method (for a 405 and its name), if any.
  static const Route* Find(const HttpRequest& request, const Route** path_match);
  // The methods of the rows matching `path`, for a 405's Allow header ("GET, DELETE").
  static std::string AllowedMethods(std::string_view path);
  // Finds the row and fills `call` (route name, arguments, parameters, key); null, with the
  // answer in `refusal`, when there is none or the call is refused before its handler.
  const Route* Routed(Call& call, HttpResponse* refusal) const;
  // Routed(), then the row's handler.
  HttpResponse Dispatch(Call& call) const;
  // What every call ends with: the headers its context gathered, metrics, usage.
  void Finish(Call& call, std::chrono::steady_clock::time_point start,
              HttpResponse& response) const;

  // One per endpoint, each named in the route table.
  HttpResponse Healthz(Call& call) const;
  HttpResponse Readyz(Call& call) const;
  HttpResponse MetricsPage(Call& call) const;
  HttpResponse WebFilePage(Call& call) const;
  HttpResponse WebConfig(Call& call) const;
  HttpResponse Search(Call& call) const;
  void StartSearch(Call& call, Answer done) const;  // Search, answered later
  HttpResponse Counts(Call& call) const;
  HttpResponse Stream(Call& call) const;
  HttpResponse Ingest(Call& call) const;
  HttpResponse GetTweet(Call& call) const;
  HttpResponse DeleteTweet(Call& call) const;
  HttpResponse Likes(Call& call) const;
  HttpResponse ListKeys(Call& call) const;
  HttpResponse CreateKey(Call& call) const;
  HttpResponse RevokeKey(Call& call) const;
  HttpResponse Usage(Call& call) const;
  HttpResponse Stats(Call& call) const;

  FrontDoor& door_;
  Metrics& metrics_;
  std::atomic<bool> ready_{false};
  std::vector<std::function<void(std::string*)>> extra_metrics_;
  usage::UsageRecorder* usage_ = nullptr;
  const RateMeter* ingest_rate_ = nullptr;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

// An error response with the JSON body {"error":{"code":..., "message":...}}.
HttpResponse ErrorResponse(const absl::Status& status, unsigned version, bool keep_alive);

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_HTTP_API_HANDLER_H_
