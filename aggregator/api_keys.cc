#include "aggregator/api_keys.h"

#include <openssl/rand.h>
#include <openssl/sha.h>
#include <rocksdb/db.h>

#include <algorithm>
#include <chrono>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/synchronization/mutex.h"
#include "common/check.h"
#include "common/strings.h"
#include "proto/tweetsearch.pb.h"
#include "storage/rocks_util.h"

namespace tweetsearch::aggregator {
namespace {

constexpr size_t kPrefixChars = 10;
constexpr Scope kScopes[] = {Scope::kSearch, Scope::kIngest, Scope::kAdmin};

std::string Hash(std::string_view key) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), digest);
  return std::string(reinterpret_cast<char*>(digest), sizeof(digest));
}

// The key's public id: 16 hex digits of its hash.
std::string IdOf(std::string_view hash) {
  return absl::BytesToHexString(AsAbsl(hash.substr(0, 8)));
}

int64_t NowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

v1::ApiKeyRecord ToRecord(const ApiKey& key) {
  v1::ApiKeyRecord r;
  r.set_owner(key.owner);
  r.set_tier(key.tier);
  for (Scope s : kScopes) {
    if (key.Allows(s)) r.add_scopes(std::string(ScopeName(s)));
  }
  r.set_created_at_ms(key.created_at_ms);
  r.set_revoked(key.revoked);
  r.set_key_prefix(key.prefix);
  return r;
}

absl::StatusOr<ApiKey> FromRecord(const std::string& value) {
  v1::ApiKeyRecord r;
  if (!r.ParseFromString(value)) return absl::DataLossError("key record does not decode");
  ApiKey key;
  key.owner = r.owner();
  key.tier = r.tier();
  for (const std::string& name : r.scopes()) {
    if (absl::StatusOr<Scope> s = ParseScope(name); s.ok()) key.scopes |= uint8_t(*s);
  }
  key.created_at_ms = r.created_at_ms();
  key.revoked = r.revoked();
  key.prefix = r.key_prefix();
  return key;
}

class RocksDbKeyRegistry final : public KeyRegistry {
 public:
  RocksDbKeyRegistry(std::unique_ptr<rocksdb::DB> db, absl::flat_hash_map<std::string, ApiKey> keys,
                     const std::string& dir)
      : db_(std::move(db)), guard_(db_.get(), dir, uint64_t{1} << 20), keys_(std::move(keys)) {}

