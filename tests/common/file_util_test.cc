#include "common/file_util.h"

#include <gtest/gtest.h>

#include "tests/testing/corpus.h"

namespace tweetsearch {
namespace {

TEST(FileUtilTest, WritesAtomicallyAndReadsBack) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/f";
  ASSERT_TRUE(WriteFileAtomically(path, "one").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "two").ok());
  EXPECT_EQ(*ReadFile(path), "two");
  EXPECT_EQ(ReadFile(dir.path() + "/missing").status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(WriteFileAtomically(dir.path() + "/no/such/dir/f", "x").ok());
}

}  // namespace
}  // namespace tweetsearch
