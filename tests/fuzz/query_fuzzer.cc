// The query language: any text through the parser and the planner (analysis included), and a
// plan that parses is searched on a real index. Nothing may crash, hang or leak; errors are
// Status values.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tests/fuzz/fuzz_service.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tweetsearch;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  aggregator::SearchRequest request;
  request.api_dev_key = std::string(fuzz::kFuzzKey);
  request.search_terms = std::string(text);
  request.maximum_results_to_return = 5;
  request.highlight = true;
  for (query::SortMode sort :
       {query::SortMode::kNewest, query::SortMode::kBestMatch, query::SortMode::kMostLiked}) {
    request.sort = sort;
    (void)fuzz::Service().door->Search(request);
  }
  return 0;
}