  absl::StatusOr<std::string> Create(std::string_view owner, std::string_view tier,
                                     uint8_t scopes) override {
    unsigned char random[16];
    TS_CHECK(RAND_bytes(random, sizeof(random)) == 1, "OpenSSL RAND_bytes failed");
    std::string key =
        "ts_" + absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(random), 16));
    if (absl::Status s = Register(key, owner, tier, scopes); !s.ok()) return s;
    return key;
  }

  absl::Status Register(std::string_view key, std::string_view owner, std::string_view tier,
                        uint8_t scopes) override {
    if (key.size() < 12) return absl::InvalidArgumentError("an API key has at least 12 bytes");
    if (owner.empty()) return absl::InvalidArgumentError("a key needs an owner");
    if (scopes == 0) return absl::InvalidArgumentError("a key needs at least one scope");
    ApiKey record;
    record.prefix = std::string(key.substr(0, kPrefixChars));
    record.owner = std::string(owner);
    record.tier = tier.empty() ? "free" : std::string(tier);
    record.scopes = scopes;
    record.created_at_ms = NowMillis();
    const std::string hash = Hash(key);
    absl::MutexLock lock(&mu_);
    if (keys_.contains(hash)) return absl::AlreadyExistsError("this key is registered already");
    if (absl::Status s = Put(hash, record); !s.ok()) return s;
    keys_.emplace(hash, std::move(record));
    return absl::OkStatus();
  }

  absl::Status SetScopes(std::string_view key, uint8_t scopes) override {
    if (scopes == 0) return absl::InvalidArgumentError("a key needs at least one scope");
    const std::string hash = Hash(key);
    absl::MutexLock lock(&mu_);
    auto it = keys_.find(hash);
    if (it == keys_.end()) return absl::NotFoundError("no such key");
    if (it->second.scopes == scopes) return absl::OkStatus();
    ApiKey changed = it->second;
    changed.scopes = scopes;
    if (absl::Status s = Put(hash, changed); !s.ok()) return s;
    it->second = std::move(changed);
    return absl::OkStatus();
  }

  absl::StatusOr<ApiKey> Identify(std::string_view key) const override {
    if (key.empty()) return absl::UnauthenticatedError("missing api_dev_key");
    const std::string hash = Hash(key);
    absl::MutexLock lock(&mu_);
    auto it = keys_.find(hash);
    if (it == keys_.end() || it->second.revoked) {
      return absl::UnauthenticatedError("unknown or revoked api_dev_key");
    }
    ApiKey found = it->second;
    found.id = IdOf(hash);
    return found;
  }

  absl::StatusOr<ApiKey> Authenticate(std::string_view key, Scope scope) const override {
    absl::StatusOr<ApiKey> found = Identify(key);
    if (found.ok() && !found->Allows(scope)) {
      return absl::PermissionDeniedError(
          StrCat("this api_dev_key lacks the '", ScopeName(scope), "' scope"));
    }
    return found;
  }

  std::vector<ApiKey> List() const override {
    std::vector<ApiKey> out;
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [hash, key] : keys_) {
        out.push_back(key);
        out.back().id = IdOf(hash);
      }
    }
    std::sort(out.begin(), out.end(), [](const ApiKey& a, const ApiKey& b) {
      return a.prefix < b.prefix || (a.prefix == b.prefix && a.created_at_ms < b.created_at_ms);
    });
    return out;
  }

  absl::Status Revoke(std::string_view key_or_prefix) override {
    if (key_or_prefix.size() < kPrefixChars) {
      return absl::InvalidArgumentError(StrCat("name a key by its whole prefix (", kPrefixChars,
                                               " characters, as listed) or its text"));
    }
    absl::MutexLock lock(&mu_);
    auto exact = keys_.find(Hash(key_or_prefix));
    ApiKey* found = nullptr;
    std::string found_hash;
    if (exact != keys_.end()) {
      found = &exact->second;
      found_hash = exact->first;
    } else {
      for (auto& [hash, key] : keys_) {
        if (!key.prefix.starts_with(key_or_prefix) || key.revoked) continue;
        if (found != nullptr) {
          return absl::InvalidArgumentError(
              StrCat("several keys start with '", key_or_prefix, "'; give more characters"));
        }
        found = &key;
        found_hash = hash;
      }
    }
    if (found == nullptr) return absl::NotFoundError(StrCat("no key '", key_or_prefix, "'"));
    if (found->Allows(Scope::kAdmin) && !found->revoked) {
      const bool another_admin = std::any_of(keys_.begin(), keys_.end(), [&](const auto& entry) {
        return entry.first != found_hash && !entry.second.revoked &&
               entry.second.Allows(Scope::kAdmin);
      });
      if (!another_admin) {
        return absl::FailedPreconditionError(
            "this is the last admin key: create another admin key before revoking it");
      }
    }
    ApiKey revoked = *found;
    revoked.revoked = true;
    if (absl::Status s = Put(found_hash, revoked); !s.ok()) return s;
    *found = std::move(revoked);
    return absl::OkStatus();
  }

 private:
  absl::Status Put(const std::string& hash, const ApiKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    rocksdb::WriteOptions options;
    options.sync = true;
    if (absl::Status s = guard_.BeforeWrite(); !s.ok()) return s;
    return guard_.After(db_->Put(options, hash, ToRecord(key).SerializeAsString()), "key registry");
  }

  std::unique_ptr<rocksdb::DB> db_;
  storage::WriteGuard guard_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, ApiKey> keys_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::string_view ScopeName(Scope scope) {
  switch (scope) {
    case Scope::kSearch:
      return "search";
    case Scope::kIngest:
      return "ingest";
    case Scope::kAdmin:
      return "admin";
  }
  return "?";
}

absl::StatusOr<Scope> ParseScope(std::string_view name) {
  for (Scope s : kScopes) {
    if (ScopeName(s) == name) return s;
  }
  return absl::InvalidArgumentError(
      StrCat("unknown scope '", name, "' (expected search, ingest or admin)"));
}

absl::StatusOr<std::unique_ptr<KeyRegistry>> KeyRegistry::Open(const std::string& dir) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.max_background_jobs = 1;
  options.keep_log_file_num = 2;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, dir, &raw);
  if (!s.ok()) return absl::UnavailableError(StrCat("open key registry ", dir, ": ", s.ToString()));
  std::unique_ptr<rocksdb::DB> db(raw);
  absl::flat_hash_map<std::string, ApiKey> keys;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    absl::StatusOr<ApiKey> key = FromRecord(it->value().ToString());
    if (!key.ok()) return key.status();
    keys.emplace(it->key().ToString(), *std::move(key));
  }
  if (!it->status().ok()) return absl::DataLossError(it->status().ToString());
  it.reset();
  return std::unique_ptr<KeyRegistry>(new RocksDbKeyRegistry(std::move(db), std::move(keys), dir));
}

}  // namespace tweetsearch::aggregator
