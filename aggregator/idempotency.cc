#include "aggregator/idempotency.h"

#include <openssl/sha.h>

#include "common/strings.h"

namespace tweetsearch::aggregator {
namespace {

// Appends `field` so that no two sequences of fields encode alike: its length, then its bytes.
void Append(std::string& out, std::string_view field) {
  out += StrCat(field.size(), ':');
  out += field;
}

std::string Sha256(std::string_view bytes) {
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size(), digest);
  return std::string(reinterpret_cast<const char*>(digest), sizeof digest);
}

}  // namespace

absl::Status CheckIdempotencyKey(std::string_view key) {
  if (key.empty() || key.size() > kMaxIdempotencyKeyBytes) {
    return absl::InvalidArgumentError(StrCat(
        "an Idempotency-Key has 1 to ", kMaxIdempotencyKeyBytes, " characters, not ", key.size()));
  }
  for (char c : key) {
    if (c < ' ' || c > '~') {
      return absl::InvalidArgumentError(
          "an Idempotency-Key is printable ASCII (a UUID, for example)");
    }
  }
  return absl::OkStatus();
}

std::string IngestFingerprint(const std::vector<absl::StatusOr<NewTweet>>& lines) {
  std::string canonical = "ingest";
  for (const absl::StatusOr<NewTweet>& line : lines) {
    if (!line.ok()) {
      Append(canonical, "error");
      Append(canonical, StrCat(line.status().message()));
      continue;
    }
    const NewTweet& t = *line;
    Append(canonical, t.id.has_value() ? StrCat(*t.id) : "-");
    Append(canonical, StrCat(t.user_id));
    Append(canonical, t.user_name);
    Append(canonical, t.text);
    Append(canonical, t.created_at_ms.has_value() ? StrCat(*t.created_at_ms) : "-");
    Append(canonical, t.lang);
    Append(canonical, StrCat(t.likes));
  }
  return Sha256(canonical);
}

std::string DeleteFingerprint(TweetId id) { return Sha256(StrCat("delete:", id)); }

std::string LikesFingerprint(TweetId id, int64_t value, bool add) {
  return Sha256(StrCat("likes:", id, add ? ":add:" : ":set:", value));
}

WriteOnce MakeWriteOnce(std::string_view key_id, std::string_view client_key,
                        std::string fingerprint) {
  WriteOnce once;
  once.key = StrCat(key_id, "/", client_key);
  once.fingerprint = std::move(fingerprint);
  return once;
}

}  // namespace tweetsearch::aggregator
