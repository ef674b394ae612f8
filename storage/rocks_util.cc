#include "storage/rocks_util.h"

#include <sys/statvfs.h>

#include "common/strings.h"

namespace tweetsearch::storage {

void AppendBigEndian(std::string* out, uint64_t value, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

uint64_t DecodeKey(const rocksdb::Slice& key, size_t offset, size_t bytes) {
  uint64_t value = 0;
  for (size_t i = offset; i < offset + bytes && i < key.size(); ++i) {
    value = (value << 8) | static_cast<uint8_t>(key[i]);
  }
  return value;
}

absl::Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return absl::OkStatus();
  std::string message = StrCat(what, ": ", s.ToString());
  if (s.IsNotFound()) return absl::NotFoundError(message);
  if (s.IsCorruption()) return absl::DataLossError(message);
  if (s.IsIOError() || s.IsBusy() || s.IsTimedOut() || s.IsTryAgain()) {
    return absl::UnavailableError(message);
  }
  if (s.IsInvalidArgument()) return absl::InvalidArgumentError(message);
  return absl::InternalError(message);
}

absl::Status WriteGuard::BeforeWrite(bool adds_data) {
  if (adds_data && min_free_bytes_ > 0) {
    struct statvfs fs {};
    if (statvfs(dir_.c_str(), &fs) == 0) {
      const uint64_t free_bytes = uint64_t{fs.f_bavail} * fs.f_frsize;
      if (free_bytes < min_free_bytes_) {
        return absl::UnavailableError(StrCat(
            "the disk of ", dir_, " has ", free_bytes >> 20, " MiB free, under the reserve of ",
            min_free_bytes_ >> 20, " MiB: writes are refused until space is freed"));
      }
    }
  }
  if (needs_resume_.load(std::memory_order_acquire)) {
    if (rocksdb::Status s = db_->Resume(); !s.ok()) {
      return absl::UnavailableError(
          StrCat("the store in ", dir_, " takes no writes after a failed write to its disk (",
                 s.ToString(), "); reads go on; restart the process to recover"));
    }
    needs_resume_.store(false, std::memory_order_release);
  }
  return absl::OkStatus();
}

absl::Status WriteGuard::After(const rocksdb::Status& s, std::string_view what) {
  if (!s.ok()) needs_resume_.store(true, std::memory_order_release);
  return FromRocks(s, what);
}

}  // namespace tweetsearch::storage
