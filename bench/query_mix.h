// The query mixes of the benchmarks, drawn from a vocabulary's frequency ranks as users would
// type them: mostly words of middling frequency, some very common ones.
#ifndef TWEETSEARCH_BENCH_QUERY_MIX_H_
#define TWEETSEARCH_BENCH_QUERY_MIX_H_

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace tweetsearch::bench {

struct QueryKind {
  std::string name;
  std::vector<std::string> queries;
};

inline std::vector<QueryKind> MakeQueries(const std::vector<std::string>& words_by_rank, size_t count,
                                   uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto word = [&] {
    // Log-uniform over ranks 1..2000: common and middling words alike.
    const double r = std::exp(std::uniform_real_distribution<double>(0, std::log(2000.0))(rng));
    return words_by_rank[std::min(words_by_rank.size() - 1, static_cast<size_t>(r))];
  };
  // n distinct words (a user does not type "i i").
  auto words = [&](size_t n) {
    std::vector<std::string> w;
    while (w.size() < n) {
      std::string candidate = word();
      if (std::find(w.begin(), w.end(), candidate) == w.end()) w.push_back(candidate);
    }
    return w;
  };
  std::vector<QueryKind> kinds = {{"1 word", {}}, {"2-word AND", {}}, {"3-word AND", {}},
                                  {"2-word OR", {}}, {"mixed", {}}};
  for (size_t i = 0; i < count; ++i) {
    kinds[0].queries.push_back(word());
    const auto two = words(2), three = words(3), four = words(4), pair = words(2);
    kinds[1].queries.push_back(two[0] + " " + two[1]);
    kinds[2].queries.push_back(three[0] + " " + three[1] + " " + three[2]);
    kinds[3].queries.push_back(pair[0] + " OR " + pair[1]);
    kinds[4].queries.push_back("(" + four[0] + " OR " + four[1] + ") " + four[2] + " -" + four[3]);
  }
  return kinds;
}


}  // namespace tweetsearch::bench

#endif  // TWEETSEARCH_BENCH_QUERY_MIX_H_
