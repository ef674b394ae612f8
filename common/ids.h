// Identifiers shared by every role.
//
// A TweetId is an unsigned 64-bit number that increases with time. New tweets get a snowflake id
// (see snowflake.h); imported tweets keep the id they came with. Newest-first order is TweetId
// descending everywhere in the project.
#ifndef TWEETSEARCH_COMMON_IDS_H_
#define TWEETSEARCH_COMMON_IDS_H_

#include <cstdint>
#include <limits>

namespace tweetsearch {

using TweetId = uint64_t;
using UserId = uint64_t;

// Largest possible id: a watermark of kMaxTweetId hides nothing.
inline constexpr TweetId kMaxTweetId = std::numeric_limits<TweetId>::max();

}  // namespace tweetsearch

#endif  // TWEETSEARCH_COMMON_IDS_H_
