#include "limiter/entry_table.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <utility>
#include <vector>

namespace tweetsearch::limiter {
namespace {

struct TestEntry {
  BucketId key;
  uint64_t value = 0;
  std::unique_ptr<int> owned;  // freed by Erase (AddressSanitizer sees a leak otherwise)
};

struct IdOrder {
  bool operator()(const BucketId& a, const BucketId& b) const {
    return std::pair(a.hi, a.lo) < std::pair(b.hi, b.lo);
  }
};

// A pool of ids whose tags collide often (four tags), drawn from again and again so that ids
// come back after they were erased. (Never {0, 0}.)
std::vector<BucketId> CrowdedIds(std::mt19937_64& rng, size_t n) {
  std::vector<BucketId> ids;
  for (size_t i = 0; i < n; ++i) {
    ids.push_back({(rng() % 4) << 57 | (rng() >> 8), rng() | 1});
  }
  return ids;
}

// Against a std::map, through every operation, on ids whose tags collide: what is found, what is
// not, the values kept, places and pointers unmoved between rebuilds, and the hints moved with
// their entries.
TEST(EntryTableTest, AgreesWithAMapThroughInsertsErasesAndRebuilds) {
  std::mt19937_64 rng(7);
  EntryTable<TestEntry> table;
  std::map<BucketId, uint64_t, IdOrder> model;
  const std::vector<BucketId> ids = CrowdedIds(rng, 30'000);
  for (int step = 0; step < 200'000; ++step) {
    const BucketId id = ids[rng() % ids.size()];
    TestEntry* found = table.Find(id);
    auto it = model.find(id);
    ASSERT_EQ(found != nullptr, it != model.end()) << "step " << step;
    if (found != nullptr) {
      ASSERT_EQ(found->value, it->second);
      ASSERT_EQ(table.hint(table.PlaceOf(*found)), static_cast<int64_t>(it->second));
    }
    if (found != nullptr && rng() % 3 == 0) {
      table.Erase(table.PlaceOf(*found));
      model.erase(it);
      ASSERT_EQ(table.Find(id), nullptr);
      continue;
    }
    if (found == nullptr) {
      const bool rebuilt = table.Reserve(1);
      // Without a rebuild, an entry found before stays where it was.
      TestEntry* before = model.empty() ? nullptr : table.Find(model.begin()->first);
      auto [entry, place] = table.Insert(id);
      ASSERT_EQ(&table.at(place), entry);
      if (before != nullptr && !rebuilt) {
        ASSERT_EQ(table.Find(model.begin()->first), before);
      }
      entry->value = rng() % 1'000'000;
      entry->owned = std::make_unique<int>(step);
      table.hint(place) = static_cast<int64_t>(entry->value);
      model[id] = entry->value;
    }
    ASSERT_EQ(table.size(), model.size());
    ASSERT_LE(table.size() * 4, table.capacity() * 3);
  }
  for (const auto& [id, value] : model) {
    const TestEntry* e = table.Find(id);
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->value, value);
  }
  // Every live place is one the map holds; places without an entry have no hint.
  size_t live = 0;
  for (size_t place = 0; place < table.capacity(); ++place) {
    if (table.live(place)) {
      ++live;
      EXPECT_TRUE(model.contains(table.at(place).key));
    } else {
      EXPECT_EQ(table.hint(place), EntryTable<TestEntry>::kNoHint);
    }
  }
  EXPECT_EQ(live, model.size());
}

// Tombstones are reused and dropped by rebuilds at the same capacity: inserting and erasing
// without end at a steady size stops growing the table, at most at twice the capacity its size
// needs.
TEST(EntryTableTest, ChurnAtASteadySizeStopsGrowing) {
  std::mt19937_64 rng(11);
  EntryTable<TestEntry> table;
  std::vector<BucketId> live;
  auto churn = [&](int rounds) {
    for (int round = 0; round < rounds; ++round) {
      const size_t victim = rng() % live.size();
      table.Erase(table.PlaceOf(*table.Find(live[victim])));
      live[victim] = {rng() | 1, rng() | 1};
      table.Reserve(1);
      table.Insert(live[victim]);
    }
  };
  for (int i = 0; i < 1000; ++i) {
    live.push_back({rng() | 1, rng() | 1});
    table.Reserve(1);
    table.Insert(live.back());
  }
  EXPECT_EQ(table.capacity(), 2048u);  // 1,000 is more than three quarters of 1,024
  churn(20'000);
  const size_t capacity = table.capacity();
  EXPECT_LE(capacity, 4096u);
  churn(20'000);
  EXPECT_EQ(table.capacity(), capacity);
  EXPECT_EQ(table.size(), 1000u);
  for (const BucketId& id : live) EXPECT_NE(table.Find(id), nullptr);
}

// A default entry's key, {0, 0}, is nobody's: an empty table, and empty places, find nothing.
TEST(EntryTableTest, FindsNothingInEmptyPlaces) {
  EntryTable<TestEntry> table;
  EXPECT_EQ(table.Find({1, 1}), nullptr);
  table.Reserve(1);
  EXPECT_EQ(table.Find({1, 1}), nullptr);
  table.Insert({1, 1});
  EXPECT_NE(table.Find({1, 1}), nullptr);
  EXPECT_EQ(table.Find({1, 2}), nullptr);
}

}  // namespace
}  // namespace tweetsearch::limiter
