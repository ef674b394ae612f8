#include "indexer/index/lead_points.h"

#include <algorithm>
#include <array>

#include "absl/container/flat_hash_set.h"
#include "common/strings.h"

namespace tweetsearch::index {
namespace {

// The least length of each bucket past the exact ones (0-7).
constexpr std::array<uint32_t, 8> kLongBuckets = {8, 10, 12, 14, 16, 20, 24, 32};

uint32_t LengthBucket(uint32_t length) {
  if (length < kLongBuckets[0]) return length;
  const auto* past = std::upper_bound(kLongBuckets.begin(), kLongBuckets.end(), length);
  return static_cast<uint32_t>(past - kLongBuckets.begin()) - 1 + kLongBuckets[0];
}

}  // namespace

uint8_t PackLeadPoint(uint32_t length, uint32_t likes) {
  return static_cast<uint8_t>(LikesBand(likes) << 4 | LengthBucket(length));
}

uint32_t LeadPointLength(uint8_t point) {
  const uint32_t bucket = point & 0xF;
  return bucket < kLongBuckets[0] ? bucket : kLongBuckets[bucket - kLongBuckets[0]];
}

LeadPoints::LeadPoints(absl::flat_hash_map<std::string, std::vector<uint8_t>> by_word)
    : by_word_(std::move(by_word)) {
  bytes_ = by_word_.capacity() * sizeof(std::pair<std::string, std::vector<uint8_t>>);
  for (const auto& [word, points] : by_word_) bytes_ += word.capacity() + points.capacity();
}

std::span<const uint8_t> LeadPoints::Of(std::string_view word) const {
  const auto it = by_word_.find(AsAbsl(word));
  if (it == by_word_.end()) return {};
  return it->second;
}

std::vector<std::string> LeadWords(DocId rows,
                                   std::span<const std::pair<uint32_t, std::string>> doc_freqs,
                                   std::span<const std::string> pair_words) {
  const absl::flat_hash_set<std::string> pairs(pair_words.begin(), pair_words.end());
  const uint64_t least = std::max<uint64_t>(kLeadPointsMinPostings, rows / kLeadPointsShare);
  std::vector<std::string> words;
  for (const auto& [doc_freq, word] : doc_freqs) {
    if (doc_freq >= least && !pairs.contains(AsAbsl(word))) words.push_back(word);
  }
  return words;
}

std::unique_ptr<LeadPoints> BuildLeadPoints(const Segment& segment, DocId rows,
                                            std::span<const std::string> words,
                                            const std::atomic<bool>* cancel) {
  if (words.empty()) return nullptr;
  const Columns& c = segment.columns();
  absl::flat_hash_map<std::string, std::vector<uint8_t>> by_word;
  std::array<DocId, 256> docs;
  for (const std::string& word : words) {
    if (cancel != nullptr && cancel->load(std::memory_order_acquire)) return nullptr;
    std::unique_ptr<PostingCursor> cursor = segment.OpenTerm(word, rows);
    if (cursor == nullptr) continue;
    std::vector<uint8_t> points;
    points.reserve(cursor->size());
    while (const size_t n = cursor->NextDocs(rows, docs.data(), docs.size())) {
      for (size_t i = 0; i < n; ++i) {
        points.push_back(PackLeadPoint(c.length(docs[i]), c.BaseLikes(docs[i])));
      }
    }
    by_word.emplace(word, std::move(points));
  }
  return std::make_unique<LeadPoints>(std::move(by_word));
}

}  // namespace tweetsearch::index
