// The cluster's shared API keys against a real etcd (started by the test on free loopback
// ports): two registries stand for two front doors; each refresh is called by the test.
#include "cluster/shared_keys.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <barrier>
#include <thread>

#include "absl/strings/escaping.h"
#include "common/strings.h"
#include "tests/testing/corpus.h"
#include "tests/testing/etcd_server.h"

namespace tweetsearch::cluster {
namespace {

using aggregator::Scope;

constexpr uint8_t kSearch = uint8_t(Scope::kSearch);
constexpr uint8_t kAdmin = uint8_t(Scope::kAdmin) | kSearch;

class SharedKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    etcd_ = std::make_unique<testing::EtcdServer>(dir_.path());
    ASSERT_TRUE(etcd_->Start()) << "etcd did not start; see " << dir_.path() << "/etcd.log";
  }

  std::unique_ptr<SharedKeyRegistry> Open() {
    absl::StatusOr<std::unique_ptr<SharedKeyRegistry>> keys = SharedKeyRegistry::Open(
        SharedKeyOptions{.etcd = {etcd_->endpoint()}, .timeout = std::chrono::milliseconds(500)},
        clock_);
    EXPECT_TRUE(keys.ok()) << keys.status();
    return keys.ok() ? *std::move(keys) : nullptr;
  }

