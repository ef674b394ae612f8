// Synthetic tweets for demos, tests and benchmarks: deterministic for a seed, fast (a million
// in a few seconds), and shaped like the real thing:
//   - words from a Zipf vocabulary (the commonest English words first, then made-up words),
//     8 to 25 of them per tweet;
//   - hashtags (12% of tweets), mentions (30%), URLs (15%), emoji (10%), each Zipf-distributed;
//   - about 5% non-English tweets (Spanish, French, German, Japanese), tagged with their lang;
//   - users with Zipf activity; power-law likes (most 0-3, a few tens of thousands);
//   - snowflake ids that increase with time, at about 4,600 tweets a second.
//
// Thread-safety: a generator is used by one thread at a time.
#ifndef TWEETSEARCH_COMMON_SYNTHETIC_H_
#define TWEETSEARCH_COMMON_SYNTHETIC_H_

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/ids.h"

namespace tweetsearch {

struct SyntheticTweet {
  TweetId id = 0;
  UserId user_id = 0;
  std::string user_name;
  std::string text;
  int64_t created_at_ms = 0;
  std::string lang;
  uint32_t likes = 0;
};

struct SyntheticOptions {
  uint64_t seed = 1;                          // same seed, same tweets
  int64_t start_unix_millis = 1767225600000;  // 2026-01-01T00:00:00Z
  uint32_t vocabulary = 50000;                // distinct plain words
  uint32_t users = 100000;
  // The snowflake node bits of the ids (0 to 1023): generators with different nodes never
  // make the same id (the service's sample uses kSampleNode, tweetgen kTweetgenNode).
  uint32_t node = 0;
};
inline constexpr uint32_t kSampleNode = 1;
inline constexpr uint32_t kTweetgenNode = 2;

// The cumulative distribution of a Zipf law of exponent `s` over ranks 0..n-1, and the rank a
// uniform draw u in [0, 1) picks from it.
std::vector<double> ZipfCdf(size_t n, double s);
size_t PickZipf(const std::vector<double>& cdf, double u);

class SyntheticTweetGenerator {
 public:
  explicit SyntheticTweetGenerator(const SyntheticOptions& options = {});
  SyntheticTweet Next();

  // The i-th most frequent plain word of the vocabulary (0 is the commonest).
  const std::string& Word(size_t rank) const { return words_[rank]; }

 private:
  size_t Zipf(const std::vector<double>& cdf);
  double Uniform();

  SyntheticOptions options_;
  std::mt19937_64 rng_;
  std::vector<std::string> words_;
  std::vector<double> word_cdf_, user_cdf_, tag_cdf_, host_cdf_;
  int64_t now_micros_;
  uint32_t sequence_ = 0;
  int64_t last_millis_ = -1;
};

}  // namespace tweetsearch

#endif  // TWEETSEARCH_COMMON_SYNTHETIC_H_
