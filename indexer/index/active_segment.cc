#include "indexer/index/active_segment.h"

#include <xxhash.h>

#include <algorithm>
#include <cassert>

namespace tweetsearch::index {

struct ActiveSegment::Block {
  explicit Block(uint32_t cap) : capacity(cap), values(new uint32_t[cap]) {}
  const uint32_t capacity;
  std::unique_ptr<uint32_t[]> values;
  std::atomic<Block*> next{nullptr};
};

// A posting list is a stream of records [doc, freq, position x freq] over a chain of blocks.
// `size` counts the published values; it is stored (release) after each whole record.
struct ActiveSegment::Term {
  Term(std::string_view t, uint64_t h) : text(t), hash(h) {}
  const std::string text;
  const uint64_t hash;
  std::atomic<uint32_t> size{0};
  std::atomic<uint32_t> doc_freq{0};
  Block* head = nullptr;  // written once, before the term is published
  // Writer only:
  Block* tail = nullptr;
  uint32_t tail_used = 0;
  uint32_t pending_size = 0;
};

// Open addressing with linear probing. Each slot keeps 32 bits of its term's hash beside the
// pointer (in the same cache line), so a probe that meets another term is settled without
// touching that term. The tag is stored before the pointer is published (release), so a
// reader that sees the pointer sees the tag.
struct ActiveSegment::Table {
  struct Slot {
    std::atomic<const Term*> term{nullptr};
    uint32_t tag = 0;
  };
  explicit Table(uint32_t cap) : capacity(cap), slots(new Slot[cap]) {}
  const uint32_t capacity;  // a power of two
  std::unique_ptr<Slot[]> slots;
};

namespace {

constexpr uint32_t kFirstBlockValues = 4;
constexpr uint32_t kMaxBlockValues = 4096;
constexpr uint32_t kFirstTableSlots = 1024;

size_t HashTerm(std::string_view term) { return XXH3_64bits(term.data(), term.size()); }

class ActiveCursor final : public PostingCursor {
 public:
  ActiveCursor(const ActiveSegment::Block* head, uint32_t limit, uint32_t doc_freq, DocId visible)
      : block_(head), limit_(limit), doc_freq_(doc_freq), visible_(visible) {
    Next();
  }

  DocId doc() const override { return doc_; }
  void Next() override {
    if (read_ >= limit_) {
      doc_ = kEndDoc;
      return;
    }
    const DocId d = ReadValue();
    if (d >= visible_) {
      doc_ = kEndDoc;
      read_ = limit_;
      return;
    }
    doc_ = d;
    const uint32_t freq = ReadValue();
    positions_.resize(freq);
    for (uint32_t i = 0; i < freq; ++i) positions_[i] = ReadValue();
  }
  void Advance(DocId target) override {
    while (doc_ < target) Next();
  }
  uint32_t freq() const override { return static_cast<uint32_t>(positions_.size()); }
  std::span<const uint32_t> positions() override { return positions_; }
  uint32_t size() const override { return doc_freq_; }
  DocId block_last_doc() const override { return kEndDoc - 1; }
  PostingBound block_bound() const override { return PostingBound{}; }
  PostingBound list_bound() const override { return PostingBound{}; }

 private:
  uint32_t ReadValue() {
    if (offset_ == block_->capacity) {
      block_ = block_->next.load(std::memory_order_acquire);
      offset_ = 0;
    }
    ++read_;
    return block_->values[offset_++];
  }

