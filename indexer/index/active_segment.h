// ActiveSegment: the segment that takes writes, after Twitter's Earlybird.
//
// One writer thread appends whole documents; each posting list is a chain of blocks that only
// grows, and a term dictionary is an open-addressing hash table whose slots are published with
// release stores (a full table is copied into one twice its size, and the old one is kept alive
// until the segment dies, so a reader still probing it stays safe). After a document's columns
// and postings are written, the writer publishes the new document count with a release store.
//
// Readers load that count once (acquire) and never look at a DocId at or past it, so each query
// sees a consistent prefix of the segment. Readers take no locks and never wait for the writer;
// nothing they can reach is moved, mutated in place (except likes and deletes, which are
// atomics) or freed while the segment lives.
//
// Thread-safety: Append() and FindForWriter() only from the single writer thread; everything
// else from any thread.
#ifndef TWEETSEARCH_INDEXER_INDEX_ACTIVE_SEGMENT_H_
#define TWEETSEARCH_INDEXER_INDEX_ACTIVE_SEGMENT_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "indexer/index/segment.h"

namespace tweetsearch::index {

// One posting to append: a document and the positions of the term in it (ascending). A view
// into the caller's buffer, valid for the call.
struct NewPosting {
  DocId doc;
  std::span<const uint32_t> positions;
};

class ActiveSegment final : public Segment {
 public:
  // Requires: 0 < capacity < kEndDoc.
  explicit ActiveSegment(uint32_t capacity);
  ~ActiveSegment() override;

  bool full() const { return next_doc_ == columns().capacity(); }

  // Writer only. Adds a document's columns and returns its DocId; the document stays
  // invisible to readers until Publish(). Requires: !full().
  DocId AddRow(const IndexDoc& doc, uint16_t length);
  // Writer only. Appends postings of `term`, whose HashForWriter() is `hash`. Requires:
  // DocIds ascending, each added by AddRow and above every earlier posting of the term; each
  // with at least one position.
  void AppendPostings(std::string_view term, uint64_t hash, std::span<const NewPosting> postings);
  // Writer only. The hash AppendPostings wants, and a hint to fetch its slot into the cache
  // ahead of the call (batch writers hash a few terms ahead).
  uint64_t HashForWriter(std::string_view term) const;
  // Stage 0 fetches the table slot; stage 1, later, the term in it.
  void PrefetchForWriter(uint64_t hash, int stage) const;
  // Writer only. Makes every added document visible to queries that start afterwards.
  void Publish() { published_.store(next_doc_, std::memory_order_release); }

  // Writer only. The DocId of `id` in this segment, if present.
  std::optional<DocId> FindForWriter(TweetId id) const;

  // Calls `fn` for each term with a cursor over its visible postings, in no particular order.
  void ForEachTerm(const std::function<void(std::string_view, PostingCursor&)>& fn) const;

  DocId VisibleDocs() const override { return published_.load(std::memory_order_acquire); }
  bool newest_first() const override { return false; }
  std::unique_ptr<PostingCursor> OpenTerm(std::string_view term, DocId visible) const override;
  uint32_t DocFreq(std::string_view term) const override;
  uint64_t TotalLength() const override { return total_length_.load(std::memory_order_acquire); }
  TweetId MaxTweetId() const override { return max_tweet_id_.load(std::memory_order_acquire); }
  size_t NumTerms() const override;
  size_t MemoryBytes() const override;

  struct Block;
  struct Term;
  struct Table;

 private:
  const Term* Lookup(std::string_view term, uint64_t hash) const;
  Term* FindOrInsertForWriter(std::string_view term, uint64_t hash);
  void AppendValue(Term& term, uint32_t value);

  std::atomic<DocId> published_{0};
  std::atomic<uint64_t> total_length_{0};
  std::atomic<TweetId> max_tweet_id_{0};
  std::atomic<const Table*> table_{nullptr};

  // Writer-owned storage; readers reach it only through published pointers.
  DocId next_doc_ = 0;
  std::vector<std::unique_ptr<Table>> tables_;
  std::vector<std::unique_ptr<Term>> terms_;
  std::vector<std::unique_ptr<Block>> blocks_;
  size_t posting_bytes_ = 0;
  absl::flat_hash_map<TweetId, DocId> doc_of_id_;
};

}  // namespace tweetsearch::index

#endif  // TWEETSEARCH_INDEXER_INDEX_ACTIVE_SEGMENT_H_
