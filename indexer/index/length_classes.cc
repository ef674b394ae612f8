#include "indexer/index/length_classes.h"

#include <algorithm>

namespace tweetsearch::index {

LengthClasses::LengthClasses(const Columns& columns, DocId rows)
    : rows_(rows), planes_((size_t{rows} + 63) / 64 * 3, 0) {
  for (size_t w = 0; w * 64 < rows; ++w) {
    const DocId first = static_cast<DocId>(w * 64);
    const DocId end = std::min<DocId>(rows, first + 64);
    uint64_t* planes = &planes_[w * 3];
    for (DocId d = first; d < end; ++d) {
      const auto c = static_cast<uint64_t>(ClassOf(columns.length(d)));
      planes[0] |= (c & 1) << (d - first);
      planes[1] |= (c >> 1 & 1) << (d - first);
      planes[2] |= (c >> 2 & 1) << (d - first);
    }
  }
}

int LengthClasses::ClassOf(uint32_t length) {
  return static_cast<int>(std::upper_bound(kLeast.begin(), kLeast.end(), length) - kLeast.begin()) -
         1;
}

uint64_t LengthClasses::AtMost(size_t w, int c) const {
  if (c >= kClasses - 1) {
    const size_t first = w * 64;
    if (first >= rows_) return 0;
    return rows_ - first >= 64 ? ~uint64_t{0} : (uint64_t{1} << (rows_ - first)) - 1;
  }
  if (c < 0 || w * 3 >= planes_.size()) return 0;
  // Compared from the high bit down: below so far, or equal so far (rows past the segment's
  // end are class 0 in the planes, so they are masked out at the end).
  const uint64_t* planes = &planes_[w * 3];
  uint64_t below = 0, equal = ~uint64_t{0};
  for (int b = 2; b >= 0; --b) {
    if ((c >> b & 1) != 0) {
      below |= equal & ~planes[b];
      equal &= planes[b];
    } else {
      equal &= ~planes[b];
    }
  }
  return (below | equal) & AtMost(w, kClasses - 1);
}

}  // namespace tweetsearch::index
