// EntryTable: one shard's quota states, found by bucket id, stored inline in an open-addressing
// table.
//
// Why our own table (docs/limiter.md, "In-process backend"): at a million keys a check's cost is
// its cache misses. A flat hash map of ids to entries elsewhere pays three in a row (its control
// bytes, its slot, then the entry); here the entry itself sits at its place in the table, and a
// lookup reads the entry at the id's home place before its tag (three ids in four are there at
// half full), so a check waits for about one miss. Tables of 2 MiB and more are on transparent
// huge pages.
//
// - Places: `capacity()` of them, a power of two. Each has a one-byte tag (empty, deleted, or 7
//   bits of the id), an Entry, and a hint: an int64 the owner keeps per place (the limiter's
//   clock hand keeps each entry's expiry there), moved with its entry; kNoHint where no entry
//   lives. Places 8i to 8i + 7 have their hints in one cache line.
// - Probing is linear from the id's home place (the low bits of `id.lo`); ids are 128 bits of a
//   seeded hash, so homes are uniform. Erasing leaves a tombstone; tombstones go when the table
//   is rebuilt.
// - Entries move only in Reserve (a rebuild, at most one per Reserve); Find, Insert and Erase move
//   none, so pointers and places stay valid from one Reserve to the next.
//
// Entry: default-constructible and movable, with a public `BucketId key` that a default one
// holds as {0, 0}. Erase resets it to a default-constructed one (freeing what it holds).
//
// Thread-safety: none; the shard's lock guards it.
#ifndef TWEETSEARCH_LIMITER_ENTRY_TABLE_H_
#define TWEETSEARCH_LIMITER_ENTRY_TABLE_H_

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>
#include <utility>

#include "limiter/rule_match.h"

namespace tweetsearch::limiter {

// `n` default-constructed T's, on transparent huge pages where they fill at least one: at a
// million keys a check's reads land on random places of tables of hundreds of megabytes, and on
// 4 KiB pages each also missed the TLB. (Where the kernel gives no huge page, plain pages.)
template <typename T>
class PlaceArray {
 public:
  PlaceArray() = default;
  explicit PlaceArray(size_t n) : n_(n) {
    static_assert(alignof(T) <= kHugePage);
    size_t bytes = std::max<size_t>(n * sizeof(T), alignof(T));
    const size_t align = bytes >= kHugePage ? kHugePage : std::max<size_t>(alignof(T), 64);
    bytes = (bytes + align - 1) / align * align;
    data_ = static_cast<T*>(std::aligned_alloc(align, bytes));
    if (data_ == nullptr) throw std::bad_alloc();
    // A hint only: without huge pages (an error here) the array works the same, slower.
    if (align == kHugePage) (void)madvise(data_, bytes, MADV_HUGEPAGE);
    std::uninitialized_value_construct_n(data_, n);
  }
  ~PlaceArray() { Free(); }
  PlaceArray(PlaceArray&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), n_(std::exchange(other.n_, 0)) {}
  PlaceArray& operator=(PlaceArray&& other) noexcept {
    if (this != &other) {
      Free();
      data_ = std::exchange(other.data_, nullptr);
      n_ = std::exchange(other.n_, 0);
    }
    return *this;
  }

  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  const T* get() const { return data_; }

 private:
  static constexpr size_t kHugePage = size_t{2} << 20;

  void Free() {
    if (data_ == nullptr) return;
    std::destroy_n(data_, n_);
    std::free(data_);
    data_ = nullptr;
  }

  T* data_ = nullptr;
  size_t n_ = 0;
};

template <typename Entry>
class EntryTable {
 public:
  static constexpr int64_t kNoHint = std::numeric_limits<int64_t>::min();

  EntryTable() = default;
  EntryTable(const EntryTable&) = delete;
  EntryTable& operator=(const EntryTable&) = delete;

  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }

  // The entry of `id` (never {0, 0}: no bucket's id), or nullptr.
  Entry* Find(const BucketId& id) {
    if (capacity_ == 0) return nullptr;
    size_t place = Home(id);
    // Most ids sit at their home place, so its entry is read first, both lines at once, without
    // waiting for its tag: a place without an entry holds a default one, whose key is {0, 0}.
    Entry& home = entries_[place];
    if constexpr (sizeof(Entry) > 64) {
      __builtin_prefetch(reinterpret_cast<const char*>(&home) + 64);
    }
    // A quarter of ids lie past their home, mostly at the next place: its tag and its first
    // line are asked for too.
    __builtin_prefetch(&tags_[place]);
    __builtin_prefetch(&entries_[(place + 1) & mask_]);
    if (home.key == id) return &home;
    const uint8_t tag = TagOf(id);
    for (;; place = (place + 1) & mask_) {
      const uint8_t t = tags_[place];
      if (t == kEmpty) return nullptr;
      if (t == tag && entries_[place].key == id) return &entries_[place];
    }
  }

