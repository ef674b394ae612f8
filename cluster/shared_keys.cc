#include "cluster/shared_keys.h"

#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "common/strings.h"

namespace tweetsearch::cluster {
namespace {

using aggregator::ApiKey;
using aggregator::KeyTable;

// How often a change is tried again when another front door changed the keys in between.
constexpr int kAttempts = 8;

std::string EtcdKeyOf(std::string_view hash) {
  return StrCat(kKeysPrefix, absl::BytesToHexString(AsAbsl(hash)));
}

// The hash an etcd key names; empty for a key that is not a record's.
std::string HashOfEtcdKey(std::string_view etcd_key) {
  if (!etcd_key.starts_with(kKeysPrefix)) return "";
  const std::string_view hex = etcd_key.substr(kKeysPrefix.size());
  if (hex.size() != 64) return "";
  for (char c : hex) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return "";
  }
  return absl::HexStringToBytes(AsAbsl(hex));
}

// The records of a range read, by key hash. A record this version cannot decode is left out:
// it authenticates nothing.
KeyTable::Map RecordsOf(const RangeResult& range) {
  KeyTable::Map records;
  for (const KeyValue& kv : range.kvs) {
    std::string hash = HashOfEtcdKey(kv.key);
    absl::StatusOr<ApiKey> key = aggregator::DecodeKeyRecord(kv.value);
    if (!hash.empty() && key.ok()) records.insert_or_assign(std::move(hash), *std::move(key));
  }
  return records;
}

absl::Status Contended(std::string_view what) {
  return absl::AbortedError(StrCat("the API keys kept changing while ", what, " them; try again"));
}

}  // namespace

SharedKeyRegistry::SharedKeyRegistry(const SharedKeyOptions& options, const Clock& clock)
    : options_(options), clock_(clock), etcd_(options.etcd, options.timeout) {}

SharedKeyRegistry::~SharedKeyRegistry() {
  if (refresher_ != nullptr) refresher_->Stop();
}

absl::StatusOr<std::unique_ptr<SharedKeyRegistry>> SharedKeyRegistry::Open(
    const SharedKeyOptions& options, const Clock& clock) {
  std::unique_ptr<SharedKeyRegistry> registry(new SharedKeyRegistry(options, clock));
  if (absl::Status s = registry->Refresh(/*full=*/true); !s.ok()) return s;
  return registry;
}

void SharedKeyRegistry::Start() {
  refresher_ = std::make_unique<PeriodicTask>(absl::FromChrono(options_.refresh),
                                              [this] { (void)Refresh(); });
}

absl::Status SharedKeyRegistry::Refresh(bool full) {
  absl::MutexLock refreshing(&refresh_mu_);
  const int64_t now_ms = clock_.NowMonotonicMicros() / 1000;
  if (now_ms - last_full_ms_ >= options_.full_reload.count()) full = true;
  const int64_t after = full ? 0 : revision();
  absl::StatusOr<RangeResult> range = etcd_.GetPrefixSince(kKeysPrefix, after + (after > 0));
  if (!range.ok()) return range.status();
  KeyTable::Map read = RecordsOf(*range);
  absl::MutexLock lock(&mu_);
  if (range->revision < revision_) return absl::OkStatus();  // an older member answered
  if (full) {
    table_ = KeyTable(std::move(read));
    last_full_ms_ = now_ms;
  } else {
    for (auto& [hash, key] : read) table_.Set(hash, std::move(key));
  }
  revision_ = range->revision;
  return absl::OkStatus();
}

int64_t SharedKeyRegistry::revision() const {
  absl::MutexLock lock(&mu_);
  return revision_;
}

absl::StatusOr<size_t> SharedKeyRegistry::Import(const KeyTable& table) {
  size_t put = 0;
  for (const auto& [hash, key] : table.keys()) {
    absl::StatusOr<bool> created =
        etcd_.CreateIfAbsent(EtcdKeyOf(hash), aggregator::EncodeKeyRecord(key), 0);
    if (!created.ok()) return created.status();
    put += *created;
  }
  if (absl::Status s = Refresh(); !s.ok()) return s;
  return put;
}

