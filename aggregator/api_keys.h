// KeyRegistry: the API keys the front door accepts, with owner, tier and scopes.
//
// Keys live in a small RocksDB database (synced writes), keyed by the SHA-256 of the key, so the
// registry never holds a usable key on disk; listings show the first characters of each key
// (its prefix) so that an operator can recognise and revoke it. All records are also held in
// memory: an Authenticate() is one hash and one map lookup.
//
// Thread-safety: every method may be called from any thread.
#ifndef TWEETSEARCH_AGGREGATOR_API_KEYS_H_
#define TWEETSEARCH_AGGREGATOR_API_KEYS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tweetsearch::aggregator {

enum class Scope : uint8_t { kSearch = 1, kIngest = 2, kAdmin = 4 };
inline constexpr Scope kAllScopes[] = {Scope::kSearch, Scope::kIngest, Scope::kAdmin};

// "search", "ingest", "admin".
std::string_view ScopeName(Scope scope);
absl::StatusOr<Scope> ParseScope(std::string_view name);

struct ApiKey {
  std::string id;      // 16 hex digits of the key's SHA-256: unique, safe to show and log
  std::string prefix;  // first characters of the key (its public name)
  std::string owner;
  std::string tier;    // quota tier, read by the limiter
  uint8_t scopes = 0;  // bit set of Scope
  int64_t created_at_ms = 0;
  bool revoked = false;

  bool Allows(Scope scope) const { return scopes & static_cast<uint8_t>(scope); }
};

// `key`, or PermissionDenied when it lacks `scope` (as KeyRegistry::Authenticate answers).
absl::StatusOr<ApiKey> CheckScope(absl::StatusOr<ApiKey> key, Scope scope);

// The documented demo key. It is public (the web page's config serves it), so by default it
// may only search; the operator can widen it (DaemonConfig::demo_key_scopes).
inline constexpr std::string_view kDemoKey = "demo-key-0123456789";

class KeyRegistry {
 public:
  // Opens or creates the registry in `dir`.
  static absl::StatusOr<std::unique_ptr<KeyRegistry>> Open(const std::string& dir);
  virtual ~KeyRegistry() = default;

  // Makes a new random key ("ts_" + 32 hex digits) and returns it; only its hash is stored.
  // InvalidArgument for an empty owner or no scopes.
  virtual absl::StatusOr<std::string> Create(std::string_view owner, std::string_view tier,
                                             uint8_t scopes) = 0;
  // Registers a key chosen by the operator (the demo key, keys from a config file).
  // AlreadyExists if it is registered. InvalidArgument if shorter than 12 bytes.
  virtual absl::Status Register(std::string_view key, std::string_view owner, std::string_view tier,
                                uint8_t scopes) = 0;
  // Gives a registered key (revoked or not: it stays so) exactly `scopes`. NotFound if it is
  // not registered, InvalidArgument for no scopes.
  virtual absl::Status SetScopes(std::string_view key, uint8_t scopes) = 0;
  // The key's record, whatever its scopes: Unauthenticated if missing, unknown or revoked.
  virtual absl::StatusOr<ApiKey> Identify(std::string_view key) const = 0;
  // The key's record: Unauthenticated if missing, unknown or revoked; PermissionDenied if it
  // lacks `scope`.
  virtual absl::StatusOr<ApiKey> Authenticate(std::string_view key, Scope scope) const = 0;
  // Every key (ids set), revoked ones included, in prefix order.
  virtual std::vector<ApiKey> List() const = 0;
  // Revokes the one key whose prefix (or full text) is `key_or_prefix`. NotFound if none,
  // InvalidArgument if several keys share the prefix or it is shorter than a listed prefix (10
  // characters); FailedPrecondition for the last admin key that is not revoked.
  virtual absl::Status Revoke(std::string_view key_or_prefix) = 0;
};

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_API_KEYS_H_
