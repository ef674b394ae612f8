// UTF-8 helpers used wherever outside text enters the system (ingest, queries, importers).
#ifndef TWEETSEARCH_COMMON_UTF8_H_
#define TWEETSEARCH_COMMON_UTF8_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace tweetsearch {

// OK if `text` is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
// Otherwise InvalidArgument naming the byte offset of the first bad sequence.
absl::Status ValidateUtf8(std::string_view text);

// Copy of `text` with every ill-formed sequence replaced by U+FFFD. Well-formed text is
// returned unchanged; nothing is dropped or truncated.
std::string SanitizeUtf8(std::string_view text);

// Latin-1 (ISO-8859-1) bytes to UTF-8. Every byte maps to one code point.
std::string Latin1ToUtf8(std::string_view latin1);

// Decodes the HTML entities tweets carry: named ones (&amp; &lt; &gt; &quot; &apos; &nbsp;) and
// numeric ones (&#39; &#x27;). Unknown or malformed entities are left as they are. When `origin`
// is given, it receives for each byte of the result the offset of the byte or entity of `text`
// it came from, plus text.size() at the end.
std::string DecodeHtmlEntities(std::string_view text, std::vector<uint32_t>* origin = nullptr);

}  // namespace tweetsearch

#endif  // TWEETSEARCH_COMMON_UTF8_H_
