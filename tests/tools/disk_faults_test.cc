// Disk faults against the real tweetsearchd: a disk that fills up (a small tmpfs the test
// mounts), fsyncs that fail, and a SIGKILL that lands inside an index save (fsync and
// fdatasync wrapped by tests/testing/fault_fs.cc through LD_PRELOAD). In every case a write that
// cannot be made durable is refused, not acknowledged; the process stays up and recovers when
// the fault goes; and after a SIGKILL and a restart every acknowledged tweet is there.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "aggregator/api_keys.h"
#include "common/file_util.h"
#include "common/strings.h"
#include "net/http_client.h"
#include "tests/testing/corpus.h"
#include "tests/testing/process.h"

namespace tweetsearch {
namespace {

using nlohmann::json;

class DiskFaultsTest : public ::testing::Test {
 protected:
  void SetUp() override { std::filesystem::create_directories(faults_); }
  ~DiskFaultsTest() override {
    daemon_.reset();
    if (mounted_) (void)testing::RunCommand({"umount", "-l", disk_}, log_, std::chrono::minutes(1));
  }

  // Mounts a tmpfs of `mib` MiB at disk_; false (the caller skips) where mounting is not allowed.
  bool MountSmallDisk(int mib) {
    std::filesystem::create_directories(disk_);
    mounted_ = testing::RunCommand(
                   {"mount", "-t", "tmpfs", "-o", StrCat("size=", mib, "m"), "tmpfs", disk_}, log_,
                   std::chrono::minutes(1)) == std::optional<int>(0);
    return mounted_;
  }

  // Starts tweetsearchd on `data_dir` with the fault injector loaded.
  void Start(const std::string& data_dir, std::vector<std::string> flags = {}) {
    const std::string launcher = dir_.path() + "/faulty-tweetsearchd.sh";
    ASSERT_TRUE(
        WriteFileAtomically(
            launcher,
            StrCat("#!/bin/sh\nexport LD_PRELOAD=", FAULT_FS_PATH, " TS_FAULT_DIR=", faults_,
                   "\n# the injector is loaded before a sanitizer runtime; that is fine\n",
                   "export ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}",
                   "verify_asan_link_order=0\"\nexec ", TWEETSEARCHD_PATH, " \"$@\"\n"))
            .ok());
    chmod(launcher.c_str(), 0755);
    flags.insert(flags.end(), {"--checkpoint-every", "1000"});
    daemon_ = std::make_unique<testing::TweetsearchdProcess>(launcher, data_dir, log_, flags);
    ASSERT_TRUE(daemon_->up()) << ReadFile(log_).value_or("");
    client_ =
        std::make_unique<net::HttpClient>("127.0.0.1", daemon_->port(), std::chrono::seconds(30));
  }

  void Fault(const std::string& name, const std::string& pattern) {
    ASSERT_TRUE(WriteFileAtomically(faults_ + "/" + name, pattern).ok());
  }
  void Clear(const std::string& name) { std::filesystem::remove(faults_ + "/" + name); }

