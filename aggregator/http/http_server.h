// HttpServer: the front door's HTTP/1.1 listener, on Boost.Beast and Boost.Asio.
//
// One io_context run by `io_threads` threads; each connection lives on its own strand, and its
// state is touched only there. Requests that may block on disk (ingest, deletes, likes, admin)
// or run long (best-match searches) run on a separate worker pool and post their response back
// to the connection's strand; other searches run inline on the network threads (in memory and
// short).
// Connections are kept alive; a body over `max_body_bytes` gets 413 and the connection is
// closed (the rest of the body is not read).
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
  // Threads running the network loop (and searches). Default 2.
  int io_threads = 2;
  // Threads running requests that may block on disk. Default 4.
  int worker_threads = 4;
  // A connection with no request for this long is closed. Default 60 s.
  std::chrono::seconds idle_timeout{60};
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
  // Graceful stop; waits at most `grace` for requests in flight. Idempotent.
  virtual void Shutdown(std::chrono::milliseconds grace) = 0;
};

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_HTTP_HTTP_SERVER_H_
