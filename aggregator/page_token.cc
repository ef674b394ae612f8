#include "aggregator/page_token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstring>

#include "absl/strings/escaping.h"
#include "common/check.h"
#include "common/strings.h"
#include "xxhash.h"

namespace tweetsearch::aggregator {
namespace {

constexpr uint8_t kVersion = 1;
constexpr size_t kFixedBytes = 1 + 1 + 8 * 5 + 1;
constexpr size_t kMaxTerms = 254;
constexpr size_t kMacBytes = 16;

template <typename T>
void Put(std::string* out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // little-endian on every platform we build for
  out->append(bytes, sizeof(T));
}

template <typename T>
T Get(const std::string& in, size_t* pos) {
  T value;
  std::memcpy(&value, in.data() + *pos, sizeof(T));
  *pos += sizeof(T);
  return value;
}

std::string Mac(const std::string& secret, std::string_view payload) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(payload.data()), payload.size(), digest, &length);
  return std::string(reinterpret_cast<char*>(digest), kMacBytes);
}

absl::Status Invalid(std::string_view why) {
  return absl::InvalidArgumentError(StrCat("invalid page_token: ", why));
}

}  // namespace

uint64_t QueryFingerprint(std::string_view search_terms) {
  return XXH64(search_terms.data(), search_terms.size(), 0x7477656574ULL);
}

PageTokenCodec::PageTokenCodec(std::string secret) : secret_(std::move(secret)) {
  TS_CHECK(secret_.size() >= 16, "page token secret under 16 bytes");
}

std::string PageTokenCodec::Encode(const PageCursor& c) const {
  std::string raw;
  raw.reserve(kFixedBytes + kMacBytes);
  Put<uint8_t>(&raw, kVersion);
  Put<uint8_t>(&raw, static_cast<uint8_t>(c.sort));
  Put<double>(&raw, c.primary);
  Put<uint64_t>(&raw, c.id);
  Put<uint64_t>(&raw, c.watermark);
  Put<int64_t>(&raw, c.now_ms);
  Put<uint64_t>(&raw, c.query_fingerprint);
  TS_CHECK(c.doc_freqs.size() <= kMaxTerms, "too many terms for a page token");
  Put<uint8_t>(&raw, c.has_stats ? static_cast<uint8_t>(c.doc_freqs.size()) : 255);
  if (c.has_stats) {
    Put<uint64_t>(&raw, c.num_docs);
    Put<double>(&raw, c.avg_length);
    for (uint64_t df : c.doc_freqs) Put<uint64_t>(&raw, df);
  }
  raw += Mac(secret_, raw);
  std::string token;
  absl::WebSafeBase64Escape(raw, &token);
  return token;
}

absl::StatusOr<PageCursor> PageTokenCodec::Decode(std::string_view token) const {
  // Checking the length first bounds the work on hostile input.
  constexpr size_t kMaxChars = ((kFixedBytes + 16 + 8 * kMaxTerms + kMacBytes) * 4 + 2) / 3;
  if (token.size() < ((kFixedBytes + kMacBytes) * 4 + 2) / 3 || token.size() > kMaxChars) {
    return Invalid("wrong length");
  }
  std::string raw;
  if (!absl::WebSafeBase64Unescape(AsAbsl(token), &raw) || raw.size() < kFixedBytes + kMacBytes) {
    return Invalid("not base64url");
  }
  const size_t payload = raw.size() - kMacBytes;
  const std::string expected = Mac(secret_, std::string_view(raw).substr(0, payload));
  if (CRYPTO_memcmp(expected.data(), raw.data() + payload, kMacBytes) != 0) {
    return Invalid("signature does not match (tampered, or issued by another deployment)");
  }
  size_t pos = 0;
  if (Get<uint8_t>(raw, &pos) != kVersion) return Invalid("unknown version");
  PageCursor c;
  c.sort = Get<uint8_t>(raw, &pos);
  c.primary = Get<double>(raw, &pos);
  c.id = Get<uint64_t>(raw, &pos);
  c.watermark = Get<uint64_t>(raw, &pos);
  c.now_ms = Get<int64_t>(raw, &pos);
  c.query_fingerprint = Get<uint64_t>(raw, &pos);
  const uint8_t terms = Get<uint8_t>(raw, &pos);
  const size_t expected_payload = kFixedBytes + (terms == 255 ? 0 : 16 + 8 * size_t{terms});
  if (payload != expected_payload) return Invalid("wrong length");
  if (terms != 255) {
    c.has_stats = true;
    c.num_docs = Get<uint64_t>(raw, &pos);
    c.avg_length = Get<double>(raw, &pos);
    for (uint8_t i = 0; i < terms; ++i) c.doc_freqs.push_back(Get<uint64_t>(raw, &pos));
  }
  return c;
}

std::string NewSecret() {
  std::string secret(32, '\0');
  // Without a CSPRNG we must not mint secrets: that is a broken machine, not an input error.
  TS_CHECK(RAND_bytes(reinterpret_cast<unsigned char*>(secret.data()), 32) == 1,
           "OpenSSL RAND_bytes failed");
  return secret;
}

}  // namespace tweetsearch::aggregator
