// KeyTable: the API key records of a registry, by the SHA-256 of each key, and the rules every
// registry applies to them (what a new record needs, which key a prefix names, the last admin
// key). The one-process registry keeps them in RocksDB, the cluster's in etcd
// (cluster/shared_keys.h); both keep a KeyTable in memory and answer every authentication from
// it.
//
// Thread-safety: none; the owning registry locks.
#ifndef TWEETSEARCH_AGGREGATOR_KEY_TABLE_H_
#define TWEETSEARCH_AGGREGATOR_KEY_TABLE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "aggregator/api_keys.h"

namespace tweetsearch::aggregator {

// The 32 bytes of the key's SHA-256: how records are found (the key itself is never stored).
std::string KeyHash(std::string_view key);
// The key's public id: 16 hex digits of its hash.
std::string KeyIdOfHash(std::string_view hash);
// A new random key: "ts_" and 32 hex digits.
std::string NewRandomKey();
// The key an admin key makes when it asks with an idempotency key: "ts_" and 32 hex digits of
// HMAC-SHA-256(admin key, idempotency key). Every attempt of that request names the same key,
// so a retry finds the key its first attempt made, on any front door, without a record of it.
std::string KeyForRetries(std::string_view admin_key, std::string_view idempotency_key);
// A record as stored (a v1.ApiKeyRecord), and back; `id` is not stored.
std::string EncodeKeyRecord(const ApiKey& key);
absl::StatusOr<ApiKey> DecodeKeyRecord(std::string_view bytes);
// The record of a key to register: InvalidArgument for a key under 12 bytes, no owner or no
// scopes. An empty tier is "free".
absl::StatusOr<ApiKey> NewKeyRecord(std::string_view key, std::string_view owner,
                                    std::string_view tier, uint8_t scopes, int64_t now_ms);

class KeyTable;
// The records of the one-process registry in `dir` (KeyRegistry::Open), for carrying them into
// a shared registry. Unavailable if `dir` holds none.
absl::StatusOr<KeyTable> ReadKeyTable(const std::string& dir);

class KeyTable {
 public:
  using Map = absl::flat_hash_map<std::string, ApiKey>;  // by KeyHash

  KeyTable() = default;
  explicit KeyTable(Map keys) : keys_(std::move(keys)) {}

  const Map& keys() const { return keys_; }
  const ApiKey* Find(std::string_view hash) const;
  // Adds or replaces the record of `hash`.
  void Set(std::string hash, ApiKey key) {
    keys_.insert_or_assign(std::move(hash), std::move(key));
  }

  // The record of `key` with its id: Unauthenticated if empty, unknown or revoked.
  absl::StatusOr<ApiKey> Identify(std::string_view key) const;
  // Every record with its id, revoked ones included, in prefix order.
  std::vector<ApiKey> List() const;
  // The hash of the key that `key_or_prefix` names (its text, or the prefix of exactly one key
  // that is not revoked), if it may be revoked: see KeyRegistry::Revoke for the errors.
  absl::StatusOr<std::string> ChooseToRevoke(std::string_view key_or_prefix) const;

 private:
  Map keys_;
};

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_KEY_TABLE_H_
