// Small file helpers with honest error reporting.
#ifndef TWEETSEARCH_COMMON_FILE_UTIL_H_
#define TWEETSEARCH_COMMON_FILE_UTIL_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tweetsearch {

// When a written file must be on disk: before WriteFileAtomically returns, or later, when the
// caller calls SyncFile (a file nothing names yet need not be durable until something does).
enum class Durability { kNow, kLater };

// Replaces `path` with `data` durably: writes `path`.tmp, fsyncs it, renames it over `path` and
// fsyncs the directory (with Durability::kLater, neither fsync). Readers see the old file or
// the new one, never a mix. Returns Internal with the errno text on failure.
absl::Status WriteFileAtomically(const std::string& path, std::string_view data,
                                 Durability durability = Durability::kNow);
// The same for a file given as consecutive pieces (written without assembling them).
absl::Status WriteFileAtomically(const std::string& path, std::span<const std::string_view> pieces,
                                 Durability durability = Durability::kNow);

// Makes `path` and its directory entry durable (fsyncs both). Internal on failure.
absl::Status SyncFile(const std::string& path);

// The whole content of `path`. NotFound if it does not exist, Internal on other errors.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// What identifies one version of a file for a watcher: its inode, size and modification time.
// The time alone misses changes: the kernel stamps files from a coarse clock (a few
// milliseconds), so two versions written in quick succession can share it; a file replaced by
// WriteFileAtomically has a new inode. A missing file has the all-zero version.
struct FileVersion {
  uint64_t device = 0, inode = 0, size = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileVersion&) const = default;
};
FileVersion VersionOf(const std::string& path);

// Raises the soft limit on open files to the hard limit (a Debian service starts at 1,024,
// which a few hundred idle connections plus storage files exhaust). Returns the soft limit in
// force afterwards.
uint64_t RaiseOpenFileLimit();

}  // namespace tweetsearch

#endif  // TWEETSEARCH_COMMON_FILE_UTIL_H_
