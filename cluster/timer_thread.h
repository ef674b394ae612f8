// TimerThread: runs callbacks at their times, on one thread of its own. A front door's
// fan-outs (cluster/fan_out.h) set their hedges and deadlines here, so no thread has to wait
// beside a search while its calls are out.
//
// There is no cancelling: a callback whose work was done meanwhile is run at its time all the
// same and finds nothing to do (a fan-out's holds a weak pointer). So the thread wakes only for
// callbacks that fall due, never for one set or made needless, and it wakes at most once a
// millisecond: callbacks due within the same millisecond run together, in the order of their
// times. A callback runs no earlier than its time, and late by the time the callbacks before
// it take: it must not block.
//
// Thread-safety: At() may be called from any thread, a callback's included. The destructor
// runs no callback that was still waiting; it destroys them.
#ifndef TWEETSEARCH_CLUSTER_TIMER_THREAD_H_
#define TWEETSEARCH_CLUSTER_TIMER_THREAD_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <queue>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"

namespace tweetsearch::cluster {

class TimerThread {
 public:
  using Time = std::chrono::system_clock::time_point;

  TimerThread();
  ~TimerThread();
  TimerThread(const TimerThread&) = delete;
  TimerThread& operator=(const TimerThread&) = delete;

  // Runs `callback` once `when` has come (at once, on the timer's thread, if it has).
  void At(Time when, absl::AnyInvocable<void() &&> callback);

  // Callbacks run so far, and times the thread woke to run some (for tests and benchmarks).
  uint64_t runs() const;
  uint64_t wakes() const;

 private:
  struct Entry {
    Time when;
    uint64_t order;  // of At() calls: equal times run in the order they were set
    mutable absl::AnyInvocable<void() &&> callback;
    bool operator>(const Entry& other) const {
      return when != other.when ? when > other.when : order > other.order;
    }
  };

  void Loop();
  // Whether the thread must wake: to stop, or for an entry earlier than it sleeps until.
  bool MustWakeLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  // A std::mutex: ThreadSanitizer sees its ordering (the system's Abseil is not instrumented).
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> entries_ ABSL_GUARDED_BY(mu_);
  Time sleeps_until_ ABSL_GUARDED_BY(mu_) = Time::max();
  uint64_t next_order_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t runs_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t wakes_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once the rest is built
};

}  // namespace tweetsearch::cluster

#endif  // TWEETSEARCH_CLUSTER_TIMER_THREAD_H_
