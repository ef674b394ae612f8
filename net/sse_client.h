// SseClient: reads a Server-Sent Events stream (GET /v1/stream) over one blocking HTTP/1.1
// connection, event by event. Used by `tweetctl stream` and the tests.
//
// Thread-safety: none; Close() may be called from another thread to end a Next() in progress.
#ifndef TWEETSEARCH_NET_SSE_CLIENT_H_
#define TWEETSEARCH_NET_SSE_CLIENT_H_

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "net/http_client.h"

namespace tweetsearch::net {

struct SseEvent {
  std::string id;     // empty when the event carries none
  std::string event;  // "message" when the event names none
  std::string data;   // its data lines, joined by '\n'
};

class SseClient {
 public:
  // Connects and sends GET `target` (with the key as X-Api-Key, and Last-Event-ID when given).
  // A non-200 answer is returned as an HttpReply in `*refused` (and an error status).
  static absl::StatusOr<std::unique_ptr<SseClient>> Open(
      const std::string& host, const std::string& port, std::string_view target,
      std::string_view api_key, std::string_view last_event_id,
      std::chrono::milliseconds timeout = std::chrono::seconds(60), HttpReply* refused = nullptr);
  ~SseClient();

  // The next event (comments skipped). Unavailable when the stream ends; DeadlineExceeded
  // after `timeout` without a byte (servers send a keep-alive every 15 s).
  absl::StatusOr<SseEvent> Next();
  // Closes the connection (a Next() in progress fails).
  void Close();

 private:
  struct Connection;
  explicit SseClient(std::unique_ptr<Connection> c);
  std::unique_ptr<Connection> c_;
};

}  // namespace tweetsearch::net

#endif  // TWEETSEARCH_NET_SSE_CLIENT_H_
