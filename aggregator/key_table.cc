#include "aggregator/key_table.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <algorithm>

#include "absl/strings/escaping.h"
#include "common/check.h"
#include "common/strings.h"
#include "proto/tweetsearch.pb.h"

namespace tweetsearch::aggregator {
namespace {

constexpr size_t kPrefixChars = 10;

}  // namespace

std::string KeyHash(std::string_view key) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(key.data()), key.size(), digest);
  return std::string(reinterpret_cast<char*>(digest), sizeof(digest));
}

std::string KeyIdOfHash(std::string_view hash) {
  return absl::BytesToHexString(AsAbsl(hash.substr(0, 8)));
}

std::string NewRandomKey() {
  unsigned char random[16];
  TS_CHECK(RAND_bytes(random, sizeof(random)) == 1, "OpenSSL RAND_bytes failed");
  return "ts_" + absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(random), 16));
}

std::string KeyForRetries(std::string_view admin_key, std::string_view idempotency_key) {
  const std::string message = StrCat("tweetsearch admin key\n", idempotency_key);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  TS_CHECK(HMAC(EVP_sha256(), admin_key.data(), static_cast<int>(admin_key.size()),
                reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac,
                &length) != nullptr,
           "OpenSSL HMAC failed");
  return "ts_" + absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(mac), 16));
}

std::string EncodeKeyRecord(const ApiKey& key) {
  v1::ApiKeyRecord r;
  r.set_owner(key.owner);
  r.set_tier(key.tier);
  for (Scope s : kAllScopes) {
    if (key.Allows(s)) r.add_scopes(std::string(ScopeName(s)));
  }
  r.set_created_at_ms(key.created_at_ms);
  r.set_revoked(key.revoked);
  r.set_key_prefix(key.prefix);
  return r.SerializeAsString();
}

absl::StatusOr<ApiKey> DecodeKeyRecord(std::string_view bytes) {
  v1::ApiKeyRecord r;
  if (!r.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::DataLossError("key record does not decode");
  }
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

absl::StatusOr<ApiKey> NewKeyRecord(std::string_view key, std::string_view owner,
                                    std::string_view tier, uint8_t scopes, int64_t now_ms) {
  if (key.size() < 12) return absl::InvalidArgumentError("an API key has at least 12 bytes");
  if (owner.empty()) return absl::InvalidArgumentError("a key needs an owner");
  if (scopes == 0) return absl::InvalidArgumentError("a key needs at least one scope");
  ApiKey record;
  record.prefix = std::string(key.substr(0, kPrefixChars));
  record.owner = std::string(owner);
  record.tier = tier.empty() ? "free" : std::string(tier);
  record.scopes = scopes;
  record.created_at_ms = now_ms;
  return record;
}

const ApiKey* KeyTable::Find(std::string_view hash) const {
  auto it = keys_.find(AsAbsl(hash));
  return it == keys_.end() ? nullptr : &it->second;
}

absl::StatusOr<ApiKey> KeyTable::Identify(std::string_view key) const {
  if (key.empty()) return absl::UnauthenticatedError("missing api_dev_key");
  const std::string hash = KeyHash(key);
  const ApiKey* found = Find(hash);
  if (found == nullptr || found->revoked) {
    return absl::UnauthenticatedError("unknown or revoked api_dev_key");
  }
  ApiKey out = *found;
  out.id = KeyIdOfHash(hash);
  return out;
}

std::vector<ApiKey> KeyTable::List() const {
  std::vector<ApiKey> out;
  out.reserve(keys_.size());
  for (const auto& [hash, key] : keys_) {
    out.push_back(key);
    out.back().id = KeyIdOfHash(hash);
  }
  std::sort(out.begin(), out.end(), [](const ApiKey& a, const ApiKey& b) {
    return a.prefix < b.prefix || (a.prefix == b.prefix && a.created_at_ms < b.created_at_ms);
  });
  return out;
}

absl::StatusOr<std::string> KeyTable::ChooseToRevoke(std::string_view key_or_prefix) const {
  if (key_or_prefix.size() < kPrefixChars) {
    return absl::InvalidArgumentError(StrCat("name a key by its whole prefix (", kPrefixChars,
                                             " characters, as listed) or its text"));
  }
  std::string found_hash = KeyHash(key_or_prefix);
  const ApiKey* found = Find(found_hash);
  if (found == nullptr) {
    for (const auto& [hash, key] : keys_) {
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
  return found_hash;
}

}  // namespace tweetsearch::aggregator
