#include "indexer/analysis/analyzer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unicode/brkiter.h>
#include <unicode/utext.h>

#include <random>

#include "common/tweet_csv.h"
#include "tests/testing/corpus.h"

namespace tweetsearch::analysis {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::IsSupersetOf;
using ::testing::Not;

std::vector<std::string> Terms(const Analyzer& analyzer, std::string_view text) {
  absl::StatusOr<std::vector<Token>> tokens = analyzer.Analyze(text);
  EXPECT_TRUE(tokens.ok()) << tokens.status();
  std::vector<std::string> terms;
  if (tokens.ok()) {
    for (const Token& t : *tokens) terms.push_back(t.text);
  }
  return terms;
}

std::unique_ptr<Analyzer> Make(AnalyzerOptions options = {}) {
  absl::StatusOr<std::unique_ptr<Analyzer>> a = Analyzer::Create(options);
  EXPECT_TRUE(a.ok()) << a.status();
  return *std::move(a);
}

TEST(AnalyzerTest, EnglishWordsAreFoldedAndStopWordsKept) {
  auto a = Make();
  EXPECT_THAT(Terms(*a, "To be, or NOT to be: that is the Question!"),
              ElementsAre("to", "be", "or", "not", "to", "be", "that", "is", "the", "question"));
}

TEST(AnalyzerTest, PositionsCountDroppedStopWords) {
  AnalyzerOptions options;
  options.drop_stop_words = true;
  auto a = Make(options);
  absl::StatusOr<std::vector<Token>> tokens = a->Analyze("the quick fox is here");
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 3u);
  EXPECT_EQ((*tokens)[0], (Token{"quick", 1, TokenKind::kWord, 4, 9}));
  EXPECT_EQ((*tokens)[1], (Token{"fox", 2, TokenKind::kWord, 10, 13}));
  EXPECT_EQ((*tokens)[2], (Token{"here", 4, TokenKind::kWord, 17, 21}));
}

// Each token's span is where it came from in the text as given: sigils and whole URLs
// included, HTML entities counted as written, non-ASCII text by bytes.
TEST(AnalyzerTest, TokensKnowTheirPlaceInTheOriginalText) {
  auto a = Make();
  const std::string text =
      "Caf\u00e9 &amp; #Tea with @Ann: see https://www.example.com/x?y=1 \U0001F600 fin&#39;s "
      "$TSLA";
  absl::StatusOr<std::vector<Token>> tokens = a->Analyze(text);
  ASSERT_TRUE(tokens.ok());
  std::vector<std::pair<std::string, std::string>> spans;
  for (const Token& t : *tokens) {
    ASSERT_LE(t.begin, t.end);
    ASSERT_LE(t.end, text.size());
    spans.emplace_back(t.text, text.substr(t.begin, t.end - t.begin));
  }
  EXPECT_THAT(
      spans, ::testing::ElementsAre(std::pair<std::string, std::string>{"caf\u00e9", "Caf\u00e9"},
                                    std::pair<std::string, std::string>{"#tea", "#Tea"},
                                    std::pair<std::string, std::string>{"with", "with"},
                                    std::pair<std::string, std::string>{"@ann", "@Ann"},
                                    std::pair<std::string, std::string>{"see", "see"},
                                    std::pair<std::string, std::string>{
                                        "example.com", "https://www.example.com/x?y=1"},
                                    std::pair<std::string, std::string>{"\U0001F600", "\U0001F600"},
                                    std::pair<std::string, std::string>{"fin's", "fin&#39;s"},
                                    std::pair<std::string, std::string>{"$tsla", "$TSLA"}));
}

