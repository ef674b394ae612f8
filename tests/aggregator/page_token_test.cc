#include "aggregator/page_token.h"

#include <gtest/gtest.h>

#include <random>

namespace tweetsearch::aggregator {
namespace {

PageCursor Sample() {
  PageCursor c;
  c.sort = 1;
  c.primary = 12.625;
  c.id = 2006515895064592385ULL;
  c.watermark = 2006515895064599999ULL;
  c.now_ms = 1767225600123;
  c.query_fingerprint = QueryFingerprint("love OR hate");
  return c;
}

TEST(PageTokenTest, RoundTrips) {
  PageTokenCodec codec(std::string(32, 'k'));
  const std::string token = codec.Encode(Sample());
  for (char c : token) EXPECT_TRUE(std::isalnum(c) || c == '-' || c == '_') << token;
  auto decoded = codec.Decode(token);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(*decoded, Sample());
}

TEST(PageTokenTest, CarriesScoringStatistics) {
  PageTokenCodec codec(std::string(32, 'k'));
  PageCursor c = Sample();
  c.has_stats = true;
  c.num_docs = 123456789;
  c.avg_length = 14.25;
  c.doc_freqs = {5, 0, 99999};
  const std::string token = codec.Encode(c);
  EXPECT_GT(token.size(), codec.Encode(Sample()).size());
  EXPECT_EQ(*codec.Decode(token), c);
  // The statistics are signed like the rest.
  std::string bad = token;
  bad[token.size() / 2 + 20] ^= 1;
  EXPECT_FALSE(codec.Decode(bad).ok());
}

TEST(PageTokenTest, EveryTamperedCharacterIsRejected) {
  PageTokenCodec codec(std::string(32, 'k'));
  const std::string token = codec.Encode(Sample());
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  for (size_t i = 0; i < token.size(); ++i) {
    for (char c : {alphabet[(alphabet.find(token[i]) + 1) % 64],
                   alphabet[(alphabet.find(token[i]) + 37) % 64]}) {
      std::string bad = token;
      bad[i] = c;
      if (bad == token) continue;
      auto decoded = codec.Decode(bad);
      // The last character carries only padding bits in some positions; a change there that
      // decodes to the same bytes is the same token.
      if (decoded.ok()) {
        EXPECT_EQ(*decoded, Sample()) << "position " << i;
      } else {
        EXPECT_TRUE(absl::IsInvalidArgument(decoded.status()));
      }
    }
  }
}

TEST(PageTokenTest, TruncatedExtendedAndForeignTokensAreRejected) {
  PageTokenCodec codec(std::string(32, 'k'));
  PageTokenCodec other(std::string(32, 'q'));
  const std::string token = codec.Encode(Sample());
  EXPECT_FALSE(codec.Decode(token.substr(0, token.size() - 1)).ok());
  EXPECT_FALSE(codec.Decode(token + "A").ok());
  EXPECT_FALSE(codec.Decode("").ok());
  EXPECT_FALSE(codec.Decode(std::string(token.size(), '=')).ok());
  auto foreign = codec.Decode(other.Encode(Sample()));
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.status().message().find("signature"), std::string::npos);
}

TEST(PageTokenTest, RandomInputNeverDecodes) {
  PageTokenCodec codec(std::string(32, 'k'));
  std::mt19937_64 rng(7);
  const size_t length = codec.Encode(Sample()).size();
  for (int i = 0; i < 20000; ++i) {
    std::string junk(i % 3 == 0 ? length : rng() % 100, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    EXPECT_FALSE(codec.Decode(junk).ok());
  }
}

}  // namespace
}  // namespace tweetsearch::aggregator