  // The admin keys not revoked, as etcd holds them now.
  size_t LiveAdmins() {
    std::unique_ptr<SharedKeyRegistry> fresh = Open();
    size_t n = 0;
    for (const aggregator::ApiKey& k : fresh->List()) n += !k.revoked && k.Allows(Scope::kAdmin);
    return n;
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::EtcdServer> etcd_;
  ManualClock clock_{1'700'000'000'000};
};

TEST_F(SharedKeysTest, AChangeOnOneFrontDoorTakesEffectOnAnotherAtItsNextRefresh) {
  std::unique_ptr<SharedKeyRegistry> a = Open();
  std::unique_ptr<SharedKeyRegistry> b = Open();
  ASSERT_TRUE(a && b);

  absl::StatusOr<std::string> key = a->Create("alice", "pro", kSearch);
  ASSERT_TRUE(key.ok()) << key.status();
  // The front door that made it knows it at once; the other after its next refresh.
  EXPECT_TRUE(a->Authenticate(*key, Scope::kSearch).ok());
  EXPECT_TRUE(absl::IsUnauthenticated(b->Authenticate(*key, Scope::kSearch).status()));
  ASSERT_TRUE(b->Refresh().ok());
  absl::StatusOr<aggregator::ApiKey> seen = b->Authenticate(*key, Scope::kSearch);
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(seen->owner, "alice");
  EXPECT_EQ(seen->tier, "pro");
  EXPECT_EQ(seen->created_at_ms, clock_.NowUnixMillis());
  EXPECT_EQ(seen->id, a->Identify(*key)->id);
  EXPECT_TRUE(absl::IsAlreadyExists(b->Register(*key, "mallory", "pro", kAdmin)));

  // Scopes changed on b reach a.
  ASSERT_TRUE(b->SetScopes(*key, kSearch | uint8_t(Scope::kIngest)).ok());
  EXPECT_TRUE(absl::IsPermissionDenied(a->Authenticate(*key, Scope::kIngest).status()));
  ASSERT_TRUE(a->Refresh().ok());
  EXPECT_TRUE(a->Authenticate(*key, Scope::kIngest).ok());

  // Revoked on a (by its prefix, as listed), refused on b.
  ASSERT_TRUE(a->Revoke(key->substr(0, 10)).ok());
  EXPECT_TRUE(absl::IsUnauthenticated(a->Authenticate(*key, Scope::kSearch).status()));
  EXPECT_TRUE(b->Authenticate(*key, Scope::kSearch).ok());
  const int64_t before = b->revision();
  ASSERT_TRUE(b->Refresh().ok());
  EXPECT_GT(b->revision(), before);
  EXPECT_TRUE(absl::IsUnauthenticated(b->Authenticate(*key, Scope::kSearch).status()));
  ASSERT_EQ(b->List().size(), 1u);
  EXPECT_TRUE(b->List()[0].revoked);
}

TEST_F(SharedKeysTest, TwoFrontDoorsNeverRevokeTheLastTwoAdminKeysTogether) {
  std::unique_ptr<SharedKeyRegistry> a = Open();
  std::unique_ptr<SharedKeyRegistry> b = Open();
  ASSERT_TRUE(a && b);
  absl::StatusOr<std::string> survivor = a->Create("admin", "admin", kAdmin);
  ASSERT_TRUE(survivor.ok()) << survivor.status();
  int a_won = 0;
  int b_won = 0;
  for (int round = 0; round < 25; ++round) {
    // Two admin keys live: the last round's survivor and a new one.
    absl::StatusOr<std::string> fresh = b->Create("admin", "admin", kAdmin);
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    ASSERT_EQ(LiveAdmins(), 2u);
    std::barrier start(2);
    absl::Status by_a;
    absl::Status by_b;
    std::thread ta([&] {
      start.arrive_and_wait();
      by_a = a->Revoke(*survivor);
    });
    std::thread tb([&] {
      start.arrive_and_wait();
      by_b = b->Revoke(*fresh);
    });
    ta.join();
    tb.join();
    // Exactly one wins; the other is told it held the last admin key.
    ASSERT_NE(by_a.ok(), by_b.ok()) << "round " << round << ": " << by_a << " / " << by_b;
    const absl::Status& lost = by_a.ok() ? by_b : by_a;
    EXPECT_TRUE(absl::IsFailedPrecondition(lost)) << lost;
    ASSERT_EQ(LiveAdmins(), 1u) << "round " << round;
    if (by_a.ok()) {
      ++a_won;
      survivor = fresh;
    } else {
      ++b_won;
    }
  }
  std::printf("revocations won: %d by a, %d by b\n", a_won, b_won);
}

TEST_F(SharedKeysTest, KeysStayInForceWhileEtcdIsAwayAndChangesAnswerUnavailable) {
  std::unique_ptr<SharedKeyRegistry> a = Open();
  ASSERT_TRUE(a);
  absl::StatusOr<std::string> key = a->Create("alice", "free", kSearch);
  ASSERT_TRUE(key.ok()) << key.status();

  etcd_->process().Signal(SIGSTOP);
  EXPECT_TRUE(absl::IsUnavailable(a->Refresh()));
  EXPECT_TRUE(a->Authenticate(*key, Scope::kSearch).ok());
  EXPECT_TRUE(absl::IsUnavailable(a->Create("bob", "free", kSearch).status()));
  EXPECT_TRUE(absl::IsUnavailable(a->Revoke(*key)));
  etcd_->process().Signal(SIGCONT);

  EXPECT_TRUE(a->Refresh().ok());
  EXPECT_TRUE(a->Revoke(*key).ok());
  EXPECT_TRUE(absl::IsUnauthenticated(a->Authenticate(*key, Scope::kSearch).status()));
}

TEST_F(SharedKeysTest, AFullReloadForgetsRecordsDeletedFromEtcd) {
  std::unique_ptr<SharedKeyRegistry> a = Open();
  ASSERT_TRUE(a);
  absl::StatusOr<std::string> key = a->Create("alice", "free", kSearch);
  ASSERT_TRUE(key.ok()) << key.status();
  EtcdClient etcd({etcd_->endpoint()});
  ASSERT_TRUE(etcd.Delete(std::string(kKeysPrefix) +
                          absl::BytesToHexString(AsAbsl(aggregator::KeyHash(*key))))
                  .ok());
  ASSERT_TRUE(a->Refresh().ok());  // changes only: a deletion is not one
  EXPECT_TRUE(a->Authenticate(*key, Scope::kSearch).ok());
  clock_.AdvanceMillis(30'000);  // the full reload is due
  ASSERT_TRUE(a->Refresh().ok());
  EXPECT_TRUE(absl::IsUnauthenticated(a->Authenticate(*key, Scope::kSearch).status()));
}

TEST_F(SharedKeysTest, AFrontDoorsOwnKeysAreCarriedOverOnce) {
  std::string local_key;
  {
    auto local = aggregator::KeyRegistry::Open(dir_.path() + "/keys");
    ASSERT_TRUE(local.ok()) << local.status();
    absl::StatusOr<std::string> made = (*local)->Create("carol", "pro", kSearch);
    ASSERT_TRUE(made.ok()) << made.status();
    local_key = *made;
    ASSERT_TRUE((*local)->Create("dave", "free", kSearch).ok());
  }
  absl::StatusOr<aggregator::KeyTable> table = aggregator::ReadKeyTable(dir_.path() + "/keys");
  ASSERT_TRUE(table.ok()) << table.status();
  std::unique_ptr<SharedKeyRegistry> a = Open();
  std::unique_ptr<SharedKeyRegistry> b = Open();
  ASSERT_TRUE(a && b);
  absl::StatusOr<size_t> put = a->Import(*table);
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(*put, 2u);
  ASSERT_TRUE(b->Refresh().ok());
  absl::StatusOr<aggregator::ApiKey> seen = b->Authenticate(local_key, Scope::kSearch);
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_EQ(seen->owner, "carol");
  // A key revoked in the cluster is not brought back by importing again.
  ASSERT_TRUE(b->Revoke(local_key).ok());
  put = a->Import(*table);
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_EQ(*put, 0u);
  EXPECT_TRUE(absl::IsUnauthenticated(a->Authenticate(local_key, Scope::kSearch).status()));
}

}  // namespace
}  // namespace tweetsearch::cluster
