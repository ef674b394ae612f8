// Clock: the one source of time for anything with a timeout, refill or timestamp.
//
// Production code takes a `Clock&` and uses SystemClock(); tests pass a ManualClock and move it by
// hand, so no test sleeps. Thread-safety: both implementations are safe to call from any thread.
#ifndef TWEETSEARCH_COMMON_CLOCK_H_
#define TWEETSEARCH_COMMON_CLOCK_H_

#include <atomic>
#include <cstdint>

namespace tweetsearch {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch (wall time; may jump when the system clock is set).
  virtual int64_t NowUnixMillis() const = 0;
  // Microseconds on a clock that never goes back (not related to the epoch): for durations.
  virtual int64_t NowMonotonicMicros() const = 0;
};

// The real wall clock. Lives for the whole program.
Clock& SystemClock();

// A clock that only moves when told to. Starts at `start_unix_millis`; its monotonic time starts
// at 0 and moves with every forward step (never with SetUnixMillis, never back).
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_unix_millis) : now_(start_unix_millis) {}
  int64_t NowUnixMillis() const override { return now_.load(std::memory_order_acquire); }
  int64_t NowMonotonicMicros() const override { return mono_us_.load(std::memory_order_acquire); }
  void AdvanceMillis(int64_t delta) {
    now_.fetch_add(delta, std::memory_order_acq_rel);
    if (delta > 0) mono_us_.fetch_add(delta * 1000, std::memory_order_acq_rel);
  }
  // Moves the monotonic time alone (the wall time keeps its milliseconds).
  void AdvanceMicros(int64_t delta) {
    if (delta > 0) mono_us_.fetch_add(delta, std::memory_order_acq_rel);
  }
  void SetUnixMillis(int64_t now) { now_.store(now, std::memory_order_release); }

 private:
  std::atomic<int64_t> now_;
  std::atomic<int64_t> mono_us_{0};
};

}  // namespace tweetsearch

#endif  // TWEETSEARCH_COMMON_CLOCK_H_
