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

// Same result as UnpackBits, several times faster, with the width fixed at compile time: eight
// values a step with SSSE3/SSE4.1 for widths up to 25 bits (a byte shuffle, a multiplication
// and a shift; about 0.5 ns a value against 1.6 for the scalar loop), otherwise one unaligned
// 64-bit load per value. Requires: `in` holds PackedBytes(n, bits) + kUnpackPadding readable
// bytes (the padding is read, never used), bits <= 32.
size_t UnpackBitsFast(const uint8_t* in, size_t n, uint8_t bits, uint32_t* out);

// Patched frame of reference (PFor, after Zukowski et al., ICDE 2006): values are stored in a
// width b chosen to minimize the total size, and the few values that do not fit ("exceptions")
// keep their high bits apart: [n low parts, b bits each][count u8][high width u8]
// [count positions u8][count high parts]. The returned descriptor is b, with
// kPForExceptions set when there are exceptions; the reader needs it and n.
inline constexpr uint8_t kPForExceptions = 0x80;
inline constexpr uint8_t kPForWidthMask = 0x3F;

// Appends `values` to `*out`; returns the descriptor. Only blocks of at most 256 values get
// exceptions; longer ones are plain frame of reference.
uint8_t PackPFor(std::span<const uint32_t> values, std::string* out);
// Decodes n values written by PackPFor with `descriptor`; returns the bytes consumed.
// Requires: a well-formed stream followed by kUnpackPadding readable bytes.
size_t UnpackPFor(const uint8_t* in, size_t n, uint8_t descriptor, uint32_t* out);
// Value i of the n values written by PackPFor with `descriptor`, without decoding the others:
// one unaligned load, and a scan of the exceptions' positions if there are any. Requires: a
// well-formed stream followed by kUnpackPadding readable bytes, i < n.
uint32_t PForAt(const uint8_t* in, size_t n, uint8_t descriptor, size_t i);
// The size of a PFor stream, from its descriptor and header, without decoding it.
size_t PForBytes(const uint8_t* in, size_t n, uint8_t descriptor);
// As UnpackPFor, for untrusted input in [in, end): returns false instead of reading past `end`
// or accepting a malformed stream.
bool UnpackPForChecked(const uint8_t* in, const uint8_t* end, size_t n, uint8_t descriptor,
                       uint32_t* out, size_t* consumed);

// Turns stored gaps into values in place: out[j] = start + Σ_{i<=j} (gaps[i] + 1) - 1, that is,
// each value is one more than the previous plus its gap, and the first is start + gaps[0].
// Uses SSE2 where the machine has it.
void GapsToValues(uint32_t* values, size_t n, uint32_t start);

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_BITPACK_H_
