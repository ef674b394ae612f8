// ParetoLikes: likes drawn as tweets' likes fall, by a power law, for tests of the structures
// that bound scores by likes (champions, likes bands, tiers).
#ifndef TWEETSEARCH_TESTS_TESTING_PARETO_H_
#define TWEETSEARCH_TESTS_TESTING_PARETO_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>

namespace tweetsearch::testing {

// P(likes >= x) ~ x^-1.1, up to `cap`.
template <typename Rng>
uint32_t ParetoLikes(Rng& rng, double cap = 1e6) {
  const double u = std::uniform_real_distribution<double>(0, 1)(rng);
  return static_cast<uint32_t>(std::min(std::pow(1.0 - u, -1.0 / 1.1) - 1, cap));
}

}  // namespace tweetsearch::testing

#endif  // TWEETSEARCH_TESTS_TESTING_PARETO_H_
