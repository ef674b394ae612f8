#include "indexer/analysis/analyzer.h"

#include <libstemmer.h>
#include <unicode/brkiter.h>
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/translit.h>
#include <unicode/uchar.h>
#include <unicode/utext.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <map>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "common/strings.h"
#include "common/utf8.h"

namespace tweetsearch::analysis {
namespace {

// ICU break iterators, transliterators and Snowball stemmers are not thread-safe, so each
// thread that analyzes text keeps its own. They live until the thread exits.
struct ThreadState {
  std::unique_ptr<icu::BreakIterator> words;
  const icu::Normalizer2* nfkc_casefold = nullptr;
  std::unique_ptr<icu::Transliterator> strip_marks;
  std::map<std::string, sb_stemmer*, std::less<>> stemmers;

  ThreadState() = default;
  ThreadState(const ThreadState&) = delete;
  ThreadState& operator=(const ThreadState&) = delete;
  ~ThreadState() {
    for (auto& [language, stemmer] : stemmers) sb_stemmer_delete(stemmer);
  }
};

absl::StatusOr<ThreadState*> GetThreadState() {
  thread_local ThreadState state;
  if (state.words == nullptr) {
    UErrorCode status = U_ZERO_ERROR;
    state.words.reset(icu::BreakIterator::createWordInstance(icu::Locale::getRoot(), status));
    if (U_FAILURE(status) || state.words == nullptr) {
      state.words.reset();
      return absl::InternalError(StrCat("ICU word break iterator: ", u_errorName(status)));
    }
    state.nfkc_casefold = icu::Normalizer2::getNFKCCasefoldInstance(status);
    if (U_FAILURE(status)) {
      state.words.reset();
      return absl::InternalError(StrCat("ICU NFKC_Casefold: ", u_errorName(status)));
    }
  }
  return &state;
}

icu::Transliterator* StripMarks(ThreadState& state) {
  if (state.strip_marks == nullptr) {
    UErrorCode status = U_ZERO_ERROR;
    state.strip_marks.reset(icu::Transliterator::createInstance(
        "NFD; [:Nonspacing Mark:] Remove; NFC", UTRANS_FORWARD, status));
    if (U_FAILURE(status)) state.strip_marks.reset();
  }
  return state.strip_marks.get();
}

sb_stemmer* Stemmer(ThreadState& state, const std::string& language) {
  auto it = state.stemmers.find(language);
  if (it != state.stemmers.end()) return it->second;
  sb_stemmer* stemmer = sb_stemmer_new(language.c_str(), "UTF_8");
  state.stemmers.emplace(language, stemmer);  // nullptr is remembered too
  return stemmer;
}

bool IsAsciiWordChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
}

bool IsAscii(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// Appends the folded form of `word` to `*out`.
void Fold(std::string_view word, const AnalyzerOptions& options, ThreadState& state,
          std::string* out) {
  if (IsAscii(word)) {
    for (char c : word) out->push_back(absl::ascii_tolower(static_cast<unsigned char>(c)));
    return;
  }
  const size_t begin = out->size();
  UErrorCode status = U_ZERO_ERROR;
  icu::StringByteSink<std::string> sink(out);
  state.nfkc_casefold->normalizeUTF8(0, icu::StringPiece(word.data(), word.size()), sink, nullptr,
                                     status);
  if (U_FAILURE(status)) {  // cannot happen for valid UTF-8; keep the word as it came
    out->resize(begin);
    out->append(word);
  }
  // A typographic apostrophe folds to the ASCII one, so "don’t" meets "don't".
  for (size_t pos; (pos = out->find("\xE2\x80\x99", begin)) != std::string::npos;) {
    out->replace(pos, 3, "'");
  }
  if (options.fold_diacritics) {
    if (icu::Transliterator* strip = StripMarks(state)) {
      icu::UnicodeString u = icu::UnicodeString::fromUTF8(
          icu::StringPiece(out->data() + begin, static_cast<int32_t>(out->size() - begin)));
      strip->transliterate(u);
      out->resize(begin);
      u.toUTF8String(*out);
    }
  }
}

// Where a URL starts at text[i], returns its length; else 0.
size_t UrlLength(std::string_view text, size_t i) {
  if (i > 0) {
    const char prev = text[i - 1];
    if (IsAsciiWordChar(prev) || static_cast<unsigned char>(prev) >= 0x80) return 0;
  }
  std::string_view rest = text.substr(i);
  if (!StartsWithIgnoreCase(rest, "http://") && !StartsWithIgnoreCase(rest, "https://") &&
      !StartsWithIgnoreCase(rest, "www.")) {
    return 0;
  }
  size_t end = 0;
  while (end < rest.size() && !absl::ascii_isspace(static_cast<unsigned char>(rest[end])) &&
         rest[end] != '"' && rest[end] != '<' && rest[end] != '>') {
    ++end;
  }
  return end;
}

// A host typed without a scheme that word boundaries would break: labels of ASCII letters,
// digits and inner hyphens joined by dots, a label before the last holding a digit or a hyphen
// ("site2.example.com", "my-site.org": UAX #29 breaks after a digit before a dot, and at a
// hyphen) and one holding a letter, ending in a top-level label of 2 to 63 letters, all
// lower-case or all upper-case ("mid-2020.Next" is two words missing a space, "1.First" a
// numbered line).
// It starts the text or follows a space or an opening bracket or quote, and ends the text or
// is followed by a space, punctuation, or a path, port, query or fragment, which belong to it
// up to the next space as in a URL. Returns its length (with what belongs to it); else 0.
// Hosts that word boundaries keep whole ("example.com") stay words, with the same text.
size_t BareHostLength(std::string_view text, size_t i) {
  if (i > 0 && !absl::ascii_isspace(static_cast<unsigned char>(text[i - 1])) &&
      std::string_view("([{<\"'").find(text[i - 1]) == std::string_view::npos) {
    return 0;
  }
  struct Label {
    bool digit = false, hyphen = false, letter = false, lower = true, upper = true;
  };
  size_t pos = i;
  size_t labels = 0;
  bool breaks = false;    // a label before the last holds a digit or a hyphen
  bool lettered = false;  // a label before the last holds a letter
  Label last;
  size_t last_length = 0;
  size_t host_end = i;
  while (true) {
    const size_t begin = pos;
    Label label;
    while (pos < text.size() &&
           (absl::ascii_isalnum(static_cast<unsigned char>(text[pos])) || text[pos] == '-')) {
      const char c = text[pos++];
      label.digit |= absl::ascii_isdigit(static_cast<unsigned char>(c));
      label.hyphen |= c == '-';
      label.letter |= absl::ascii_isalpha(static_cast<unsigned char>(c));
      label.lower &= c >= 'a' && c <= 'z';
      label.upper &= c >= 'A' && c <= 'Z';
    }
    if (pos == begin && labels >= 2) break;  // a dot ending the host, as a sentence's
    if (pos == begin || text[begin] == '-' || text[pos - 1] == '-' || pos - begin > 63) return 0;
    if (labels > 0) {
      breaks |= last.digit || last.hyphen;
      lettered |= last.letter;
    }
    last = label;
    last_length = pos - begin;
    host_end = pos;
    ++labels;
    if (pos >= text.size() || text[pos] != '.') break;
    ++pos;
  }
  if (labels < 2 || !breaks || !lettered || !(last.lower || last.upper) || last_length < 2) {
    return 0;
  }
  size_t end = host_end;
  if (end == text.size() || absl::ascii_isspace(static_cast<unsigned char>(text[end]))) {
    return end - i;
  }
  if (std::string_view("/?#:").find(text[end]) != std::string_view::npos) {
    while (end < text.size() && !absl::ascii_isspace(static_cast<unsigned char>(text[end])) &&
           text[end] != '"' && text[end] != '<' && text[end] != '>') {
      ++end;
    }
    return end - i;
  }
  return std::string_view(".,;!)]}>'\"").find(text[end]) != std::string_view::npos ? end - i : 0;
}

// The host part of a URL, lower-cased, without "www." and trailing punctuation.
std::string_view UrlHost(std::string_view url) {
  if (size_t scheme = url.find("://"); scheme != std::string_view::npos) {
    url.remove_prefix(scheme + 3);
  }
  if (size_t userinfo = url.find('@');
      userinfo != std::string_view::npos && userinfo < url.find_first_of("/?#")) {
    url.remove_prefix(userinfo + 1);
  }
  url = url.substr(0, url.find_first_of("/?#:"));
  while (!url.empty() && std::strchr(".,;!?)]}'", url.back()) != nullptr) url.remove_suffix(1);
  if (StartsWithIgnoreCase(url, "www.")) url.remove_prefix(4);
  return url;
}

bool IsEmojiStart(std::string_view segment) {
  int32_t i = 0;
  UChar32 c;
  U8_NEXT(reinterpret_cast<const uint8_t*>(segment.data()), i, static_cast<int32_t>(segment.size()),
          c);
  return c >= 0x80 && (u_hasBinaryProperty(c, UCHAR_EXTENDED_PICTOGRAPHIC) ||
                       u_hasBinaryProperty(c, UCHAR_REGIONAL_INDICATOR));
}

std::string EmojiTerm(std::string_view segment) {
  std::string out(segment);
  for (size_t pos; (pos = out.find("\xEF\xB8\x8F")) != std::string::npos;) out.erase(pos, 3);
  return out;
}

class TokenSink {
 public:
  // `text` is the text being split (words are views into it); `origin`, when not null, maps its
  // byte offsets to those of the caller's text (see DecodeHtmlEntities).
  TokenSink(const AnalyzerOptions& options, ThreadState& state, std::vector<Token>* out,
            uint32_t first_position, std::string_view text, const std::vector<uint32_t>* origin)
      : options_(options),
        state_(state),
        out_(out),
        position_(first_position),
        text_(text),
        origin_(origin) {}

  // A word segment of the original text, with the sigil that precedes it (0 for none).
  void AddWord(std::string_view word, char sigil) {
    TokenKind kind = TokenKind::kWord;
    std::string text;
    if (sigil == '#') {
      kind = TokenKind::kHashtag;
    } else if (sigil == '@') {
      kind = TokenKind::kMention;
    } else if (sigil == '$' && absl::ascii_isalpha(static_cast<unsigned char>(word[0]))) {
      kind = TokenKind::kCashtag;
    }
    if (kind != TokenKind::kWord) text.push_back(sigil);
    const size_t begin = static_cast<size_t>(word.data() - text_.data()) - (sigil != 0 ? 1 : 0);
    span_ = {begin, static_cast<size_t>(word.data() - text_.data()) + word.size()};
    Fold(word, options_, state_, &text);
    if (kind == TokenKind::kWord) {
      if (options_.drop_stop_words && Analyzer::IsStopWord(text)) {
        ++position_;  // keep the gap so phrases still line up
        return;
      }
      if (!options_.stem_language.empty()) Stem(&text);
    }
    Add(std::move(text), kind);
  }

  // A token made from text_[span_.first, span_.second) (set by AddWord, or by the caller).
  void Add(std::string text, TokenKind kind) {
    if (text.empty() || text.size() > options_.max_token_bytes) return;
    out_->push_back(
        Token{std::move(text), position_++, kind, Original(span_.first), Original(span_.second)});
  }
  void set_span(size_t begin, size_t end) { span_ = {begin, end}; }

 private:
  void Stem(std::string* text) {
    sb_stemmer* stemmer = Stemmer(state_, options_.stem_language);
    if (stemmer == nullptr) return;
    const sb_symbol* stemmed = sb_stemmer_stem(
        stemmer, reinterpret_cast<const sb_symbol*>(text->data()), static_cast<int>(text->size()));
    if (stemmed == nullptr) return;  // out of memory in Snowball: keep the unstemmed word
    text->assign(reinterpret_cast<const char*>(stemmed),
                 static_cast<size_t>(sb_stemmer_length(stemmer)));
  }

  uint32_t Original(size_t offset) const {
    return static_cast<uint32_t>(origin_ != nullptr ? (*origin_)[offset] : offset);
  }

  const AnalyzerOptions& options_;
  ThreadState& state_;
  std::vector<Token>* out_;
  uint32_t position_;
  std::string_view text_;
  const std::vector<uint32_t>* origin_;
  std::pair<size_t, size_t> span_{0, 0};
};

// Feeds the word text[ws, we) of `text` to `sink`, with its sigil.
void EmitWord(std::string_view text, size_t ws, size_t we, TokenSink& sink) {
  std::string_view segment = text.substr(ws, we - ws);
  if (segment.size() > 1 && segment[0] == '@') {
    // ICU 72 keeps '@' inside words (for addresses), so a mention arrives whole.
    sink.AddWord(segment.substr(1), '@');
    return;
  }
  char sigil = 0;
  if (ws > 0 && std::strchr("#@$", text[ws - 1]) != nullptr &&
      (ws == 1 || !IsAsciiWordChar(text[ws - 2]))) {
    sigil = text[ws - 1];
  }
  sink.AddWord(segment, sigil);
}

}  // namespace

// UAX #29 word boundaries as ICU 72's root rules draw them, for ASCII text only. Letters (and
// '@', which ICU 72 counts as a letter), digits and '_' join; '.' and '\'' join two letters or
// two digits, ',' and ';' two digits; every other character stands alone. A run of only '_'
// is a word when longer than one character. WordBreakMatchesIcuOnAscii in the tests checks
// this against ICU on random text.
void AsciiWordBreak(std::string_view text,
                    const std::function<void(size_t begin, size_t end)>& on_word) {
  enum Class : uint8_t { kOther, kLetter, kDigit, kUnderscore };
  auto class_of = [](char c) {
    if (absl::ascii_isalpha(static_cast<unsigned char>(c)) || c == '@') return kLetter;
    if (absl::ascii_isdigit(static_cast<unsigned char>(c))) return kDigit;
    if (c == '_') return kUnderscore;
    return kOther;
  };
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    if (class_of(text[i]) == kOther) {
      ++i;
      continue;
    }
    const size_t start = i;
    bool has_alnum = false;
    while (i < n) {
      const Class c = class_of(text[i]);
      if (c != kOther) {
        has_alnum |= c != kUnderscore;
        ++i;
        continue;
      }
      // A middle character joins only between two letters or two digits.
      const char mid = text[i];
      if (i + 1 >= n) break;
      const Class before = class_of(text[i - 1]), after = class_of(text[i + 1]);
      const bool letters = before == kLetter && after == kLetter && (mid == '.' || mid == '\'');
      const bool digits = before == kDigit && after == kDigit &&
                          (mid == '.' || mid == '\'' || mid == ',' || mid == ';');
      if (!letters && !digits) break;
      i += 1;  // the middle character; the next loop turn takes the character after it
    }
    if (has_alnum || i - start > 1) on_word(start, i);
  }
}

