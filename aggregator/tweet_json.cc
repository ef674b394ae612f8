#include "aggregator/tweet_json.h"

#include <chrono>
#include <limits>
#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/time/time.h"
#include "common/strings.h"

namespace tweetsearch::aggregator {
namespace {

using nlohmann::json;

absl::Status Bad(std::string_view why) { return absl::InvalidArgumentError(std::string(why)); }

// An unsigned 64-bit id from a string of digits or a JSON integer.
absl::StatusOr<uint64_t> ParseId(const json& value, std::string_view field) {
  if (value.is_string()) {
    const std::optional<uint64_t> id = ParseDecimal<uint64_t>(value.get_ref<const std::string&>());
    if (!id.has_value()) {
      return Bad(StrCat(field, " must be a decimal string of an unsigned 64-bit number"));
    }
    return *id;
  }
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) return value.get<uint64_t>();
  return Bad(StrCat(field, " must be a non-negative integer or a string of digits"));
}

absl::StatusOr<std::string> String(const json& object, const char* field) {
  auto it = object.find(field);
  if (it == object.end() || it->is_null()) return std::string();
  if (!it->is_string()) return Bad(StrCat(field, " must be a string"));
  return it->get<std::string>();
}

absl::StatusOr<int64_t> ParseCreatedAt(const json& value) {
  if (value.is_number_integer()) return value.get<int64_t>();
  if (!value.is_string()) return Bad("created_at must be an RFC 3339 string or Unix milliseconds");
  const std::string& s = value.get_ref<const std::string&>();
  if (absl::StatusOr<int64_t> t = ParseRfc3339(s); t.ok()) return t;
  // Twitter API v1.1: "Wed Oct 10 20:19:24 +0000 2018".
  absl::Time t;
  std::string error;
  if (absl::ParseTime("%a %b %d %H:%M:%S %z %Y", s, &t, &error)) return absl::ToUnixMillis(t);
  return Bad(StrCat("created_at '", s.substr(0, 40), "' is neither RFC 3339 nor Twitter's format"));
}

}  // namespace

absl::Status CheckJsonBounds(std::string_view text, size_t max_bytes) {
  if (text.size() > max_bytes) {
    return Bad(StrCat("JSON text of ", text.size(), " bytes is over the limit of ", max_bytes));
  }
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        return Bad(StrCat("JSON nested deeper than ", kMaxJsonDepth, " levels"));
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<NewTweet> ParseTweetJson(std::string_view line) {
  if (absl::Status s = CheckJsonBounds(line); !s.ok()) return s;
  json object = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (object.is_discarded()) return Bad("bad JSON (or invalid UTF-8)");
  if (!object.is_object()) return Bad("a tweet must be a JSON object");
  NewTweet t;
  // Ids: ours ("id"), or Twitter's ("id_str" preferred over the lossy "id").
  if (auto it = object.find("id_str"); it != object.end() && !it->is_null()) {
    absl::StatusOr<uint64_t> id = ParseId(*it, "id_str");
    if (!id.ok()) return id.status();
    t.id = *id;
  } else if (auto it = object.find("id"); it != object.end() && !it->is_null()) {
    absl::StatusOr<uint64_t> id = ParseId(*it, "id");
    if (!id.ok()) return id.status();
    t.id = *id;
  }
  absl::StatusOr<std::string> text = String(object, "full_text");
  if (!text.ok()) return text.status();
  if (text->empty()) text = String(object, "text");
  if (!text.ok()) return text.status();
  if (text->empty()) return Bad("missing text");
  t.text = *std::move(text);

  absl::StatusOr<std::string> user_name = String(object, "user_name");
  if (!user_name.ok()) return user_name.status();
  t.user_name = *std::move(user_name);
  if (auto it = object.find("user_id"); it != object.end() && !it->is_null()) {
    absl::StatusOr<uint64_t> id = ParseId(*it, "user_id");
    if (!id.ok()) return id.status();
    t.user_id = *id;
  }
  if (auto user = object.find("user"); user != object.end() && user->is_object()) {
    absl::StatusOr<std::string> name = String(*user, "screen_name");
    if (!name.ok()) return name.status();
    if (t.user_name.empty()) t.user_name = *std::move(name);
    for (const char* field : {"id_str", "id"}) {
      if (auto it = user->find(field); t.user_id == 0 && it != user->end() && !it->is_null()) {
        absl::StatusOr<uint64_t> id = ParseId(*it, "user.id");
        if (!id.ok()) return id.status();
        t.user_id = *id;
      }
    }
  }
  if (auto it = object.find("created_at"); it != object.end() && !it->is_null()) {
    absl::StatusOr<int64_t> created = ParseCreatedAt(*it);
    if (!created.ok()) return created.status();
    t.created_at_ms = *created;
  }
  absl::StatusOr<std::string> lang = String(object, "lang");
  if (!lang.ok()) return lang.status();
  t.lang = *std::move(lang);
  if (t.lang == "und") t.lang.clear();  // Twitter's "undetermined"
  for (const char* field : {"likes", "favorite_count"}) {
    auto it = object.find(field);
    if (it == object.end() || it->is_null()) continue;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 ||
        it->get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
      return Bad(StrCat(field, " must be an integer from 0 to 4294967295"));
    }
    t.likes = it->get<uint32_t>();
    break;
  }
  return t;
}

std::string FormatRfc3339(int64_t unix_millis) {
  // Civil-from-days with <chrono>: several times faster than a general time formatter, and on
  // the path of every search result.
  using namespace std::chrono;
  const sys_time<milliseconds> t{milliseconds(unix_millis)};
  const sys_days day = floor<days>(t);
  const year_month_day ymd{day};
  const hh_mm_ss<milliseconds> time{t - day};
  const int year = static_cast<int>(ymd.year());
  if (year < 0 || year > 9999) {  // outside RFC 3339's four-digit years: let absl say it
    return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(unix_millis),
                            absl::UTCTimeZone());
  }
  const int64_t ms = time.subseconds().count();
  // "YYYY-MM-DDTHH:MM:SS[.mmm]Z", digit by digit.
  char text[24];
  auto put = [&](int at, int64_t value, int width) {
    for (int i = width - 1; i >= 0; --i, value /= 10)
      text[at + i] = static_cast<char>('0' + value % 10);
  };
  put(0, year, 4);
  text[4] = '-';
  put(5, static_cast<unsigned>(ymd.month()), 2);
  text[7] = '-';
  put(8, static_cast<unsigned>(ymd.day()), 2);
  text[10] = 'T';
  put(11, time.hours().count(), 2);
  text[13] = ':';
  put(14, time.minutes().count(), 2);
  text[16] = ':';
  put(17, time.seconds().count(), 2);
  int length = 19;
  if (ms != 0) {
    text[19] = '.';
    put(20, ms, 3);
    length = 23;
  }
  text[length++] = 'Z';
  return std::string(text, static_cast<size_t>(length));
}

absl::StatusOr<int64_t> ParseRfc3339(std::string_view text) {
  absl::Time t;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, AsAbsl(text), &t, &error)) {
    return Bad(StrCat("'", text.substr(0, 40), "' is not an RFC 3339 time: ", error));
  }
  return absl::ToUnixMillis(t);
}

}  // namespace tweetsearch::aggregator
