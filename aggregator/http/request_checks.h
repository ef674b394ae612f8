// Checks on a request's header, made before its body is read (docs/security.md):
//
// - CheckFraming: the body's length must be unambiguous (RFC 9112 §6). A Transfer-Encoding
//   other than exactly "chunked" — "xchunked", "gzip", "identity", "chunked, identity",
//   "chunked" twice — would otherwise be read as an empty body, and the body's bytes as the
//   next request on the connection (request smuggling behind a proxy).
// - HostPolicy: the Host header must name this server, so that a page served from another
//   name that resolves to it (DNS rebinding) cannot read or write through a user's browser.
// - CheckWriteContentType: a POST must say its body is JSON (or carry an API key header), which
//   a cross-site HTML form cannot do without the browser asking the server first (CORS).
//
// Every refusal is answered and the connection closed: the body was not read.
#ifndef TWEETSEARCH_AGGREGATOR_HTTP_REQUEST_CHECKS_H_
#define TWEETSEARCH_AGGREGATOR_HTTP_REQUEST_CHECKS_H_

#include <boost/beast/http/message.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace tweetsearch::aggregator {

using HttpRequestHeader = boost::beast::http::request_header<>;

// OK, or InvalidArgument (400) for ambiguous framing: a Transfer-Encoding that does not end
// in one "chunked", Transfer-Encoding with Content-Length, Transfer-Encoding in HTTP/1.0, no
// Host in HTTP/1.1 or more than one Host; Unimplemented (501) for a transfer coding before
// "chunked" (gzip, deflate, ...), which the server does not decode.
absl::Status CheckFraming(const HttpRequestHeader& header);

// Which Host headers a server answers.
class HostPolicy {
 public:
  // `names`: host names (no port) the server answers besides IP literals; "*" answers any.
  // With no names: a server listening on a loopback address answers "localhost" and IP
  // literals only; one listening elsewhere answers any host.
  HostPolicy(std::string_view listen_address, std::vector<std::string> names);

  // OK, or PermissionDenied naming the host. The port, if any, is not checked.
  absl::Status Check(const HttpRequestHeader& header) const;

 private:
  bool any_ = false;
  std::vector<std::string> names_;  // lower case
};

// OK for anything but a POST to the API (/v1/...); for such a POST, OK when its Content-Type is a
// JSON type (application/json, application/x-ndjson, application/jsonl, ...) or it carries an
// X-Api-Key or Authorization header; else InvalidArgument (answered 415).
absl::Status CheckWriteContentType(const HttpRequestHeader& header);

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_HTTP_REQUEST_CHECKS_H_
