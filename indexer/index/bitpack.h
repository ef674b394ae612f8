// Bit packing for posting blocks: n unsigned values of `bits` bits each, little-endian bit order,
// padded to a whole byte. This is the "frame of reference" layout of PForDelta without
// exceptions; a block's width is the width of its largest value.
//
// Thread-safety: plain functions over caller-owned memory.
#ifndef TWEETSEARCH_INDEXER_INDEX_BITPACK_H_
#define TWEETSEARCH_INDEXER_INDEX_BITPACK_H_

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace tweetsearch::index {

// Bits needed for the largest of `values` (0 when all are 0).
inline uint8_t BitsNeeded(std::span<const uint32_t> values) {
  uint32_t all = 0;
  for (uint32_t v : values) all |= v;
  return static_cast<uint8_t>(std::bit_width(all));
}

// Bytes that PackBits writes for n values of `bits` bits.
inline size_t PackedBytes(size_t n, uint8_t bits) { return (n * bits + 7) / 8; }

// Appends `values`, each in `bits` bits, to `*out`. Requires: every value < 2^bits.
void PackBits(std::span<const uint32_t> values, uint8_t bits, std::string* out);

// Reads n values of `bits` bits from `in` into `out[0..n)`. Returns the bytes consumed.
// Requires: `in` holds at least PackedBytes(n, bits) bytes.
size_t UnpackBits(const uint8_t* in, size_t n, uint8_t bits, uint32_t* out);

// Bytes a buffer must hold past its last packed value for UnpackBitsFast.
inline constexpr size_t kUnpackPadding = 8;

// Same result as UnpackBits, several times faster: one unaligned 64-bit load per value, with
// the width fixed at compile time. Requires: `in` holds PackedBytes(n, bits) + kUnpackPadding
// readable bytes (the padding is read, never used), bits <= 32.
size_t UnpackBitsFast(const uint8_t* in, size_t n, uint8_t bits, uint32_t* out);

// Turns stored gaps into values in place: out[j] = start + Σ_{i<=j} (gaps[i] + 1) - 1, that is,
// each value is one more than the previous plus its gap, and the first is start + gaps[0].
// Uses SSE2 where the machine has it.
void GapsToValues(uint32_t* values, size_t n, uint32_t start);

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_BITPACK_H_
