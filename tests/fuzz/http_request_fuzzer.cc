// The HTTP request path: any bytes through Beast's request parser (the limits the server
// sets), the header checks (framing, Host, content type) and, for a request that parses and
// passes them, the API handler over a real engine. Every answer must be a well-formed HTTP
// response with a JSON (or text) body.
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>
#include <cstdint>
#include <string>

#include "aggregator/http/request_checks.h"
#include "common/check.h"
#include "tests/fuzz/fuzz_service.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tweetsearch;
  namespace http = boost::beast::http;
  static const aggregator::HostPolicy host_policy("127.0.0.1", {});
  http::request_parser<http::string_body> parser;
  parser.header_limit(16 * 1024);
  parser.body_limit(64 * 1024);
  parser.eager(true);
  boost::beast::error_code ec;
  size_t used = 0;
  // Fed in two pieces, as a network would, split where the input says.
  const size_t split = size == 0 ? 0 : data[0] % (size + 1);
  used += parser.put(boost::asio::buffer(data, split), ec);
  if ((!ec || ec == http::error::need_more) && !parser.is_done()) {
    ec = {};
    used += parser.put(boost::asio::buffer(data + used, size - used), ec);
  }
  if (!parser.is_header_done()) return 0;
  const aggregator::HttpRequestHeader& header = parser.get();
  if (!aggregator::CheckFraming(header).ok() || !host_policy.Check(header).ok() ||
      !aggregator::CheckWriteContentType(header).ok()) {
    return 0;
  }
  if (!parser.is_done()) return 0;
  aggregator::HttpRequest request = parser.release();
  aggregator::HttpResponse response = fuzz::Service().handler->Handle(request, "127.0.0.1");
  TS_CHECK(response.result_int() >= 200 && response.result_int() < 600, "a strange status");
  // 501: a feature this service runs without (usage analytics); 503: storage refused a write.
  const unsigned status = response.result_int();
  TS_CHECK(status < 500 || status == 501 || status == 503,
           "a 5xx answer to a request (a bug, not bad input)");
  return 0;
}