TEST(AnalyzerTest, HashtagsMentionsAndCashtagsKeepTheirSigil) {
  auto a = Make();
  absl::StatusOr<std::vector<Token>> tokens =
      a->Analyze("@Switchfoot loves #NowPlaying and $TSLA, but costs $5 (C#)");
  ASSERT_TRUE(tokens.ok());
  std::vector<std::pair<std::string, TokenKind>> got;
  for (const Token& t : *tokens) got.emplace_back(t.text, t.kind);
  EXPECT_THAT(
      got, ElementsAre(std::pair{"@switchfoot", TokenKind::kMention},
                       std::pair{"loves", TokenKind::kWord},
                       std::pair{"#nowplaying", TokenKind::kHashtag},
                       std::pair{"and", TokenKind::kWord}, std::pair{"$tsla", TokenKind::kCashtag},
                       std::pair{"but", TokenKind::kWord}, std::pair{"costs", TokenKind::kWord},
                       std::pair{"5", TokenKind::kWord}, std::pair{"c", TokenKind::kWord}));
}

TEST(AnalyzerTest, UrlsBecomeTheirHost) {
  auto a = Make();
  EXPECT_THAT(Terms(*a, "look http://twitpic.com/2y1zl - and https://WWW.Example.org:8080/a?b=c."),
              ElementsAre("look", "twitpic.com", "and", "example.org"));
  EXPECT_THAT(Terms(*a, "(see www.bbc.co.uk/news)"), ElementsAre("see", "bbc.co.uk"));
}

// A host typed without a scheme is a URL's host where word boundaries would break it (a label
// with a digit or a hyphen), so it meets the links to it; look-alikes stay words.
TEST(AnalyzerTest, HostsWithoutASchemeBecomeTheirHost) {
  auto a = Make();
  EXPECT_THAT(Terms(*a, "see site2.example.com/p/1?x=2 now"),
              ElementsAre("see", "site2.example.com", "now"));
  EXPECT_THAT(Terms(*a, "(my-site.org), \"web-1.Example.COM:8080\" and site2.example.com."),
              ElementsAre("my-site.org", "web-1.example.com", "and", "site2.example.com"));
  absl::StatusOr<std::vector<Token>> host = a->Analyze("at site2.example.com!");
  ASSERT_TRUE(host.ok());
  ASSERT_EQ(host->size(), 2u);
  EXPECT_EQ((*host)[1].kind, TokenKind::kUrlHost);
  EXPECT_EQ((*host)[1].begin, 3u);
  EXPECT_EQ((*host)[1].end, 20u);
  // Whole words already, and kept as words: the same term as a link's host.
  EXPECT_THAT(Terms(*a, "example.com"), ElementsAre("example.com"));
  // Not hosts: a numbered line, two words missing a space, a version, a one-letter or
  // mixed-case ending, no letter before the ending, a mail address, a word glued on.
  EXPECT_THAT(Terms(*a, "1.First"), ElementsAre("1", "first"));
  EXPECT_THAT(Terms(*a, "mid-2020.Next"), ElementsAre("mid", "2020", "next"));
  EXPECT_THAT(Terms(*a, "v2.0 site2.example.c"), ElementsAre("v2.0", "site2", "example.c"));
  EXPECT_THAT(Terms(*a, "192.168.1.com"), ElementsAre("192.168.1", "com"));
  EXPECT_THAT(Terms(*a, "bob@site2.example.com site2.example.com_x site2-.example.com"),
              Not(Contains("site2.example.com")));
}

TEST(AnalyzerTest, HtmlEntitiesAreDecoded) {
  auto a = Make();
  EXPECT_THAT(Terms(*a, "fish &amp; chips &quot;yum&quot; &#39;ok&#39; &lt;3"),
              ElementsAre("fish", "chips", "yum", "ok", "3"));
  EXPECT_EQ(DecodeHtmlEntities("a&amp;b &#x41; &#65; &bogus; &#xD800; &"),
            "a&b A A &bogus; &#xD800; &");
}

TEST(AnalyzerTest, SpanishGermanFrenchKeepDiacriticsByDefault) {
  auto a = Make();
  EXPECT_THAT(Terms(*a, "¿Dónde está el Niño?"), ElementsAre("dónde", "está", "el", "niño"));
  // NFKC case folding maps ß to ss, as ICU's full case folding does.
  EXPECT_THAT(Terms(*a, "Grüße aus MÜNCHEN"), ElementsAre("grüsse", "aus", "münchen"));
  EXPECT_THAT(Terms(*a, "L'été à Paris, c'est génial"),
              ElementsAre("l'été", "à", "paris", "c'est", "génial"));
}

