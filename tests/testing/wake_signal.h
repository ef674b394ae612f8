// WakeSignal: what a test's reader of a stream waits on between reads: the stream's wake
// callback sets it, the reader waits for it with a deadline (never a fixed sleep).
//
// std::mutex rather than absl::Mutex: ThreadSanitizer sees its ordering (as the hub's).
#ifndef TWEETSEARCH_TESTS_TESTING_WAKE_SIGNAL_H_
#define TWEETSEARCH_TESTS_TESTING_WAKE_SIGNAL_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>

namespace tweetsearch::testing {

class WakeSignal {
 public:
  // The callback to hand the stream (OnReady); it must not outlive this.
  std::function<void()> Callback() {
    return [this] {
      std::lock_guard<std::mutex> lock(mu_);
      woken_ = true;
      cv_.notify_one();
    };
  }
  // Waits until the callback ran since the last wait; false at `deadline`.
  bool Wait(std::chrono::steady_clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_until(lock, deadline, [this] { return woken_; })) return false;
    woken_ = false;
    return true;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;
};

}  // namespace tweetsearch::testing

#endif  // TWEETSEARCH_TESTS_TESTING_WAKE_SIGNAL_H_
