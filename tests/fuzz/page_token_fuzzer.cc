// Page tokens: (1) any text through Decode, which must refuse all but tokens it signed;
// (2) a cursor of arbitrary values, signed with the service's secret (as if the secret had
// leaked, or a bug had minted it), through a real search: strange sorts, NaN scores and ids
// past the watermark must give errors or pages, never a crash; (3) a signed token with one
// character changed must not decode to another cursor.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "aggregator/page_token.h"
#include "common/check.h"
#include "tests/fuzz/fuzz_service.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tweetsearch;
  const aggregator::PageTokenCodec codec{std::string(fuzz::kFuzzSecret)};
  const std::string raw(reinterpret_cast<const char*>(data), size);
  (void)codec.Decode(raw);

  FuzzedDataProvider in(data, size);
  aggregator::PageCursor cursor;
  cursor.sort = in.ConsumeIntegral<uint8_t>();
  cursor.primary = in.ConsumeFloatingPoint<double>();
  cursor.id = in.ConsumeIntegral<uint64_t>();
  cursor.watermark = in.ConsumeIntegral<uint64_t>();
  cursor.now_ms = in.ConsumeIntegral<int64_t>();
  const std::string terms = in.ConsumeRandomLengthString(64);
  cursor.query_fingerprint =
      in.ConsumeBool() ? aggregator::QueryFingerprint(terms) : in.ConsumeIntegral<uint64_t>();
  cursor.has_stats = in.ConsumeBool();
  if (cursor.has_stats) {
    cursor.num_docs = in.ConsumeIntegral<uint64_t>();
    cursor.avg_length = in.ConsumeFloatingPoint<double>();
    const size_t n = in.ConsumeIntegralInRange<size_t>(0, 8);
    for (size_t i = 0; i < n; ++i) cursor.doc_freqs.push_back(in.ConsumeIntegral<uint64_t>());
  }
  std::string token = codec.Encode(cursor);
  TS_CHECK(codec.Decode(token).ok(), "a token the codec made does not decode");

  aggregator::SearchRequest request;
  request.api_dev_key = std::string(fuzz::kFuzzKey);
  request.search_terms = terms.empty() ? "the" : terms;
  request.sort = static_cast<query::SortMode>(cursor.sort % 3);
  request.page_token = token;
  request.maximum_results_to_return = 3;
  (void)fuzz::Service().door->Search(request);

  if (!token.empty()) {
    const size_t at = in.ConsumeIntegralInRange<size_t>(0, token.size() - 1);
    const char replacement = token[at] == 'A' ? 'B' : 'A';
    token[at] = replacement;
    absl::StatusOr<aggregator::PageCursor> tampered = codec.Decode(token);
    // base64url's last character may carry unused bits: a change there can decode the same.
    TS_CHECK(!tampered.ok() || *tampered == cursor, "a tampered token decoded to another cursor");
  }
  return 0;
}
