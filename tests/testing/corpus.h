// Test helpers: the shared real-tweet corpus and temporary directories.
#ifndef TWEETSEARCH_TESTS_TESTING_CORPUS_H_
#define TWEETSEARCH_TESTS_TESTING_CORPUS_H_

#include <optional>
#include <string>
#include <vector>

#include "indexer/index/segment.h"

namespace tweetsearch::testing {

// Path of ../shared/data/sentiment140-20k.csv, or nullopt when it is not there.
std::optional<std::string> Sentiment140Path();

// Parses the Sentiment140 CSV (Latin-1, every field quoted) into index documents. Likes are
// derived from the id, deterministically, since the corpus has none.
std::vector<index::IndexDoc> LoadSentiment140(const std::string& path);

// A fresh directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace tweetsearch::testing

#endif  // TWEETSEARCH_TESTS_TESTING_CORPUS_H_
