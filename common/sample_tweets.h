// SampleTweetGenerator: the tweets a fresh one-process server starts with, so that a new user
// sees something that reads like Twitter rather than the benchmarks' corpus (synthetic.h).
//
//   - English sentences from templates and a small grammar written here, about topics (also
//     written here) chosen with a Zipf law, so that some are everywhere and most are rare;
//   - about 5% Spanish, French, German and Japanese tweets, tagged with their lang;
//   - hashtags (about 15% of tweets), mentions (25%), links (8%), emoji (12%);
//   - users with Zipf activity, named like "sunny_otter12"; power-law likes;
//   - dated evenly over the `span_ms` before `now_ms`, oldest first, with snowflake ids of that
//     time on node kSampleNode (never an id tweetgen writes).
//
// Deterministic for a seed and a `now_ms`.
//
// Thread-safety: a generator is used by one thread at a time.
#ifndef TWEETSEARCH_COMMON_SAMPLE_TWEETS_H_
#define TWEETSEARCH_COMMON_SAMPLE_TWEETS_H_

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "common/synthetic.h"

namespace tweetsearch {

struct SampleOptions {
  uint64_t seed = 1;
  uint64_t count = 300'000;                   // tweets the span is shared between
  int64_t now_ms = 0;                         // the newest tweet's time
  int64_t span_ms = int64_t{7} * 86'400'000;  // the oldest is this much older
};

class SampleTweetGenerator {
 public:
  explicit SampleTweetGenerator(const SampleOptions& options);
  SyntheticTweet Next();

 private:
  double Uniform();
  size_t Pick(size_t n) { return static_cast<size_t>(Uniform() * static_cast<double>(n)); }
  std::string_view Topic();
  std::string UserName(size_t user) const;
  std::string English();
  std::string Fill(std::string_view pattern);

  SampleOptions options_;
  std::mt19937_64 rng_;
  std::vector<double> topic_cdf_, user_cdf_;
  uint64_t index_ = 0;
  int64_t last_millis_ = -1;
  uint32_t sequence_ = 0;
};

}  // namespace tweetsearch

#endif  // TWEETSEARCH_COMMON_SAMPLE_TWEETS_H_
