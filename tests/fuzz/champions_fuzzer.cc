// Champion records (indexer/index/champions.h) as a segment file stores them: any bytes
// through ReadChampions, which must refuse what does not fit or is out of order and never
// read past the end; a record it accepts must encode back to the same bytes.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "common/check.h"
#include "indexer/index/champions.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tweetsearch::index;
  // Exactly `size` bytes on the heap, so that ASan sees a read past them.
  std::unique_ptr<uint8_t[]> bytes(new uint8_t[size]);
  if (size > 0) std::memcpy(bytes.get(), data, size);
  Champions c;
  const uint32_t num_docs = 1u << 20;
  if (!ReadChampions(bytes.get(), bytes.get() + size, num_docs, &c)) return 0;
  TS_CHECK(!c.docs.empty() && c.docs.size() <= kMaxChampions, "champion count");
  TS_CHECK(c.docs.size() == c.tfs.size(), "one frequency per champion");
  TS_CHECK(c.lengths.empty() || c.lengths.size() == c.docs.size(), "one length per champion");
  TS_CHECK(c.bands.size() == c.lengths.size(), "one likes band per length");
  for (const uint8_t band : c.bands) TS_CHECK(band < kLikesBands, "a likes band out of range");
  std::string again;
  AppendChampions(c, &again);
  TS_CHECK(again.size() <= size, "a record longer than its bytes");
  // The padding after an odd count of frequencies, and after as many lengths and bands, is
  // not read back; all else is.
  const size_t n = c.docs.size();
  const size_t tf_pad = 8 + 4 * n + 2 * n;
  const size_t point_pad = 8 + 4 * n + (2 * n + 3) / 4 * 4 + 2 * n;
  auto padding = [&](size_t i, size_t at) { return n % 2 == 1 && i >= at && i < at + 2; };
  for (size_t i = 0; i < again.size(); ++i) {
    if (padding(i, tf_pad) || (!c.lengths.empty() && padding(i, point_pad))) continue;
    TS_CHECK(static_cast<uint8_t>(again[i]) == bytes[i], "a record that reads back otherwise");
  }
  return 0;
}
