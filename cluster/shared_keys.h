// SharedKeyRegistry: the API keys of a cluster, in etcd, shared by every front door.
//
// A key is one etcd key, /ts/keys/<hex SHA-256 of the key> = a v1.ApiKeyRecord (the key itself
// is never stored). Each front door holds every record in memory (aggregator/key_table.h) and
// answers Identify and Authenticate from it, never waiting on etcd. It learns of changes by
// asking etcd, every `refresh` (250 ms), for the records modified since the revision it last
// read: one small range read, empty when nothing changed. Every 30 s it reads them all again,
// which also forgets records deleted behind its back. A key created, changed or revoked on one
// front door therefore takes effect on every other within one refresh and one etcd round trip.
// While etcd is away, the last records read stay in force and changes answer Unavailable.
//
// Changes are etcd transactions, so two front doors cannot undo each other's:
// - Register: created only if absent (AlreadyExists otherwise).
// - SetScopes: put only if the record has not changed since it was read (retried).
// - Revoke: the whole key set is read, the rules of KeyTable::ChooseToRevoke applied to it, and
//   the revoked record put only if no record changed since that read (retried), so two front
//   doors revoking the last two admin keys at once cannot both succeed.
// A front door reads etcd again after its own change, so it sees the change at once.
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_CLUSTER_SHARED_KEYS_H_
#define TWEETSEARCH_CLUSTER_SHARED_KEYS_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "aggregator/api_keys.h"
#include "aggregator/key_table.h"
#include "cluster/etcd_client.h"
#include "common/clock.h"
#include "common/periodic.h"

namespace tweetsearch::cluster {

inline constexpr std::string_view kKeysPrefix = "/ts/keys/";

struct SharedKeyOptions {
  std::vector<std::string> etcd;  // HOST:PORT of the etcd members
  std::chrono::milliseconds refresh{250};
  std::chrono::milliseconds full_reload{30'000};
  std::chrono::milliseconds timeout{2'000};  // of each etcd call
};

class SharedKeyRegistry final : public aggregator::KeyRegistry {
 public:
  // Reads every record (Unavailable if etcd cannot be reached). `clock` dates new keys and must
  // outlive the registry. Start() begins the refreshes.
  static absl::StatusOr<std::unique_ptr<SharedKeyRegistry>> Open(const SharedKeyOptions& options,
                                                                 const Clock& clock);
  ~SharedKeyRegistry() override;

  // Refreshes every `refresh` on a thread of its own. Call once.
  void Start();
  // Reads what changed in etcd since the last read (everything when `full`).
  absl::Status Refresh(bool full = false);
  // Puts the records of `table` that etcd lacks (a front door's keys from before it joined a
  // cluster); returns how many it put.
  absl::StatusOr<size_t> Import(const aggregator::KeyTable& table);
  // The etcd revision of the last successful read.
  int64_t revision() const;

  absl::StatusOr<std::string> Create(std::string_view owner, std::string_view tier,
                                     uint8_t scopes) override;
  absl::Status Register(std::string_view key, std::string_view owner, std::string_view tier,
                        uint8_t scopes) override;
  absl::Status SetScopes(std::string_view key, uint8_t scopes) override;
  absl::StatusOr<aggregator::ApiKey> Identify(std::string_view key) const override;
  absl::StatusOr<aggregator::ApiKey> Authenticate(std::string_view key,
                                                  aggregator::Scope scope) const override;
  std::vector<aggregator::ApiKey> List() const override;
  absl::Status Revoke(std::string_view key_or_prefix) override;

 private:
  SharedKeyRegistry(const SharedKeyOptions& options, const Clock& clock);

  const SharedKeyOptions options_;
  const Clock& clock_;
  EtcdClient etcd_;         // changes and refreshes
  absl::Mutex refresh_mu_;  // one read of etcd at a time, applied in revision order
  int64_t last_full_ms_ ABSL_GUARDED_BY(refresh_mu_) = 0;
  mutable absl::Mutex mu_;
  aggregator::KeyTable table_ ABSL_GUARDED_BY(mu_);
  int64_t revision_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<PeriodicTask> refresher_;
};

}  // namespace tweetsearch::cluster

#endif  // TWEETSEARCH_CLUSTER_SHARED_KEYS_H_