  const ActiveSegment::Block* block_;
  uint32_t offset_ = 0;
  uint32_t read_ = 0;
  const uint32_t limit_;
  const uint32_t doc_freq_;
  const DocId visible_;
  DocId doc_ = kEndDoc;
  std::vector<uint32_t> positions_;
};

}  // namespace

ActiveSegment::ActiveSegment(uint32_t capacity) : Segment(capacity) {
  assert(capacity > 0 && capacity < kEndDoc);
  doc_of_id_.reserve(capacity);  // never rehashed while the segment fills
  tables_.push_back(std::make_unique<Table>(kFirstTableSlots));
  table_.store(tables_.back().get(), std::memory_order_release);
}

ActiveSegment::~ActiveSegment() = default;

const ActiveSegment::Term* ActiveSegment::Lookup(std::string_view term, uint64_t hash) const {
  const Table* table = table_.load(std::memory_order_acquire);
  const uint32_t mask = table->capacity - 1;
  const uint32_t tag = static_cast<uint32_t>(hash >> 32);
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Term* t = table->slots[i].term.load(std::memory_order_acquire);
    if (t == nullptr) return nullptr;
    if (table->slots[i].tag == tag && t->text == term) return t;
  }
}

namespace {

void InsertInto(ActiveSegment::Table& table, const ActiveSegment::Term* t, uint64_t hash);

}  // namespace

uint64_t ActiveSegment::HashForWriter(std::string_view term) const { return HashTerm(term); }

void ActiveSegment::PrefetchForWriter(uint64_t hash, int stage) const {
  const Table* table = table_.load(std::memory_order_relaxed);
  const Table::Slot& slot = table->slots[hash & (table->capacity - 1)];
  if (stage == 0) {
    __builtin_prefetch(&slot);
    return;
  }
  // The slot is (likely) cached by now: fetch the term it points to. (Reading the term to
  // fetch its tail block as well stalls on the term and measured slower.)
  if (const Term* t = slot.term.load(std::memory_order_relaxed)) __builtin_prefetch(t);
}

ActiveSegment::Term* ActiveSegment::FindOrInsertForWriter(std::string_view term, uint64_t hash) {
  if (const Term* found = Lookup(term, hash)) return const_cast<Term*>(found);
  const Table* table = table_.load(std::memory_order_relaxed);
  if ((terms_.size() + 1) * 2 > table->capacity) {  // keep the load factor at most 1/2
    auto bigger = std::make_unique<Table>(table->capacity * 2);
    for (const auto& t : terms_) InsertInto(*bigger, t.get(), t->hash);
    table = bigger.get();
    tables_.push_back(std::move(bigger));  // the old table stays alive for readers probing it
    table_.store(table, std::memory_order_release);
  }
  auto owned = std::make_unique<Term>(term, hash);
  Term* t = owned.get();
  blocks_.push_back(std::make_unique<Block>(kFirstBlockValues));
  posting_bytes_ += kFirstBlockValues * sizeof(uint32_t);
  t->head = t->tail = blocks_.back().get();
  terms_.push_back(std::move(owned));
  InsertInto(*tables_.back(), t, hash);
  return t;
}

namespace {

void InsertInto(ActiveSegment::Table& table, const ActiveSegment::Term* t, uint64_t hash) {
  const uint32_t mask = table.capacity - 1;
  size_t i = hash & mask;
  while (table.slots[i].term.load(std::memory_order_relaxed) != nullptr) i = (i + 1) & mask;
  table.slots[i].tag = static_cast<uint32_t>(hash >> 32);
  table.slots[i].term.store(t, std::memory_order_release);
}

}  // namespace

void ActiveSegment::AppendValue(Term& term, uint32_t value) {
  if (term.tail_used == term.tail->capacity) {
    const uint32_t next_capacity = std::min(term.tail->capacity * 2, kMaxBlockValues);
    blocks_.push_back(std::make_unique<Block>(next_capacity));
    posting_bytes_ += next_capacity * sizeof(uint32_t);
    Block* next = blocks_.back().get();
    term.tail->next.store(next, std::memory_order_release);
    term.tail = next;
    term.tail_used = 0;
  }
  term.tail->values[term.tail_used++] = value;
  ++term.pending_size;
}

