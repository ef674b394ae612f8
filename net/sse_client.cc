#include "net/sse_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "common/strings.h"

namespace tweetsearch::net {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct SseClient::Connection {
  asio::io_context ioc;
  beast::tcp_stream stream{ioc};
  std::string pending;  // bytes read but not yet parsed into events
  std::chrono::milliseconds timeout{0};
};

SseClient::SseClient(std::unique_ptr<Connection> c) : c_(std::move(c)) {}

SseClient::~SseClient() { Close(); }

void SseClient::Close() {
  beast::error_code ignored;  // the server may have closed already
  c_->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
}

absl::StatusOr<std::unique_ptr<SseClient>> SseClient::Open(
    const std::string& host, const std::string& port, std::string_view target,
    std::string_view api_key, std::string_view last_event_id, std::chrono::milliseconds timeout,
    HttpReply* refused) {
  auto c = std::make_unique<Connection>();
  c->timeout = timeout;
  beast::error_code ec;
  tcp::resolver resolver(c->ioc);
  const auto endpoints = resolver.resolve(host, port, ec);
  if (ec) return absl::UnavailableError(StrCat("cannot resolve ", host, ": ", ec.message()));
  c->stream.expires_after(timeout);
  c->stream.connect(endpoints, ec);
  if (ec) {
    return absl::UnavailableError(
        StrCat("cannot connect to ", host, ":", port, ": ", ec.message()));
  }
  http::request<http::empty_body> request(http::verb::get,
                                          beast::string_view(target.data(), target.size()), 11);
  request.set(http::field::host, host);
  request.set(http::field::accept, "text/event-stream");
  if (!api_key.empty())
    request.set("X-Api-Key", beast::string_view(api_key.data(), api_key.size()));
  if (!last_event_id.empty()) {
    request.set("Last-Event-ID", beast::string_view(last_event_id.data(), last_event_id.size()));
  }
  http::write(c->stream, request, ec);
  if (ec) return absl::UnavailableError(StrCat("sending the request: ", ec.message()));
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(1 << 20);
  http::read_header(c->stream, buffer, parser, ec);
  if (ec) return absl::UnavailableError(StrCat("reading the answer: ", ec.message()));
  if (parser.get().result_int() != 200) {
    http::read(c->stream, buffer, parser, ec);
    HttpReply reply;
    reply.status = static_cast<int>(parser.get().result_int());
    reply.body = parser.get().body();
    if (refused != nullptr) *refused = reply;
    return absl::FailedPreconditionError(StrCat("HTTP ", reply.status, ": ", reply.body));
  }
  // What was read past the header is the stream's first bytes.
  const auto data = buffer.data();
  c->pending.assign(static_cast<const char*>(data.data()), data.size());
  return std::unique_ptr<SseClient>(new SseClient(std::move(c)));
}

absl::StatusOr<SseEvent> SseClient::Next() {
  SseEvent event;
  bool any = false;
  for (;;) {
    // Parse whole lines of what is pending; a blank line ends an event.
    size_t at = 0;
    for (size_t eol; (eol = c_->pending.find('\n', at)) != std::string::npos; at = eol + 1) {
      std::string_view line(c_->pending.data() + at, eol - at);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line.empty()) {
        if (!any) continue;
        c_->pending.erase(0, eol + 1);
        if (event.event.empty()) event.event = "message";
        return event;
      }
      if (line.front() == ':') continue;  // a comment (keep-alive)
      const size_t colon = line.find(':');
      const std::string_view field = line.substr(0, colon);
      std::string_view value = colon == std::string_view::npos ? "" : line.substr(colon + 1);
      if (value.starts_with(' ')) value.remove_prefix(1);
      if (field == "id") {
        event.id = value;
      } else if (field == "event") {
        event.event = value;
      } else if (field == "data") {
        if (!event.data.empty()) event.data += '\n';
        event.data += value;
      } else {
        continue;  // "retry" and unknown fields
      }
      any = true;
    }
    c_->pending.erase(0, at);
    char bytes[16 * 1024];
    beast::error_code ec;
    c_->stream.expires_after(c_->timeout);
    const size_t n = c_->stream.read_some(asio::buffer(bytes), ec);
    if (ec == beast::error::timeout) {
      return absl::DeadlineExceededError("no byte from the stream within the timeout");
    }
    if (ec) return absl::UnavailableError(StrCat("the stream ended: ", ec.message()));
    c_->pending.append(bytes, n);
  }
}

}  // namespace tweetsearch::net
