// Membership against a real etcd (started by the test on free loopback ports), its time on a
// ManualClock: the lease counts as held until its last renewal request plus the TTL minus one
// second, however long the process was frozen.
#include "cluster/membership.h"

#include <gtest/gtest.h>

#include "tests/testing/corpus.h"
#include "tests/testing/etcd_server.h"

namespace tweetsearch::cluster {
namespace {

TEST(MembershipTest, ALeaseCountsAsHeldUntilItsLastRenewalPlusTheTtlLessASecond) {
  testing::TempDir dir;
  testing::EtcdServer etcd(dir.path());
  ASSERT_TRUE(etcd.Start()) << "etcd did not start; see " << dir.path() << "/etcd.log";
  ManualClock clock(1'700'000'000'000);
  // A TTL of 60 s: the keep-alive (every 15 s of real time) does not run during the test, so
  // only the manual clock moves the lease's end.
  absl::StatusOr<std::unique_ptr<Membership>> m = Membership::Start({etcd.endpoint()}, 60, clock);
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE((*m)->Put("/ts/members/index/i0a", "127.0.0.1:1").ok());
  absl::StatusOr<std::optional<KeyValue>> key = (*m)->etcd().Get("/ts/members/index/i0a");
  ASSERT_TRUE(key.ok()) << key.status();
  ASSERT_TRUE(key->has_value());
  EXPECT_EQ((*key)->lease, (*m)->lease());

  EXPECT_TRUE((*m)->Holds());
  clock.AdvanceMillis(58'999);
  EXPECT_TRUE((*m)->Holds());
  clock.AdvanceMillis(1);  // 59 s: the margin of a second is gone
  EXPECT_FALSE((*m)->Holds());
  EXPECT_EQ((*m)->generation(), 1u);

  // Gone with the membership: the lease is revoked and its keys vanish at once.
  m->reset();
  EtcdClient client({etcd.endpoint()}, std::chrono::seconds(5));
  absl::StatusOr<std::optional<KeyValue>> after = client.Get("/ts/members/index/i0a");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_FALSE(after->has_value());
}

}  // namespace
}  // namespace tweetsearch::cluster
