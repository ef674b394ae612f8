#include "tools/ctl/ingest_source.h"

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/strings.h"
#include "common/tweet_csv.h"

namespace tweetsearch::ctl {

using nlohmann::json;

absl::StatusOr<std::string> Sentiment140ToJson(std::string_view csv_line) {
  absl::StatusOr<ImportedTweet> t = ParseSentiment140Line(csv_line);
  if (!t.ok()) return t.status();
  // The corpus has no likes: imported tweets start at 0 (benchmarks use the derived ones).
  json line = {{"id", StrCat(t->id)}, {"user_id", StrCat(t->user_id)},  {"user_name", t->user_name},
               {"text", t->text},     {"created_at", t->created_at_ms}, {"lang", "en"},
               {"likes", 0}};
  return line.dump(-1, ' ', false, json::error_handler_t::replace);
}

absl::StatusOr<std::unique_ptr<IngestSource>> IngestSource::Open(
    const std::vector<std::string>& files, size_t batch_lines, size_t batch_bytes) {
  uint64_t total = 0;
  for (const std::string& f : files) {
    if (f == "-") continue;
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(f, ec);
    if (ec) return absl::InvalidArgumentError(StrCat("cannot read ", f, ": ", ec.message()));
    total += size;
  }
  return std::unique_ptr<IngestSource>(new IngestSource(files, batch_lines, batch_bytes, total));
}

bool IngestSource::OpenNext() {
  while (next_file_ < files_.size()) {
    current_ = files_[next_file_++];
    line_ = 0;
    array_.clear();
    array_next_ = 0;
    csv_ = current_.ends_with(".csv") || current_.ends_with(".CSV");
    if (current_ == "-") {
      in_ = std::make_unique<std::istream>(std::cin.rdbuf());
    } else {
      auto file = std::make_unique<std::ifstream>(current_, std::ios::binary);
      if (!*file) {
        rejects_.push_back({current_, "cannot open the file"});
        continue;
      }
      in_ = std::move(file);
    }
    // A JSON array file is read whole (arrays are how v1.1 timelines come).
    if (!csv_) {
      const int first = (*in_ >> std::ws).peek();
      if (first == '[') {
        std::stringstream all;
        all << in_->rdbuf();
        json array = json::parse(all.str(), nullptr, false);
        if (array.is_discarded() || !array.is_array()) {
          rejects_.push_back({current_, "the file starts with '[' but is not a JSON array"});
          bytes_read_ += all.str().size();
          continue;
        }
        for (const json& element : array) {
          array_.push_back(element.dump(-1, ' ', false, json::error_handler_t::replace));
        }
        bytes_read_ += all.str().size();
        in_.reset();
      }
    }
    return true;
  }
  return false;
}

std::optional<std::string> IngestSource::NextLine(std::string* origin) {
  while (true) {
    if (in_ == nullptr && array_next_ >= array_.size()) {
      if (!OpenNext()) return std::nullopt;
    }
    if (array_next_ < array_.size()) {
      *origin = StrCat(current_, "[", array_next_, "]");
      return std::move(array_[array_next_++]);
    }
    if (in_ == nullptr) continue;
    std::string line;
    if (!std::getline(*in_, line)) {
      in_.reset();
      continue;
    }
    ++line_;
    bytes_read_ += line.size() + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    *origin = StrCat(current_, ":", line_);
    if (!csv_) return line;
    absl::StatusOr<std::string> converted = Sentiment140ToJson(line);
    if (converted.ok()) return *std::move(converted);
    rejects_.push_back({*origin, std::string(converted.status().message())});
  }
}

std::optional<Batch> IngestSource::NextBatch() {
  absl::MutexLock lock(&mu_);
  Batch batch;
  std::string origin;
  const uint64_t before = bytes_read_.load(std::memory_order_relaxed);
  while (batch.origins.size() < batch_lines_ && batch.body.size() < batch_bytes_) {
    std::optional<std::string> line = NextLine(&origin);
    if (!line.has_value()) break;
    batch.body += *line;
    batch.body += '\n';
    batch.origins.push_back(origin);
  }
  if (batch.origins.empty()) return std::nullopt;
  batch.source_bytes = bytes_read_.load(std::memory_order_relaxed) - before;
  return batch;
}

std::vector<LocalReject> IngestSource::local_rejects() const {
  absl::MutexLock lock(&mu_);
  return rejects_;
}

}  // namespace tweetsearch::ctl
