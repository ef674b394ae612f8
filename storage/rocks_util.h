// Small helpers shared by the RocksDB stores (tweets, the builder's map):
// big-endian keys, so that RocksDB's bytewise order is numeric order, and
// RocksDB statuses as absl ones.
#ifndef TWEETSEARCH_STORAGE_ROCKS_UTIL_H_
#define TWEETSEARCH_STORAGE_ROCKS_UTIL_H_

#include <rocksdb/db.h>
#include <rocksdb/slice.h>
#include <rocksdb/status.h>

#include <atomic>
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

// Guards one RocksDB database's writes against a full or failing disk (docs/security.md):
// - Before a write that adds data, Unavailable when the disk holding `dir` has less than
//   `min_free_bytes` free: the write is refused before RocksDB runs out of space (RocksDB 7.8,
//   Debian 12's, aborts on an assertion when it writes a WAL again after a failed append; the
//   upstream fix came in 9.x), and it is accepted again as soon as space returns.
// - After a failed write, RocksDB stops taking writes; the next write first asks it to resume,
//   and is refused while it cannot. After a failed WAL fsync it never can (RocksDB calls that
//   unrecoverable in process, as PostgreSQL does since 2018: the kernel may have dropped the
//   unsynced pages): the store then serves reads only, until a restart reopens it, replaying
//   the WAL from disk.
// Thread-safe.
class WriteGuard {
 public:
  WriteGuard(rocksdb::DB* db, std::string dir, uint64_t min_free_bytes)
      : db_(db), dir_(std::move(dir)), min_free_bytes_(min_free_bytes) {}

  // OK, or why the write must not be made. `adds_data` false skips the space check (a write
  // that frees space, such as a trim).
  absl::Status BeforeWrite(bool adds_data = true);
  // FromRocks(s, what), remembering a failure for the next BeforeWrite.
  absl::Status After(const rocksdb::Status& s, std::string_view what);

 private:
  rocksdb::DB* const db_;
  const std::string dir_;
  const uint64_t min_free_bytes_;
  std::atomic<bool> needs_resume_{false};
};

}  // namespace tweetsearch::storage

#endif  // TWEETSEARCH_STORAGE_ROCKS_UTIL_H_
