#include "indexer/index/term_dictionary.h"

#include <algorithm>

#include "common/strings.h"

namespace tweetsearch::index {
namespace {

void PutVarint(uint32_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Reads a varint at *pos, advancing it. False if it runs past `end` or over 32 bits.
bool GetVarint(const std::string& in, size_t end, size_t* pos, uint32_t* v) {
  uint32_t result = 0;
  for (int shift = 0; shift <= 28; shift += 7) {
    if (*pos >= end) return false;
    const uint8_t byte = static_cast<uint8_t>(in[(*pos)++]);
    result |= static_cast<uint32_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) {
      if (shift == 28 && byte > 0x0F) return false;
      *v = result;
      return true;
    }
  }
  return false;
}

// Walks the entries of one block, rebuilding each term in `term`. Stops early when `visit`
// returns false. False if the block is malformed.
template <typename Visit>
bool WalkBlock(const std::string& blob, size_t begin, size_t end, uint32_t count,
               std::string* term, Visit&& visit) {
  size_t pos = begin;
  uint32_t offset = 0;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t shared = 0, suffix = 0, doc_freq = 0, offset_field = 0;
    if (i > 0 && !GetVarint(blob, end, &pos, &shared)) return false;
    if (!GetVarint(blob, end, &pos, &suffix)) return false;
    if (shared > term->size() || suffix > end - pos) return false;
    term->resize(shared);
    term->append(blob, pos, suffix);
    pos += suffix;
    if (!GetVarint(blob, end, &pos, &doc_freq) || !GetVarint(blob, end, &pos, &offset_field)) {
      return false;
    }
    if (i == 0) {
      offset = offset_field;
    } else {
      if (offset_field > UINT32_MAX - offset) return false;
      offset += offset_field;
    }
    if (!visit(std::string_view(*term), TermDictionary::Entry{doc_freq, offset})) return true;
  }
  return pos == end;
}

}  // namespace

void TermDictionary::Builder::Add(std::string_view term, Entry entry) {
  if (count_ % kTermsPerBlock == 0) {
    block_offsets_.push_back(static_cast<uint32_t>(blob_.size()));
    PutVarint(static_cast<uint32_t>(term.size()), &blob_);
    blob_.append(term);
    PutVarint(entry.doc_freq, &blob_);
    PutVarint(entry.offset, &blob_);
  } else {
    size_t shared = 0;
    const size_t limit = std::min(previous_.size(), term.size());
    while (shared < limit && previous_[shared] == term[shared]) ++shared;
    PutVarint(static_cast<uint32_t>(shared), &blob_);
    PutVarint(static_cast<uint32_t>(term.size() - shared), &blob_);
    blob_.append(term.substr(shared));
    PutVarint(entry.doc_freq, &blob_);
    PutVarint(entry.offset - previous_offset_, &blob_);
  }
  previous_.assign(term);
  previous_offset_ = entry.offset;
  ++count_;
}

TermDictionary TermDictionary::Builder::Finish() {
  TermDictionary dictionary;
  dictionary.blob_ = std::move(blob_);
  dictionary.blob_.shrink_to_fit();
  dictionary.block_offsets_ = std::move(block_offsets_);
  dictionary.num_terms_ = count_;
  return dictionary;
}

absl::StatusOr<TermDictionary> TermDictionary::FromParts(std::string blob,
                                                         std::vector<uint32_t> block_offsets,
                                                         uint32_t num_terms) {
  auto bad = [](std::string_view why) {
    return absl::DataLossError(StrCat("term dictionary: ", why));
  };
  if (block_offsets.size() != (num_terms + kTermsPerBlock - 1) / kTermsPerBlock) {
    return bad("block count disagrees with the term count");
  }
  TermDictionary dictionary;
  dictionary.blob_ = std::move(blob);
  dictionary.block_offsets_ = std::move(block_offsets);
  dictionary.num_terms_ = num_terms;
  const std::vector<uint32_t>& blocks = dictionary.block_offsets_;
  std::string previous, term;
  uint32_t previous_offset = 0;
  bool first = true, ordered = true;
  for (size_t b = 0; b < blocks.size(); ++b) {
    const size_t begin = blocks[b];
    const size_t end = b + 1 < blocks.size() ? blocks[b + 1] : dictionary.blob_.size();
    if ((b == 0 && begin != 0) || begin > end || end > dictionary.blob_.size()) {
      return bad("block offsets out of order or out of bounds");
    }
    const uint32_t count =
        std::min<uint32_t>(kTermsPerBlock, num_terms - static_cast<uint32_t>(b) * kTermsPerBlock);
    term.clear();
    const bool ok = WalkBlock(dictionary.blob_, begin, end, count, &term,
                              [&](std::string_view t, Entry e) {
                                if (!first && (t <= previous || e.offset < previous_offset)) {
                                  ordered = false;
                                }
                                previous.assign(t);
                                previous_offset = e.offset;
                                first = false;
                                return true;
                              });
    if (!ok) return bad("malformed block");
    if (!ordered) return bad("terms out of order");
  }
  return dictionary;
}

std::optional<TermDictionary::Entry> TermDictionary::Find(std::string_view target) const {
  if (num_terms_ == 0) return std::nullopt;
  // The last block whose first term is <= target.
  auto first_term = [&](size_t b) {
    size_t pos = block_offsets_[b];
    uint32_t length = 0;
    GetVarint(blob_, blob_.size(), &pos, &length);  // validated on load or built here
    return std::string_view(blob_).substr(pos, length);
  };
  size_t lo = 0, hi = block_offsets_.size();
  while (hi - lo > 1) {
    const size_t mid = lo + (hi - lo) / 2;
    if (first_term(mid) <= target) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  const size_t end = lo + 1 < block_offsets_.size() ? block_offsets_[lo + 1] : blob_.size();
  const uint32_t count =
      std::min<uint32_t>(kTermsPerBlock, num_terms_ - static_cast<uint32_t>(lo) * kTermsPerBlock);
  std::string term;
  std::optional<Entry> found;
  WalkBlock(blob_, block_offsets_[lo], end, count, &term, [&](std::string_view t, Entry e) {
    if (t == target) found = e;
    return t < target;  // sorted: past the target, stop
  });
  return found;
}

void TermDictionary::ForEach(const std::function<void(std::string_view, Entry)>& fn) const {
  std::string term;
  for (size_t b = 0; b < block_offsets_.size(); ++b) {
    const size_t end = b + 1 < block_offsets_.size() ? block_offsets_[b + 1] : blob_.size();
    const uint32_t count =
        std::min<uint32_t>(kTermsPerBlock, num_terms_ - static_cast<uint32_t>(b) * kTermsPerBlock);
    term.clear();
    WalkBlock(blob_, block_offsets_[b], end, count, &term, [&](std::string_view t, Entry e) {
      fn(t, e);
      return true;
    });
  }
}

}  // namespace tweetsearch::index
