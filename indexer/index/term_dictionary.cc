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

// One entry of a block as stored: how many first bytes its term shares with the one before,
// the rest of it, its document frequency and its list's offset.
struct RawEntry {
  uint32_t shared = 0;
  std::string_view rest;
  uint32_t doc_freq = 0;
  uint32_t offset = 0;
};

// Reads the entry at *pos (the block's first if `first`; else the entry before it had its list
// at `offset`), advancing *pos. False if it does not decode before `end`.
bool ReadEntry(std::string_view blob, size_t end, bool first, uint32_t offset, size_t* pos,
               RawEntry* e) {
  uint32_t suffix = 0, offset_field = 0;
  e->shared = 0;
  if (!first && !GetVarint(blob, end, pos, &e->shared)) return false;
  if (!GetVarint(blob, end, pos, &suffix) || suffix > end - *pos) return false;
  e->rest = blob.substr(*pos, suffix);
  *pos += suffix;
  if (!GetVarint(blob, end, pos, &e->doc_freq) || !GetVarint(blob, end, pos, &offset_field)) {
    return false;
  }
  if (!first && offset_field > UINT32_MAX - offset) return false;
  e->offset = first ? offset_field : offset + offset_field;
  return true;
}

// Walks the entries of one block, rebuilding each term in `term`. Stops early when `visit`
// returns false. False if the block is malformed.
template <typename Visit>
bool WalkBlock(std::string_view blob, size_t begin, size_t end, uint32_t count, std::string* term,
               Visit&& visit) {
  size_t pos = begin;
  RawEntry e;
  for (uint32_t i = 0; i < count; ++i) {
    if (!ReadEntry(blob, end, i == 0, e.offset, &pos, &e) || e.shared > term->size()) return false;
    term->resize(e.shared);
    term->append(e.rest);
    if (!visit(std::string_view(*term), TermDictionary::Entry{e.doc_freq, e.offset})) return true;
  }
  return pos == end;
}

constexpr size_t kCacheLine = 64;  // bytes; a block is asked for ahead a line at a time

