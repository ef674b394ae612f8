#include "common/synthetic.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "common/snowflake.h"
#include "common/strings.h"

namespace tweetsearch {
namespace {

// The commonest English words, roughly in order of frequency in tweets.
constexpr std::array<const char*, 120> kCommon = {
    "the",     "i",     "to",      "a",     "and",   "is",       "in",    "it",     "you",
    "of",      "for",   "on",      "my",    "that",  "at",       "with",  "me",     "do",
    "have",    "just",  "this",    "be",    "so",    "are",      "not",   "was",    "but",
    "out",     "up",    "what",    "now",   "get",   "go",       "no",    "all",    "good",
    "can",     "day",   "like",    "love",  "your",  "we",       "from",  "got",    "today",
    "going",   "time",  "work",    "back",  "one",   "new",      "know",  "lol",    "will",
    "im",      "too",   "see",     "home",  "night", "its",      "well",  "think",  "really",
    "want",    "still", "how",     "more",  "need",  "been",     "last",  "there",  "had",
    "about",   "off",   "thanks",  "great", "u",     "morning",  "they",  "would",  "happy",
    "much",    "oh",    "he",      "here",  "why",   "tomorrow", "miss",  "sleep",  "some",
    "haha",    "very",  "week",    "feel",  "when",  "if",       "only",  "fun",    "her",
    "an",      "our",   "people",  "has",   "sad",   "then",     "could", "school", "right",
    "tonight", "him",   "make",    "bad",   "sorry", "hope",     "wait",  "come",   "twitter",
    "first",   "music", "watching"};

constexpr std::array<const char*, 16> kSyllables = {"ka",  "lo",  "mi",  "ra", "te", "su",
                                                    "ven", "dor", "pi",  "an", "el", "qu",
                                                    "ix",  "zo",  "ber", "ny"};

constexpr std::array<const char*, 12> kEmoji = {
    "\U0001F602", "\u2764\uFE0F", "\U0001F60D", "\U0001F525", "\U0001F62D", "\U0001F44D",
    "\U0001F64F", "\U0001F60A",   "\u2728",     "\U0001F389", "\U0001F914", "\U0001F60E"};

struct Language {
  const char* code;
  std::vector<const char*> words;
  const char* separator;
};

const std::array<Language, 4>& Languages() {
  static const auto* kLanguages = new std::array<Language, 4>{{
      {"es",
       {"hola", "gracias", "el", "la", "que", "de", "muy", "bien", "día", "mañana", "fútbol",
        "amigos", "niño", "corazón", "también", "años"},
       " "},
      {"fr",
       {"bonjour", "merci", "le", "la", "et", "très", "été", "café", "ça", "va", "crème", "déjà",
        "français", "où", "fête", "amis"},
       " "},
      {"de",
       {"hallo", "danke", "und", "der", "die", "schön", "grüße", "straße", "müde", "heute",
        "morgen", "fußball", "über", "freunde", "bär", "größe"},
       " "},
      {"ja",
       {"東京", "今日", "ありがとう", "天気", "ラーメン", "仕事", "電車", "映画", "猫", "桜",
        "友達", "楽しい", "週末", "音楽", "日本", "朝"},
       ""},
  }};
  return *kLanguages;
}

}  // namespace

std::vector<double> ZipfCdf(size_t n, double s) {
  std::vector<double> cdf(n);
  double total = 0;
  for (size_t i = 0; i < n; ++i) {
    total += 1.0 / std::pow(static_cast<double>(i + 1), s);
    cdf[i] = total;
  }
  for (double& c : cdf) c /= total;
  return cdf;
}

size_t PickZipf(const std::vector<double>& cdf, double u) {
  const auto it = std::lower_bound(cdf.begin(), cdf.end(), u);
  return std::min(static_cast<size_t>(it - cdf.begin()), cdf.size() - 1);
}

SyntheticTweetGenerator::SyntheticTweetGenerator(const SyntheticOptions& options)
    : options_(options), rng_(options.seed), now_micros_(options.start_unix_millis * 1000) {
  words_.reserve(options_.vocabulary);
  for (const char* w : kCommon) {
    if (words_.size() < options_.vocabulary) words_.emplace_back(w);
  }
  for (uint32_t i = 0; words_.size() < options_.vocabulary; ++i) {
    std::string w;
    uint32_t x = i + 17;
    do {
      w += kSyllables[x % kSyllables.size()];
      x /= kSyllables.size();
    } while (x != 0);
    words_.push_back(std::move(w));
  }
  word_cdf_ = ZipfCdf(words_.size(), 1.0);
  user_cdf_ = ZipfCdf(options_.users, 0.9);
  tag_cdf_ = ZipfCdf(2000, 1.1);
  host_cdf_ = ZipfCdf(200, 1.2);
}

double SyntheticTweetGenerator::Uniform() {
  return static_cast<double>(rng_() >> 11) * (1.0 / 9007199254740992.0);  // [0, 1)
}

size_t SyntheticTweetGenerator::Zipf(const std::vector<double>& cdf) {
  return PickZipf(cdf, Uniform());
}

SyntheticTweet SyntheticTweetGenerator::Next() {
  SyntheticTweet t;
  // Arrivals at ~4,600 a second: exponential gaps with a mean of 217 microseconds.
  now_micros_ += static_cast<int64_t>(-std::log(1.0 - Uniform()) * 217.0);
  const int64_t millis = now_micros_ / 1000;
  sequence_ = millis == last_millis_ ? sequence_ + 1 : 0;
  last_millis_ = millis;
  t.id = SnowflakeLowerBound(millis) | (TweetId{options_.node & 0x3FF} << kSnowflakeSequenceBits) |
         (sequence_ & 0xFFF);
  t.created_at_ms = millis;
  const size_t user = Zipf(user_cdf_);
  t.user_id = user + 1;
  t.user_name = StrCat("user", user + 1);
  // Pareto likes: P(likes >= x) ~ x^-1.1.
  t.likes = static_cast<uint32_t>(std::min(std::pow(1.0 - Uniform(), -1.0 / 1.1) - 1.0, 2e6));

  const int words = 8 + static_cast<int>(rng_() % 18);
  const double kind = Uniform();
  if (kind < 0.05) {  // non-English
    const Language& lang = Languages()[rng_() % Languages().size()];
    t.lang = lang.code;
    for (int i = 0; i < words; ++i) {
      if (i > 0) t.text += lang.separator;
      t.text += lang.words[static_cast<size_t>(std::pow(Uniform(), 2.0) * lang.words.size())];
    }
  } else {
    t.lang = "en";
    for (int i = 0; i < words; ++i) {
      if (i > 0) t.text += ' ';
      t.text += words_[Zipf(word_cdf_)];
    }
  }
  if (Uniform() < 0.30) t.text = StrCat("@user", Zipf(user_cdf_) + 1, " ", t.text);
  if (Uniform() < 0.12) StrAppend(&t.text, " #tag", Zipf(tag_cdf_));
  if (Uniform() < 0.03) StrAppend(&t.text, " #tag", Zipf(tag_cdf_));
  if (Uniform() < 0.15) {
    StrAppend(&t.text, " https://site", Zipf(host_cdf_), ".example.com/p/", rng_() % 100000);
  }
  if (Uniform() < 0.10) StrAppend(&t.text, " ", kEmoji[Zipf(host_cdf_) % kEmoji.size()]);
  return t;
}

}  // namespace tweetsearch
