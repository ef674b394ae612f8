// HttpClient: a small blocking HTTP/1.1 client on Beast, with one kept-alive connection.
// Used by tweetctl, the end-to-end tests and the ingest benchmark; not a general client (no
// TLS, no redirects, no chunked uploads).
//
// Thread-safety: none; use one client per thread.
#ifndef TWEETSEARCH_NET_HTTP_CLIENT_H_
#define TWEETSEARCH_NET_HTTP_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace tweetsearch::net {

struct HttpReply {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // names lower-cased
};

// Splits "http://host:port" into host and port. InvalidArgument otherwise.
absl::Status ParseServerUrl(std::string_view url, std::string* host, std::string* port);

class HttpClient {
 public:
  HttpClient(std::string host, std::string port,
             std::chrono::milliseconds timeout = std::chrono::seconds(120));
  ~HttpClient();

  // Sends one request (reconnecting if the kept-alive connection was closed) and reads the
  // reply, with `headers` added as given (a name may repeat). Unavailable when the server
  // cannot be reached or the connection breaks.
  absl::StatusOr<HttpReply> Send(
      std::string_view method, std::string_view target, std::string_view body = {},
      std::string_view content_type = "application/json", std::string_view api_key = {},
      const std::vector<std::pair<std::string, std::string>>& headers = {});

 private:
  struct Connection;
  std::string host_, port_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Connection> connection_;
};

// Percent-encodes a query parameter value.
std::string UrlEncode(std::string_view value);

}  // namespace tweetsearch::net

#endif  // TWEETSEARCH_NET_HTTP_CLIENT_H_
