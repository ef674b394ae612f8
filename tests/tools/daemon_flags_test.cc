// tweetsearchd's command line: defaults, then the --config file's keys, then the flags given.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/testing/corpus.h"
#include "tools/daemon/flags.h"

namespace tweetsearch::tools {
namespace {

// Parses `args` (without the program name) as tweetsearchd would and returns the config.
absl::StatusOr<aggregator::DaemonConfig> Parse(std::vector<std::string> args,
                                               std::string* topology = nullptr) {
  CLI::App app;
  DaemonFlags flags(app);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes them reversed
  app.parse(reversed);
  if (topology != nullptr) *topology = flags.topology_file();
  return flags.Config();
}

TEST(DaemonFlagsTest, WithoutAFileFlagsSetTheirFieldsAndTheRestKeepTheDefaults) {
  absl::StatusOr<aggregator::DaemonConfig> config =
      Parse({"--data-dir", "/tmp/x", "--http-port", "0", "--demo-key-scopes", "search,ingest",
             "--min-free-disk-mb", "5", "--no-demo-key"});
  ASSERT_TRUE(config.ok()) << config.status();
  const aggregator::DaemonConfig defaults;
  EXPECT_EQ(config->data_dir, "/tmp/x");
  EXPECT_EQ(config->http.port, 0);
  EXPECT_EQ(config->demo_key_scopes, (std::vector<std::string>{"search", "ingest"}));
  EXPECT_EQ(config->engine.store.min_free_disk_bytes, uint64_t{5} << 20);
  EXPECT_FALSE(config->demo_key);
  EXPECT_EQ(config->grpc_port, defaults.grpc_port);
  EXPECT_EQ(config->sample, defaults.sample);
  EXPECT_EQ(config->log_level, defaults.log_level);
}

TEST(DaemonFlagsTest, FlagsGivenWinOverTheFileAndTheFileOverTheDefaults) {
  testing::TempDir dir;
  const std::string file = dir.path() + "/tweetsearchd.yaml";
  std::ofstream(file) << "data_dir: /from/file\nhttp_port: 1234\ngrpc_port: 4321\nsample: 7\n"
                         "min_free_disk_mb: 9\nlog_level: warn\n";
  std::string topology;
  absl::StatusOr<aggregator::DaemonConfig> config = Parse(
      {"--config", file, "--grpc-port", "-1", "--sample", "0", "--topology", "t.yaml"}, &topology);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->data_dir, "/from/file");
  EXPECT_EQ(config->http.port, 1234);
  EXPECT_EQ(config->grpc_port, -1);
  EXPECT_EQ(config->sample, 0u);
  EXPECT_EQ(config->engine.store.min_free_disk_bytes, uint64_t{9} << 20);
  EXPECT_EQ(config->log_level, "warn");
  EXPECT_TRUE(config->demo_key);
  EXPECT_EQ(topology, "t.yaml");

  std::ofstream(file) << "no_such_key: 1\n";
  absl::StatusOr<aggregator::DaemonConfig> bad = Parse({"--config", file});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_NE(bad.status().message().find("no_such_key"), std::string::npos) << bad.status();
}

TEST(DaemonFlagsTest, OutOfRangeValuesAreRefusedByTheParser) {
  EXPECT_THROW((void)Parse({"--http-port", "70000"}), CLI::ValidationError);
  EXPECT_THROW((void)Parse({"--grpc-port", "-2"}), CLI::ValidationError);
  EXPECT_THROW((void)Parse({"--usage-flush-ms", "-1"}), CLI::ValidationError);
}

}  // namespace
}  // namespace tweetsearch::tools
