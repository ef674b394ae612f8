// IngestSource: reads tweet files for `tweetctl ingest` and hands out batches of JSON lines in
// the shape POST /v1/tweets takes.
//
// Formats, chosen by the file name: "*.csv" is the Sentiment140 CSV (Latin-1, converted to
// UTF-8 JSON here); anything else is JSON: JSON Lines (one tweet object per line, ours or
// Twitter API v1.1) or one JSON array of tweet objects (the shape of v1.1 timelines). "-" reads
// standard input as JSON Lines.
//
// Thread-safety: NextBatch() may be called from several sender threads.
#ifndef TWEETSEARCH_TOOLS_CTL_INGEST_SOURCE_H_
#define TWEETSEARCH_TOOLS_CTL_INGEST_SOURCE_H_

#include <atomic>
#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace tweetsearch::ctl {

struct Batch {
  std::string body;                  // JSON Lines
  std::vector<std::string> origins;  // "file:line" of each line of `body`
  uint64_t source_bytes = 0;         // of the files, read for this batch (for progress)
};

// A line that could not be turned into a tweet before sending (a malformed CSV line).
struct LocalReject {
  std::string origin;
  std::string reason;
};

class IngestSource {
 public:
  // InvalidArgument (naming the file) if a file cannot be opened or a JSON array is malformed.
  static absl::StatusOr<std::unique_ptr<IngestSource>> Open(const std::vector<std::string>& files,
                                                            size_t batch_lines, size_t batch_bytes);

  // The next batch, or nullopt at the end of the last file.
  std::optional<Batch> NextBatch();

  uint64_t total_bytes() const { return total_bytes_; }  // 0 when unknown (stdin)
  uint64_t bytes_read() const { return bytes_read_.load(std::memory_order_relaxed); }  // ahead
  std::vector<LocalReject> local_rejects() const;

 private:
  IngestSource(std::vector<std::string> files, size_t batch_lines, size_t batch_bytes,
               uint64_t total_bytes)
      : files_(std::move(files)),
        batch_lines_(batch_lines),
        batch_bytes_(batch_bytes),
        total_bytes_(total_bytes) {}
  // Next tweet as one JSON line, or nullopt at the end of all input.
  std::optional<std::string> NextLine(std::string* origin) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool OpenNext() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::vector<std::string> files_;
  const size_t batch_lines_, batch_bytes_;
  const uint64_t total_bytes_;
  std::atomic<uint64_t> bytes_read_{0};
  mutable absl::Mutex mu_;
  size_t next_file_ ABSL_GUARDED_BY(mu_) = 0;
  std::string current_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<std::istream> in_ ABSL_GUARDED_BY(mu_);
  bool csv_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t line_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> array_ ABSL_GUARDED_BY(mu_);  // elements of a JSON array file
  size_t array_next_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<LocalReject> rejects_ ABSL_GUARDED_BY(mu_);
};

// One Sentiment140 CSV line as a JSON line for POST /v1/tweets.
absl::StatusOr<std::string> Sentiment140ToJson(std::string_view csv_line);

}  // namespace tweetsearch::ctl

#endif  // TWEETSEARCH_TOOLS_CTL_INGEST_SOURCE_H_
