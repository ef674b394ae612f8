// WakeWord: a 32-bit word one thread sleeps on until another changes it and wakes it (a Linux
// futex), with a deadline.
//
// Why not a condition variable (docs/limiter.md, "Redis backend"): a lane's leader hands each
// pipelined caller its answer. Signalled under the lane's mutex, every woken caller first
// blocked again on that mutex, still held by the leader, and was woken a second time when the
// leader let go: at 8 callers, 2.5 futex calls and 1.8 context switches per decision. A word
// needs no mutex to wait on: set (under whatever lock orders it), then woken after the lock is
// let go, each caller wakes once.
//
// Waking after the lock is let go means the sleeper may already have seen the word change
// (spuriously woken, or past its deadline), returned, and ended the word's lifetime. Wake()
// therefore only hands the word's address to the kernel, which reads nothing there for a
// process-private futex; at worst it wakes another sleeper at that address, whose wait, as
// every wait here, rechecks its word.
//
// Thread-safety: any thread may Set, Wake and read; the word's owner waits.
#ifndef TWEETSEARCH_LIMITER_WAKE_WORD_H_
#define TWEETSEARCH_LIMITER_WAKE_WORD_H_

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <ctime>

namespace tweetsearch::limiter {

class WakeWord {
 public:
  explicit WakeWord(uint32_t value = 0) : word_(value) {}
  WakeWord(const WakeWord&) = delete;
  WakeWord& operator=(const WakeWord&) = delete;

  uint32_t load() const { return word_.load(std::memory_order_acquire); }
  // What was written before Set is seen by whoever loads `value`.
  void Set(uint32_t value) { word_.store(value, std::memory_order_release); }

  // The address Wake() takes: kept, so that a word may be woken after its lock is let go.
  std::atomic<uint32_t>* address() { return &word_; }

  // Wakes the one thread sleeping on the word at `address` (if any).
  static void Wake(std::atomic<uint32_t>* address) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(address), FUTEX_WAKE_PRIVATE, 1, nullptr,
            nullptr, 0);
  }

  // Sleeps while the word holds `value`, until `deadline` (steady clock). Returns the word's
  // new value, or `value` if the deadline passed first.
  uint32_t WaitWhile(uint32_t value, std::chrono::steady_clock::time_point deadline) {
    return Wait(value, &deadline);
  }

  // Sleeps while the word holds `value`, however long.
  uint32_t WaitWhile(uint32_t value) { return Wait(value, nullptr); }

 private:
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) &&
                std::atomic<uint32_t>::is_always_lock_free);
  // The waits above; no deadline (null): however long.
  uint32_t Wait(uint32_t value, const std::chrono::steady_clock::time_point* deadline) {
    for (uint32_t now_value = load(); now_value == value; now_value = load()) {
      timespec timeout{};
      if (deadline != nullptr) {
        const auto left = *deadline - std::chrono::steady_clock::now();
        if (left <= std::chrono::steady_clock::duration::zero()) return value;
        const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
        timeout = {static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
      }
      // Woken, the word changed first (EAGAIN), a signal (EINTR) or the timeout: look again.
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word_), FUTEX_WAIT_PRIVATE, value,
              deadline != nullptr ? &timeout : nullptr, nullptr, 0);
    }
    return load();
  }

  std::atomic<uint32_t> word_;
};

}  // namespace tweetsearch::limiter

#endif  // TWEETSEARCH_LIMITER_WAKE_WORD_H_