absl::StatusOr<std::string> SharedKeyRegistry::Create(std::string_view owner, std::string_view tier,
                                                      uint8_t scopes) {
  std::string key = aggregator::NewRandomKey();
  if (absl::Status s = Register(key, owner, tier, scopes); !s.ok()) return s;
  return key;
}

absl::Status SharedKeyRegistry::Register(std::string_view key, std::string_view owner,
                                         std::string_view tier, uint8_t scopes) {
  absl::StatusOr<ApiKey> record =
      aggregator::NewKeyRecord(key, owner, tier, scopes, clock_.NowUnixMillis());
  if (!record.ok()) return record.status();
  absl::StatusOr<bool> created = etcd_.CreateIfAbsent(EtcdKeyOf(aggregator::KeyHash(key)),
                                                      aggregator::EncodeKeyRecord(*record), 0);
  if (!created.ok()) return created.status();
  if (!*created) {
    // Registered by another front door, maybe lately: read it, so that the caller finds it
    // (a retry with an idempotency key compares it with its request).
    if (absl::Status s = Refresh(); !s.ok()) return s;
    return absl::AlreadyExistsError("this key is registered already");
  }
  return Refresh();
}

absl::Status SharedKeyRegistry::SetScopes(std::string_view key, uint8_t scopes) {
  if (scopes == 0) return absl::InvalidArgumentError("a key needs at least one scope");
  const std::string etcd_key = EtcdKeyOf(aggregator::KeyHash(key));
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    absl::StatusOr<std::optional<KeyValue>> current = etcd_.Get(etcd_key);
    if (!current.ok()) return current.status();
    if (!current->has_value()) return absl::NotFoundError("no such key");
    absl::StatusOr<ApiKey> record = aggregator::DecodeKeyRecord((*current)->value);
    if (!record.ok()) return record.status();
    if (record->scopes == scopes) return absl::OkStatus();
    record->scopes = scopes;
    absl::StatusOr<bool> put = etcd_.CompareAndPut(etcd_key, (*current)->mod_revision,
                                                   aggregator::EncodeKeyRecord(*record), 0);
    if (!put.ok()) return put.status();
    if (*put) return Refresh();
  }
  return Contended("changing the scopes of");
}

absl::StatusOr<ApiKey> SharedKeyRegistry::Identify(std::string_view key) const {
  absl::MutexLock lock(&mu_);
  return table_.Identify(key);
}

absl::StatusOr<ApiKey> SharedKeyRegistry::Authenticate(std::string_view key,
                                                       aggregator::Scope scope) const {
  return aggregator::CheckScope(Identify(key), scope);
}

std::vector<ApiKey> SharedKeyRegistry::List() const {
  absl::MutexLock lock(&mu_);
  return table_.List();
}

absl::Status SharedKeyRegistry::Revoke(std::string_view key_or_prefix) {
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    absl::StatusOr<RangeResult> range = etcd_.GetPrefixSince(kKeysPrefix, 0);
    if (!range.ok()) return range.status();
    const KeyTable now(RecordsOf(*range));
    absl::StatusOr<std::string> hash = now.ChooseToRevoke(key_or_prefix);
    if (!hash.ok()) return hash.status();
    ApiKey revoked = *now.Find(*hash);
    revoked.revoked = true;
    absl::StatusOr<bool> put = etcd_.PutIfPrefixUnchanged(
        kKeysPrefix, range->revision, EtcdKeyOf(*hash), aggregator::EncodeKeyRecord(revoked));
    if (!put.ok()) return put.status();
    if (*put) return Refresh();
  }
  return Contended("revoking");
}

}  // namespace tweetsearch::cluster
