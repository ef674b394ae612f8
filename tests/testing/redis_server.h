// A real redis-server for tests, on a free loopback port, without persistence; stopped (and
// reaped) by the destructor. Stop() and Start() play an outage on the same port.
#ifndef TWEETSEARCH_TESTS_TESTING_REDIS_SERVER_H_
#define TWEETSEARCH_TESTS_TESTING_REDIS_SERVER_H_

#include <memory>
#include <string>

#include "tests/testing/process.h"

namespace tweetsearch::testing {

class RedisServer {
 public:
  explicit RedisServer(const std::string& dir);
  // Starts it (again); false if it did not answer PING within 10 s.
  bool Start();
  void Stop();    // SIGKILL: an outage, not a shutdown
  void Pause();   // SIGSTOP: a frozen server (connections stay open, nothing answers)
  void Resume();  // SIGCONT
  int port() const { return port_; }

 private:
  std::string dir_;
  int port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace tweetsearch::testing

#endif  // TWEETSEARCH_TESTS_TESTING_REDIS_SERVER_H_
