// String building and the bridge to Abseil's string_view.
//
// Debian 12 builds Abseil with its own absl::string_view (not an alias of std::string_view), so
// Abseil's string functions do not accept std::string_view. The project speaks std::string_view
// everywhere and builds strings with fmt; AsAbsl() converts where an Abseil API needs a view.
#ifndef TWEETSEARCH_COMMON_STRINGS_H_
#define TWEETSEARCH_COMMON_STRINGS_H_

#include <fmt/format.h>

#include <charconv>
#include <concepts>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"

// Lets StrCat and fmt take Abseil's string_view (status messages, for example).
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<std::string_view> {
  template <typename FormatContext>
  auto format(absl::string_view s, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(std::string_view(s.data(), s.size()), ctx);
  }
};

namespace tweetsearch {

// Concatenates the fmt-formatted ("{}") forms of `args`.
template <typename... Args>
std::string StrCat(const Args&... args) {
  fmt::memory_buffer buffer;
  (fmt::format_to(std::back_inserter(buffer), "{}", args), ...);
  return fmt::to_string(buffer);
}

// Appends the fmt-formatted forms of `args` to `*out`.
template <typename... Args>
void StrAppend(std::string* out, const Args&... args) {
  (fmt::format_to(std::back_inserter(*out), "{}", args), ...);
}

inline absl::string_view AsAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}
inline std::string_view AsStd(absl::string_view s) { return std::string_view(s.data(), s.size()); }

// A whole decimal number and nothing else: ASCII digits, with one leading '-' only for a signed
// T. No spaces, no '+', no hex, no empty text; nullopt when the value does not fit T. Every
// number read from a request goes through here (absl::SimpleAtoi also takes " 12" and "+5").
template <std::integral T>
std::optional<T> ParseDecimal(std::string_view text) {
  if (text.empty() || text.size() > 40) return std::nullopt;
  T value{};
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value, 10);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return value;
}

// ASCII-only, case-insensitive prefix test.
bool StartsWithIgnoreCase(std::string_view text, std::string_view prefix);

}  // namespace tweetsearch

#endif  // TWEETSEARCH_COMMON_STRINGS_H_
