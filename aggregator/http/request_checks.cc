#include "aggregator/http/request_checks.h"

#include <algorithm>
#include <boost/asio/ip/address.hpp>

#include "absl/strings/ascii.h"
#include "common/strings.h"
#include "common/utf8.h"

namespace tweetsearch::aggregator {
namespace {

namespace http = boost::beast::http;

std::string_view View(boost::beast::string_view s) { return {s.data(), s.size()}; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  absl::AsciiStrToLower(&out);
  return out;
}

// The transfer codings of every Transfer-Encoding line, in order, lower case; an empty
// element (",," or a blank line) is kept as "" so that it is refused.
std::vector<std::string> TransferCodings(const HttpRequestHeader& header) {
  std::vector<std::string> codings;
  auto [begin, end] = header.equal_range(http::field::transfer_encoding);
  for (auto it = begin; it != end; ++it) {
    std::string_view rest = View(it->value());
    while (true) {
      const size_t comma = rest.find(',');
      codings.push_back(Lower(Trim(rest.substr(0, comma))));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  return codings;
}

absl::Status BadFraming(std::string_view why) {
  return absl::InvalidArgumentError(StrCat("ambiguous request framing: ", why));
}

bool IsIpLiteral(std::string_view host) {
  boost::system::error_code ec;
  (void)boost::asio::ip::make_address(std::string(host), ec);
  return !ec;
}

// The host of a Host header value without its port ("[::1]:80" → "::1"); nullopt when the
// value is not a host (with an optional decimal port).
std::optional<std::string> HostOf(std::string_view value) {
  std::string_view host = value, port;
  if (value.starts_with('[')) {
    const size_t close = value.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = value.substr(1, close - 1);
    port = value.substr(close + 1);
    if (!port.empty() && port[0] != ':') return std::nullopt;
    if (!IsIpLiteral(host)) return std::nullopt;
  } else {
    const size_t colon = value.find(':');
    host = value.substr(0, colon);
    if (colon != std::string_view::npos) port = value.substr(colon);
  }
  if (!port.empty() && !ParseDecimal<uint16_t>(port.substr(1)).has_value()) return std::nullopt;
  if (host.empty() || host.size() > 253) return std::nullopt;
  const bool name_chars = std::all_of(host.begin(), host.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == ':' ||
           c == '_';
  });
  if (!name_chars) return std::nullopt;
  return Lower(host);
}

}  // namespace

absl::Status CheckFraming(const HttpRequestHeader& header) {
  const size_t hosts = header.count(http::field::host);
  if (hosts > 1) return BadFraming("more than one Host header");
  if (hosts == 0 && header.version() >= 11) return BadFraming("HTTP/1.1 requires a Host header");
  if (header.count(http::field::transfer_encoding) == 0) return absl::OkStatus();
  if (header.version() < 11) return BadFraming("Transfer-Encoding in an HTTP/1.0 request");
  if (header.count(http::field::content_length) > 0) {
    return BadFraming("both Transfer-Encoding and Content-Length");
  }
  const std::vector<std::string> codings = TransferCodings(header);
  if (codings.back() != "chunked") {
    return BadFraming("Transfer-Encoding must end in chunked");
  }
  for (size_t i = 0; i + 1 < codings.size(); ++i) {
    const std::string& c = codings[i];
    if (c == "chunked") return BadFraming("chunked more than once");
    if (c == "gzip" || c == "x-gzip" || c == "deflate" || c == "compress" || c == "x-compress") {
      return absl::UnimplementedError(StrCat("transfer coding '", c,
                                             "' is not supported: send the body chunked or with a "
                                             "Content-Length"));
    }
    return BadFraming(StrCat("unknown transfer coding '", SanitizeUtf8(c.substr(0, 40)), "'"));
  }
  return absl::OkStatus();
}

HostPolicy::HostPolicy(std::string_view listen_address, std::vector<std::string> names) {
  for (std::string& name : names) {
    if (name == "*") any_ = true;
    names_.push_back(Lower(name));
  }
  if (names_.empty()) {
    boost::system::error_code ec;
    const auto address = boost::asio::ip::make_address(std::string(listen_address), ec);
    const bool loopback = listen_address == "localhost" || (!ec && address.is_loopback());
    any_ = !loopback;
    names_.push_back("localhost");
  }
}

absl::Status HostPolicy::Check(const HttpRequestHeader& header) const {
  if (any_) return absl::OkStatus();
  auto it = header.find(http::field::host);
  if (it == header.end()) return absl::OkStatus();  // HTTP/1.0 without one: CheckFraming's call
  const std::optional<std::string> host = HostOf(View(it->value()));
  if (host.has_value() &&
      (IsIpLiteral(*host) || std::find(names_.begin(), names_.end(), *host) != names_.end())) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(StrCat("this server does not answer for Host '",
                                            SanitizeUtf8(View(it->value()).substr(0, 100)),
                                            "' (the operator lists its names in allowed_hosts)"));
}

absl::Status CheckWriteContentType(const HttpRequestHeader& header) {
  if (header.method() != http::verb::post || !View(header.target()).starts_with("/v1/")) {
    return absl::OkStatus();
  }
  if (header.count("X-Api-Key") > 0 || header.count(http::field::authorization) > 0) {
    return absl::OkStatus();
  }
  std::string_view type;
  if (auto it = header.find(http::field::content_type); it != header.end()) {
    type = View(it->value());
  }
  const std::string media = Lower(Trim(type.substr(0, type.find(';'))));
  static constexpr std::string_view kJsonTypes[] = {
      "application/json",    "application/x-ndjson",  "application/ndjson",     "application/jsonl",
      "application/x-jsonl", "application/jsonlines", "application/x-jsonlines"};
  if (std::find(std::begin(kJsonTypes), std::end(kJsonTypes), media) != std::end(kJsonTypes)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      StrCat("a POST must be sent with Content-Type: application/json (or application/x-ndjson "
             "for JSON Lines), or with an X-Api-Key header; got '",
             SanitizeUtf8(media.substr(0, 60)), "'"));
}

}  // namespace tweetsearch::aggregator
