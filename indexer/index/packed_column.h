// PackedColumn: a read-only column of unsigned 64-bit values with O(1) random access, stored in
// frame of reference: the values are cut into blocks of 128, and each block keeps its smallest
// value (the base) and every value's difference from it in the block's bit width.
//
// Per-tweet columns of a sealed segment are nearly sorted (ids, times), small (lengths, codes)
// or nearly constant (the offset of created_at from the time in the id), so most blocks are a
// few bits wide. A value is one header load and one or two word loads away:
// base[i / 128] + bits(i % 128).
//
// Layout, little-endian, 8-byte aligned:
//   u32 count, u32 blocks
//   blocks × { u64 base, u32 first word, u8 width, 3 bytes zero }
//   words (u64), each block's values starting on a word, one zero word of padding at the end
//
// Thread-safety: a PackedColumn is a view of immutable bytes; any number of readers.
#ifndef TWEETSEARCH_INDEXER_INDEX_PACKED_COLUMN_H_
#define TWEETSEARCH_INDEXER_INDEX_PACKED_COLUMN_H_

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tweetsearch::index {

class PackedColumn {
 public:
  static constexpr uint32_t kBlock = 128;

  // Appends the encoding of `values` to `*out`. `out->size()` must be a multiple of 8 (the
  // column's words are read in place).
  static void Encode(std::span<const uint64_t> values, std::string* out);

  // A view of an encoding at `bytes` (8-byte aligned, which the caller guarantees). Checks
  // that the layout lies inside `bytes` and holds `count` values; DataLoss otherwise. The bytes
  // must outlive the view.
  static absl::StatusOr<PackedColumn> View(std::string_view bytes, uint32_t count);

  PackedColumn() = default;

  uint32_t size() const { return count_; }

  uint64_t Get(uint32_t i) const {
    const uint8_t* header = headers_ + (i / kBlock) * kHeaderBytes;
    uint64_t base;
    uint32_t first_word;
    std::memcpy(&base, header, 8);
    std::memcpy(&first_word, header + 8, 4);
    const uint32_t width = header[12];
    if (width == 0) return base;
    const uint64_t bit = uint64_t{i % kBlock} * width;
    const uint64_t* w = words_ + first_word;
    uint64_t v;
    if (width <= 56) {  // one unaligned load holds the value whatever its first bit
      std::memcpy(&v, reinterpret_cast<const uint8_t*>(w) + bit / 8, 8);
      v >>= bit % 8;
    } else {
      const uint32_t shift = bit % 64;
      v = w[bit / 64] >> shift;
      if (shift + width > 64) v |= w[bit / 64 + 1] << (64 - shift);
    }
    return base + (v & (~uint64_t{0} >> (64 - width)));
  }

 private:
  static constexpr size_t kHeaderBytes = 16;
  const uint8_t* headers_ = nullptr;
  const uint64_t* words_ = nullptr;
  uint32_t count_ = 0;
};

// Maps a signed value to an unsigned one so that small magnitudes stay small (0, -1, 1, -2 ...
// become 0, 1, 2, 3 ...).
inline uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
inline int64_t UnZigZag(uint64_t v) {
  return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
}

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_PACKED_COLUMN_H_
