#include "common/clock.h"

#include <chrono>

namespace tweetsearch {
namespace {

class RealClock final : public Clock {
 public:
  int64_t NowUnixMillis() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  int64_t NowMonotonicMicros() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
};

}  // namespace

Clock& SystemClock() {
  static RealClock* clock = new RealClock();  // never destroyed: usable during static teardown
  return *clock;
}

}  // namespace tweetsearch
