// PeriodicTask: runs a function on its own thread every `interval`, until stopped.
//
// The first run is one interval after construction. Stop() (and the destructor) wakes the
// thread at once, waits for a run in progress to finish, and joins.
//
// Thread-safety: Stop() may be called from any thread but the task's own.
#ifndef TWEETSEARCH_COMMON_PERIODIC_H_
#define TWEETSEARCH_COMMON_PERIODIC_H_

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tweetsearch {

class PeriodicTask {
 public:
  PeriodicTask(absl::Duration interval, std::function<void()> run);
  ~PeriodicTask() { Stop(); }
  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;

  // Safe to call more than once.
  void Stop();

 private:
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tweetsearch

#endif  // TWEETSEARCH_COMMON_PERIODIC_H_
