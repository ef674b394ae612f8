// tweetctl against a real tweetsearchd: what it prints and its exit codes.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/testing/corpus.h"
#include "tests/testing/process.h"

namespace tweetsearch {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

class TweetctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<testing::TweetsearchdProcess>(
        TWEETSEARCHD_PATH, dir_.path() + "/data", dir_.path() + "/daemon.log");
    ASSERT_TRUE(daemon_->up()) << "tweetsearchd did not start";
  }

  // Runs tweetctl with `args` against the daemon; returns the exit code and fills `*output`.
  int Ctl(std::vector<std::string> args, std::string* output, const std::string& server = "") {
    const std::string log = dir_.path() + "/ctl" + std::to_string(runs_++) + ".log";
    std::vector<std::string> argv = {
        TWEETCTL_PATH, "--server", server.empty() ? "http://127.0.0.1:" + daemon_->port() : server};
    argv.insert(argv.end(), args.begin(), args.end());
    std::optional<int> code = testing::RunCommand(argv, log, std::chrono::minutes(2));
    *output = ReadAll(log);
    return code.value_or(-1);
  }

  std::string Write(const std::string& name, const std::string& contents) {
    const std::string path = dir_.path() + "/" + name;
    std::ofstream(path) << contents;
    return path;
  }

  testing::TempDir dir_;
  std::unique_ptr<testing::TweetsearchdProcess> daemon_;
  int runs_ = 0;
};

TEST_F(TweetctlTest, IngestsJsonLinesAndArraysAndReportsRejections) {
  std::string out;
  const std::string lines = Write("t.jsonl",
                                  "{\"id\":\"11\",\"text\":\"quokka one\"}\n"
                                  "{\"id\":\"12\",\"text\":\"quokka two\"}\n"
                                  "not json\n"
                                  "{\"id\":\"11\",\"text\":\"quokka again\"}\n");
  const std::string array = Write("timeline.json",
                                  "[{\"id_str\":\"13\",\"full_text\":\"quokka three\","
                                  "\"user\":{\"screen_name\":\"q\"}}]");
  EXPECT_EQ(Ctl({"ingest", lines, array}, &out), 1) << out;  // 1: some lines were rejected
  EXPECT_NE(out.find("accepted 3, rejected 2"), std::string::npos) << out;
  EXPECT_NE(out.find("1 × duplicate id #"), std::string::npos) << out;
  EXPECT_NE(out.find("t.jsonl:3: bad JSON"), std::string::npos) << out;

  EXPECT_EQ(Ctl({"search", "quokka", "--limit", "2"}, &out), 0) << out;
  EXPECT_NE(out.find("TWEET ID"), std::string::npos) << out;
  EXPECT_NE(out.find("quokka three"), std::string::npos) << out;
  EXPECT_NE(out.find("next page: --page-token"), std::string::npos) << out;
  EXPECT_EQ(Ctl({"search", "quokka", "--json"}, &out), 0);
  EXPECT_NE(out.find("\"tweet_id\":\"13\""), std::string::npos) << out;

  EXPECT_EQ(Ctl({"likes", "12", "--add", "4"}, &out), 0) << out;
  EXPECT_NE(out.find("12 has 4 likes"), std::string::npos) << out;
  EXPECT_EQ(Ctl({"delete", "12"}, &out), 0) << out;
  EXPECT_EQ(Ctl({"get", "12"}, &out), 4) << out;  // 4: refused (404)
  EXPECT_NE(out.find("404"), std::string::npos) << out;
}

