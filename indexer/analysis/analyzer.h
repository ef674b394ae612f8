// Analyzer: turns tweet text (and query words) into index terms.
//
// One pipeline serves indexing and querying, so a word typed in a query always meets the terms
// its tweets were indexed under:
//   1. UTF-8 is validated; ill-formed input is rejected with the byte offset (never truncated).
//   2. HTML entities are decoded (`&amp;` -> `&`, `&#39;` -> `'`).
//   3. URLs (http://, https://, www.) become one token: their host, without `www.`. So does a
//      host typed without a scheme where word boundaries would break it ("site2.example.com",
//      "my-site.org/page"; see BareHostLength in analyzer.cc for what counts as one).
//   4. ICU word boundaries (UAX #29; dictionary-based for Chinese, Japanese, Thai) split the rest.
//      A word right after `#`, `@` or `$` (at the start of a word) is a hashtag, mention or
//      cashtag and keeps its sigil: `#Foo` -> `#foo`. Emoji are tokens of their own.
//   5. NFKC case folding (ICU), diacritics kept unless fold_diacritics is set.
//   6. Optionally, stop words are dropped (their positions stay reserved, so phrases still line
//      up) and plain words are stemmed with Snowball (libstemmer).
//
// Thread-safety: an Analyzer is immutable after Create() and Analyze() may be called from any
// number of threads at once (ICU and Snowball state is kept per thread).
#ifndef TWEETSEARCH_INDEXER_ANALYSIS_ANALYZER_H_
#define TWEETSEARCH_INDEXER_ANALYSIS_ANALYZER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/utf8.h"

namespace tweetsearch::analysis {

enum class TokenKind : uint8_t {
  kWord,     // a plain word or number
  kHashtag,  // "#tag"
  kMention,  // "@user"
  kCashtag,  // "$tsla"
  kUrlHost,  // "example.com", from a URL
  kEmoji,    // one emoji (variation selectors removed)
};

struct Token {
  std::string text;       // the index term, folded; sigil included for tags and mentions
  uint32_t position = 0;  // 0-based; dropped stop words leave a gap
  TokenKind kind = TokenKind::kWord;
  // Where the token came from: bytes [begin, end) of the analyzed text (sigil included; a
  // whole URL for a host), for highlighting.
  uint32_t begin = 0;
  uint32_t end = 0;

  bool operator==(const Token&) const = default;
};

struct AnalyzerOptions {
  // Drop English stop words ("the", "to", "be", ...). Default false: tweets are short and
  // queries such as "to be or not to be" need them.
  bool drop_stop_words = false;
  // Snowball algorithm for plain words, e.g. "english", "spanish", "german". Empty (the
  // default) disables stemming. Tags, mentions and hosts are never stemmed.
  std::string stem_language;
  // Remove diacritics after folding ("café" -> "cafe"). Default false: diacritics are kept.
  bool fold_diacritics = false;
  // Tokens longer than this many bytes are skipped (they are noise, not words). Default 100.
  size_t max_token_bytes = 100;
};

class Analyzer {
 public:
  // Returns InvalidArgument for an unknown stemming language.
  static absl::StatusOr<std::unique_ptr<Analyzer>> Create(const AnalyzerOptions& options);

  Analyzer(const Analyzer&) = delete;
  Analyzer& operator=(const Analyzer&) = delete;
  ~Analyzer();

  // Appends the tokens of `text` to `*out`, positions starting at `first_position`.
  // Returns InvalidArgument ("invalid UTF-8 at byte N") for ill-formed UTF-8, leaving `*out`
  // as it was; Internal if ICU fails.
  absl::Status Analyze(std::string_view text, std::vector<Token>* out,
                       uint32_t first_position = 0) const;

  // Convenience form of Analyze().
  absl::StatusOr<std::vector<Token>> Analyze(std::string_view text) const;

  const AnalyzerOptions& options() const { return options_; }

  // True if `folded_word` is on the stop word list (whether or not it is dropped).
  static bool IsStopWord(std::string_view folded_word);

 private:
  explicit Analyzer(AnalyzerOptions options) : options_(std::move(options)) {}

  const AnalyzerOptions options_;
};

// Word boundaries of ASCII `text`, exactly as ICU's root word break iterator finds them:
// calls on_word(begin, end) for each segment ICU would give a word status. Exposed for the test
// that compares it with ICU.
void AsciiWordBreak(std::string_view text,
                    const std::function<void(size_t begin, size_t end)>& on_word);

// DecodeHtmlEntities lives in common/utf8.h (importers decode too).
using ::tweetsearch::DecodeHtmlEntities;

}  // namespace tweetsearch::analysis

#endif  // TWEETSEARCH_INDEXER_ANALYSIS_ANALYZER_H_
