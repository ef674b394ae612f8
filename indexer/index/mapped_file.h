// FileBytes: the read-only bytes of a segment, either a file mapped into memory or (for an
// index that keeps no directory) a heap buffer holding what the file would hold. Readers see
// one contiguous, page-aligned range either way.
//
// A mapped file is shared and read-only (PROT_READ, MAP_SHARED): its pages belong to the page
// cache, not to the process's heap, and the kernel may drop and re-read them. The mapping lives
// as long as the FileBytes; deleting the file meanwhile is safe (the inode stays until then).
// Truncating it is not: a read past the new end raises SIGBUS. Segment files are never
// modified after they are written, only replaced or deleted.
//
// Thread-safety: immutable; any number of readers.
#ifndef TWEETSEARCH_INDEXER_INDEX_MAPPED_FILE_H_
#define TWEETSEARCH_INDEXER_INDEX_MAPPED_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tweetsearch::index {

class FileBytes {
 public:
  // Maps `path` whole. NotFound if it does not exist, DataLoss if it is empty, Internal for
  // other errors.
  static absl::StatusOr<std::unique_ptr<FileBytes>> Map(const std::string& path);
  // Copies `bytes` into a page-aligned heap buffer.
  static std::unique_ptr<FileBytes> FromBytes(std::string_view bytes);
  // The same for bytes given as consecutive pieces.
  static std::unique_ptr<FileBytes> FromPieces(std::span<const std::string_view> pieces);

  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;
  ~FileBytes();

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  std::string_view view() const { return {reinterpret_cast<const char*>(data_), size_}; }
  bool mapped() const { return mapped_; }
  // Advises the kernel that a range is read at random (madvise); a hint, errors are ignored.
  void AdviseRandom(size_t offset, size_t length) const;

 private:
  FileBytes(const uint8_t* data, size_t size, bool mapped)
      : data_(data), size_(size), mapped_(mapped) {}
  const uint8_t* const data_;
  const size_t size_;
  const bool mapped_;
};

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_MAPPED_FILE_H_