  // Makes room for `n` more insertions that will move no entry, rebuilding the table if needed
  // (at the same capacity, dropping tombstones, or at twice it). Moves entries only when it
  // rebuilds; returns whether it did.
  bool Reserve(size_t n) {
    if (used_ + n <= MaxUsed(capacity_)) return false;
    size_t capacity = std::max(capacity_, kMinCapacity);
    // The same capacity, without its tombstones, when they take an eighth of it at least (a
    // rebuild moves every entry: at most one per eighth of the capacity inserted); else twice.
    if (size_ + n > MaxUsed(capacity) - capacity / 8) capacity *= 2;
    while (size_ + n > MaxUsed(capacity)) capacity *= 2;
    Rebuild(capacity);
    return true;
  }

  // Inserts `id`, which must be absent, after a Reserve with room for it. Returns its entry (a
  // default one with its key set) and its place.
  std::pair<Entry*, size_t> Insert(const BucketId& id) {
    size_t place = Home(id);
    while (tags_[place] < kDeleted) place = (place + 1) & mask_;  // a full place: go on
    if (tags_[place] == kEmpty) ++used_;
    tags_[place] = TagOf(id);
    entries_[place].key = id;
    ++size_;
    return {&entries_[place], place};
  }

  // Drops the entry at `place` (which must be live), leaving a tombstone.
  void Erase(size_t place) {
    tags_[place] = kDeleted;
    entries_[place] = Entry();
    hint(place) = kNoHint;
    --size_;
  }

  bool live(size_t place) const { return tags_[place] < kDeleted; }
  Entry& at(size_t place) { return entries_[place]; }
  const Entry& at(size_t place) const { return entries_[place]; }
  int64_t& hint(size_t place) { return hints_[place / kHintsPerLine].hint[place % kHintsPerLine]; }
  const int64_t* hint_address(size_t place) const {
    return &hints_[place / kHintsPerLine].hint[place % kHintsPerLine];
  }
  size_t PlaceOf(const Entry& e) const { return static_cast<size_t>(&e - entries_.get()); }

 private:
  static constexpr uint8_t kEmpty = 0xFF, kDeleted = 0x80;  // else 0..127: a live id's tag
  static constexpr size_t kMinCapacity = 16;
  static constexpr size_t kHintsPerLine = 8;
  // Hints by the cache line, so that a line of eight places' hints is one cache line.
  struct alignas(64) HintLine {
    int64_t hint[kHintsPerLine];
  };

  // At most 3/4 of the places are live or tombstones.
  static size_t MaxUsed(size_t capacity) { return capacity / 4 * 3; }
  size_t Home(const BucketId& id) const { return id.lo & mask_; }
  // Seven bits that neither the home place (the low bits of lo) nor the shard (hi % 64) uses.
  static uint8_t TagOf(const BucketId& id) { return static_cast<uint8_t>(id.hi >> 57); }

  void Rebuild(size_t capacity) {
    auto tags = std::make_unique<uint8_t[]>(capacity);
    PlaceArray<Entry> entries(capacity);
    PlaceArray<HintLine> hints(capacity / kHintsPerLine);
    std::fill_n(tags.get(), capacity, kEmpty);
    for (size_t i = 0; i < capacity / kHintsPerLine; ++i) {
      std::fill_n(hints[i].hint, kHintsPerLine, kNoHint);
    }
    const size_t mask = capacity - 1;
    for (size_t i = 0; i < capacity_; ++i) {
      if (!live(i)) continue;
      size_t place = entries_[i].key.lo & mask;
      while (tags[place] != kEmpty) place = (place + 1) & mask;
      tags[place] = tags_[i];
      entries[place] = std::move(entries_[i]);
      hints[place / kHintsPerLine].hint[place % kHintsPerLine] = hint(i);
    }
    tags_ = std::move(tags);
    entries_ = std::move(entries);
    hints_ = std::move(hints);
    capacity_ = capacity;
    mask_ = mask;
    used_ = size_;
  }

  std::unique_ptr<uint8_t[]> tags_;
  PlaceArray<Entry> entries_;
  PlaceArray<HintLine> hints_;
  size_t capacity_ = 0, mask_ = 0;
  size_t size_ = 0;  // live entries
  size_t used_ = 0;  // live entries and tombstones
};

}  // namespace tweetsearch::limiter

#endif  // TWEETSEARCH_LIMITER_ENTRY_TABLE_H_
