// Small file helpers with honest error reporting.
#ifndef TWEETSEARCH_COMMON_FILE_UTIL_H_
#define TWEETSEARCH_COMMON_FILE_UTIL_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tweetsearch {

// Replaces `path` with `data` durably: writes `path`.tmp, fsyncs it, renames it over `path` and
// fsyncs the directory. Readers see the old file or the new one, never a mix.
// Returns Internal with the errno text on failure.
absl::Status WriteFileAtomically(const std::string& path, std::string_view data);

// The whole content of `path`. NotFound if it does not exist, Internal on other errors.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// Raises the soft limit on open files to the hard limit (a Debian service starts at 1,024,
// which a few hundred idle connections plus storage files exhaust). Returns the soft limit in
// force afterwards.
uint64_t RaiseOpenFileLimit();

}  // namespace tweetsearch

#endif  // TWEETSEARCH_COMMON_FILE_UTIL_H_
