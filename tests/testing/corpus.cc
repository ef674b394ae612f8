#include "tests/testing/corpus.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/tweet_csv.h"
#include "indexer/index/index.h"
#include "indexer/index/tweet_sources.h"

namespace tweetsearch::testing {

std::optional<std::string> Sentiment140Path() {
  std::string path = std::string(TWEETSEARCH_SHARED_DATA) + "/sentiment140-20k.csv";
  if (!std::filesystem::exists(path)) return std::nullopt;
  return path;
}

std::vector<index::IndexDoc> LoadSentiment140(const std::string& path) {
  std::vector<index::IndexDoc> docs;
  absl::StatusOr<std::vector<ImportedTweet>> tweets = ReadSentiment140(path);
  if (!tweets.ok()) return docs;
  for (ImportedTweet& t : *tweets) docs.push_back(index::ToIndexDoc(std::move(t)));
  return docs;
}

TempDir::TempDir() {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "tweetsearch-test-XXXXXX").string();
  char* made = ::mkdtemp(pattern.data());
  path_ = made == nullptr ? std::string() : std::string(made);
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) std::filesystem::remove_all(path_, ec);
}

}  // namespace tweetsearch::testing
