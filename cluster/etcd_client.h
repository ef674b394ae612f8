// EtcdClient: the few etcd v3 calls the cluster needs (keys, leases, one-key
// transactions), over etcd's JSON gateway (POST /v3/kv/range, /v3/kv/txn,
// /v3/lease/...) on its client port. Keys and values are bytes (base64 on the
// wire, which this class hides).
//
// Thread-safety: every method may be called from any thread (calls are
// serialized on one kept-alive connection per client; use one client per busy
// thread).
#ifndef TWEETSEARCH_CLUSTER_ETCD_CLIENT_H_
#define TWEETSEARCH_CLUSTER_ETCD_CLIENT_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace tweetsearch::net {
class HttpClient;
}

namespace tweetsearch::cluster {

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;
};

// Keys read together, and etcd's revision when they were read.
struct RangeResult {
  std::vector<KeyValue> kvs;
  int64_t revision = 0;
};

class EtcdClient {
 public:
  // `endpoints`: HOST:PORT of etcd members; a call that cannot reach one tries
  // the next.
  explicit EtcdClient(std::vector<std::string> endpoints,
                      std::chrono::milliseconds timeout = std::chrono::seconds(3));
  ~EtcdClient();

  // A lease of `ttl_s` seconds; keys put with it vanish when it is not kept
  // alive.
  absl::StatusOr<int64_t> GrantLease(int64_t ttl_s);
  // Renews `lease`. NotFound when it has expired (its keys are gone).
  absl::Status KeepAlive(int64_t lease);
  absl::Status Revoke(int64_t lease);

  absl::Status Put(std::string_view key, std::string_view value, int64_t lease = 0);
  absl::StatusOr<std::optional<KeyValue>> Get(std::string_view key);
  // Every key starting with `prefix`, in key order.
  absl::StatusOr<std::vector<KeyValue>> GetPrefix(std::string_view prefix);
  // The keys starting with `prefix` last modified at or after `min_mod_revision` (every one
  // for 0), in key order, with the revision they were read at.
  absl::StatusOr<RangeResult> GetPrefixSince(std::string_view prefix, int64_t min_mod_revision);
  absl::Status Delete(std::string_view key);
  // Creates `key` if it does not exist: true; otherwise false and the current
  // value in `*current` (when not null).
  absl::StatusOr<bool> CreateIfAbsent(std::string_view key, std::string_view value, int64_t lease,
                                      KeyValue* current = nullptr);
  // Replaces `key` if it was last modified at `mod_revision`: true; false if it
  // changed or is gone.
  absl::StatusOr<bool> CompareAndPut(std::string_view key, int64_t mod_revision,
                                     std::string_view value, int64_t lease);
  // Puts `key` (no lease) if no key starting with `prefix` was modified after `revision`: a
  // lock on a whole prefix, taken optimistically. True if it put, false if something changed.
  absl::StatusOr<bool> PutIfPrefixUnchanged(std::string_view prefix, int64_t revision,
                                            std::string_view key, std::string_view value);

 private:
  // POSTs `body` (JSON) to `path` and returns the JSON answer's text.
  absl::StatusOr<std::string> Call(std::string_view path, const std::string& body);

  const std::vector<std::string> endpoints_;
  const std::chrono::milliseconds timeout_;
  absl::Mutex mu_;
  size_t current_ ABSL_GUARDED_BY(mu_) = 0;
  std::unique_ptr<net::HttpClient> http_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tweetsearch::cluster

#endif  // TWEETSEARCH_CLUSTER_ETCD_CLIENT_H_
