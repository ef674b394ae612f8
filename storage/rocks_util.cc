#include "storage/rocks_util.h"

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

}  // namespace tweetsearch::storage
