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
bool GetVarint(std::string_view in, size_t end, size_t* pos, uint32_t* v) {
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
bool WalkBlock(std::string_view blob, size_t begin, size_t end, uint32_t count, std::string* term,
               Visit&& visit) {
  size_t pos = begin;
  uint32_t offset = 0;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t shared = 0, suffix = 0, doc_freq = 0, offset_field = 0;
    if (i > 0 && !GetVarint(blob, end, &pos, &shared)) return false;
    if (!GetVarint(blob, end, &pos, &suffix)) return false;
    if (shared > term->size() || suffix > end - pos) return false;
    term->resize(shared);
    term->append(blob.substr(pos, suffix));
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
  auto owned = std::make_shared<Owned>();
  owned->blob = std::move(blob_);
  owned->blob.shrink_to_fit();
  owned->block_offsets = std::move(block_offsets_);
  TermDictionary dictionary;
  dictionary.blob_ = owned->blob;
  dictionary.block_offsets_ = owned->block_offsets;
  dictionary.num_terms_ = count_;
  dictionary.owned_ = std::move(owned);
  return dictionary;
}

absl::StatusOr<TermDictionary> TermDictionary::ViewParts(std::string_view blob,
                                                         std::span<const uint32_t> block_offsets,
                                                         uint32_t num_terms) {
  if (block_offsets.size() != (num_terms + kTermsPerBlock - 1) / kTermsPerBlock ||
      (!block_offsets.empty() && block_offsets[0] != 0)) {
    return absl::DataLossError("term dictionary: block count disagrees with the term count");
  }
  TermDictionary dictionary;
  dictionary.blob_ = blob;
  dictionary.block_offsets_ = block_offsets;
  dictionary.num_terms_ = num_terms;
  return dictionary;
}

absl::StatusOr<TermDictionary> TermDictionary::FromParts(std::string_view blob,
                                                         std::span<const uint32_t> block_offsets,
                                                         uint32_t num_terms) {
  auto bad = [](std::string_view why) {
    return absl::DataLossError(StrCat("term dictionary: ", why));
  };
  absl::StatusOr<TermDictionary> viewed = ViewParts(blob, block_offsets, num_terms);
  if (!viewed.ok()) return viewed.status();
  const TermDictionary& dictionary = *viewed;
  std::string previous, term;
  uint32_t previous_offset = 0;
  bool first = true, ordered = true;
  for (size_t b = 0; b < block_offsets.size(); ++b) {
    const size_t begin = block_offsets[b];
    const size_t end = b + 1 < block_offsets.size() ? block_offsets[b + 1] : blob.size();
    if (begin > end || end > blob.size()) return bad("block offsets out of order or out of bounds");
    term.clear();
    const bool ok = WalkBlock(blob, begin, end, dictionary.BlockCount(b), &term,
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
  return viewed;
}

uint32_t TermDictionary::BlockCount(size_t b) const {
  return std::min<uint32_t>(kTermsPerBlock, num_terms_ - static_cast<uint32_t>(b) * kTermsPerBlock);
}

size_t TermDictionary::BlockEnd(size_t b) const {
  const size_t end = b + 1 < block_offsets_.size() ? block_offsets_[b + 1] : blob_.size();
  return std::min(end, blob_.size());
}

size_t TermDictionary::BlockOf(std::string_view target) const {
  auto first_term = [&](size_t b) {
    size_t pos = block_offsets_[b];
    uint32_t length = 0;
    if (!GetVarint(blob_, blob_.size(), &pos, &length) || length > blob_.size() - pos) {
      return std::string_view();
    }
    return blob_.substr(pos, length);
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
  return lo;
}

std::optional<TermDictionary::Entry> TermDictionary::Find(std::string_view target) const {
  std::optional<Located> located = Locate(target, 0);
  if (!located) return std::nullopt;
  return located->entry;
}

std::optional<TermDictionary::Located> TermDictionary::Locate(std::string_view target,
                                                              uint32_t end_of_last) const {
  if (num_terms_ == 0) return std::nullopt;
  const size_t b = BlockOf(target);
  std::string term;
  std::optional<Located> found;
  bool next_needed = false;
  WalkBlock(blob_, std::min<size_t>(block_offsets_[b], blob_.size()), BlockEnd(b), BlockCount(b),
            &term, [&](std::string_view t, Entry e) {
              if (next_needed) {
                found->end = e.offset;
                next_needed = false;
                return false;
              }
              if (t == target) {
                found = Located{e, end_of_last};
                next_needed = true;
                return true;
              }
              return t < target;  // sorted: past the target, stop
            });
  if (next_needed && b + 1 < block_offsets_.size()) {
    // The last term of its block: the next list starts at the next block's first offset.
    WalkBlock(blob_, std::min<size_t>(block_offsets_[b + 1], blob_.size()), BlockEnd(b + 1), 1,
              &term, [&](std::string_view, Entry e) {
                found->end = e.offset;
                return false;
              });
  }
  return found;
}

void TermDictionary::ForEach(const std::function<void(std::string_view, Entry)>& fn) const {
  for (Iterator it(*this); it.Valid(); it.Next()) fn(it.term(), it.entry());
}

TermDictionary::Iterator::Iterator(const TermDictionary& dictionary) : dictionary_(&dictionary) {
  LoadBlocks();
}

void TermDictionary::Iterator::Next() {
  if (++at_ == terms_.size()) LoadBlocks();
}

void TermDictionary::Iterator::LoadBlocks() {
  terms_.clear();
  at_ = 0;
  const TermDictionary& d = *dictionary_;
  std::string term;
  while (terms_.empty() && block_ < d.block_offsets_.size()) {
    term.clear();
    const size_t b = block_++;
    const bool ok =
        WalkBlock(d.blob_, std::min<size_t>(d.block_offsets_[b], d.blob_.size()), d.BlockEnd(b),
                  d.BlockCount(b), &term, [&](std::string_view t, Entry e) {
                    terms_.emplace_back(std::string(t), e);
                    return true;
                  });
    (void)ok;  // a block that does not decode yields the terms before the fault, as in ForEach
  }
}

}  // namespace tweetsearch::index
