// LikesOverlay: the like counts of a sealed segment's tweets that changed after the segment was
// written. The segment file holds every tweet's likes as they were when it was written; a
// change goes here, so the mapped file stays read-only and the heap holds only what changed.
//
// An open-addressed table of 64-bit slots, each (DocId + 1) << 32 | likes, read and written
// with single atomic loads and stores: a reader sees a whole old or a whole new entry. When the
// table passes half full, the writer copies it into one twice the size and publishes it; old
// tables stay until the overlay dies, so a reader still probing one is safe (it may return the
// value from just before a racing change, which is the order a lock would have given too).
//
// Thread-safety: Get() from any thread at any time; Set() from one writer at a time.
#ifndef TWEETSEARCH_INDEXER_INDEX_LIKES_OVERLAY_H_
#define TWEETSEARCH_INDEXER_INDEX_LIKES_OVERLAY_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace tweetsearch::index {

class LikesOverlay {
 public:
  LikesOverlay();
  LikesOverlay(const LikesOverlay&) = delete;
  LikesOverlay& operator=(const LikesOverlay&) = delete;

  // The changed likes of `doc`, or nullopt if they never changed.
  std::optional<uint32_t> Get(uint32_t doc) const;
  void Set(uint32_t doc, uint32_t likes);

  // Entries held (one per changed tweet).
  uint32_t size() const { return size_.load(std::memory_order_acquire); }
  // Calls fn(doc, likes) for every entry, in no particular order. Any thread: an entry set
  // meanwhile may be missed (the tables it reads are never freed while the overlay lives).
  void ForEach(const std::function<void(uint32_t doc, uint32_t likes)>& fn) const;
  // Heap bytes held, old tables included.
  size_t MemoryBytes() const;

 private:
  struct Table {
    explicit Table(uint32_t capacity);
    const uint32_t mask;
    std::unique_ptr<std::atomic<uint64_t>[]> slots;
  };
  void Grow();

  std::atomic<Table*> table_;
  std::vector<std::unique_ptr<Table>> tables_;  // every table made, the current one last
  std::atomic<uint32_t> size_{0};
};

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_LIKES_OVERLAY_H_
