// Direct JSON output for the hot answers (search results, tweets), without building a DOM:
// building nlohmann::json trees cost a third of a search request's CPU (docs/benchmarks.md).
// Everything else is written with nlohmann::json.
#ifndef TWEETSEARCH_AGGREGATOR_HTTP_JSON_WRITER_H_
#define TWEETSEARCH_AGGREGATOR_HTTP_JSON_WRITER_H_

#include <string>
#include <string_view>

#include "storage/tweet_store.h"

namespace tweetsearch::aggregator {

// Appends `s` as a JSON string literal (RFC 8259: quotes, backslashes and control characters
// escaped). Requires: `s` is valid UTF-8 (stored text is validated on ingest).
void AppendJsonString(std::string* out, std::string_view s);

// Appends {"tweet_id":"…","user_id":"…","user_name":…,"text":…,"created_at":"RFC 3339",
// "lang":…,"likes":N[,"score":X]}, with `likes` (the index's current count) and the score only
// when `with_score`.
void AppendTweetJson(std::string* out, const storage::StoredTweet& t, uint32_t likes,
                     bool with_score, double score);

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_HTTP_JSON_WRITER_H_
