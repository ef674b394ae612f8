#include "aggregator/api_keys.h"

#include <rocksdb/db.h>

#include <chrono>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "aggregator/key_table.h"
#include "common/strings.h"
#include "storage/rocks_util.h"

namespace tweetsearch::aggregator {
namespace {

int64_t NowMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class RocksDbKeyRegistry final : public KeyRegistry {
 public:
  RocksDbKeyRegistry(std::unique_ptr<rocksdb::DB> db, KeyTable keys, const std::string& dir)
      : db_(std::move(db)), guard_(db_.get(), dir, uint64_t{1} << 20), keys_(std::move(keys)) {}

  absl::StatusOr<std::string> Create(std::string_view owner, std::string_view tier,
                                     uint8_t scopes) override {
    std::string key = NewRandomKey();
    if (absl::Status s = Register(key, owner, tier, scopes); !s.ok()) return s;
    return key;
  }

  absl::Status Register(std::string_view key, std::string_view owner, std::string_view tier,
                        uint8_t scopes) override {
    absl::StatusOr<ApiKey> record = NewKeyRecord(key, owner, tier, scopes, NowMillis());
    if (!record.ok()) return record.status();
    std::string hash = KeyHash(key);
    absl::MutexLock lock(&mu_);
    if (keys_.Find(hash) != nullptr)
      return absl::AlreadyExistsError("this key is registered already");
    return Put(std::move(hash), *std::move(record));
  }

  absl::Status SetScopes(std::string_view key, uint8_t scopes) override {
    if (scopes == 0) return absl::InvalidArgumentError("a key needs at least one scope");
    std::string hash = KeyHash(key);
    absl::MutexLock lock(&mu_);
    const ApiKey* found = keys_.Find(hash);
    if (found == nullptr) return absl::NotFoundError("no such key");
    if (found->scopes == scopes) return absl::OkStatus();
    ApiKey changed = *found;
    changed.scopes = scopes;
    return Put(std::move(hash), std::move(changed));
  }

  absl::StatusOr<ApiKey> Identify(std::string_view key) const override {
    absl::MutexLock lock(&mu_);
    return keys_.Identify(key);
  }

  absl::StatusOr<ApiKey> Authenticate(std::string_view key, Scope scope) const override {
    return CheckScope(Identify(key), scope);
  }

  std::vector<ApiKey> List() const override {
    absl::MutexLock lock(&mu_);
    return keys_.List();
  }

  absl::Status Revoke(std::string_view key_or_prefix) override {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<std::string> hash = keys_.ChooseToRevoke(key_or_prefix);
    if (!hash.ok()) return hash.status();
    ApiKey revoked = *keys_.Find(*hash);
    revoked.revoked = true;
    return Put(*std::move(hash), std::move(revoked));
  }

 private:
  // Stores the record, then (only if that succeeded) holds it in memory.
  absl::Status Put(std::string hash, ApiKey key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    rocksdb::WriteOptions options;
    options.sync = true;
    if (absl::Status s = guard_.BeforeWrite(); !s.ok()) return s;
    if (absl::Status s =
            guard_.After(db_->Put(options, hash, EncodeKeyRecord(key)), "key registry");
        !s.ok()) {
      return s;
    }
    keys_.Set(std::move(hash), std::move(key));
    return absl::OkStatus();
  }

  std::unique_ptr<rocksdb::DB> db_;
  storage::WriteGuard guard_;
  mutable absl::Mutex mu_;
  KeyTable keys_ ABSL_GUARDED_BY(mu_);
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
  for (Scope s : kAllScopes) {
    if (ScopeName(s) == name) return s;
  }
  return absl::InvalidArgumentError(
      StrCat("unknown scope '", name, "' (expected search, ingest or admin)"));
}

absl::StatusOr<ApiKey> CheckScope(absl::StatusOr<ApiKey> key, Scope scope) {
  if (key.ok() && !key->Allows(scope)) {
    return absl::PermissionDeniedError(
        StrCat("this api_dev_key lacks the '", ScopeName(scope), "' scope"));
  }
  return key;
}

namespace {

absl::StatusOr<std::unique_ptr<rocksdb::DB>> OpenKeyDb(const std::string& dir, bool create) {
  rocksdb::Options options;
  options.create_if_missing = create;
  options.max_background_jobs = 1;
  options.keep_log_file_num = 2;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, dir, &raw);
  if (!s.ok()) return absl::UnavailableError(StrCat("open key registry ", dir, ": ", s.ToString()));
  return std::unique_ptr<rocksdb::DB>(raw);
}

absl::StatusOr<KeyTable> ReadAll(rocksdb::DB& db) {
  KeyTable::Map keys;
  std::unique_ptr<rocksdb::Iterator> it(db.NewIterator(rocksdb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    absl::StatusOr<ApiKey> key =
        DecodeKeyRecord(std::string_view(it->value().data(), it->value().size()));
    if (!key.ok()) return key.status();
    keys.emplace(it->key().ToString(), *std::move(key));
  }
  if (!it->status().ok()) return absl::DataLossError(it->status().ToString());
  return KeyTable(std::move(keys));
}

}  // namespace

absl::StatusOr<KeyTable> ReadKeyTable(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<rocksdb::DB>> db = OpenKeyDb(dir, /*create=*/false);
  if (!db.ok()) return db.status();
  return ReadAll(**db);
}

absl::StatusOr<std::unique_ptr<KeyRegistry>> KeyRegistry::Open(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<rocksdb::DB>> db = OpenKeyDb(dir, /*create=*/true);
  if (!db.ok()) return db.status();
  absl::StatusOr<KeyTable> keys = ReadAll(**db);
  if (!keys.ok()) return keys.status();
  return std::unique_ptr<KeyRegistry>(
      new RocksDbKeyRegistry(*std::move(db), *std::move(keys), dir));
}

}  // namespace tweetsearch::aggregator