TEST_F(TweetctlTest, CountsPrintABarPerBucketWithMatches) {
  std::string out;
  const std::string lines =
      Write("t.jsonl",
            "{\"id\":\"21\",\"text\":\"wombat a\",\"created_at\":\"2026-05-01T10:00:00Z\"}\n"
            "{\"id\":\"22\",\"text\":\"wombat b\",\"created_at\":\"2026-05-01T10:59:00Z\"}\n"
            "{\"id\":\"23\",\"text\":\"wombat c\",\"created_at\":\"2026-05-01T13:00:00Z\"}\n");
  ASSERT_EQ(Ctl({"ingest", lines}, &out), 0) << out;
  ASSERT_EQ(Ctl({"counts", "wombat", "--since", "2026-05-01T00:00:00Z", "--until",
                 "2026-05-02T00:00:00Z"},
                &out),
            0)
      << out;
  EXPECT_NE(out.find("2026-05-01T10:00:00Z           2  " + std::string(40, '#') + "\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("2026-05-01T13:00:00Z           1  " + std::string(20, '#') + "\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("3 matches from 2026-05-01T00:00:00Z to 2026-05-02T00:00:00Z, per hour "
                     "(22 empty buckets not shown)"),
            std::string::npos)
      << out;
  EXPECT_EQ(Ctl({"counts", "wombat", "--granularity", "week"}, &out), 4) << out;
  EXPECT_NE(out.find("granularity must be minute, hour or day"), std::string::npos) << out;
}

TEST_F(TweetctlTest, StreamPrintsNewMatchesAsTheyArriveAndResumes) {
  const std::string log = dir_.path() + "/stream.log";
  testing::ChildProcess stream({TWEETCTL_PATH, "--server", "http://127.0.0.1:" + daemon_->port(),
                                "stream", "wombat", "--json", "--max-events", "2"},
                               log);
  // Ingest once the stream is open (its ready event is printed).
  for (int i = 0; i < 3000 && ReadAll(log).find("\"ready\"") == std::string::npos; ++i) {
    ASSERT_FALSE(stream.Wait(std::chrono::milliseconds(10)).has_value()) << ReadAll(log);
  }
  std::string out;
  ASSERT_EQ(Ctl({"ingest", Write("w.jsonl",
                                 "{\"id\":\"31\",\"text\":\"wombat one\"}\n"
                                 "{\"id\":\"32\",\"text\":\"no match\"}\n"
                                 "{\"id\":\"33\",\"text\":\"wombat two\"}\n")},
                &out),
            0)
      << out;
  ASSERT_EQ(stream.Wait(std::chrono::seconds(60)), 0) << ReadAll(log);
  std::vector<nlohmann::json> events;
  std::istringstream lines(ReadAll(log));
  for (std::string line; std::getline(lines, line);) {
    nlohmann::json e = nlohmann::json::parse(line, nullptr, false);
    if (!e.is_discarded()) events.push_back(e);
  }
  ASSERT_EQ(events.size(), 3u) << ReadAll(log);
  EXPECT_EQ(events[0]["event"], "ready");
  EXPECT_EQ(events[1]["data"]["tweet_id"], "31");
  EXPECT_EQ(events[2]["data"]["text"], "wombat two");

  // Resumed after the first tweet, in the table form: the second one.
  ASSERT_EQ(Ctl({"stream", "wombat", "--last-event-id", events[1]["id"].get<std::string>(),
                 "--max-events", "1"},
                &out),
            0)
      << out;
  EXPECT_NE(out.find("wombat two"), std::string::npos) << out;
  EXPECT_EQ(out.find("wombat one"), std::string::npos) << out;
  EXPECT_EQ(Ctl({"stream", "wombat", "--last-event-id", "nonsense"}, &out), 4) << out;
  EXPECT_NE(out.find("not an event id"), std::string::npos) << out;
}

TEST_F(TweetctlTest, IngestsTheRealSentiment140Csv) {
  std::optional<std::string> csv = testing::Sentiment140Path();
  if (!csv.has_value()) GTEST_SKIP() << "../shared/data/sentiment140-20k.csv is absent";
  std::string out;
  EXPECT_EQ(Ctl({"ingest", *csv}, &out), 0) << out;
  EXPECT_NE(out.find("accepted 20000, rejected 0"), std::string::npos) << out;
  EXPECT_EQ(Ctl({"search", "\"good morning\""}, &out), 0) << out;
  EXPECT_NE(out.find("matches"), std::string::npos) << out;
}

TEST_F(TweetctlTest, StatusShowsTheOneProcessServer) {
  std::string out;
  EXPECT_EQ(Ctl({"status"}, &out), 0) << out;  // the demo key: readiness only
  EXPECT_NE(out.find(": ready\n"), std::string::npos) << out;
  EXPECT_NE(out.find("need an admin key"), std::string::npos) << out;
  std::ifstream key_file(dir_.path() + "/data/admin.key");
  std::string admin_key;
  key_file >> admin_key;
  ASSERT_FALSE(admin_key.empty());
  const std::string lines = Write("s.jsonl",
                                  "{\"id\":\"31\",\"text\":\"status one\"}\n"
                                  "{\"id\":\"32\",\"text\":\"status two\"}\n");
  ASSERT_EQ(Ctl({"ingest", lines}, &out), 0) << out;
  EXPECT_EQ(Ctl({"--key", admin_key, "status"}, &out), 0) << out;
  EXPECT_NE(out.find("shape: one process"), std::string::npos) << out;
  EXPECT_NE(out.find("tweets: 2 indexed"), std::string::npos) << out;
  EXPECT_EQ(Ctl({"status"}, &out, "http://127.0.0.1:1"), 3) << out;

  // keys list: the columns line up, however long the cells.
  ASSERT_EQ(Ctl({"--key", admin_key, "keys", "create", "--owner",
                 "an owner with a rather long name", "--scopes", "search,ingest,admin"},
                &out),
            0)
      << out;
  ASSERT_EQ(Ctl({"--key", admin_key, "keys", "list"}, &out), 0) << out;
  std::istringstream table(out);
  std::string header, row;
  std::getline(table, header);
  const size_t state_column = header.find("STATE");
  ASSERT_NE(state_column, std::string::npos) << out;
  int rows = 0;
  while (std::getline(table, row)) {
    ++rows;
    EXPECT_EQ(row.find_last_of(' ') + 1, state_column) << out;
  }
  EXPECT_GE(rows, 3) << out;  // the demo key, the admin key and the new one

  // Run again with its --idempotency-key, a command makes no second key and answers the first.
  const std::vector<std::string> create = {
      "--key", admin_key, "keys", "create", "--owner", "ida", "--idempotency-key", "make-ida"};
  ASSERT_EQ(Ctl(create, &out), 0) << out;
  const std::string made = out;
  ASSERT_EQ(Ctl(create, &out), 0) << out;
  EXPECT_EQ(out, made);
  ASSERT_EQ(Ctl({"--key", admin_key, "keys", "list"}, &out), 0) << out;
  ASSERT_NE(out.find(" ida "), std::string::npos) << out;
  EXPECT_EQ(out.find(" ida "), out.rfind(" ida ")) << out;
  const std::vector<std::string> revoke = {
      "--key", admin_key, "keys", "revoke", made.substr(0, 10), "--idempotency-key", "revoke-ida"};
  ASSERT_EQ(Ctl(revoke, &out), 0) << out;
  EXPECT_EQ(Ctl(revoke, &out), 0) << out;
}

TEST_F(TweetctlTest, ExitCodesSayWhatWentWrong) {
  std::string out;
  EXPECT_EQ(Ctl({"ingest", dir_.path() + "/missing.jsonl"}, &out), 2) << out;
  EXPECT_NE(out.find("cannot read"), std::string::npos) << out;
  EXPECT_EQ(Ctl({"keys", "list"}, &out), 4) << out;  // the demo key is no admin
  EXPECT_NE(out.find("lacks the 'admin' scope"), std::string::npos) << out;
  // Nothing listens on port 1 of loopback.
  EXPECT_EQ(Ctl({"search", "x"}, &out, "http://127.0.0.1:1"), 3) << out;
  EXPECT_NE(out.find("cannot reach"), std::string::npos) << out;
  EXPECT_EQ(Ctl({"search", "x"}, &out, "ftp:/nowhere"), 2) << out;
}

}  // namespace
}  // namespace tweetsearch
