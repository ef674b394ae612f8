#include "indexer/index/packed_column.h"

#include <algorithm>
#include <bit>

#include "common/strings.h"

namespace tweetsearch::index {

void PackedColumn::Encode(std::span<const uint64_t> values, std::string* out) {
  const uint32_t count = static_cast<uint32_t>(values.size());
  const uint32_t blocks = (count + kBlock - 1) / kBlock;
  out->append(reinterpret_cast<const char*>(&count), 4);
  out->append(reinterpret_cast<const char*>(&blocks), 4);
  const size_t headers = out->size();
  out->resize(headers + size_t{blocks} * kHeaderBytes);
  std::vector<uint64_t> words;
  for (uint32_t b = 0; b < blocks; ++b) {
    const std::span<const uint64_t> block =
        values.subspan(size_t{b} * kBlock, std::min<size_t>(kBlock, count - b * kBlock));
    const uint64_t base = *std::min_element(block.begin(), block.end());
    uint64_t all = 0;
    for (uint64_t v : block) all |= v - base;
    const uint8_t width = static_cast<uint8_t>(std::bit_width(all));
    const uint32_t first_word = static_cast<uint32_t>(words.size());
    words.resize(words.size() + (block.size() * width + 63) / 64);
    for (size_t j = 0; j < block.size() && width > 0; ++j) {
      const uint64_t v = block[j] - base;
      const uint64_t bit = j * width;
      uint64_t* w = words.data() + first_word + bit / 64;
      const uint32_t shift = bit % 64;
      w[0] |= v << shift;
      if (shift + width > 64) w[1] |= v >> (64 - shift);
    }
    char* header = out->data() + headers + size_t{b} * kHeaderBytes;
    std::memcpy(header, &base, 8);
    std::memcpy(header + 8, &first_word, 4);
    header[12] = static_cast<char>(width);
  }
  words.push_back(0);  // Get() may load the word after a value's last one
  out->append(reinterpret_cast<const char*>(words.data()), words.size() * sizeof(uint64_t));
}

absl::StatusOr<PackedColumn> PackedColumn::View(std::string_view bytes, uint32_t count) {
  auto bad = [](std::string_view why) {
    return absl::DataLossError(StrCat("packed column: ", why));
  };
  if (reinterpret_cast<uintptr_t>(bytes.data()) % 8 != 0) return bad("misaligned");
  if (bytes.size() < 8) return bad("truncated header");
  uint32_t stored_count, blocks;
  std::memcpy(&stored_count, bytes.data(), 4);
  std::memcpy(&blocks, bytes.data() + 4, 4);
  if (stored_count != count || blocks != (count + kBlock - 1) / kBlock) {
    return bad("value count disagrees with the segment");
  }
  const size_t header_end = 8 + size_t{blocks} * kHeaderBytes;
  if (bytes.size() < header_end + 8 || (bytes.size() - header_end) % 8 != 0) {
    return bad("truncated");
  }
  const size_t num_words = (bytes.size() - header_end) / 8 - 1;  // less the padding word
  PackedColumn column;
  column.headers_ = reinterpret_cast<const uint8_t*>(bytes.data()) + 8;
  column.words_ = reinterpret_cast<const uint64_t*>(bytes.data() + header_end);
  column.count_ = count;
  for (uint32_t b = 0; b < blocks; ++b) {
    const uint8_t* header = column.headers_ + size_t{b} * kHeaderBytes;
    uint32_t first_word;
    std::memcpy(&first_word, header + 8, 4);
    const uint32_t width = header[12];
    const size_t n = std::min<size_t>(kBlock, count - b * kBlock);
    if (width > 64 || first_word + (n * width + 63) / 64 > num_words) {
      return bad("block out of bounds");
    }
  }
  return column;
}

}  // namespace tweetsearch::index
