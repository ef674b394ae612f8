// Small helpers shared by the RocksDB stores (tweets, the builder's map):
// big-endian keys, so that RocksDB's bytewise order is numeric order, and
// RocksDB statuses as absl ones.
#ifndef TWEETSEARCH_STORAGE_ROCKS_UTIL_H_
#define TWEETSEARCH_STORAGE_ROCKS_UTIL_H_

#include <rocksdb/slice.h>
#include <rocksdb/status.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace tweetsearch::storage {

// Appends the `bytes` low bytes of `value`, most significant first.
void AppendBigEndian(std::string* out, uint64_t value, int bytes = 8);
inline std::string EncodeKey(uint64_t value) {
  std::string key;
  AppendBigEndian(&key, value);
  return key;
}
// Reads up to 8 bytes of `key` from `offset` as a big-endian number.
uint64_t DecodeKey(const rocksdb::Slice& key, size_t offset = 0, size_t bytes = 8);

// NotFound, DataLoss (corruption), Unavailable (I/O, busy), InvalidArgument or
// Internal, with `what` leading the message.
absl::Status FromRocks(const rocksdb::Status& s, std::string_view what);

}  // namespace tweetsearch::storage

#endif  // TWEETSEARCH_STORAGE_ROCKS_UTIL_H_
