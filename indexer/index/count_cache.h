// CountCache: the match counts of recent queries over one segment, so that the next page of a
// search, or the same search again, need not count the segment's matches again.
//
// A sealed segment's postings never change: a count stays right until a row's deleted flag or
// likes change, which Columns::changes() counts. An entry remembers that generation and is used
// only while it is unchanged. The query layer decides what a key means (a plan and its filters)
// and which counts it may store (docs/ranking.md, "Totals").
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_INDEXER_INDEX_COUNT_CACHE_H_
#define TWEETSEARCH_INDEXER_INDEX_COUNT_CACHE_H_

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"

namespace tweetsearch::index {

class CountCache {
 public:
  struct Count {
    uint64_t matches = 0;
    bool complete = true;  // every match was counted; else counting stopped at `matches`
  };
  static constexpr size_t kMaxEntries = 256;

  // The count stored for `key` at `generation`, if any.
  std::optional<Count> Get(const std::string& key, uint64_t generation) const;
  // Stores a count; the oldest entry goes when the cache is full.
  void Put(const std::string& key, uint64_t generation, Count count);

 private:
  struct Entry {
    uint64_t generation;
    Count count;
  };
  // A std::mutex, which ThreadSanitizer sees (the system's Abseil is not built for it).
  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_;  // guarded by mu_
  std::deque<std::string> order_;                    // guarded by mu_; keys, oldest first
};

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_COUNT_CACHE_H_
