#include "common/utf8.h"

#include <unicode/utf8.h>

#include <array>
#include <cstdint>
#include <utility>

#include "absl/strings/ascii.h"
#include "common/strings.h"

namespace tweetsearch {

absl::Status ValidateUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const int32_t length = static_cast<int32_t>(text.size());
  if (text.size() > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError("text too large to validate");
  }
  int32_t i = 0;
  while (i < length) {
    if (s[i] < 0x80) {  // ASCII fast path
      ++i;
      continue;
    }
    const int32_t start = i;
    UChar32 c;
    U8_NEXT(s, i, length, c);
    if (c < 0) {
      return absl::InvalidArgumentError(StrCat("invalid UTF-8 at byte ", start));
    }
  }
  return absl::OkStatus();
}

std::string SanitizeUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const int32_t length = static_cast<int32_t>(text.size());
  std::string out;
  out.reserve(text.size());
  int32_t i = 0;
  while (i < length) {
    const int32_t start = i;
    UChar32 c;
    U8_NEXT(s, i, length, c);
    if (c < 0) {
      out.append("\xEF\xBF\xBD");
    } else {
      out.append(text.substr(start, i - start));
    }
  }
  return out;
}

std::string Latin1ToUtf8(std::string_view latin1) {
  std::string out;
  out.reserve(latin1.size() + latin1.size() / 8);
  for (unsigned char c : latin1) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

std::string DecodeHtmlEntities(std::string_view text, std::vector<uint32_t>* origin) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 6> kNamed = {
      {{"amp", "&"}, {"lt", "<"}, {"gt", ">"}, {"quot", "\""}, {"apos", "'"}, {"nbsp", " "}}};
  std::string out;
  out.reserve(text.size());
  if (origin != nullptr) {
    origin->clear();
    origin->reserve(text.size() + 1);
  }
  size_t i = 0;
  // Appends text[i] and moves on.
  auto copy_one = [&] {
    if (origin != nullptr) origin->push_back(static_cast<uint32_t>(i));
    out.push_back(text[i++]);
  };
  while (i < text.size()) {
    if (text[i] != '&') {
      copy_one();
      continue;
    }
    const size_t semi = text.find(';', i + 1);
    if (semi == std::string_view::npos || semi - i > 10) {
      copy_one();
      continue;
    }
    std::string_view name = text.substr(i + 1, semi - i - 1);
    bool decoded = false;
    if (name.size() >= 2 && name[0] == '#') {
      const bool hex = name[1] == 'x' || name[1] == 'X';
      std::string_view digits = name.substr(hex ? 2 : 1);
      uint32_t code = 0;
      bool ok = !digits.empty();
      for (char d : digits) {
        int v = hex ? (absl::ascii_isxdigit(static_cast<unsigned char>(d))
                           ? (absl::ascii_isdigit(static_cast<unsigned char>(d))
                                  ? d - '0'
                                  : absl::ascii_tolower(static_cast<unsigned char>(d)) - 'a' + 10)
                           : -1)
                    : (absl::ascii_isdigit(static_cast<unsigned char>(d)) ? d - '0' : -1);
        if (v < 0 || code > 0x10FFFF) {
          ok = false;
          break;
        }
        code = code * (hex ? 16 : 10) + static_cast<uint32_t>(v);
      }
      // Only scalar values other than NUL: surrogates and out-of-range numbers stay literal.
      if (ok && code != 0 && code <= 0x10FFFF && (code < 0xD800 || code > 0xDFFF)) {
        char buf[4];
        int32_t len = 0;
        UBool error = false;
        U8_APPEND(reinterpret_cast<uint8_t*>(buf), len, 4, static_cast<UChar32>(code), error);
        if (!error) {
          out.append(buf, static_cast<size_t>(len));
          decoded = true;
        }
      }
    } else {
      for (const auto& [entity, value] : kNamed) {
        if (name == entity) {
          out.append(value);
          decoded = true;
          break;
        }
      }
    }
    if (decoded) {
      if (origin != nullptr) origin->resize(out.size(), static_cast<uint32_t>(i));
      i = semi + 1;
    } else {
      copy_one();
    }
  }
  if (origin != nullptr) origin->push_back(static_cast<uint32_t>(text.size()));
  return out;
}

}  // namespace tweetsearch
