#include "indexer/index/likes_overlay.h"

namespace tweetsearch::index {
namespace {

constexpr uint32_t kInitialCapacity = 16;

uint32_t Hash(uint32_t doc) { return doc * 0x9E3779B1u; }
uint64_t Pack(uint32_t doc, uint32_t likes) { return (uint64_t{doc} + 1) << 32 | likes; }

}  // namespace

LikesOverlay::Table::Table(uint32_t capacity)
    : mask(capacity - 1), slots(new std::atomic<uint64_t>[capacity]()) {}

LikesOverlay::LikesOverlay() {
  tables_.push_back(std::make_unique<Table>(kInitialCapacity));
  table_.store(tables_.back().get(), std::memory_order_release);
}

std::optional<uint32_t> LikesOverlay::Get(uint32_t doc) const {
  if (size_.load(std::memory_order_acquire) == 0) return std::nullopt;
  const Table* t = table_.load(std::memory_order_acquire);
  const uint64_t key = uint64_t{doc} + 1;
  for (uint32_t i = Hash(doc) & t->mask;; i = (i + 1) & t->mask) {
    const uint64_t slot = t->slots[i].load(std::memory_order_acquire);
    if (slot == 0) return std::nullopt;
    if (slot >> 32 == key) return static_cast<uint32_t>(slot);
  }
}

void LikesOverlay::Set(uint32_t doc, uint32_t likes) {
  Table* t = table_.load(std::memory_order_relaxed);
  const uint64_t key = uint64_t{doc} + 1;
  for (uint32_t i = Hash(doc) & t->mask;; i = (i + 1) & t->mask) {
    const uint64_t slot = t->slots[i].load(std::memory_order_relaxed);
    if (slot == 0 || slot >> 32 == key) {
      t->slots[i].store(Pack(doc, likes), std::memory_order_release);
      if (slot == 0) {
        const uint32_t n = size_.load(std::memory_order_relaxed) + 1;
        size_.store(n, std::memory_order_release);
        if (n * 2 > t->mask + 1) Grow();
      }
      return;
    }
  }
}

void LikesOverlay::Grow() {
  const Table* old = table_.load(std::memory_order_relaxed);
  auto bigger = std::make_unique<Table>((old->mask + 1) * 2);
  for (uint32_t i = 0; i <= old->mask; ++i) {
    const uint64_t slot = old->slots[i].load(std::memory_order_relaxed);
    if (slot == 0) continue;
    const uint32_t doc = static_cast<uint32_t>((slot >> 32) - 1);
    uint32_t j = Hash(doc) & bigger->mask;
    while (bigger->slots[j].load(std::memory_order_relaxed) != 0) j = (j + 1) & bigger->mask;
    bigger->slots[j].store(slot, std::memory_order_relaxed);
  }
  tables_.push_back(std::move(bigger));
  table_.store(tables_.back().get(), std::memory_order_release);
}

void LikesOverlay::ForEach(const std::function<void(uint32_t, uint32_t)>& fn) const {
  const Table* t = table_.load(std::memory_order_acquire);
  for (uint32_t i = 0; i <= t->mask; ++i) {
    const uint64_t slot = t->slots[i].load(std::memory_order_acquire);
    if (slot != 0) fn(static_cast<uint32_t>((slot >> 32) - 1), static_cast<uint32_t>(slot));
  }
}

size_t LikesOverlay::MemoryBytes() const {
  size_t bytes = 0;
  for (const auto& t : tables_) bytes += (size_t{t->mask} + 1) * sizeof(uint64_t);
  return bytes;
}

}  // namespace tweetsearch::index
