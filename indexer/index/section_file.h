// Section files: the container of segment files (format v4). A file is a header page, then
// sections each starting on a 4 KiB boundary, then a trailer:
//
//   page 0:  magic (8 bytes), u32 section count, u32 zero,
//            per section { u32 tag (1, 2, ...), u32 zero, u64 offset, u64 length, u64 XXH64 },
//            u64 XXH64 of the header so far; zeros to 4 KiB
//   sections: each followed by at least 8 zero bytes, then zeros to the next 4 KiB
//   trailer: u64 XXH64 of everything before it, "TSSEGEND"
//
// Page alignment lets each section be advised to the kernel on its own (madvise) and keeps
// 8-byte values in place; the zeros after a section let bit unpackers read a word past its end.
// Reading checks the header's checksum and the layout, and the checksum of every section
// except those the caller verifies its own way (large ones, checked lazily in chunks); the
// whole-file checksum is for full verification and copies, and is not read on open.
//
// Thread-safety: plain functions and a single-threaded writer.
#ifndef TWEETSEARCH_INDEXER_INDEX_SECTION_FILE_H_
#define TWEETSEARCH_INDEXER_INDEX_SECTION_FILE_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tweetsearch::index {

inline constexpr size_t kSectionAlignment = 4096;

class SectionFileWriter {
 public:
  explicit SectionFileWriter(std::string_view magic, uint32_t sections);
  // Adds the next section (tags are 1, 2, ... in order). The bytes are not copied: they must
  // stay valid while the pieces are used.
  void Add(std::string_view bytes);
  // The file as consecutive pieces (views of the sections and of buffers the writer owns,
  // valid while both live), to write without assembling it. Requires: every section added.
  std::vector<std::string_view> Pieces();

 private:
  std::string header_, trailer_;
  std::vector<std::string_view> sections_;
  std::string magic_;
  uint32_t count_;
};

struct SectionFile {
  std::vector<std::string_view> sections;  // by tag; [0] unused
  std::vector<uint64_t> checksums;         // by tag, as the header records them
};

// Reads the layout of `file`. DataLoss (the message says what is wrong) for a bad magic, a
// damaged header, sections out of bounds or overlapping, a missing trailer, or a section
// whose checksum fails, except the sections listed in `unchecked`.
absl::StatusOr<SectionFile> ReadSectionFile(std::string_view file, std::string_view magic,
                                            uint32_t sections, std::span<const uint32_t> unchecked);

// The whole-file checksum check (reads every byte). DataLoss if it fails.
absl::Status VerifyWholeFile(std::string_view file);

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_SECTION_FILE_H_
