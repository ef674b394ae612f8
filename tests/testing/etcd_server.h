// A real etcd for tests (Debian's etcd-server), on free loopback ports, its data in a folder
// of the test; SIGKILLed and reaped by the destructor.
#ifndef TWEETSEARCH_TESTS_TESTING_ETCD_SERVER_H_
#define TWEETSEARCH_TESTS_TESTING_ETCD_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "tests/testing/process.h"

namespace tweetsearch::testing {

class EtcdServer {
 public:
  // Data in `dir`/etcd, log in `dir`/etcd.log; not started yet. On free loopback ports, or
  // with `host`, on its ports 2379 and 2380, run through `exec` (a network namespace's).
  explicit EtcdServer(const std::string& dir, const std::string& host = {},
                      std::vector<std::string> exec = {});
  // Starts it; false if it did not answer within 10 s.
  bool Start();
  // HOST:PORT of its client URL.
  const std::string& endpoint() const { return endpoint_; }
  ChildProcess& process() { return *process_; }

 private:
  std::string dir_;
  std::string endpoint_;
  std::string peer_url_;
  std::vector<std::string> exec_;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace tweetsearch::testing

#endif  // TWEETSEARCH_TESTS_TESTING_ETCD_SERVER_H_