  // Ingests tweets next_id_ .. next_id_+n-1 (the word `tag` in each); the accepted ids join
  // acked_. Returns the HTTP status (-1 when there was no answer).
  int Ingest(int n, const std::string& tag = "plain") {
    std::string body;
    for (int i = 0; i < n; ++i) {
      StrAppend(&body, R"({"id": ")", next_id_ + i, R"(", "text": "tweet )", next_id_ + i, " ", tag,
                "\"}\n");
    }
    auto r =
        client_->Send("POST", "/v1/tweets", body, "application/x-ndjson", aggregator::kDemoKey);
    if (!r.ok()) return -1;
    const json answer = json::parse(r->body, nullptr, false);
    EXPECT_FALSE(answer.is_discarded()) << "not JSON: " << r->body.substr(0, 200);
    if (r->status == 200) {
      for (const json& line : answer["results"]) {
        if (line["status"] == "accepted") acked_.push_back(next_id_ + line["line"].get<int>() - 1);
      }
    } else {
      EXPECT_TRUE(answer.contains("error")) << r->body.substr(0, 200);
    }
    next_id_ += n;
    return r->status;
  }
  // Whether the last Ingest accepted every line.
  bool AllAccepted(int status, size_t acked_before, int n) {
    return status == 200 && acked_.size() == acked_before + static_cast<size_t>(n);
  }
  // Ingests until a batch is wholly accepted (at most `tries`, 50 ms apart).
  bool IngestUntilAccepted(int n, int tries) {
    for (int i = 0; i < tries; ++i) {
      const size_t before = acked_.size();
      if (AllAccepted(Ingest(n), before, n)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  uint64_t Metric(const std::string& series) {
    auto r = client_->Send("GET", "/metrics");
    if (!r.ok()) return 0;
    const size_t at = r->body.find("\n" + series + " ");
    return at == std::string::npos ? 0 : std::stoull(r->body.substr(at + series.size() + 2));
  }
  bool Healthy() {
    auto r = client_->Send("GET", "/healthz");
    return r.ok() && r->status == 200;
  }

  // SIGKILLs the daemon, starts it again on `data_dir` without faults, and checks that every
  // acknowledged tweet is stored and indexed.
  void KillRestartAndCheckEveryAcknowledgedTweet(const std::string& data_dir) {
    daemon_->process().Signal(SIGKILL);
    daemon_->process().Wait(std::chrono::minutes(1));
    Clear("fail");
    Clear("hang");
    Start(data_dir);
    if (HasFatalFailure()) return;
    size_t missing = 0;
    for (uint64_t id : acked_) {
      auto r = client_->Send("GET", StrCat("/v1/tweets/", id), {}, "", aggregator::kDemoKey);
      if (!r.ok() || r->status != 200) ++missing;
    }
    EXPECT_EQ(missing, 0u) << "of " << acked_.size() << " acknowledged tweets";
    EXPECT_GE(Metric("tweetsearch_index_documents"), acked_.size());
  }

  testing::TempDir dir_;
  const std::string disk_ = dir_.path() + "/disk";
  const std::string faults_ = dir_.path() + "/faults";
  const std::string log_ = dir_.path() + "/daemon.log";
  bool mounted_ = false;
  std::unique_ptr<testing::TweetsearchdProcess> daemon_;
  std::unique_ptr<net::HttpClient> client_;
  uint64_t next_id_ = 1000;
  std::vector<uint64_t> acked_;
};

TEST_F(DiskFaultsTest, AFullDiskRefusesWritesCleanlyAndTheServerRecoversWhenSpaceReturns) {
  if (!MountSmallDisk(48)) GTEST_SKIP() << "cannot mount a tmpfs here (needs root)";
  const std::string data = disk_ + "/data";
  Start(data, {"--min-free-disk-mb", "8"});
  ASSERT_FALSE(HasFatalFailure());
  for (int i = 0; i < 6; ++i) ASSERT_EQ(Ingest(500), 200);
  ASSERT_EQ(acked_.size(), 3000u);

  // Fill the disk but for 256 KiB.
  struct statvfs fs {};
  ASSERT_EQ(statvfs(disk_.c_str(), &fs), 0);
  const uint64_t free_bytes = uint64_t{fs.f_bavail} * fs.f_frsize;
  {
    std::ofstream filler(disk_ + "/filler", std::ios::binary);
    const std::string block(1 << 20, 'f');
    for (uint64_t left = free_bytes - (256 << 10); left > 0;) {
      const uint64_t n = std::min<uint64_t>(left, block.size());
      filler.write(block.data(), static_cast<std::streamsize>(n));
      left -= n;
    }
  }
  // Under the reserve: every line is refused (unavailable) before RocksDB runs out of space.
  const size_t before = acked_.size();
  EXPECT_FALSE(AllAccepted(Ingest(200), before, 200));
  EXPECT_EQ(acked_.size(), before);
  EXPECT_TRUE(Healthy()) << ReadFile(log_).value_or("");
  auto search = client_->Send("GET", "/v1/search?q=plain", {}, "", aggregator::kDemoKey);
  ASSERT_TRUE(search.ok());
  EXPECT_EQ(search->status, 200) << "searches go on while the disk is full";

  // Space returns: writes are accepted again without a restart.
  std::filesystem::remove(disk_ + "/filler");
  EXPECT_TRUE(IngestUntilAccepted(200, 200)) << ReadFile(log_).value_or("");
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Ingest(200), 200);  // across a checkpoint
  KillRestartAndCheckEveryAcknowledgedTweet(data);
}

TEST_F(DiskFaultsTest, FailedFsyncsInIngestAndCheckpointsLoseNothingAcknowledged) {
  const std::string data = dir_.path() + "/data";
  Start(data);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_EQ(Ingest(500), 200);

  // The index cannot be saved: checkpoints fail, ingest goes on (the change log keeps every
  // change since the last good checkpoint), and the next checkpoint after the fault succeeds.
  const uint64_t checkpoint = Metric("tweetsearch_checkpoint_change_sequence");
  Fault("fail", "/index/");
  for (int i = 0; i < 6; ++i) EXPECT_EQ(Ingest(500), 200);
  EXPECT_EQ(acked_.size(), 3500u);
  EXPECT_GE(Metric("tweetsearch_checkpoint_failures_total"), 1u);
  EXPECT_EQ(Metric("tweetsearch_checkpoint_change_sequence"), checkpoint);
  EXPECT_NE(ReadFile(log_).value_or("").find("checkpoint failed"), std::string::npos);
  Clear("fail");
  // The index's disk is full (writes fail with ENOSPC): the same, and no partial file is left.
  const uint64_t failures = Metric("tweetsearch_checkpoint_failures_total");
  Fault("nospace", "/index/");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Ingest(500), 200);
  EXPECT_GT(Metric("tweetsearch_checkpoint_failures_total"), failures);
  EXPECT_EQ(Metric("tweetsearch_checkpoint_change_sequence"), checkpoint);
  for (const auto& entry : std::filesystem::directory_iterator(data + "/index")) {
    EXPECT_FALSE(entry.path().string().ends_with(".tmp")) << entry.path();
  }
  Clear("nospace");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(Ingest(500), 200);
  EXPECT_GT(Metric("tweetsearch_checkpoint_change_sequence"), checkpoint);

  // The storage WAL cannot be synced: the write is refused, not acknowledged, and so is every
  // write after it (RocksDB cannot trust the WAL again in this process); reads go on.
  Fault("fail", "/storage/");
  const size_t before = acked_.size();
  EXPECT_FALSE(AllAccepted(Ingest(100), before, 100));
  // An idempotent write refused for want of storage keeps no answer: its retry does it.
  const std::string keyed = R"({"text": "idempotent through a failed fsync"})";
  auto send_keyed = [&] {
    return client_->Send("POST", "/v1/tweets", keyed, "application/x-ndjson", aggregator::kDemoKey,
                         {{"Idempotency-Key", "through-the-fault"}});
  };
  auto refused_keyed = send_keyed();
  ASSERT_TRUE(refused_keyed.ok());
  EXPECT_EQ(refused_keyed->status, 503) << refused_keyed->body;
  Clear("fail");
  EXPECT_FALSE(AllAccepted(Ingest(100), before, 100));
  EXPECT_EQ(acked_.size(), before);
  EXPECT_TRUE(Healthy()) << ReadFile(log_).value_or("");
  auto search = client_->Send("GET", "/v1/search?q=plain", {}, "", aggregator::kDemoKey);
  ASSERT_TRUE(search.ok());
  EXPECT_EQ(search->status, 200);
  auto refused = client_->Send("POST", "/v1/tweets", R"({"text": "x"})", "application/json",
                               aggregator::kDemoKey);
  ASSERT_TRUE(refused.ok());
  EXPECT_NE(refused->body.find("restart the process to recover"), std::string::npos)
      << refused->body;

  // A restart reopens the store: everything acknowledged is there and writes are taken again.
  KillRestartAndCheckEveryAcknowledgedTweet(data);
  EXPECT_EQ(Ingest(100), 200);
  EXPECT_EQ(acked_.size(), before + 100);
  auto retried_keyed = send_keyed();
  ASSERT_TRUE(retried_keyed.ok());
  EXPECT_EQ(retried_keyed->status, 200) << retried_keyed->body;
  EXPECT_EQ(retried_keyed->headers.count("idempotent-replayed"), 0u) << "a failure was kept";
  EXPECT_EQ(json::parse(retried_keyed->body)["accepted"], 1);
}

TEST_F(DiskFaultsTest, ASigkillInsideAnIndexSaveLosesNothingAcknowledged) {
  const std::string data = dir_.path() + "/data";
  Start(data);
  ASSERT_FALSE(HasFatalFailure());
  ASSERT_EQ(Ingest(500), 200);
  ASSERT_EQ(Ingest(400), 200);
  // The next checkpoint (at change 1,000) stops inside its first fsync of an index file.
  Fault("hang", "/index/");
  std::thread writer([&] {
    net::HttpClient client("127.0.0.1", daemon_->port(), std::chrono::seconds(60));
    std::string body;
    for (int i = 0; i < 200; ++i)
      StrAppend(&body, R"({"id": ")", 900000 + i, R"(", "text": "hung"})", "\n");
    (void)client.Send("POST", "/v1/tweets", body, "application/x-ndjson", aggregator::kDemoKey);
  });
  ASSERT_TRUE(testing::WaitForFile(faults_ + "/hung", std::chrono::minutes(1)).has_value());
  KillRestartAndCheckEveryAcknowledgedTweet(data);
  writer.join();
  // The batch whose checkpoint was cut was durable in storage before the save began: it is
  // back too, in storage and in the index (the restart replays the change log).
  auto r = client_->Send("GET", "/v1/search?q=hung&limit=100", {}, "", aggregator::kDemoKey);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(json::parse(r->body)["total_hits"], 200) << r->body.substr(0, 300);
}

}  // namespace
}  // namespace tweetsearch
