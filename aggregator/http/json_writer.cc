#include "aggregator/http/json_writer.h"

#include <charconv>
#include <chrono>
#include <cmath>

#include "aggregator/tweet_json.h"

namespace tweetsearch::aggregator {

void AppendJsonString(std::string* out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->reserve(out->size() + s.size() + 2);
  out->push_back('"');
  size_t run = 0;  // start of the pending run of characters that need no escape
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out->append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      default:
        out->append("\\u00");
        out->push_back(kHex[c >> 4]);
        out->push_back(kHex[c & 15]);
    }
  }
  out->append(s.data() + run, s.size() - run);
  out->push_back('"');
}

namespace {

void AppendNumber(std::string* out, uint64_t value) {
  char digits[24];
  const auto [end, ec] = std::to_chars(digits, digits + sizeof(digits), value);
  out->append(digits, end);
}

}  // namespace

void AppendTweetJson(std::string* out, const storage::StoredTweet& t, uint32_t likes,
                     bool with_score, double score) {
  // Plain appends and to_chars: this runs for every search result.
  out->append("{\"tweet_id\":\"");
  AppendNumber(out, t.id);
  out->append("\",\"user_id\":\"");
  AppendNumber(out, t.user_id);
  out->append("\",\"user_name\":");
  AppendJsonString(out, t.user_name);
  out->append(",\"text\":");
  AppendJsonString(out, t.text);
  out->append(",\"created_at\":\"");
  out->append(FormatRfc3339(t.created_at_ms));
  out->append("\",\"lang\":");
  AppendJsonString(out, t.lang);
  out->append(",\"likes\":");
  AppendNumber(out, likes);
  if (with_score) {
    // JSON has no NaN or infinity; scores are finite, but a bug must not produce invalid JSON.
    char digits[32];
    const auto [end, ec] =
        std::to_chars(digits, digits + sizeof(digits), std::isfinite(score) ? score : 0.0);
    out->append(",\"score\":");
    out->append(digits, end);
  }
  out->push_back('}');
}

}  // namespace tweetsearch::aggregator
