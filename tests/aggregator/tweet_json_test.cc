#include "aggregator/tweet_json.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "absl/time/time.h"
#include "aggregator/http/json_writer.h"

namespace tweetsearch::aggregator {
namespace {

TEST(TweetJsonTest, ParsesOurShape) {
  auto t = ParseTweetJson(
      R"({"id":"18446744073709551615","user_id":7,"user_name":"ana","text":"héllo","created_at":"2026-01-01T10:00:00.250Z","lang":"pt-BR","likes":3})");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t->id, 18446744073709551615ULL);
  EXPECT_EQ(t->user_id, 7u);
  EXPECT_EQ(t->user_name, "ana");
  EXPECT_EQ(t->text, "héllo");
  EXPECT_EQ(*t->created_at_ms, 1767261600250);
  EXPECT_EQ(t->lang, "pt-BR");
  EXPECT_EQ(t->likes, 3u);
}

TEST(TweetJsonTest, ParsesTwitterV11Objects) {
  auto t = ParseTweetJson(
      R"({"created_at":"Wed Oct 10 20:19:24 +0000 2018","id":1050118621198921728,"id_str":"1050118621198921728","full_text":"To make room for more expression","truncated":false,"user":{"id":6253282,"id_str":"6253282","screen_name":"TwitterAPI"},"lang":"en","favorite_count":17,"entities":{"hashtags":[]}})");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t->id, 1050118621198921728ULL);
  EXPECT_EQ(t->user_name, "TwitterAPI");
  EXPECT_EQ(t->user_id, 6253282u);
  EXPECT_EQ(t->text, "To make room for more expression");
  EXPECT_EQ(*t->created_at_ms, 1539202764000);
  EXPECT_EQ(t->likes, 17u);
}

TEST(TweetJsonTest, RefusesDeepNestingAndHugeLinesBeforeParsing) {
  auto nested = [](size_t depth) {
    return "{\"text\": \"x\", \"extra\": " + std::string(depth - 1, '[') +
           std::string(depth - 1, ']') + "}";
  };
  EXPECT_TRUE(ParseTweetJson(nested(kMaxJsonDepth)).ok());
  absl::StatusOr<NewTweet> deep = ParseTweetJson(nested(kMaxJsonDepth + 1));
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("nested deeper than 32"), std::string::npos);
  // A 16 MB line of brackets is refused without building anything.
  EXPECT_FALSE(ParseTweetJson(std::string(16 << 20, '[')).ok());
  // Brackets inside strings, and escaped quotes, do not count.
  const std::string in_text =
      "{\"text\": \"" + std::string(100, '[') + "\\\"" + std::string(100, '{') + "\"}";
  ASSERT_TRUE(ParseTweetJson(in_text).ok()) << ParseTweetJson(in_text).status();
  EXPECT_EQ(ParseTweetJson(in_text)->text.size(), 201u);
  // Over 1 MiB.
  const std::string big = "{\"text\": \"x\", \"pad\": \"" + std::string(1 << 20, 'a') + "\"}";
  EXPECT_NE(ParseTweetJson(big).status().message().find("over the limit"), std::string::npos);
  EXPECT_TRUE(CheckJsonBounds("[[]]", 4).ok());
  EXPECT_FALSE(CheckJsonBounds("[[]] ", 4).ok());
}

TEST(TweetJsonTest, RejectsWithReasons) {
  auto message = [](std::string_view line) {
    auto t = ParseTweetJson(line);
    EXPECT_FALSE(t.ok()) << line;
    return std::string(t.status().message());
  };
  EXPECT_EQ(message("{"), "bad JSON (or invalid UTF-8)");
  EXPECT_EQ(message("[1,2]"), "a tweet must be a JSON object");
  EXPECT_EQ(message(R"({"user_name":"x"})"), "missing text");
  EXPECT_EQ(message(R"({"text":""})"), "missing text");
  EXPECT_NE(message(R"({"text":"a","id":-4})").find("id must be"), std::string::npos);
  EXPECT_NE(message(R"({"text":"a","id":"12x"})").find("id must be"), std::string::npos);
  EXPECT_NE(message(R"({"text":"a","id":"99999999999999999999"})").find("id must be"),
            std::string::npos);
  EXPECT_NE(message(R"({"text":"a","likes":-1})").find("likes"), std::string::npos);
  EXPECT_NE(message(R"({"text":"a","created_at":"yesterday"})").find("created_at"),
            std::string::npos);
  EXPECT_NE(message(R"({"text":5})").find("text must be a string"), std::string::npos);
  EXPECT_EQ(message("{\"text\":\"\xff\xfe\"}"), "bad JSON (or invalid UTF-8)");
}

