// JSON Lines ingest: any body through the line splitter and the tweet parser, and the tweets
// that parse into a real engine. Bounds (depth, line size) must hold before parsing.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "aggregator/tweet_json.h"
#include "common/check.h"
#include "tests/fuzz/fuzz_service.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tweetsearch;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  std::vector<absl::StatusOr<aggregator::NewTweet>> lines;
  size_t start = 0;
  while (start < body.size()) {
    size_t end = body.find('\n', start);
    if (end == std::string_view::npos) end = body.size();
    const std::string_view line = body.substr(start, end - start);
    start = end + 1;
    absl::StatusOr<aggregator::NewTweet> tweet = aggregator::ParseTweetJson(line);
    // A line the bounds refuse never parses.
    TS_CHECK(aggregator::CheckJsonBounds(line).ok() || !tweet.ok(), "a refused line parsed");
    lines.push_back(std::move(tweet));
  }
  if (!lines.empty()) (void)fuzz::Service().door->Ingest(fuzz::kFuzzKey, std::move(lines));
  return 0;
}
