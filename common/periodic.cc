#include "common/periodic.h"

namespace tweetsearch {

PeriodicTask::PeriodicTask(absl::Duration interval, std::function<void()> run) {
  thread_ = std::thread([this, interval, run = std::move(run)] {
    for (;;) {
      {
        absl::MutexLock lock(&mu_);
        mu_.AwaitWithTimeout(absl::Condition(&stopping_), interval);
        if (stopping_) return;
      }
      run();
    }
  });
}

void PeriodicTask::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace tweetsearch
