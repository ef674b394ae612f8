// Steps over ascending runs of DocIds eight at a time: a merge or a lookup that walks one
// sorted list to the places of another's DocIds (PostingCursor::Filter, Repeats::Find) waits
// on a comparison per step when it goes one DocId at a time.
#ifndef TWEETSEARCH_INDEXER_INDEX_ASCENDING_H_
#define TWEETSEARCH_INDEXER_INDEX_ASCENDING_H_

#include <bit>
#include <climits>
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tweetsearch::index {

// How many of the ascending p[0..8) are below `a` (those are a prefix of the eight).
inline uint32_t CountBelowOfEight(const uint32_t* p, uint32_t a) {
#if defined(__SSE2__)
  // Signed comparisons of the values with the top bit flipped order them as unsigned.
  const __m128i flip = _mm_set1_epi32(INT_MIN);
  const __m128i target = _mm_xor_si128(_mm_set1_epi32(static_cast<int>(a)), flip);
  const __m128i lo = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)), flip);
  const __m128i hi = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 4)), flip);
  const int below = _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(target, lo))) |
                    _mm_movemask_ps(_mm_castsi128_ps(_mm_cmpgt_epi32(target, hi))) << 4;
  return static_cast<uint32_t>(std::popcount(static_cast<unsigned>(below)));
#else
  uint32_t n = 0;
  for (int i = 0; i < 8; ++i) n += p[i] < a ? 1 : 0;
  return n;
#endif
}

// Which of the four values at `a` equal one of the four at `b`: bit k for a[k]. All sixteen
// pairs compared at once (b against itself turned by one, two and three places).
inline uint32_t EqualsAnyOfFour(const uint32_t* a, const uint32_t* b) {
#if defined(__SSE2__)
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
  const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  __m128i eq = _mm_cmpeq_epi32(x, y);
  eq = _mm_or_si128(eq, _mm_cmpeq_epi32(x, _mm_shuffle_epi32(y, _MM_SHUFFLE(0, 3, 2, 1))));
  eq = _mm_or_si128(eq, _mm_cmpeq_epi32(x, _mm_shuffle_epi32(y, _MM_SHUFFLE(1, 0, 3, 2))));
  eq = _mm_or_si128(eq, _mm_cmpeq_epi32(x, _mm_shuffle_epi32(y, _MM_SHUFFLE(2, 1, 0, 3))));
  return static_cast<uint32_t>(_mm_movemask_ps(_mm_castsi128_ps(eq)));
#else
  uint32_t found = 0;
  for (int k = 0; k < 4; ++k) {
    for (int l = 0; l < 4; ++l) found |= static_cast<uint32_t>(a[k] == b[l]) << k;
  }
  return found;
#endif
}

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_ASCENDING_H_