namespace {

// Splits text[begin, end) into words and feeds them to `sink`: by AsciiWordBreak when the
// range is ASCII (most tweets; several times faster), else by ICU.
absl::Status BreakWords(std::string_view text, size_t begin, size_t end, ThreadState& state,
                        TokenSink& sink) {
  if (begin >= end) return absl::OkStatus();
  if (IsAscii(text.substr(begin, end - begin))) {
    AsciiWordBreak(text.substr(begin, end - begin),
                   [&](size_t b, size_t e) { EmitWord(text, begin + b, begin + e, sink); });
    return absl::OkStatus();
  }
  UErrorCode status = U_ZERO_ERROR;
  UText ut = UTEXT_INITIALIZER;
  utext_openUTF8(&ut, text.data() + begin, static_cast<int64_t>(end - begin), &status);
  icu::BreakIterator& words = *state.words;
  words.setText(&ut, status);
  if (U_FAILURE(status)) {
    utext_close(&ut);
    return absl::InternalError(StrCat("ICU word breaking: ", u_errorName(status)));
  }
  int32_t start = words.first();
  for (int32_t stop = words.next(); stop != icu::BreakIterator::DONE;
       start = stop, stop = words.next()) {
    const size_t ws = begin + static_cast<size_t>(start);
    std::string_view segment = text.substr(ws, static_cast<size_t>(stop - start));
    if (words.getRuleStatus() < UBRK_WORD_NONE_LIMIT) {
      if (IsEmojiStart(segment)) {
        sink.set_span(ws, ws + segment.size());
        sink.Add(EmojiTerm(segment), TokenKind::kEmoji);
      }
      continue;
    }
    EmitWord(text, ws, ws + segment.size(), sink);
  }
  utext_close(&ut);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Analyzer>> Analyzer::Create(const AnalyzerOptions& options) {
  absl::StatusOr<ThreadState*> state = GetThreadState();
  if (!state.ok()) return state.status();
  if (!options.stem_language.empty() && Stemmer(**state, options.stem_language) == nullptr) {
    return absl::InvalidArgumentError(
        StrCat("unknown stemming language '", options.stem_language, "'"));
  }
  if (options.fold_diacritics && StripMarks(**state) == nullptr) {
    return absl::InternalError("ICU transliterator for diacritics folding is unavailable");
  }
  return std::unique_ptr<Analyzer>(new Analyzer(options));
}

Analyzer::~Analyzer() = default;

absl::Status Analyzer::Analyze(std::string_view text, std::vector<Token>* out,
                               uint32_t first_position) const {
  if (absl::Status valid = ValidateUtf8(text); !valid.ok()) return valid;
  absl::StatusOr<ThreadState*> state = GetThreadState();
  if (!state.ok()) return state.status();

  std::string decoded;
  std::vector<uint32_t> origin;
  if (text.find('&') != std::string_view::npos) {
    decoded = DecodeHtmlEntities(text, &origin);
    text = decoded;
  }
  const size_t old_size = out->size();
  TokenSink sink(options_, **state, out, first_position, text, origin.empty() ? nullptr : &origin);
  size_t plain_begin = 0;
  const bool may_hold_bare_host = text.find('.') != std::string_view::npos;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    size_t url_length = 0;
    if (c == 'h' || c == 'H' || c == 'w' || c == 'W') url_length = UrlLength(text, i);
    if (url_length == 0 && may_hold_bare_host &&
        absl::ascii_isalnum(static_cast<unsigned char>(c))) {
      url_length = BareHostLength(text, i);
    }
    if (url_length == 0) continue;
    if (absl::Status s = BreakWords(text, plain_begin, i, **state, sink); !s.ok()) {
      out->resize(old_size);
      return s;
    }
    std::string host;
    Fold(UrlHost(text.substr(i, url_length)), options_, **state, &host);
    sink.set_span(i, i + url_length);
    sink.Add(std::move(host), TokenKind::kUrlHost);
    i += url_length - 1;
    plain_begin = i + 1;
  }
  if (absl::Status s = BreakWords(text, plain_begin, text.size(), **state, sink); !s.ok()) {
    out->resize(old_size);
    return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Token>> Analyzer::Analyze(std::string_view text) const {
  std::vector<Token> tokens;
  if (absl::Status s = Analyze(text, &tokens); !s.ok()) return s;
  return tokens;
}

bool Analyzer::IsStopWord(std::string_view folded_word) {
  // Lucene's English list plus the pronouns and contractions that dominate tweets.
  static const auto* const kStopWords = new absl::flat_hash_set<std::string_view>{
      "a",    "an",    "and",  "are",   "as",   "at",    "be",    "but",  "by",   "for",
      "if",   "in",    "into", "is",    "it",   "no",    "not",   "of",   "on",   "or",
      "such", "that",  "the",  "their", "then", "there", "these", "they", "this", "to",
      "was",  "will",  "with", "i",     "me",   "my",    "you",   "your", "we",   "he",
      "she",  "him",   "her",  "his",   "its",  "so",    "do",    "have", "has",  "had",
      "am",   "been",  "were", "just",  "what", "from",  "up",    "out",  "all",  "i'm",
      "it's", "don't", "im",   "can",   "get",  "got",   "our",   "us",   "them", "than"};
  return kStopWords->contains(folded_word);
}

}  // namespace tweetsearch::analysis
