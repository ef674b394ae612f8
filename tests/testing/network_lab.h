// NetworkLab: network namespaces for partition tests (Jepsen's nemesis, on one machine).
//
// Every process of a local cluster gets a namespace of its own, with one address; each
// namespace is joined by a veth pair to a bridge in a hub namespace, and the test's own
// namespace by one more, so the test reaches every process and every process reaches every
// other. Partitions are made of routes and links, with iproute2 only:
//   Cut(a, b)   a blackhole route for b's address in a's namespace and for a's in b's: their
//               packets vanish (connections hang and time out, as in a real partition);
//   Isolate(a)  a's link down: cut from everyone, the test included;
//   Heal()      every cut and isolation undone.
// Namespaces are named ts<test pid>-<name>; the destructor deletes them all, and the
// constructor those of test processes that died without doing so.
//
// Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and the `ip` tool: Available() says why not.
#ifndef TWEETSEARCH_TESTS_TESTING_NETWORK_LAB_H_
#define TWEETSEARCH_TESTS_TESTING_NETWORK_LAB_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace tweetsearch::testing {

class NetworkLab {
 public:
  // OK when this process can make namespaces; else why not (for GTEST_SKIP).
  static absl::Status Available();

  // Makes the hub and the test's link; `log_dir` gets the log of every `ip` command.
  explicit NetworkLab(std::string log_dir);
  ~NetworkLab();
  NetworkLab(const NetworkLab&) = delete;
  NetworkLab& operator=(const NetworkLab&) = delete;

  // False when a command failed (the log says which).
  bool ok() const { return ok_; }
  // Makes the namespace of `name` and returns its address (no port).
  std::string Add(const std::string& name);
  // What runs a command in `name`'s namespace: prefix its argv with this.
  std::vector<std::string> Exec(const std::string& name) const;
  const std::string& address(const std::string& name) const { return hosts_.at(name).address; }

  void Cut(const std::string& a, const std::string& b);
  void Isolate(const std::string& name);
  void Heal();

 private:
  struct Host {
    std::string ns;       // the namespace
    std::string address;  // in the lab's /24
    std::string hub_end;  // its veth's end on the bridge
  };
  // Runs `ip` with `args`; false (and ok_ false) if it fails.
  bool Ip(const std::vector<std::string>& args);

  std::string log_dir_;
  std::string prefix_;  // ts<pid>-
  std::string subnet_;  // 10.231.N.
  std::string hub_;
  std::map<std::string, Host> hosts_;
  std::vector<std::pair<std::string, std::string>> cuts_;
  std::vector<std::string> isolated_;
  int next_host_ = 1;
  bool ok_ = true;
};

}  // namespace tweetsearch::testing

#endif  // TWEETSEARCH_TESTS_TESTING_NETWORK_LAB_H_