// The first 8 bytes of `term`, big-endian, zero-padded: for any two terms, a smaller key means
// a smaller term and a larger key a larger one; equal keys tell nothing.
uint64_t PrefixKey(std::string_view term) {
  uint64_t key = 0;
  for (size_t i = 0; i < 8; ++i) {
    key = key << 8 | (i < term.size() ? static_cast<uint8_t>(term[i]) : 0);
  }
  return key;
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
  dictionary.BuildKeys();
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
  dictionary.BuildKeys();
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

std::string_view TermDictionary::FirstTerm(size_t b) const {
  size_t pos = block_offsets_[b];
  uint32_t length = 0;
  if (!GetVarint(blob_, blob_.size(), &pos, &length) || length > blob_.size() - pos) {
    return std::string_view();
  }
  return blob_.substr(pos, length);
}

void TermDictionary::BuildKeys() {
  auto keys = std::make_shared<std::vector<uint64_t>>(block_offsets_.size());
  for (size_t b = 0; b < keys->size(); ++b) (*keys)[b] = PrefixKey(FirstTerm(b));
  block_keys_ = std::move(keys);
}

size_t TermDictionary::BlockOf(std::string_view target) const {
  const std::vector<uint64_t>& keys = *block_keys_;
  const uint64_t key = PrefixKey(target);
  return BlockFrom(std::lower_bound(keys.begin(), keys.end(), key) - keys.begin(), key, target);
}

size_t TermDictionary::BlockFrom(size_t lo, uint64_t key, std::string_view target) const {
  // Blocks before `lo` start below the target, blocks from `hi` on above it; those between
  // share its first 8 bytes and are told apart by their whole first terms.
  const std::vector<uint64_t>& keys = *block_keys_;
  size_t hi = std::upper_bound(keys.begin() + lo, keys.end(), key) - keys.begin();
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (FirstTerm(mid) <= target) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo > 0 ? lo - 1 : 0;  // lo: the first block whose first term is above the target
}

void TermDictionary::LocateInEach(std::span<const TermDictionary* const> dictionaries,
                                  std::string_view target, std::span<std::optional<Entry>> out) {
  const uint64_t key = PrefixKey(target);
  const size_t n = dictionaries.size();
  // Each dictionary's lower bound of `key` among its block keys (as std::lower_bound), all
  // found in lockstep: a round asks for every dictionary's next probe before it compares any.
  std::vector<size_t> base(n, 0), left(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (dictionaries[i]->num_terms_ > 0) left[i] = dictionaries[i]->block_keys_->size();
  }
  for (bool more = true; more;) {
    more = false;
    for (size_t i = 0; i < n; ++i) {
      if (left[i] > 0) __builtin_prefetch(&(*dictionaries[i]->block_keys_)[base[i] + left[i] / 2]);
    }
    for (size_t i = 0; i < n; ++i) {
      if (left[i] == 0) continue;
      const size_t half = left[i] / 2;
      if ((*dictionaries[i]->block_keys_)[base[i] + half] < key) {
        base[i] += half + 1;
        left[i] -= half + 1;
      } else {
        left[i] = half;
      }
      more = more || left[i] > 0;
    }
  }
  // Then each one's block: its offset, and then its bytes, asked for ahead of the scans.
  for (size_t i = 0; i < n; ++i) {
    const TermDictionary& d = *dictionaries[i];
    if (d.num_terms_ == 0) continue;
    base[i] = d.BlockFrom(base[i], key, target);
    __builtin_prefetch(&d.block_offsets_[base[i]]);
  }
  for (size_t i = 0; i < n; ++i) {
    const TermDictionary& d = *dictionaries[i];
    if (d.num_terms_ == 0) continue;
    const size_t begin = std::min<size_t>(d.block_offsets_[base[i]], d.blob_.size());
    const size_t end = std::min(d.BlockEnd(base[i]), begin + 4 * kCacheLine);
    for (size_t at = begin; at < end; at += kCacheLine) __builtin_prefetch(d.blob_.data() + at);
  }
  for (size_t i = 0; i < n; ++i) {
    out[i].reset();
    if (dictionaries[i]->num_terms_ == 0) continue;
    if (std::optional<Located> located = dictionaries[i]->LocateIn(base[i], target, 0)) {
      out[i] = located->entry;
    }
  }
}

std::optional<TermDictionary::Entry> TermDictionary::Find(std::string_view target) const {
  std::optional<Located> located = Locate(target, 0);
  if (!located) return std::nullopt;
  return located->entry;
}

std::optional<TermDictionary::Located> TermDictionary::Locate(std::string_view target,
                                                              uint32_t end_of_last) const {
  if (num_terms_ == 0) return std::nullopt;
  return LocateIn(BlockOf(target), target, end_of_last);
}

std::optional<TermDictionary::Located> TermDictionary::LocateIn(size_t b, std::string_view target,
                                                                uint32_t end_of_last) const {
  // The block's terms are read in order without being rebuilt. `matched`: how many first bytes
  // the term read last (below the target) shares with the target. A term sharing more than
  // that with the one before it is below the target as that one was; one sharing less is
  // above it (the terms increase); only one sharing exactly that much is compared, from there.
  const size_t end = BlockEnd(b);
  size_t pos = std::min<size_t>(block_offsets_[b], blob_.size());
  const uint32_t count = BlockCount(b);
  size_t matched = 0, previous_size = 0;
  RawEntry e;
  for (uint32_t i = 0; i < count; ++i) {
    if (!ReadEntry(blob_, end, i == 0, e.offset, &pos, &e) || e.shared > previous_size) {
      return std::nullopt;
    }
    const uint32_t shared = e.shared;
    const std::string_view rest = e.rest;
    previous_size = shared + rest.size();
    if (shared > matched) continue;             // below the target, as the one before
    if (shared < matched) return std::nullopt;  // above it: the target is not here
    const std::string_view wanted = target.substr(matched);
    const size_t common =
        std::mismatch(rest.begin(), rest.begin() + std::min(rest.size(), wanted.size()),
                      wanted.begin())
            .first -
        rest.begin();
    matched += common;
    if (common == rest.size() && common == wanted.size()) {
      Located found{Entry{e.doc_freq, e.offset}, end_of_last};
      found.end = NextOffset(b, i + 1, pos, e.offset).value_or(end_of_last);
      return found;
    }
    const bool below = common == rest.size() ||
                       (common < wanted.size() &&
                        static_cast<uint8_t>(rest[common]) < static_cast<uint8_t>(wanted[common]));
    if (!below) return std::nullopt;
  }
  return std::nullopt;
}

std::optional<uint32_t> TermDictionary::NextOffset(size_t b, uint32_t i, size_t pos,
                                                   uint32_t offset) const {
  if (i < BlockCount(b)) {
    // The next term of the block: its offset is a difference from `offset`.
    RawEntry e;
    if (!ReadEntry(blob_, BlockEnd(b), /*first=*/false, offset, &pos, &e)) return std::nullopt;
    return e.offset;
  }
  if (b + 1 >= block_offsets_.size()) return std::nullopt;  // the last term
  // The last term of its block: the next list starts at the next block's first offset.
  std::optional<uint32_t> next;
  std::string term;
  WalkBlock(blob_, std::min<size_t>(block_offsets_[b + 1], blob_.size()), BlockEnd(b + 1), 1, &term,
            [&](std::string_view, Entry e) {
              next = e.offset;
              return false;
            });
  return next;
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
