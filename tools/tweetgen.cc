// tweetgen: writes deterministic synthetic tweets as JSON Lines.
//
//   tweetgen --count 1000000 --seed 1 --out tweets.jsonl
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/synthetic.h"

namespace {

std::string Rfc3339(int64_t unix_millis) {
  const std::time_t seconds = static_cast<std::time_t>(unix_millis / 1000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buffer[80];
  std::snprintf(buffer, sizeof(buffer), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(unix_millis % 1000));
  return buffer;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Writes deterministic synthetic tweets as JSON Lines"};
  uint64_t count = 1000;
  uint64_t seed = 1;
  std::string out = "-";
  app.add_option("-n,--count", count, "How many tweets")->capture_default_str();
  app.add_option("-s,--seed", seed, "Random seed; the same seed gives the same tweets")
      ->capture_default_str();
  app.add_option("-o,--out", out, "Output file, - for standard output")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  std::ofstream file;
  if (out != "-") {
    file.open(out);
    if (!file) {
      std::cerr << "tweetgen: cannot write " << out << "\n";
      return 1;
    }
  }
  std::ostream& os = out == "-" ? std::cout : file;
  tweetsearch::SyntheticOptions options;
  options.seed = seed;
  options.node = tweetsearch::kTweetgenNode;  // never the ids of the service's sample
  tweetsearch::SyntheticTweetGenerator generator(options);
  for (uint64_t i = 0; i < count; ++i) {
    const tweetsearch::SyntheticTweet t = generator.Next();
    nlohmann::json line = {{"id", std::to_string(t.id)},
                           {"user_id", t.user_id},
                           {"user_name", t.user_name},
                           {"text", t.text},
                           {"created_at", Rfc3339(t.created_at_ms)},
                           {"lang", t.lang},
                           {"likes", t.likes}};
    os << line.dump() << '\n';
  }
  os.flush();
  if (!os) {
    std::cerr << "tweetgen: write failed\n";
    return 1;
  }
  return 0;
}