DocId ActiveSegment::AddRow(const IndexDoc& doc, uint16_t length) {
  assert(!full());
  const DocId d = next_doc_++;
  mutable_columns().SetRow(d, doc.id, doc.created_at_ms, doc.user_id, PackLang(doc.lang), length,
                           doc.likes);
  doc_of_id_[doc.id] = d;
  total_length_.store(total_length_.load(std::memory_order_relaxed) + length,
                      std::memory_order_release);
  if (doc.id > max_tweet_id_.load(std::memory_order_relaxed)) {
    max_tweet_id_.store(doc.id, std::memory_order_release);
  }
  return d;
}

void ActiveSegment::AppendPostings(std::string_view text, uint64_t hash,
                                   std::span<const NewPosting> postings) {
  Term* term = FindOrInsertForWriter(text, hash);
  for (const NewPosting& p : postings) {
    AppendValue(*term, p.doc);
    AppendValue(*term, static_cast<uint32_t>(p.positions.size()));
    for (uint32_t position : p.positions) AppendValue(*term, position);
  }
  term->doc_freq.store(
      term->doc_freq.load(std::memory_order_relaxed) + static_cast<uint32_t>(postings.size()),
      std::memory_order_release);
  // Publishes the values written above: a reader that loads `size` sees them.
  term->size.store(term->pending_size, std::memory_order_release);
}

std::optional<DocId> ActiveSegment::FindForWriter(TweetId id) const {
  auto it = doc_of_id_.find(id);
  if (it == doc_of_id_.end()) return std::nullopt;
  return it->second;
}

std::unique_ptr<PostingCursor> ActiveSegment::OpenTerm(std::string_view term, DocId visible) const {
  const Term* t = Lookup(term, HashTerm(term));
  if (t == nullptr) return nullptr;
  // Load the size before reading any value: the release store that wrote it follows them.
  const uint32_t size = t->size.load(std::memory_order_acquire);
  return std::make_unique<ActiveCursor>(t->head, size, t->doc_freq.load(std::memory_order_acquire),
                                        visible);
}

uint32_t ActiveSegment::DocFreq(std::string_view term) const {
  const Term* t = Lookup(term, HashTerm(term));
  return t == nullptr ? 0 : t->doc_freq.load(std::memory_order_acquire);
}

void ActiveSegment::ForEachTerm(
    const std::function<void(std::string_view, PostingCursor&)>& fn) const {
  const DocId visible = VisibleDocs();
  const Table* table = table_.load(std::memory_order_acquire);
  constexpr uint32_t kAhead = 8;  // terms live all over memory: fetch a few slots ahead
  for (uint32_t i = 0; i < table->capacity; ++i) {
    if (i + kAhead < table->capacity) {
      if (const Term* ahead = table->slots[i + kAhead].term.load(std::memory_order_acquire)) {
        __builtin_prefetch(ahead);
      }
    }
    const Term* t = table->slots[i].term.load(std::memory_order_acquire);
    if (t == nullptr) continue;
    // The term is in hand: open its cursor directly rather than looking it up again.
    ActiveCursor cursor(t->head, t->size.load(std::memory_order_acquire),
                        t->doc_freq.load(std::memory_order_acquire), visible);
    if (cursor.doc() != kEndDoc) fn(t->text, cursor);
  }
}

size_t ActiveSegment::NumTerms() const {
  const Table* table = table_.load(std::memory_order_acquire);
  size_t n = 0;
  for (uint32_t i = 0; i < table->capacity; ++i) {
    n += table->slots[i].term.load(std::memory_order_acquire) != nullptr;
  }
  return n;
}

size_t ActiveSegment::MemoryBytes() const {
  // Approximate, and only meaningful from the writer thread (the vectors are writer-owned).
  size_t bytes = posting_bytes_ + blocks_.size() * sizeof(Block);
  for (const auto& t : terms_) bytes += sizeof(Term) + t->text.capacity();
  for (const auto& t : tables_) bytes += t->capacity * sizeof(Table::Slot);
  bytes += columns().MemoryBytes();
  return bytes;
}

}  // namespace tweetsearch::index
