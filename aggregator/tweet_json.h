// JSON forms of tweets at the front door: ingest lines in, search results out.
//
// An ingest line is one JSON object, in either of two shapes (fields not listed are ignored):
//   ours:          {"id": "123" | 123, "user_id": 7, "user_name": "ana", "text": "...",
//                   "created_at": "2026-01-01T10:00:00Z" | <Unix ms>, "lang": "en", "likes": 3}
//   Twitter v1.1:  {"id_str": "123", "full_text" | "text": "...", "created_at":
//                   "Wed Oct 10 20:19:24 +0000 2018", "lang": "en", "favorite_count": 3,
//                   "user": {"id_str": "7", "screen_name": "ana"}}
// Only "text" is required. Ids are accepted as strings (the safe form: JavaScript numbers lose
// 64-bit precision) or as non-negative integers.
#ifndef TWEETSEARCH_AGGREGATOR_TWEET_JSON_H_
#define TWEETSEARCH_AGGREGATOR_TWEET_JSON_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "aggregator/engine.h"

namespace tweetsearch::aggregator {

// Bounds on a JSON text read from a request, checked before it is parsed: a parsed document
// takes many times its text in memory (measured: a deeply nested 16 MB line took 1.1 GB),
// so depth and size are refused up front (docs/security.md).
inline constexpr size_t kMaxJsonDepth = 32;           // tweets need 5, Twitter v1.1 objects 8
inline constexpr size_t kMaxJsonLineBytes = 1 << 20;  // one tweet object

// OK, or InvalidArgument when `text` is over `max_bytes` or nests arrays and objects deeper
// than kMaxJsonDepth (counted outside strings, without parsing).
absl::Status CheckJsonBounds(std::string_view text, size_t max_bytes = kMaxJsonLineBytes);

// InvalidArgument naming the problem ("bad JSON: ...", "id must be ...", CheckJsonBounds).
absl::StatusOr<NewTweet> ParseTweetJson(std::string_view line);

// "2026-01-01T10:00:00.123Z" (milliseconds shown only when not zero).
std::string FormatRfc3339(int64_t unix_millis);
// RFC 3339 ("2026-01-01T10:00:00Z", with fraction or offset) to Unix milliseconds.
absl::StatusOr<int64_t> ParseRfc3339(std::string_view text);

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_TWEET_JSON_H_
