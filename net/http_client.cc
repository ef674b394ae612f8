#include "net/http_client.h"

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "common/strings.h"

namespace tweetsearch::net {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

struct HttpClient::Connection {
  net::io_context ioc;
  beast::tcp_stream stream{ioc};
  beast::flat_buffer buffer;
  bool open = false;
};

namespace {

// Runs the handlers of `ioc` until none is left, ready for the next operation.
void RunToCompletion(net::io_context& ioc) {
  ioc.run();
  ioc.restart();
}

}  // namespace

absl::Status ParseServerUrl(std::string_view url, std::string* host, std::string* port) {
  const std::string_view original = url;
  auto bad = [&] {
    return absl::InvalidArgumentError(
        StrCat("server '", original, "' is not http://HOST:PORT (TLS is not supported)"));
  };
  if (url.starts_with("http://")) {
    url.remove_prefix(7);
  } else if (url.find("://") != std::string_view::npos) {
    return bad();
  }
  while (url.ends_with("/")) url.remove_suffix(1);
  const size_t colon = url.rfind(':');
  if (url.empty() || colon == std::string_view::npos || colon == 0) return bad();
  const std::string_view port_text = url.substr(colon + 1);
  uint32_t number = 0;
  if (port_text.empty() || port_text.size() > 5 ||
      !std::all_of(port_text.begin(), port_text.end(),
                   [](char c) { return c >= '0' && c <= '9'; }) ||
      (number = static_cast<uint32_t>(std::stoul(std::string(port_text)))) == 0 || number > 65535) {
    return bad();
  }
  std::string_view host_text = url.substr(0, colon);
  if (host_text.size() > 2 && host_text.front() == '[' && host_text.back() == ']') {
    host_text = host_text.substr(1, host_text.size() - 2);
  }
  if (host_text.find('/') != std::string_view::npos) return bad();
  *host = std::string(host_text);
  *port = std::string(port_text);
  return absl::OkStatus();
}

std::string UrlEncode(std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

HttpClient::HttpClient(std::string host, std::string port, std::chrono::milliseconds timeout)
    : host_(std::move(host)),
      port_(std::move(port)),
      timeout_(timeout),
      connection_(std::make_unique<Connection>()) {}

HttpClient::~HttpClient() {
  beast::error_code ignored;  // closing a connection the server may have closed
  connection_->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
}

absl::StatusOr<HttpReply> HttpClient::Send(
    std::string_view method, std::string_view target, std::string_view body,
    std::string_view content_type, std::string_view api_key,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  http::request<http::string_body> request;
  request.method(http::string_to_verb(beast::string_view(method.data(), method.size())));
  if (request.method() == http::verb::unknown) {
    return absl::InvalidArgumentError(StrCat("unknown method ", method));
  }
  request.target(beast::string_view(target.data(), target.size()));
  request.version(11);
  request.set(http::field::host, host_);
  request.set(http::field::user_agent, "tweetsearch-client");
  if (!api_key.empty())
    request.set("X-Api-Key", beast::string_view(api_key.data(), api_key.size()));
  if (!content_type.empty() && (!body.empty() || request.method() == http::verb::post)) {
    request.set(http::field::content_type,
                beast::string_view(content_type.data(), content_type.size()));
  }
  for (const auto& [name, value] : headers) request.insert(name, value);
  request.body() = std::string(body);
  request.keep_alive(true);
  request.prepare_payload();

  // A kept-alive connection may have been closed by the server since the last call: one retry
  // on a fresh connection, but only if nothing of the reply was read.
  for (int attempt = 0; attempt < 2; ++attempt) {
    Connection& c = *connection_;
    beast::error_code ec;
    const bool reused = c.open;
    if (!c.open) {
      tcp::resolver resolver(c.ioc);
      auto endpoints = resolver.resolve(host_, port_, ec);
      if (ec) return absl::UnavailableError(StrCat("cannot resolve ", host_, ": ", ec.message()));
      c.stream.expires_after(timeout_);
      c.stream.async_connect(endpoints,
                             [&ec](beast::error_code e, const tcp::endpoint&) { ec = e; });
      RunToCompletion(c.ioc);
      if (ec) {
        return absl::UnavailableError(
            StrCat("cannot connect to ", host_, ":", port_, ": ", ec.message()));
      }
      c.stream.socket().set_option(tcp::no_delay(true), ec);
      c.open = true;
      c.buffer.clear();
    }
    // Asynchronous operations run to completion here, because the stream's timeout (expires_after)
    // only bounds asynchronous ones: a synchronous read from a frozen server never returns.
    c.stream.expires_after(timeout_);
    http::async_write(c.stream, request, [&ec](beast::error_code e, size_t) { ec = e; });
    RunToCompletion(c.ioc);
    http::response_parser<http::string_body> parser;
    parser.body_limit(size_t{1} << 30);
    if (!ec) {
      http::async_read(c.stream, c.buffer, parser, [&ec](beast::error_code e, size_t) { ec = e; });
      RunToCompletion(c.ioc);
    }
    if (ec) {
      c.stream.socket().close(ec);
      connection_ = std::make_unique<Connection>();
      if (attempt == 0 && reused &&
          (ec == http::error::end_of_stream || ec == net::error::connection_reset ||
           ec == net::error::broken_pipe || ec == net::error::eof)) {
        continue;
      }
      return absl::UnavailableError(
          StrCat("request to ", host_, ":", port_, " failed: ", ec.message()));
    }
    http::response<http::string_body> response = parser.release();
    HttpReply reply;
    reply.status = response.result_int();
    for (const auto& field : response) {
      std::string name(field.name_string());
      for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      reply.headers[name] = std::string(field.value());
    }
    reply.body = std::move(response.body());
    if (!response.keep_alive()) {
      c.stream.socket().close(ec);
      connection_ = std::make_unique<Connection>();
    }
    return reply;
  }
  return absl::UnavailableError("unreachable");
}

}  // namespace tweetsearch::net
