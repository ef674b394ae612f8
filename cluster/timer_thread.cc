#include "cluster/timer_thread.h"

#include <utility>

namespace tweetsearch::cluster {

namespace {

// `t` rounded up to a whole millisecond: callbacks due within one millisecond share a wake.
TimerThread::Time CeilMillis(TimerThread::Time t) {
  if (t > TimerThread::Time::max() - std::chrono::milliseconds(1)) return t;
  return std::chrono::ceil<std::chrono::milliseconds>(t);
}

}  // namespace

TimerThread::TimerThread() : thread_([this] { Loop(); }) {}

TimerThread::~TimerThread() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void TimerThread::At(Time when, absl::AnyInvocable<void() &&> callback) {
  bool wake;
  {
    std::lock_guard lock(mu_);
    entries_.push(Entry{when, next_order_++, std::move(callback)});
    // Woken only when this entry is due before the time it sleeps until.
    wake = MustWakeLocked();
  }
  if (wake) wake_.notify_one();
}

uint64_t TimerThread::runs() const {
  std::lock_guard lock(mu_);
  return runs_;
}

uint64_t TimerThread::wakes() const {
  std::lock_guard lock(mu_);
  return wakes_;
}

bool TimerThread::MustWakeLocked() const {
  return stop_ || (!entries_.empty() && CeilMillis(entries_.top().when) < sleeps_until_);
}

void TimerThread::Loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    sleeps_until_ = entries_.empty() ? Time::max() : CeilMillis(entries_.top().when);
    auto must_wake = [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return MustWakeLocked(); };
    if (sleeps_until_ == Time::max()) {
      wake_.wait(lock, must_wake);
    } else {
      wake_.wait_until(lock, sleeps_until_, must_wake);
    }
    sleeps_until_ = Time::min();  // awake: At() need not wake it
    if (stop_) return;
    ++wakes_;
    const Time now = std::chrono::system_clock::now();
    while (!entries_.empty() && entries_.top().when <= now) {
      absl::AnyInvocable<void() &&> callback = std::move(entries_.top().callback);
      entries_.pop();
      ++runs_;
      lock.unlock();
      std::move(callback)();
      callback = nullptr;  // what it holds is released unlocked, too
      lock.lock();
      if (stop_) return;
    }
  }
}

}  // namespace tweetsearch::cluster
