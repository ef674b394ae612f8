// WaitUntil: how a test waits for something another thread or process does: it asks again and
// again until the answer is yes or a deadline passes (never one fixed sleep that hopes).
#ifndef TWEETSEARCH_TESTS_TESTING_WAIT_H_
#define TWEETSEARCH_TESTS_TESTING_WAIT_H_

#include <chrono>
#include <functional>
#include <thread>

namespace tweetsearch::testing {

// Asks `done` every `every` until it holds (true) or `timeout` has passed (false).
inline bool WaitUntil(const std::function<bool()>& done,
                      std::chrono::milliseconds timeout = std::chrono::seconds(10),
                      std::chrono::milliseconds every = std::chrono::milliseconds(100)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(every);
  }
  return true;
}

}  // namespace tweetsearch::testing

#endif  // TWEETSEARCH_TESTS_TESTING_WAIT_H_
