#include "common/tweet_csv.h"

#include <xxhash.h>

#include <array>
#include <chrono>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "common/file_util.h"
#include "common/strings.h"
#include "common/utf8.h"

namespace tweetsearch {

absl::StatusOr<int64_t> ParseTwitterDate(std::string_view date) {
  // "Www Mmm DD HH:MM:SS ZZZ YYYY"
  auto bad = [&] { return absl::InvalidArgumentError(StrCat("bad date '", date, "'")); };
  if (date.size() != 28 || date[3] != ' ' || date[7] != ' ' || date[10] != ' ' || date[13] != ':' ||
      date[16] != ':' || date[19] != ' ' || date[23] != ' ') {
    return bad();
  }
  static constexpr std::array<std::string_view, 12> kMonths = {
      "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  unsigned month = 0;
  for (unsigned m = 0; m < 12; ++m) {
    if (date.substr(4, 3) == kMonths[m]) month = m + 1;
  }
  auto number = [&](size_t pos, size_t len, int* out) {
    return absl::SimpleAtoi(AsAbsl(date.substr(pos, len)), out);
  };
  int day = 0, hour = 0, minute = 0, second = 0, year = 0;
  if (month == 0 || !number(8, 2, &day) || !number(11, 2, &hour) || !number(14, 2, &minute) ||
      !number(17, 2, &second) || !number(24, 4, &year) || hour > 23 || minute > 59 || second > 60) {
    return bad();
  }
  const std::string_view zone = date.substr(20, 3);
  int offset_hours = 0;
  if (zone == "PDT")
    offset_hours = -7;
  else if (zone == "PST")
    offset_hours = -8;
  else if (zone == "EDT")
    offset_hours = -4;
  else if (zone == "EST")
    offset_hours = -5;
  else if (zone != "UTC" && zone != "GMT")
    return bad();
  const std::chrono::year_month_day ymd{std::chrono::year{year}, std::chrono::month{month},
                                        std::chrono::day{static_cast<unsigned>(day)}};
  if (!ymd.ok()) return bad();
  const int64_t days = std::chrono::sys_days{ymd}.time_since_epoch().count();
  const int64_t seconds = days * 86400 + hour * 3600 + minute * 60 + second - offset_hours * 3600;
  return seconds * 1000;
}

uint32_t DerivedLikes(TweetId id) {
  const uint64_t h = XXH64(&id, sizeof(id), 140);
  const double u = (static_cast<double>(h % 1'000'000) + 1) / 1'000'000.0;  // (0, 1]
  const double likes = std::pow(u, -1.2) - 1;  // Pareto: median ~0.8, p99.9 ~ 4000
  return static_cast<uint32_t>(std::min(likes, 5e6));
}

absl::StatusOr<ImportedTweet> ParseSentiment140Line(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::array<std::string_view, 6> fields;
  size_t pos = 0;
  for (size_t f = 0; f < fields.size(); ++f) {
    if (pos >= line.size() || line[pos] != '"') {
      return absl::InvalidArgumentError(StrCat("field ", f + 1, " does not start with a quote"));
    }
    // The text field may itself hold quotes; it is the last field, so it ends at the last quote.
    const size_t close = f + 1 == fields.size() ? line.rfind('"') : line.find("\",\"", pos + 1);
    if (close == std::string_view::npos || close <= pos) {
      return absl::InvalidArgumentError(StrCat("field ", f + 1, " is not closed"));
    }
    fields[f] = line.substr(pos + 1, close - pos - 1);
    pos = close + (f + 1 == fields.size() ? 1 : 2);
  }
  ImportedTweet tweet;
  if (!absl::SimpleAtoi(AsAbsl(fields[1]), &tweet.id) || tweet.id == 0) {
    return absl::InvalidArgumentError(StrCat("bad tweet id '", fields[1], "'"));
  }
  absl::StatusOr<int64_t> created = ParseTwitterDate(fields[2]);
  if (!created.ok()) return created.status();
  tweet.created_at_ms = *created;
  tweet.user_name = Latin1ToUtf8(fields[4]);
  tweet.user_id = XXH64(tweet.user_name.data(), tweet.user_name.size(), 0) >> 1;
  // The corpus escapes its text for HTML (&amp;, &quot;, &lt;): stored as the user wrote it.
  tweet.text = DecodeHtmlEntities(Latin1ToUtf8(fields[5]));
  tweet.likes = DerivedLikes(tweet.id);
  return tweet;
}

absl::StatusOr<std::vector<ImportedTweet>> ReadSentiment140(const std::string& path,
                                                            size_t* rejected) {
  absl::StatusOr<std::string> data = ReadFile(path);
  if (!data.ok()) return data.status();
  std::vector<ImportedTweet> tweets;
  size_t bad = 0;
  std::string_view rest = *data;
  while (!rest.empty()) {
    const size_t eol = rest.find('\n');
    std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
    if (line.empty() || line == "\r") continue;
    absl::StatusOr<ImportedTweet> tweet = ParseSentiment140Line(line);
    if (tweet.ok()) {
      tweets.push_back(*std::move(tweet));
    } else {
      ++bad;
    }
  }
  if (rejected != nullptr) *rejected = bad;
  return tweets;
}

}  // namespace tweetsearch
