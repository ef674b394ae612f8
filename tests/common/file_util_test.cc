#include "common/file_util.h"

#include <gtest/gtest.h>

#include <iostream>

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

// A file replaced many times in quick succession: every replacement is a new version, though
// the kernel's coarse clock gives many of them the same modification time (the rules watcher
// once missed a change that way, and a reload never came).
TEST(FileUtilTest, EveryReplacementIsANewVersionEvenWithinOneTimeStamp) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/rules.yaml";
  ASSERT_TRUE(WriteFileAtomically(path, "a", Durability::kLater).ok());
  FileVersion previous = VersionOf(path);
  int same_mtime = 0;
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(WriteFileAtomically(path, i % 2 ? "a" : "b", Durability::kLater).ok());
    const FileVersion now = VersionOf(path);
    ASSERT_NE(now, previous) << "replacement " << i;
    same_mtime += now.mtime_ns == previous.mtime_ns;
    previous = now;
  }
  EXPECT_EQ(VersionOf(dir.path() + "/missing"), FileVersion{});
  std::cout << same_mtime << " of 200 replacements kept the previous modification time\n";
}

}  // namespace
}  // namespace tweetsearch
