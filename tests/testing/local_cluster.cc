#include "tests/testing/local_cluster.h"

#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "common/file_util.h"
#include "common/strings.h"
#include "net/http_client.h"
#include "nlohmann/json.hpp"

namespace tweetsearch::testing {
namespace {

// Keys under `prefix` in etcd, through its JSON gateway.
std::map<std::string, std::string> EtcdRange(const std::string& endpoint,
                                             const std::string& prefix) {
  std::map<std::string, std::string> out;
  const size_t colon = endpoint.rfind(':');
  net::HttpClient client(endpoint.substr(0, colon), endpoint.substr(colon + 1),
                         std::chrono::seconds(2));
  std::string end = prefix;
  end.back() = static_cast<char>(end.back() + 1);
  nlohmann::json body = {{"key", absl::Base64Escape(prefix)},
                         {"range_end", absl::Base64Escape(end)}};
  absl::StatusOr<net::HttpReply> reply = client.Send("POST", "/v3/kv/range", body.dump());
  if (!reply.ok() || reply->status != 200) return out;
  nlohmann::json j = nlohmann::json::parse(reply->body, nullptr, false);
  if (!j.is_object() || !j.contains("kvs")) return out;
  for (const auto& kv : j["kvs"]) {
    std::string key, value;
    absl::Base64Unescape(kv.value("key", ""), &key);
    absl::Base64Unescape(kv.value("value", ""), &value);
    out[key] = value;
  }
  return out;
}

// The index replicas a front door's /metrics says its view lists as serving.
int ListedIndexReplicas(absl::string_view metrics) {
  int listed = 0;
  for (absl::string_view line : absl::StrSplit(metrics, '\n')) {
    if (absl::StartsWith(line, "tweetsearch_replica_listed{") && absl::EndsWith(line, "} 1")) {
      ++listed;
    }
  }
  return listed;
}

}  // namespace

LocalCluster::LocalCluster(LocalClusterOptions options) : options_(std::move(options)) {}

LocalCluster::~LocalCluster() {
  if (etcd_ != nullptr) etcd_->process().Signal(SIGCONT);
  for (auto& [node, process] : processes_) {
    process->Signal(SIGCONT);  // a frozen process must be able to die
  }
  processes_.clear();  // SIGKILL and reap
  etcd_.reset();
  lab_.reset();  // the namespaces go once nothing runs in them
}

std::string LocalCluster::RoleOf(const std::string& node) const {
  switch (node[0]) {
    case 's':
      return "storage";
    case 'i':
      return "index";
    case 'b':
      return "builder";
    default:
      return "aggregator";
  }
}

std::string LocalCluster::Listen(const std::string& node, int lab_port) {
  if (lab_ == nullptr) return StrCat("127.0.0.1:", FreeLoopbackPort());
  return StrCat(lab_->address(node), ":", lab_port);
}

bool LocalCluster::Start() {
  std::filesystem::create_directories(options_.dir);
  if (options_.network_namespaces) {
    lab_ = std::make_unique<NetworkLab>(options_.dir);
    const std::string etcd_host = lab_->Add("etcd");
    etcd_ = std::make_unique<EtcdServer>(options_.dir, etcd_host, lab_->Exec("etcd"));
  } else {
    etcd_ = std::make_unique<EtcdServer>(options_.dir);
  }
  etcd_endpoint_ = etcd_->endpoint();

  std::string yaml = StrCat("etcd: [", etcd_endpoint_, "]\n");
  if (!options_.redis.empty()) yaml += StrCat("redis: ", options_.redis, "\n");
  yaml +=
      StrCat("lease_ttl_s: ", options_.lease_ttl_s,
             "\nallow_single_replica: ", options_.allow_single_replica ? "true" : "false", "\n");
  if (options_.live_reader_window_s != 0) {
    yaml += StrCat("live_reader_window_s: ", options_.live_reader_window_s, "\n");
  }
  if (options_.write_retry_s != 0) yaml += StrCat("write_retry_s: ", options_.write_retry_s, "\n");
  if (options_.max_log_changes != 0) {
    yaml += StrCat("max_log_changes: ", options_.max_log_changes, "\n");
  }
  auto partitions = [&](const char* name, char prefix, int count) {
    yaml += StrCat(name, ":\n");
    for (int p = 0; p < count; ++p) {
      yaml += "  - replicas:\n";
      for (const char* r : {"a", "b"}) {
        const std::string node = StrCat(std::string(1, prefix), p, r);
        nodes_.push_back(node);
        if (lab_ != nullptr) lab_->Add(node);
        grpc_addresses_[node] = Listen(node, 7000);
        yaml += StrCat("      - {node: ", node, ", grpc: ", grpc_addresses_[node],
                       ", data: ", options_.dir, "/", node, "}\n");
      }
    }
  };
  partitions("storage_partitions", 's', options_.storage_partitions);
  partitions("index_partitions", 'i', options_.index_partitions);
  if (options_.builders > 0) yaml += "builders:\n";
  for (int b = 0; b < options_.builders; ++b) {
    const std::string node = StrCat("b", b);
    nodes_.push_back(node);
    if (lab_ != nullptr) lab_->Add(node);
    grpc_addresses_[node] = Listen(node, 7000);
    yaml += StrCat("  - {node: ", node, ", grpc: ", grpc_addresses_[node], ", data: ", options_.dir,
                   "/", node, "}\n");
  }
  yaml += "aggregators:\n";
  for (const char* a : {"a0", "a1"}) {
    nodes_.push_back(a);
    if (lab_ != nullptr) lab_->Add(a);
    http_addresses_[a] = Listen(a, 8000);
    yaml += StrCat("  - {node: ", a, ", http: ", http_addresses_[a], ", grpc: ", Listen(a, 7000),
                   ", data: ", options_.dir, "/", a, "}\n");
  }
  if (lab_ != nullptr && !lab_->ok()) {
    fprintf(stderr, "cannot make the network namespaces: see %s/netns.log\n", options_.dir.c_str());
    return false;
  }
  topology_path_ = options_.dir + "/topology.yaml";
  std::ofstream(topology_path_) << yaml;

  // etcd first: nodes need it to start.
  if (!etcd_->Start()) return false;
  for (const std::string& node : nodes_) StartNode(node);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  while (std::chrono::steady_clock::now() < deadline) {
    bool ready = true;
    std::string doors;  // why each front door is not ready
    for (const char* a : {"a0", "a1"}) {
      net::HttpClient c(http_host(a), http_port(a), std::chrono::seconds(2));
      absl::StatusOr<net::HttpReply> r =
          c.Send("GET", "/v1/search?api_dev_key=demo-key-0123456789&search_terms=x");
      // Its view of etcd (refreshed twice a second) must list every index replica too: a test
      // that kills one expects this front door to know the other.
      absl::StatusOr<net::HttpReply> metrics = c.Send("GET", "/metrics");
      if (r.ok() && r->status == 200 && metrics.ok() &&
          ListedIndexReplicas(metrics->body) == 2 * options_.index_partitions) {
        continue;
      }
      ready = false;
      doors += StrCat("\n  ", a, ": ",
                      r.ok() ? StrCat(r->status, " ", r->body.substr(0, 300))
                             : std::string(r.status().message()));
    }
    bool primaries = true;
    for (int p = 0; p < options_.storage_partitions; ++p)
      primaries = primaries && !StoragePrimary(p).empty();
    // Ready means every index replica serving, not just one per partition: the fault tests
    // kill one and expect the other to answer.
    const bool all_serving =
        ServingIndexNodes().size() == static_cast<size_t>(2 * options_.index_partitions);
    const bool builder = options_.builders == 0 || !BuilderLeader().empty();
    if (ready && primaries && all_serving && builder) return true;
    if (std::chrono::steady_clock::now() + std::chrono::milliseconds(200) >= deadline) {
      std::string serving;
      for (const std::string& n : ServingIndexNodes()) serving += " " + n;
      fprintf(stderr,
              "cluster not ready: front doors %s, primaries %s, builder leader %s, serving index "
              "nodes:%s%s\n",
              ready ? "answer" : "do not answer", primaries ? "all" : "missing",
              builder ? "yes" : "none", serving.c_str(), doors.c_str());
      // The logs go with the test's directory: keep the end of the front doors' here.
      for (const char* a : {"a0", "a1"}) {
        std::string log = ReadFile(StrCat(options_.dir, "/", a, ".log")).value_or("");
        if (log.size() > 2000) log = log.substr(log.size() - 2000);
        fprintf(stderr, "--- end of %s.log:\n%s\n", a, log.c_str());
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

void LocalCluster::StartNode(const std::string& node) {
  std::vector<std::string> argv;
  if (lab_ != nullptr) argv = lab_->Exec(node);
  argv.insert(argv.end(), {options_.tweetsearchd, "--topology", topology_path_, "--role",
                           RoleOf(node), "--node", node, "--log-level", "info"});
  if (RoleOf(node) == "aggregator") {
    // The tests write with the demo key.
    argv.insert(argv.end(), {"--demo-key-scopes", "search,ingest"});
    argv.insert(argv.end(), options_.aggregator_args.begin(), options_.aggregator_args.end());
  }
  processes_[node] = std::make_unique<ChildProcess>(argv, options_.dir + "/" + node + ".log");
}

std::string LocalCluster::grpc_address(const std::string& node) const {
  auto it = grpc_addresses_.find(node);
  return it == grpc_addresses_.end() ? "" : it->second;
}

void LocalCluster::Signal(const std::string& node, int signal_number) {
  if (node == "etcd") {
    if (etcd_ != nullptr) etcd_->process().Signal(signal_number);
    return;
  }
  auto it = processes_.find(node);
  if (it == processes_.end()) return;
  it->second->Signal(signal_number);
  if (signal_number == SIGKILL) {
    it->second->Wait(std::chrono::seconds(10));
    processes_.erase(it);
  }
}

void LocalCluster::Restart(const std::string& node) { StartNode(node); }

void LocalCluster::Wipe(const std::string& node) {
  Signal(node, SIGKILL);
  std::filesystem::remove_all(options_.dir + "/" + node);
}

std::string LocalCluster::http_host(const std::string& aggregator) const {
  auto it = http_addresses_.find(aggregator);
  return it == http_addresses_.end() ? "" : it->second.substr(0, it->second.rfind(':'));
}

std::string LocalCluster::http_port(const std::string& aggregator) const {
  auto it = http_addresses_.find(aggregator);
  return it == http_addresses_.end() ? "" : it->second.substr(it->second.rfind(':') + 1);
}

std::string LocalCluster::StoragePrimary(int partition) const {
  auto kvs = EtcdRange(etcd_endpoint_, StrCat("/ts/storage/", partition, "/primary"));
  if (kvs.empty()) return "";
  const std::string& value = kvs.begin()->second;
  return value.substr(0, value.find(' '));
}

std::string LocalCluster::BuilderLeader() const {
  auto kvs = EtcdRange(etcd_endpoint_, "/ts/builder/leader");
  return kvs.empty() ? "" : kvs.begin()->second;
}

std::vector<std::string> LocalCluster::ServingIndexNodes() const {
  std::vector<std::string> out;
  for (const auto& [key, value] : EtcdRange(etcd_endpoint_, "/ts/members/index/")) {
    out.push_back(key.substr(key.rfind('/') + 1));
  }
  return out;
}

}  // namespace tweetsearch::testing
