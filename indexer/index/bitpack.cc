#include "indexer/index/bitpack.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__SSSE3__) && defined(__SSE4_1__)
#include <smmintrin.h>
#define TWEETSEARCH_SIMD_UNPACK 1
#endif

#include <array>
#include <cstring>
#include <utility>
#include <vector>

namespace tweetsearch::index {

void PackBits(std::span<const uint32_t> values, uint8_t bits, std::string* out) {
  if (bits == 0) return;
  uint64_t buffer = 0;
  int filled = 0;
  for (uint32_t v : values) {
    buffer |= static_cast<uint64_t>(v) << filled;
    filled += bits;
    while (filled >= 8) {
      out->push_back(static_cast<char>(buffer & 0xFF));
      buffer >>= 8;
      filled -= 8;
    }
  }
  if (filled > 0) out->push_back(static_cast<char>(buffer & 0xFF));
}

size_t UnpackBits(const uint8_t* in, size_t n, uint8_t bits, uint32_t* out) {
  if (bits == 0) {
    std::memset(out, 0, n * sizeof(uint32_t));
    return 0;
  }
  const size_t bytes = PackedBytes(n, bits);
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  uint64_t buffer = 0;
  int filled = 0;
  size_t pos = 0;
  for (size_t i = 0; i < n; ++i) {
    while (filled < bits) {
      buffer |= static_cast<uint64_t>(in[pos++]) << filled;
      filled += 8;
    }
    out[i] = static_cast<uint32_t>(buffer & mask);
    buffer >>= bits;
    filled -= bits;
  }
  return bytes;
}

uint8_t PackPFor(std::span<const uint32_t> values, std::string* out) {
  const size_t n = values.size();
  const uint8_t max_bits = BitsNeeded(values);
  if (n > 256) {  // exception positions are one byte each
    PackBits(values, max_bits, out);
    return max_bits;
  }
  // Count, for each width, how many values need more.
  size_t need_more[33] = {};
  for (uint32_t v : values) {
    const int w = std::bit_width(v);
    for (int b = 0; b < w; ++b) ++need_more[b];
  }
  uint8_t best = max_bits;
  size_t best_bits = n * max_bits;
  for (uint8_t b = 0; b < max_bits; ++b) {
    const size_t exceptions = need_more[b];
    if (exceptions > 255) continue;
    const size_t bits = n * b + 16 + exceptions * (8 + (max_bits - b));
    if (bits < best_bits) {
      best = b;
      best_bits = bits;
    }
  }
  if (best == max_bits) {
    PackBits(values, best, out);
    return best;
  }
  uint32_t lows[256], highs[256];
  char indices[256];
  size_t count = 0;
  const uint32_t mask = best == 0 ? 0 : (1u << best) - 1;  // best < max_bits <= 32
  for (size_t i = 0; i < n; ++i) {
    lows[i] = values[i] & mask;
    if (std::bit_width(values[i]) > best) {
      indices[count] = static_cast<char>(i);
      highs[count++] = values[i] >> best;
    }
  }
  const uint8_t high_bits = BitsNeeded(std::span<const uint32_t>(highs, count));
  PackBits(std::span<const uint32_t>(lows, n), best, out);
  out->push_back(static_cast<char>(count));
  out->push_back(static_cast<char>(high_bits));
  out->append(indices, count);
  PackBits(std::span<const uint32_t>(highs, count), high_bits, out);
  return best | kPForExceptions;
}

size_t UnpackPFor(const uint8_t* in, size_t n, uint8_t descriptor, uint32_t* out) {
  const uint8_t b = descriptor & kPForWidthMask;
  size_t pos = UnpackBitsFast(in, n, b, out);
  if ((descriptor & kPForExceptions) == 0) return pos;
  const size_t count = in[pos];
  const uint8_t high_bits = in[pos + 1];
  const uint8_t* indices = in + pos + 2;
  pos += 2 + count;
  uint32_t highs[256];
  pos += UnpackBitsFast(in + pos, count, high_bits, highs);
  for (size_t e = 0; e < count; ++e) out[indices[e]] |= highs[e] << b;
  return pos;
}

namespace {
// The `bits`-bit value at bit offset `bit` of `in` (bits <= 32; 8 bytes readable there).
uint32_t PackedAt(const uint8_t* in, size_t bit, uint8_t bits) {
  if (bits == 0) return 0;
  uint64_t word;
  std::memcpy(&word, in + bit / 8, sizeof(word));
  return static_cast<uint32_t>(word >> (bit % 8) & ((uint64_t{1} << bits) - 1));
}
}  // namespace

uint32_t PForAt(const uint8_t* in, size_t n, uint8_t descriptor, size_t i) {
  const uint8_t b = descriptor & kPForWidthMask;
  uint32_t value = PackedAt(in, i * b, b);
  if ((descriptor & kPForExceptions) == 0) return value;
  const size_t pos = PackedBytes(n, b);
  const size_t count = in[pos];
  const uint8_t* indices = in + pos + 2;
  for (size_t e = 0; e < count; ++e) {
    if (indices[e] == i) {
      return value | PackedAt(indices + count, e * in[pos + 1], in[pos + 1]) << b;
    }
  }
  return value;
}

size_t PForBytes(const uint8_t* in, size_t n, uint8_t descriptor) {
  size_t pos = PackedBytes(n, descriptor & kPForWidthMask);
  if ((descriptor & kPForExceptions) == 0) return pos;
  const size_t count = in[pos];
  return pos + 2 + count + PackedBytes(count, in[pos + 1]);
}

bool UnpackPForChecked(const uint8_t* in, const uint8_t* end, size_t n, uint8_t descriptor,
                       uint32_t* out, size_t* consumed) {
  const uint8_t b = descriptor & kPForWidthMask;
  if (b > 32 || (descriptor & ~(kPForWidthMask | kPForExceptions)) != 0 || in > end) {
    return false;
  }
  const size_t available = static_cast<size_t>(end - in);
  size_t pos = PackedBytes(n, b);
  if (pos > available) return false;
  UnpackBits(in, n, b, out);
  if ((descriptor & kPForExceptions) != 0) {
    if (available - pos < 2) return false;
    const size_t count = in[pos];
    const uint8_t high_bits = in[pos + 1];
    if (b >= 32 || high_bits > 32 || b + high_bits > 32 || count == 0) return false;
    const uint8_t* indices = in + pos + 2;
    pos += 2 + count;
    if (pos > available || PackedBytes(count, high_bits) > available - pos) return false;
    uint32_t highs[256];
    pos += UnpackBits(in + pos, count, high_bits, highs);
    for (size_t e = 0; e < count; ++e) {
      if (indices[e] >= n) return false;
      out[indices[e]] |= highs[e] << b;
    }
  }
  *consumed = pos;
  return true;
}

void GapsToValues(uint32_t* values, size_t n, uint32_t start) {
  size_t i = 0;
#if defined(__SSE2__)
  // values[j] = (start - 1) + Σ_{i<=j} (gap_i + 1): an inclusive prefix sum of gap + 1,
  // four lanes at a time, carrying the last lane into the next group.
  __m128i carry = _mm_set1_epi32(static_cast<int>(start - 1));
  const __m128i ones = _mm_set1_epi32(1);
  for (; i + 4 <= n; i += 4) {
    __m128i x = _mm_add_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(values + i)), ones);
    x = _mm_add_epi32(x, _mm_slli_si128(x, 4));
    x = _mm_add_epi32(x, _mm_slli_si128(x, 8));
    x = _mm_add_epi32(x, carry);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(values + i), x);
    carry = _mm_shuffle_epi32(x, 0xFF);
  }
  uint32_t next = i == 0 ? start : values[i - 1] + 1;
