// Idempotency keys as the front door takes them (HTTP's Idempotency-Key header, gRPC's
// idempotency_key field): checked, scoped to the caller's API key, and paired with a
// fingerprint of what was asked. The backends keep the records (storage/write_records.h).
#ifndef TWEETSEARCH_AGGREGATOR_IDEMPOTENCY_H_
#define TWEETSEARCH_AGGREGATOR_IDEMPOTENCY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "aggregator/backend.h"
#include "common/ids.h"

namespace tweetsearch::aggregator {

inline constexpr size_t kMaxIdempotencyKeyBytes = 255;

// InvalidArgument unless `key` is 1 to 255 bytes of printable ASCII (space to '~'), as
// clients send UUIDs or other tokens.
absl::Status CheckIdempotencyKey(std::string_view key);

// The fingerprints of the three writes: SHA-256 of the call as the backend sees it, so that a
// retry sent over HTTP or gRPC, with its JSON spelled differently, is the same request.
std::string IngestFingerprint(const std::vector<absl::StatusOr<NewTweet>>& lines);
std::string DeleteFingerprint(TweetId id);
std::string LikesFingerprint(TweetId id, int64_t value, bool add);

// The write's key as the backend keeps it: the caller's key id, '/', the client's key.
WriteOnce MakeWriteOnce(std::string_view key_id, std::string_view client_key,
                        std::string fingerprint);

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_IDEMPOTENCY_H_