TEST(AnalyzerTest, DiacriticsFoldWhenAsked) {
  AnalyzerOptions options;
  options.fold_diacritics = true;
  auto a = Make(options);
  EXPECT_THAT(Terms(*a, "Café CRÈME naïve"), ElementsAre("cafe", "creme", "naive"));
}

TEST(AnalyzerTest, TypographicApostropheMeetsAscii) {
  auto a = Make();
  EXPECT_EQ(Terms(*a, "don\u2019t"), Terms(*a, "don't"));
}

TEST(AnalyzerTest, FullwidthFormsFoldToAscii) {
  auto a = Make();
  EXPECT_THAT(Terms(*a, "ＴＷＩＴＴＥＲ ２００９"), ElementsAre("twitter", "2009"));
}

TEST(AnalyzerTest, JapaneseAndChineseUseDictionaryWordBreaks) {
  auto a = Make();
  std::vector<std::string> ja = Terms(*a, "東京都に住んでいます");
  EXPECT_GE(ja.size(), 3u);  // a dictionary split, not one token per sentence
  EXPECT_THAT(ja, IsSupersetOf({"東京"}));
  std::vector<std::string> zh = Terms(*a, "我喜欢北京大学");
  EXPECT_GE(zh.size(), 3u);
  EXPECT_THAT(zh, IsSupersetOf({"北京"}));
}

TEST(AnalyzerTest, ArabicWordsSplitOnSpaces) {
  auto a = Make();
  EXPECT_THAT(Terms(*a, "مرحبا بالعالم"), ElementsAre("مرحبا", "بالعالم"));
}

TEST(AnalyzerTest, EmojiAreTokensWithoutVariationSelectors) {
  auto a = Make();
  absl::StatusOr<std::vector<Token>> tokens =
      a->Analyze("love it \u2764\uFE0F so much \U0001F525!");
  ASSERT_TRUE(tokens.ok());
  std::vector<std::string> emoji;
  for (const Token& t : *tokens) {
    if (t.kind == TokenKind::kEmoji) emoji.push_back(t.text);
  }
  EXPECT_THAT(emoji, ElementsAre("\u2764", "\U0001F525"));
  EXPECT_THAT(Terms(*a, "\u2764"), ElementsAre("\u2764"));  // a query finds it the same way
}

TEST(AnalyzerTest, SnowballStemming) {
  AnalyzerOptions options;
  options.stem_language = "english";
  auto a = Make(options);
  EXPECT_THAT(Terms(*a, "running runs #running"), ElementsAre("run", "run", "#running"));
  options.stem_language = "spanish";
  EXPECT_THAT(Terms(*Make(options), "corriendo"), ElementsAre("corr"));
  options.stem_language = "klingon";
  EXPECT_EQ(Analyzer::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(AnalyzerTest, InvalidUtf8IsRejectedWithItsOffset) {
  auto a = Make();
  std::vector<Token> tokens = {{"keep", 0, TokenKind::kWord}};
  absl::Status s = a->Analyze(std::string_view("ok \xC3\x28 bad", 9), &tokens);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("byte 3"));
  EXPECT_EQ(tokens.size(), 1u);                       // nothing appended on error
  EXPECT_FALSE(a->Analyze("\xED\xA0\x80").ok());      // a surrogate
  EXPECT_FALSE(a->Analyze("\xF4\x90\x80\x80").ok());  // above U+10FFFF
  EXPECT_FALSE(a->Analyze("\xC0\xAF").ok());          // overlong
}

TEST(AnalyzerTest, ArbitraryBytesNeverCrash) {
  auto a = Make();
  uint64_t state = 42;
  for (int i = 0; i < 3000; ++i) {
    std::string text;
    const int n = static_cast<int>(state % 40);
    for (int j = 0; j < n; ++j) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      text.push_back(static_cast<char>(state >> 56));
    }
    std::vector<Token> tokens;
    absl::Status s = a->Analyze(text, &tokens);
    if (s.ok()) {
      for (const Token& t : tokens) EXPECT_FALSE(t.text.empty());
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    }
  }
}

