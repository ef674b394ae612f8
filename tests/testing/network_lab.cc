#include "tests/testing/network_lab.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_join.h"
#include "common/strings.h"
#include "tests/testing/process.h"

namespace tweetsearch::testing {
namespace {

constexpr const char* kIp = "/usr/sbin/ip";

// The namespaces `ip netns list` shows.
std::vector<std::string> ListNamespaces(const std::string& log) {
  std::vector<std::string> out;
  if (!RunCommand({kIp, "netns", "list"}, log, std::chrono::seconds(10)).has_value()) return out;
  std::ifstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string name;
    if (words >> name && name.starts_with("ts") && name.find('-') != std::string::npos) {
      out.push_back(name);
    }
  }
  return out;
}

}  // namespace

absl::Status NetworkLab::Available() {
  if (geteuid() != 0) {
    return absl::UnavailableError("partition tests need root (network namespaces)");
  }
  if (access(kIp, X_OK) != 0) return absl::UnavailableError("partition tests need iproute2 (ip)");
  // Root in a container may still lack the capabilities: try one.
  const std::string probe = StrCat("ts", getpid(), "-probe");
  const std::string log = StrCat("/tmp/", probe, ".log");
  const bool made =
      RunCommand({kIp, "netns", "add", probe}, log, std::chrono::seconds(10)) == std::optional(0);
  if (made) RunCommand({kIp, "netns", "del", probe}, log, std::chrono::seconds(10));
  std::remove(log.c_str());
  if (!made)
    return absl::UnavailableError("this machine does not let the test make network namespaces");
  return absl::OkStatus();
}

NetworkLab::NetworkLab(std::string log_dir)
    : log_dir_(std::move(log_dir)),
      prefix_(StrCat("ts", getpid(), "-")),
      subnet_(StrCat("10.231.", getpid() % 250, ".")),
      hub_(prefix_ + "hub") {
  // Namespaces of test processes that died without deleting theirs.
  for (const std::string& ns : ListNamespaces(log_dir_ + "/netns-list.log")) {
    const int pid = std::atoi(ns.substr(2, ns.find('-') - 2).c_str());
    if (pid > 0 && pid != getpid() && kill(pid, 0) != 0) Ip({"netns", "del", ns});
  }
  ok_ = true;
  Ip({"netns", "add", hub_});
  Ip({"-n", hub_, "link", "set", "lo", "up"});
  Ip({"-n", hub_, "link", "add", "br0", "type", "bridge"});
  Ip({"-n", hub_, "link", "set", "br0", "up"});
  // The test's own link: its end here, in the test's namespace.
  const std::string mine = StrCat("tsr", getpid());
  Ip({"link", "add", mine, "type", "veth", "peer", "name", "test", "netns", hub_});
  Ip({"addr", "add", subnet_ + "254/24", "dev", mine});
  Ip({"link", "set", mine, "up"});
  Ip({"-n", hub_, "link", "set", "test", "master", "br0"});
  Ip({"-n", hub_, "link", "set", "test", "up"});
}

NetworkLab::~NetworkLab() {
  Heal();
  for (const auto& [name, host] : hosts_) Ip({"netns", "del", host.ns});
  Ip({"netns", "del", hub_});  // also deletes the test's link (its peer was here)
}

bool NetworkLab::Ip(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {kIp};
  argv.insert(argv.end(), args.begin(), args.end());
  std::optional<int> code = RunCommand(argv, log_dir_ + "/netns.log", std::chrono::seconds(10));
  if (code == 0) return true;
  ok_ = false;
  std::ofstream(log_dir_ + "/netns.log", std::ios::app)
      << "failed (" << code.value_or(-1) << "): " << absl::StrJoin(argv, " ") << "\n";
  return false;
}

std::string NetworkLab::Add(const std::string& name) {
  Host host;
  host.ns = prefix_ + name;
  host.address = subnet_ + std::to_string(next_host_);
  host.hub_end = StrCat("v", next_host_);
  ++next_host_;
  Ip({"netns", "add", host.ns});
  Ip({"-n", host.ns, "link", "set", "lo", "up"});
  Ip({"-n", hub_, "link", "add", host.hub_end, "type", "veth", "peer", "name", "eth0", "netns",
      host.ns});
  Ip({"-n", hub_, "link", "set", host.hub_end, "master", "br0"});
  Ip({"-n", hub_, "link", "set", host.hub_end, "up"});
  Ip({"-n", host.ns, "addr", "add", host.address + "/24", "dev", "eth0"});
  Ip({"-n", host.ns, "link", "set", "eth0", "up"});
  hosts_[name] = host;
  return host.address;
}

std::vector<std::string> NetworkLab::Exec(const std::string& name) const {
  return {kIp, "netns", "exec", hosts_.at(name).ns};
}

void NetworkLab::Cut(const std::string& a, const std::string& b) {
  Ip({"-n", hosts_.at(a).ns, "route", "add", "blackhole", hosts_.at(b).address + "/32"});
  Ip({"-n", hosts_.at(b).ns, "route", "add", "blackhole", hosts_.at(a).address + "/32"});
  cuts_.emplace_back(a, b);
}

void NetworkLab::Isolate(const std::string& name) {
  Ip({"-n", hub_, "link", "set", hosts_.at(name).hub_end, "down"});
  isolated_.push_back(name);
}

void NetworkLab::Heal() {
  for (const auto& [a, b] : cuts_) {
    Ip({"-n", hosts_.at(a).ns, "route", "del", "blackhole", hosts_.at(b).address + "/32"});
    Ip({"-n", hosts_.at(b).ns, "route", "del", "blackhole", hosts_.at(a).address + "/32"});
  }
  cuts_.clear();
  for (const std::string& name : isolated_) {
    Ip({"-n", hub_, "link", "set", hosts_.at(name).hub_end, "up"});
  }
  isolated_.clear();
}

}  // namespace tweetsearch::testing
