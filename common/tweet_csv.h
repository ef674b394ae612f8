// Reader for the Sentiment140 CSV format (Go, Bhayani and Huang, 2009): Latin-1, every field
// double-quoted, no header; columns polarity, id, date ("Mon Apr 06 22:19:45 PDT 2009"),
// query, user, text. Used by tests, benchmarks and importers.
#ifndef TWEETSEARCH_COMMON_TWEET_CSV_H_
#define TWEETSEARCH_COMMON_TWEET_CSV_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ids.h"

namespace tweetsearch {

struct ImportedTweet {
  TweetId id = 0;
  UserId user_id = 0;  // derived from the user name (the corpus has no user ids)
  std::string user_name;
  std::string text;  // UTF-8, HTML entities decoded
  int64_t created_at_ms = 0;
  uint32_t likes = 0;  // derived from the id (the corpus has no likes): power-law
};

// Parses one CSV line. InvalidArgument naming the problem for a malformed line.
absl::StatusOr<ImportedTweet> ParseSentiment140Line(std::string_view line);

// Reads a whole file; malformed lines are counted in `*rejected` (may be null) and skipped.
absl::StatusOr<std::vector<ImportedTweet>> ReadSentiment140(const std::string& path,
                                                            size_t* rejected = nullptr);

// Parses "Mon Apr 06 22:19:45 PDT 2009" (zones PDT, PST, EDT, EST, UTC, GMT) to Unix millis.
absl::StatusOr<int64_t> ParseTwitterDate(std::string_view date);

// A deterministic, heavy-tailed like count for a tweet id: most tweets get 0 to 2, a few
// thousands.
uint32_t DerivedLikes(TweetId id);

}  // namespace tweetsearch

#endif  // TWEETSEARCH_COMMON_TWEET_CSV_H_