TEST(TweetJsonTest, RandomBytesNeverCrash) {
  std::mt19937_64 rng(11);
  const std::string seed = R"({"id":"12","text":"a b","user":{"screen_name":"x"},"likes":3})";
  for (int i = 0; i < 50000; ++i) {
    std::string line = seed;
    for (int k = 0; k < 3; ++k) line[rng() % line.size()] = static_cast<char>(rng());
    (void)ParseTweetJson(line);  // any answer is fine; it must not crash or throw
  }
}

TEST(TweetJsonTest, Rfc3339RoundTrips) {
  EXPECT_EQ(FormatRfc3339(1767261600000), "2026-01-01T10:00:00Z");
  EXPECT_EQ(FormatRfc3339(1767261600250), "2026-01-01T10:00:00.250Z");
  EXPECT_EQ(*ParseRfc3339("2026-01-01T12:00:00+02:00"), 1767261600000);
  EXPECT_FALSE(ParseRfc3339("2026-13-01T00:00:00Z").ok());
}

}  // namespace
}  // namespace tweetsearch::aggregator

namespace tweetsearch::aggregator {
namespace {

// The direct writer's strings parse back to the input, for random valid UTF-8 with every
// control character and quote in it.
TEST(JsonWriterTest, StringsRoundTripThroughAJsonParser) {
  std::mt19937_64 rng(5);
  const std::vector<std::string> pieces = {"a", "\"", "\\", "\n",   "\t", "\x01", "\x1f",
                                           "é", "😀",  "/",  "\x7f", " ",  "日本"};
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    for (int k = rng() % 12; k > 0; --k) s += pieces[rng() % pieces.size()];
    std::string out;
    AppendJsonString(&out, s);
    nlohmann::json parsed = nlohmann::json::parse(out, nullptr, false);
    ASSERT_FALSE(parsed.is_discarded()) << out;
    ASSERT_EQ(parsed.get<std::string>(), s);
  }
}

TEST(JsonWriterTest, TweetsParseBack) {
  storage::StoredTweet t{
      18446744073709551615ULL, 9007199254740993ULL, "a\"b", "line\nbreak", 1767261600250, "en", 7};
  std::string out;
  AppendTweetJson(&out, t, t.likes, true, 1.5);
  nlohmann::json parsed = nlohmann::json::parse(out);
  EXPECT_EQ(parsed["tweet_id"], "18446744073709551615");
  EXPECT_EQ(parsed["user_id"], "9007199254740993");
  EXPECT_EQ(parsed["user_name"], "a\"b");
  EXPECT_EQ(parsed["text"], "line\nbreak");
  EXPECT_EQ(parsed["created_at"], "2026-01-01T10:00:00.250Z");
  EXPECT_EQ(parsed["likes"], 7);
  EXPECT_EQ(parsed["score"], 1.5);
}

// The fast RFC 3339 formatter agrees with Abseil's over a wide range of instants.
TEST(JsonWriterTest, Rfc3339MatchesAbseil) {
  std::mt19937_64 rng(9);
  for (int i = 0; i < 100000; ++i) {
    const int64_t ms = static_cast<int64_t>(rng() % 253402300799999ULL);
    const std::string expected =
        absl::FormatTime(ms % 1000 == 0 ? "%Y-%m-%dT%H:%M:%SZ" : "%Y-%m-%dT%H:%M:%E3SZ",
                         absl::FromUnixMillis(ms), absl::UTCTimeZone());
    ASSERT_EQ(FormatRfc3339(ms), expected) << ms;
  }
  EXPECT_EQ(FormatRfc3339(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatRfc3339(951782400000), "2000-02-29T00:00:00Z");
}

}  // namespace
}  // namespace tweetsearch::aggregator
