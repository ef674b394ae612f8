#include "cluster/timer_thread.h"

#include <utility>

#include "absl/time/time.h"

namespace tweetsearch::cluster {

namespace {

// `t` rounded up to a whole millisecond: callbacks due within one millisecond share a wake.
TimerThread::Time CeilMillis(TimerThread::Time t) {
  return std::chrono::ceil<std::chrono::milliseconds>(t);
}

}  // namespace

TimerThread::TimerThread() : thread_([this] { Loop(); }) {}

TimerThread::~TimerThread() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void TimerThread::At(Time when, absl::AnyInvocable<void() &&> callback) {
  // absl::Mutex evaluates the sleeping thread's condition on unlock: it is woken only when
  // this entry is due before the time it sleeps until.
  absl::MutexLock lock(&mu_);
  entries_.push(Entry{when, next_order_++, std::move(callback)});
}

uint64_t TimerThread::runs() const {
  absl::MutexLock lock(&mu_);
  return runs_;
}

uint64_t TimerThread::wakes() const {
  absl::MutexLock lock(&mu_);
  return wakes_;
}

bool TimerThread::MustWakeLocked() const {
  return stop_ || (!entries_.empty() && CeilMillis(entries_.top().when) < sleeps_until_);
}

void TimerThread::Loop() {
  absl::MutexLock lock(&mu_);
  for (;;) {
    sleeps_until_ = entries_.empty() ? Time::max() : CeilMillis(entries_.top().when);
    const absl::Condition must_wake(this, &TimerThread::MustWakeLocked);
    if (sleeps_until_ == Time::max()) {
      mu_.Await(must_wake);
    } else {
      mu_.AwaitWithDeadline(must_wake, absl::FromChrono(sleeps_until_));
    }
    sleeps_until_ = Time::min();  // awake: At() need not wake it
    if (stop_) return;
    ++wakes_;
    const Time now = std::chrono::system_clock::now();
    while (!entries_.empty() && entries_.top().when <= now) {
      absl::AnyInvocable<void() &&> callback = std::move(entries_.top().callback);
      entries_.pop();
      ++runs_;
      mu_.Unlock();
      std::move(callback)();
      callback = nullptr;  // what it holds is released unlocked, too
      mu_.Lock();
      if (stop_) return;
    }
  }
}

}  // namespace tweetsearch::cluster
