// HttpServer: the front door's HTTP/1.1 listener, on Boost.Beast and Boost.Asio.
//
// One io_context run by `io_threads` threads; each connection lives on its own strand, and its
// state is touched only there. Requests that may block on disk (ingest, deletes, likes, admin)
// or run long (best-match searches) run on a separate worker pool and post their response back
// to the connection's strand; other searches run inline on the network threads (in memory and
// short).
// Connections are kept alive; a body over `max_body_bytes` gets 413 and the connection is
// closed (the rest of the body is not read). A request's header is checked before its body is
// read (request_checks.h: framing, Host, a JSON content type on POST); a refusal is answered
// and the connection closed.
//
// Connections are capped in all and per client address. At the cap the longest-idle
// keep-alive connection is closed to make room; with none idle the new connection is answered
// 503 and closed. When accept() runs out of file descriptors (EMFILE, ENFILE) the acceptor
// closes up to 16 idle connections and pauses 50 ms instead of spinning. Every refusal is counted
// in RenderMetrics and logged (at most once a second).
//
// Shutdown: stop accepting, close idle connections, let requests in flight finish and answer
// (with "Connection: close"), then stop the threads.
//
// Thread-safety: Start/port/Shutdown from one controlling thread.
#ifndef TWEETSEARCH_AGGREGATOR_HTTP_HTTP_SERVER_H_
#define TWEETSEARCH_AGGREGATOR_HTTP_HTTP_SERVER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "aggregator/http/api_handler.h"

namespace tweetsearch::aggregator {

struct HttpServerOptions {
  // Address to listen on. Default "127.0.0.1" (loopback only); "0.0.0.0" or "::" for all.
  std::string address = "127.0.0.1";
  // TCP port; 0 picks a free one (see HttpServer::port()). Default 8080.
  uint16_t port = 8080;
  // Largest request body, bytes; larger ones get 413. Default 64 MiB.
  size_t max_body_bytes = size_t{64} << 20;
  // Threads running the network loop (and searches). 0 (the default): 2. A cluster's front
  // door keeps 2 as well: its searches hold no thread while the index servers answer
  // (ApiHandler::HandleAsync).
  int io_threads = 0;
  // Threads running requests that may block on disk. Default 4.
  int worker_threads = 4;
  // Best-match searches run on the network threads, as other searches do, not on the worker
  // pool. A cluster's front door sets it (cluster/node.cc): it computes no ranking itself,
  // and the hop to a worker and back cost it two thread wake-ups per search and capped the
  // searches in flight at `worker_threads` (docs/benchmarks.md). Default false.
  bool best_match_inline = false;
  // A connection with no request for this long is closed. Default 60 s.
  std::chrono::seconds idle_timeout{60};
  // Host names answered besides IP literals and "localhost"; "*" answers any. Empty (the
  // default): a loopback listener answers IP literals and localhost only (no DNS rebinding),
  // any other listener answers any host.
  std::vector<std::string> allowed_hosts;
  // Most open connections. 0 (the default): the soft open-file limit less a reserve for the
  // storage files (a quarter of it, at least 64, at most 256), and at most 10,000.
  size_t max_connections = 0;
  // Most open connections from one client address. Default 256.
  size_t max_connections_per_client = 256;
};

class HttpServer {
 public:
  // Binds and starts serving. Unavailable if the address cannot be bound. `handler` must
  // outlive the server.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const HttpServerOptions& options,
                                                           ApiHandler& handler);
  virtual ~HttpServer() = default;

  // The port actually bound (useful with port 0).
  virtual uint16_t port() const = 0;
  // The connection cap in force (max_connections, or the one derived from the file limit).
  virtual size_t max_connections() const = 0;
  // Prometheus series: open connections, the cap, connections refused and closed to make room,
  // accept errors, requests refused before their body.
  virtual void RenderMetrics(std::string* out) const = 0;
  // Graceful stop; waits at most `grace` for requests in flight. Idempotent.
  virtual void Shutdown(std::chrono::milliseconds grace) = 0;
};

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_HTTP_HTTP_SERVER_H_
