#include "cluster/cluster_status.h"

#include <grpcpp/grpcpp.h>

#include <future>
#include <set>

#include "absl/strings/numbers.h"
#include "cluster/cluster_view.h"
#include "cluster/etcd_client.h"
#include "common/strings.h"
#include "net/grpc.h"
#include "net/http_client.h"
#include "nlohmann/json.hpp"
#include "proto/cluster.grpc.pb.h"

namespace tweetsearch::cluster {
namespace {

namespace ipb = internal::v1;

constexpr auto kTimeout = std::chrono::seconds(2);

std::unique_ptr<grpc::ClientContext> StatusContext() { return net::DeadlineContext(kTimeout); }

std::string Sequences(const google::protobuf::RepeatedField<uint64_t>& applied) {
  std::string out;
  for (uint64_t a : applied) out += StrCat(out.empty() ? "" : ",", a);
  return out;
}

void AskStorage(ProcessStatus& p) {
  ipb::StorageStatus s;
  grpc::Status r =
      ipb::Storage::NewStub(net::Connect(p.address))->Status(StatusContext().get(), {}, &s);
  if (!r.ok()) {
    p.detail = r.error_message();
    return;
  }
  p.reachable = true;
  p.state = s.installing() ? "installing a copy" : s.role();
  p.tweets = s.tweets_estimate();
  p.detail = StrCat("epoch ", s.epoch(), ", sequence ", s.last_sequence(), ", log from ",
                    s.first_sequence());
  if (s.role() == "primary") {
    p.detail += s.peer_in_sync() ? ", secondary in sync" : ", secondary NOT in sync";
    if (s.single_replica_writes() > 0) {
      p.detail += StrCat(", ", s.single_replica_writes(), " writes on this replica alone");
    }
    if (s.copies_sent() > 0) {
      p.detail +=
          StrCat(", ", s.copies_sent(), " full copies sent (", s.tweets_copied(), " tweets)");
    }
  }
  p.healthy = p.member;
}

void AskIndex(ProcessStatus& p) {
  ipb::IndexStatus s;
  grpc::Status r =
      ipb::Index::NewStub(net::Connect(p.address))->Status(StatusContext().get(), {}, &s);
  if (!r.ok()) {
    p.detail = r.error_message();
    return;
  }
  p.reachable = true;
  p.state = s.state();
  p.tweets = s.documents();
  p.detail = StrCat("applied ", Sequences(s.applied()), ", ", s.memory_bytes() >> 20, " MiB");
  p.healthy = s.state() == "serving" && p.member;
}

void AskBuilder(ProcessStatus& p) {
  ipb::BuilderStatus s;
  grpc::Status r =
      ipb::Builder::NewStub(net::Connect(p.address))->Status(StatusContext().get(), {}, &s);
  if (!r.ok()) {
    p.detail = r.error_message();
    return;
  }
  p.reachable = true;
  p.state = s.state();
  p.tweets = s.ids();
  p.detail = StrCat("applied ", Sequences(s.applied()));
  if (s.resyncs() > 0) p.detail += StrCat(", ", s.resyncs(), " resyncs from storage");
  p.healthy = s.state() == "serving" && p.member;
}

void AskAggregator(ProcessStatus& p, const std::string& http) {
  const size_t colon = http.rfind(':');
  net::HttpClient client(http.substr(0, colon), http.substr(colon + 1), kTimeout);
  absl::StatusOr<net::HttpReply> r = client.Send("GET", "/readyz");
  if (!r.ok()) {
    p.detail = std::string(r.status().message());
    return;
  }
  p.reachable = true;
  p.state = r->status == 200 ? "ready" : StrCat("not ready (", r->status, ")");
  p.detail = StrCat("http ", http);
  p.healthy = r->status == 200 && p.member;
}

}  // namespace

absl::StatusOr<ClusterStatus> CollectStatus(const Topology& topology) {
  EtcdClient etcd(topology.etcd, kTimeout);
  absl::StatusOr<std::vector<KeyValue>> keys = etcd.GetPrefix("/ts/");
  if (!keys.ok()) return keys.status();
  std::map<std::string, std::string> kv;
  for (KeyValue& k : *keys) kv[k.key] = std::move(k.value);
  auto value = [&](const std::string& key) -> const std::string* {
    auto it = kv.find(key);
    return it == kv.end() ? nullptr : &it->second;
  };

  ClusterStatus out;
  auto add = [&](Role role, const NodeSpec& n, int partition) {
    ProcessStatus& p = out.processes.emplace_back();
    p.role = role;
    p.node = n.node;
    p.partition = partition;
    p.address = n.grpc;
    p.member = value(MemberKey(role, n.node)) != nullptr;
  };
  for (size_t i = 0; i < topology.storage.size(); ++i) {
    for (const NodeSpec& n : topology.storage[i].replicas) add(Role::kStorage, n, int(i));
  }
  for (size_t i = 0; i < topology.index.size(); ++i) {
    for (const NodeSpec& n : topology.index[i].replicas) add(Role::kIndex, n, int(i));
  }
  for (const NodeSpec& n : topology.builders) add(Role::kBuilder, n, -1);
  for (const NodeSpec& n : topology.aggregators) add(Role::kAggregator, n, -1);

  std::vector<std::future<void>> calls;
  for (size_t i = 0; i < out.processes.size(); ++i) {
    calls.push_back(std::async(std::launch::async, [&, i] {
      ProcessStatus& p = out.processes[i];
      switch (p.role) {
        case Role::kStorage:
          return AskStorage(p);
        case Role::kIndex:
          return AskIndex(p);
        case Role::kBuilder:
          return AskBuilder(p);
        case Role::kAggregator:
          return AskAggregator(p, topology.Find(p.node)->spec->http);
      }
    }));
  }
  for (auto& c : calls) c.get();

  const std::string* leader = value(kBuilderLeaderKey);
  std::set<int> storage_with_primary, index_serving;
  for (ProcessStatus& p : out.processes) {
    if (p.role == Role::kBuilder && leader != nullptr && *leader == p.node) p.state += ", leader";
    if (p.role == Role::kStorage && p.state == "primary") storage_with_primary.insert(p.partition);
    if (p.role == Role::kIndex && p.healthy) index_serving.insert(p.partition);
    if (p.role == Role::kIndex && p.state == "rebuilding") {
      if (const std::string* progress = value(RebuildKey(p.partition, p.node))) {
        nlohmann::json j = nlohmann::json::parse(*progress, nullptr, false);
        if (j.is_object() && j.value("total", 0u) > 0) {
          p.detail = StrCat("rebuild ", j.value("done", 0u), "/", j.value("total", 0u), " (",
                            j.value("state", ""), "), ", p.detail);
        }
      }
    }
  }
  for (size_t i = 0; i < topology.storage.size(); ++i) {
    if (!storage_with_primary.contains(int(i))) {
      out.problems.push_back(StrCat("storage partition ", i, " has no primary: writes to it fail"));
    }
  }
  for (size_t i = 0; i < topology.index.size(); ++i) {
    if (!index_serving.contains(int(i))) {
      out.problems.push_back(StrCat("index partition ", i,
                                    " has no serving replica: searches are 503 or partial "
                                    "(tweetctl rebuild --replica ...)"));
    }
  }
  if (!topology.builders.empty() && leader == nullptr) {
    out.problems.push_back("no builder leads: tweetctl rebuild cannot run");
  }
  return out;
}

}  // namespace tweetsearch::cluster
