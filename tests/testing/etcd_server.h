// A real etcd for tests (Debian's etcd-server), on free loopback ports, its data in a folder
// of the test; SIGKILLed and reaped by the destructor.
#ifndef TWEETSEARCH_TESTS_TESTING_ETCD_SERVER_H_
#define TWEETSEARCH_TESTS_TESTING_ETCD_SERVER_H_

#include <memory>
#include <string>

#include "tests/testing/process.h"

namespace tweetsearch::testing {

class EtcdServer {
 public:
  // Data in `dir`/etcd, log in `dir`/etcd.log; not started yet.
  explicit EtcdServer(const std::string& dir);
  // Starts it; false if it did not answer within 10 s.
  bool Start();
  // HOST:PORT of its client URL.
  const std::string& endpoint() const { return endpoint_; }
  ChildProcess& process() { return *process_; }

 private:
  std::string dir_;
  std::string endpoint_;
  int peer_port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace tweetsearch::testing

#endif  // TWEETSEARCH_TESTS_TESTING_ETCD_SERVER_H_