#else
  uint32_t next = start;
#endif
  for (; i < n; ++i) {
    values[i] += next;
    next = values[i] + 1;
  }
}

namespace {

template <int kBits>
void UnpackFixed(const uint8_t* in, size_t n, uint32_t* out) {
  constexpr uint64_t kMask = (uint64_t{1} << kBits) - 1;
  for (size_t i = 0; i < n; ++i) {
    const size_t bit = i * kBits;
    uint64_t word;
    std::memcpy(&word, in + bit / 8, sizeof(word));
    out[i] = static_cast<uint32_t>((word >> (bit % 8)) & kMask);
  }
}

#if defined(TWEETSEARCH_SIMD_UNPACK)
// Eight values of b bits fill exactly b bytes. For each half of such a group (four values,
// one 32-bit lane each): which bytes of a 16-byte load a lane takes (0x80: none), the power
// of two that moves the value's lowest bit to bit 7 of its lane, and where the second half's
// load starts in the group.
struct UnpackLanes {
  uint8_t shuffle[2][16] = {};
  uint32_t multiply[2][4] = {};
  uint32_t second_half_byte = 0;
};

constexpr UnpackLanes MakeLanes(int bits) {
  UnpackLanes lanes;
  lanes.second_half_byte = static_cast<uint32_t>(4 * bits / 8);
  for (int half = 0; half < 2; ++half) {
    const int load_byte = half == 0 ? 0 : static_cast<int>(lanes.second_half_byte);
    for (int k = 0; k < 4; ++k) {
      const int bit = (4 * half + k) * bits;
      const int shift = bit % 8;
      const int bytes = (shift + bits + 7) / 8;  // the bytes holding the value
      for (int j = 0; j < 4; ++j) {
        lanes.shuffle[half][4 * k + j] =
            static_cast<uint8_t>(j < bytes ? bit / 8 - load_byte + j : 0x80);
      }
      lanes.multiply[half][k] = uint32_t{1} << (7 - shift);
    }
  }
  return lanes;
}

// Widths up to this many bits keep a value, moved to bit 7 of its lane, inside the lane.
constexpr int kMaxSimdBits = 25;

// Eight values per step with SSSE3/SSE4.1 (after Willhalm et al., "SIMD-Scan", VLDB 2009): a
// byte shuffle puts each value's bytes in its own 32-bit lane, a multiplication by a power
// of two lines its lowest bit up at bit 7, a shift and a mask keep its bits. About two
// instructions per value, where the scalar loop takes eight or nine. Only groups whose 16-byte
// loads end within the packed bytes and kUnpackPadding are done so; the rest, scalar.
template <int kBits>
void UnpackSimd(const uint8_t* in, size_t n, uint32_t* out) {
  static constexpr UnpackLanes kLanes = MakeLanes(kBits);
  const __m128i shuffle0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kLanes.shuffle[0]));
  const __m128i shuffle1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kLanes.shuffle[1]));
  const __m128i multiply0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kLanes.multiply[0]));
  const __m128i multiply1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kLanes.multiply[1]));
  const __m128i mask = _mm_set1_epi32(static_cast<int>((uint32_t{1} << kBits) - 1));
  const size_t readable = PackedBytes(n, kBits) + kUnpackPadding;
  size_t g = 0;
  for (; 8 * g + 8 <= n && g * kBits + kLanes.second_half_byte + 16 <= readable; ++g) {
    const uint8_t* group = in + g * kBits;
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(group));
    const __m128i hi =
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(group + kLanes.second_half_byte));
    __m128i a = _mm_mullo_epi32(_mm_shuffle_epi8(lo, shuffle0), multiply0);
    __m128i b = _mm_mullo_epi32(_mm_shuffle_epi8(hi, shuffle1), multiply1);
    a = _mm_and_si128(_mm_srli_epi32(a, 7), mask);
    b = _mm_and_si128(_mm_srli_epi32(b, 7), mask);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 8 * g), a);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 8 * g + 4), b);
  }
  // Groups end on byte boundaries: the rest starts at a whole byte.
  UnpackFixed<kBits>(in + g * kBits, n - 8 * g, out + 8 * g);
}
#endif

template <int kBits>
void Unpack(const uint8_t* in, size_t n, uint32_t* out) {
#if defined(TWEETSEARCH_SIMD_UNPACK)
  if constexpr (kBits <= kMaxSimdBits) {
    UnpackSimd<kBits>(in, n, out);
    return;
  }
#endif
  UnpackFixed<kBits>(in, n, out);
}

template <int... kBits>
constexpr auto MakeTable(std::integer_sequence<int, kBits...>) {
  return std::array<void (*)(const uint8_t*, size_t, uint32_t*), sizeof...(kBits)>{
      &Unpack<kBits + 1>...};
}

// Unpack<1> ... Unpack<32>.
constexpr auto kUnpackers = MakeTable(std::make_integer_sequence<int, 32>{});

}  // namespace

size_t UnpackBitsFast(const uint8_t* in, size_t n, uint8_t bits, uint32_t* out) {
  if (bits == 0) {
    std::memset(out, 0, n * sizeof(uint32_t));
    return 0;
  }
  kUnpackers[bits - 1](in, n, out);
  return PackedBytes(n, bits);
}

}  // namespace tweetsearch::index
