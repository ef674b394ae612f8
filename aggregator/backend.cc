#include "aggregator/backend.h"

#include <algorithm>

#include "common/snowflake.h"
#include "common/strings.h"
#include "common/utf8.h"

namespace tweetsearch::aggregator {

NewTweet ToNewTweet(SyntheticTweet t) {
  NewTweet out;
  out.id = t.id;
  out.user_id = t.user_id;
  out.user_name = std::move(t.user_name);
  out.text = std::move(t.text);
  out.created_at_ms = t.created_at_ms;
  out.lang = std::move(t.lang);
  out.likes = t.likes;
  return out;
}
namespace {

constexpr size_t kMaxUserNameBytes = 64;
constexpr size_t kMaxLangBytes = 16;

}  // namespace

absl::Status ValidateNewTweet(const NewTweet& t, size_t max_text_bytes) {
  if (t.text.empty()) return absl::InvalidArgumentError("missing text");
  if (t.text.size() > max_text_bytes) {
    return absl::InvalidArgumentError(
        StrCat("text has ", t.text.size(), " bytes, over the limit of ", max_text_bytes));
  }
  if (absl::Status s = ValidateUtf8(t.text); !s.ok()) {
    return absl::InvalidArgumentError(StrCat("text: ", s.message()));
  }
  if (t.user_name.size() > kMaxUserNameBytes) {
    return absl::InvalidArgumentError(StrCat("user_name over ", kMaxUserNameBytes, " bytes"));
  }
  if (absl::Status s = ValidateUtf8(t.user_name); !s.ok()) {
    return absl::InvalidArgumentError(StrCat("user_name: ", s.message()));
  }
  if (t.lang.size() > kMaxLangBytes || !std::all_of(t.lang.begin(), t.lang.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-';
      })) {
    return absl::InvalidArgumentError("lang must be a language code such as \"en\" or \"pt-BR\"");
  }
  if (t.id.has_value() && *t.id == 0) return absl::InvalidArgumentError("id 0 is reserved");
  // 1970 to the end of 9999: times that every later step (RFC 3339, recency) can represent.
  constexpr int64_t kLastMillis = 253'402'300'799'999;
  if (t.created_at_ms.has_value() && (*t.created_at_ms < 0 || *t.created_at_ms > kLastMillis)) {
    return absl::InvalidArgumentError(
        StrCat("created_at must be from 1970 to 9999 (Unix milliseconds 0 to ", kLastMillis, ")"));
  }
  return absl::OkStatus();
}

storage::StoredTweet ToStoredTweet(NewTweet&& t, TweetId id, const Clock& clock) {
  storage::StoredTweet s;
  s.id = id;
  s.user_id = t.user_id;
  s.user_name = std::move(t.user_name);
  s.text = std::move(t.text);
  if (t.created_at_ms.has_value()) {
    s.created_at_ms = *t.created_at_ms;
  } else if (!t.id.has_value()) {
    s.created_at_ms = SnowflakeUnixMillis(id);
  } else {
    s.created_at_ms = clock.NowUnixMillis();
  }
  s.lang = std::move(t.lang);
  s.likes = t.likes;
  return s;
}

}  // namespace tweetsearch::aggregator
