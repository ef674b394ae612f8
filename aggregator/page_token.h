// Page tokens: opaque, stateless, signed cursors for the next page of a search.
//
// A token carries what the next page needs to continue exactly where the last one stopped:
// the sort mode, the sort key of the last result, the watermark (the highest tweet id visible
// when page 1 was served, so that tweets arriving later cannot shift the pages) and "now" of
// page 1 (the recency part of best-match scores is computed against it, so scores do not drift
// between pages). It is bound to the query by a fingerprint of its text.
//
// Best-match tokens also carry the collection statistics that page 1 was scored with (document
// count, average length, the document frequency of each query term): BM25 depends on them, and
// tweets arriving between pages would otherwise move every score.
//
// Layout, before base64url: version (1 byte) | sort (1) | primary (8, IEEE double) | id (8) |
// watermark (8) | now_ms (8) | query fingerprint (8) | term count n (1; 255 = no statistics) |
// [num_docs (8) | avg_length (8, double) | n doc frequencies (8 each)] | HMAC-SHA256 of the
// preceding bytes, truncated to 16 bytes. All integers little-endian. The HMAC key is a server
// secret; a token signed with another secret (another deployment) is "foreign" and rejected like a
// tampered one.
//
// Thread-safety: PageTokenCodec is immutable after construction; any thread may use it.
#ifndef TWEETSEARCH_AGGREGATOR_PAGE_TOKEN_H_
#define TWEETSEARCH_AGGREGATOR_PAGE_TOKEN_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/ids.h"

namespace tweetsearch::aggregator {

struct PageCursor {
  int sort = 0;        // query::SortMode as int
  double primary = 0;  // sort key of the last result served
  TweetId id = 0;
  TweetId watermark = 0;
  int64_t now_ms = 0;
  uint64_t query_fingerprint = 0;
  // Scoring statistics of page 1 (best match only). doc_freqs are in the order of the query's
  // terms sorted bytewise.
  bool has_stats = false;
  uint64_t num_docs = 0;
  double avg_length = 0;
  std::vector<uint64_t> doc_freqs;  // at most 254

  bool operator==(const PageCursor&) const = default;
};

// A fingerprint of the query text, for binding tokens to their query.
uint64_t QueryFingerprint(std::string_view search_terms);

class PageTokenCodec {
 public:
  // Requires: `secret` has at least 16 bytes.
  explicit PageTokenCodec(std::string secret);

  std::string Encode(const PageCursor& cursor) const;
  // InvalidArgument for anything that is not a token this codec made: bad base64, wrong length
  // or version, or a signature that does not match (tampered, truncated or foreign).
  absl::StatusOr<PageCursor> Decode(std::string_view token) const;

 private:
  std::string secret_;
};

// 32 random bytes from OpenSSL's CSPRNG, for a new deployment's secret.
std::string NewSecret();

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_PAGE_TOKEN_H_
