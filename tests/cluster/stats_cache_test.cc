#include "cluster/stats_cache.h"

#include <gtest/gtest.h>

#include "cluster/topology.h"
#include "common/clock.h"
#include "common/strings.h"

namespace tweetsearch::cluster {
namespace {

query::CollectionStats Stats(uint64_t docs, uint64_t df) {
  query::CollectionStats s;
  s.num_docs = docs;
  s.total_length = docs * 10;
  s.avg_length = 10;
  s.doc_freq["word"] = df;
  return s;
}

TEST(StatsCacheTest, KeptStatisticsServeOnlyWhileFreshAndNoPartitionChanged) {
  ManualClock clock(1'767'225'600'000);
  StatsCache cache(clock, /*ttl_ms=*/1000);
  EXPECT_FALSE(cache.Find("word").has_value());
  cache.Store("word", Stats(100, 7), {5, 9}, cache.Epoch());
  ASSERT_TRUE(cache.Find("word").has_value());
  EXPECT_EQ(cache.Find("word")->doc_freq.at("word"), 7u);
  EXPECT_FALSE(cache.Find("other").has_value());

  // Answers at the generations it was collected at change nothing.
  cache.Saw(0, 5);
  cache.Saw(1, 9);
  clock.AdvanceMillis(999);
  EXPECT_TRUE(cache.Find("word").has_value());
  // Its time is up.
  clock.AdvanceMillis(1);
  EXPECT_FALSE(cache.Find("word").has_value());

  // A partition seen at another generation (a replica that applied more, or fewer) makes it
  // unusable; seen back at the same one, it serves again.
  cache.Store("word", Stats(100, 7), {5, 9}, cache.Epoch());
  cache.Saw(1, 10);
  EXPECT_FALSE(cache.Find("word").has_value());
  cache.Saw(1, 9);
  EXPECT_TRUE(cache.Find("word").has_value());
  // Statistics collected later move what was seen: the older entry no longer serves.
  cache.Store("other", Stats(101, 3), {6, 9}, cache.Epoch());
  EXPECT_FALSE(cache.Find("word").has_value());
  EXPECT_TRUE(cache.Find("other").has_value());
}

TEST(StatsCacheTest, AWriteDropsEverythingAndWhatWasCollectedAcrossItIsNotKept) {
  ManualClock clock(1'767'225'600'000);
  StatsCache cache(clock, /*ttl_ms=*/10'000);
  cache.Store("word", Stats(100, 7), {5}, cache.Epoch());
  const uint64_t before_write = cache.Epoch();
  cache.Clear();  // the front door wrote
  EXPECT_FALSE(cache.Find("word").has_value());
  cache.Store("word", Stats(100, 7), {5}, before_write);  // collected while the write ran
  EXPECT_FALSE(cache.Find("word").has_value());
  cache.Store("word", Stats(104, 8), {5}, cache.Epoch());
  ASSERT_TRUE(cache.Find("word").has_value());
  EXPECT_EQ(cache.Find("word")->num_docs, 104u);
}

TEST(StatsCacheTest, AZeroTtlKeepsNothingAndTheBoundHolds) {
  ManualClock clock(1'767'225'600'000);
  StatsCache off(clock, /*ttl_ms=*/0);
  off.Store("word", Stats(100, 7), {5}, off.Epoch());
  EXPECT_FALSE(off.Find("word").has_value());

  StatsCache small(clock, /*ttl_ms=*/1000, /*max_entries=*/2);
  small.Store("a", Stats(1, 1), {5}, small.Epoch());
  small.Store("b", Stats(1, 1), {5}, small.Epoch());
  EXPECT_TRUE(small.Find("a").has_value() && small.Find("b").has_value());
  small.Store("c", Stats(1, 1), {5}, small.Epoch());  // full: the others go
  EXPECT_FALSE(small.Find("a").has_value());
  EXPECT_TRUE(small.Find("c").has_value());
}

TEST(StatsCacheTest, TheTopologySetsHowLongWithinBounds) {
  constexpr std::string_view kTopology = R"(etcd: [127.0.0.1:2379]
storage_partitions:
  - replicas: [{node: s0a, grpc: 127.0.0.1:7100, data: /tmp/s0a}]
index_partitions:
  - replicas: [{node: i0a, grpc: 127.0.0.1:7200, data: /tmp/i0a}]
builders: [{node: b0, grpc: 127.0.0.1:7300, data: /tmp/b0}]
aggregators: [{node: a0, http: 127.0.0.1:8080, grpc: 127.0.0.1:9090, data: /tmp/a0}]
)";
  absl::StatusOr<Topology> plain = ParseTopology(kTopology);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->stats_ttl_ms, 10'000u);
  absl::StatusOr<Topology> off = ParseTopology(StrCat(kTopology, "stats_ttl_ms: 0\n"));
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->stats_ttl_ms, 0u);
  absl::StatusOr<Topology> absurd = ParseTopology(StrCat(kTopology, "stats_ttl_ms: 86400000\n"));
  ASSERT_FALSE(absurd.ok());
  EXPECT_NE(absurd.status().message().find("stats_ttl_ms"), std::string::npos);
}

}  // namespace
}  // namespace tweetsearch::cluster