// The ASCII fast path must cut words exactly where ICU does, or a query analyzed one way would
// miss tweets analyzed the other way.
std::vector<std::pair<size_t, size_t>> IcuWords(std::string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::BreakIterator> words(
      icu::BreakIterator::createWordInstance(icu::Locale::getRoot(), status));
  UText ut = UTEXT_INITIALIZER;
  utext_openUTF8(&ut, text.data(), static_cast<int64_t>(text.size()), &status);
  words->setText(&ut, status);
  std::vector<std::pair<size_t, size_t>> out;
  int32_t start = words->first();
  for (int32_t end = words->next(); end != icu::BreakIterator::DONE;
       start = end, end = words->next()) {
    if (words->getRuleStatus() >= UBRK_WORD_NONE_LIMIT) out.emplace_back(start, end);
  }
  utext_close(&ut);
  return out;
}

TEST(AnalyzerTest, WordBreakMatchesIcuOnAscii) {
  const std::string wide = "ab1 2_@.',;:#$-!?/\n\t\"()&";
  const std::string narrow = "a1_@.',;";  // only the characters with joining rules
  std::mt19937 rng(29);
  for (int i = 0; i < 60000; ++i) {
    const std::string& alphabet = i % 2 ? wide : narrow;
    std::string text;
    const size_t n = rng() % 24;
    for (size_t j = 0; j < n; ++j) text.push_back(alphabet[rng() % alphabet.size()]);
    std::vector<std::pair<size_t, size_t>> fast;
    AsciiWordBreak(text, [&](size_t b, size_t e) { fast.emplace_back(b, e); });
    ASSERT_EQ(fast, IcuWords(text)) << "[" << text << "]";
  }
  // And on real tweets.
  std::optional<std::string> path = testing::Sentiment140Path();
  if (!path) return;
  absl::StatusOr<std::vector<ImportedTweet>> tweets = ReadSentiment140(*path);
  ASSERT_TRUE(tweets.ok());
  for (const ImportedTweet& t : *tweets) {
    if (!std::all_of(t.text.begin(), t.text.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; })) {
      continue;
    }
    std::vector<std::pair<size_t, size_t>> fast;
    AsciiWordBreak(t.text, [&](size_t b, size_t e) { fast.emplace_back(b, e); });
    ASSERT_EQ(fast, IcuWords(t.text)) << "[" << t.text << "]";
  }
}

TEST(AnalyzerTest, RealTweetsFromSentiment140) {
  std::optional<std::string> path = testing::Sentiment140Path();
  if (!path) GTEST_SKIP() << "../shared/data/sentiment140-20k.csv is absent; skipping";
  absl::StatusOr<std::vector<ImportedTweet>> tweets = ReadSentiment140(*path);
  ASSERT_TRUE(tweets.ok()) << tweets.status();
  ASSERT_GE(tweets->size(), 19000u);
  auto a = Make();
  size_t tokens_total = 0, hashtags = 0, mentions = 0, hosts = 0;
  for (const ImportedTweet& t : *tweets) {
    absl::StatusOr<std::vector<Token>> tokens = a->Analyze(t.text);
    ASSERT_TRUE(tokens.ok()) << t.id << ": " << tokens.status();
    tokens_total += tokens->size();
    for (const Token& token : *tokens) {
      EXPECT_EQ(token.text.find("&amp;"), std::string::npos) << t.text;
      hashtags += token.kind == TokenKind::kHashtag;
      mentions += token.kind == TokenKind::kMention;
      hosts += token.kind == TokenKind::kUrlHost;
    }
  }
  EXPECT_GT(tokens_total / tweets->size(), 8u);  // about 13 words per tweet
  EXPECT_GT(mentions, 5000u);
  EXPECT_GT(hashtags, 100u);
  EXPECT_GT(hosts, 500u);
  // The first tweet of the corpus, with its noise.
  EXPECT_THAT(Terms(*a, (*tweets)[0].text),
              IsSupersetOf({"@switchfoot", "twitpic.com", "awww", "that's", "bummer"}));
}

}  // namespace
}  // namespace tweetsearch::analysis
