#include "cluster/cluster_view.h"

#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/strings.h"
#include "net/grpc.h"

namespace tweetsearch::cluster {

std::string MemberKey(Role role, const std::string& node) {
  return StrCat("/ts/members/", RoleName(role), "/", node);
}
std::string PrimaryKey(uint32_t p) { return StrCat("/ts/storage/", p, "/primary"); }
std::string EpochKey(uint32_t p) { return StrCat("/ts/storage/", p, "/epoch"); }
std::string StaleKey(uint32_t p, const std::string& node) {
  return StrCat("/ts/storage/", p, "/stale/", node);
}
std::string RebuildKey(uint32_t index_partition, const std::string& node) {
  return StrCat("/ts/rebuild/", index_partition, "/", node);
}
std::string PrimaryValue(const std::string& node, uint64_t epoch) {
  return StrCat(node, " ", epoch);
}

bool ParsePrimaryValue(const std::string& value, std::string* node, uint64_t* epoch) {
  std::vector<std::string> parts = absl::StrSplit(value, ' ');
  return parts.size() == 2 && !parts[0].empty() && absl::SimpleAtoi(parts[1], epoch) &&
         (*node = parts[0], true);
}

ClusterView::ClusterView(Topology topology, absl::Duration refresh)
    : topology_(std::move(topology)), etcd_(topology_.etcd, std::chrono::seconds(2)) {
  for (const Partition& p : topology_.storage) {
    auto& stubs = storage_.emplace_back();
    for (const NodeSpec& n : p.replicas)
      stubs.push_back(internal::v1::Storage::NewStub(net::Connect(n.grpc)));
  }
  for (const Partition& p : topology_.index) {
    auto& stubs = index_.emplace_back();
    for (const NodeSpec& n : p.replicas)
      stubs.push_back(internal::v1::Index::NewStub(net::Connect(n.grpc)));
  }
  {
    absl::MutexLock lock(&mu_);
    primaries_.resize(topology_.storage.size());
    live_index_.resize(topology_.index.size());
  }
  Refresh();
  refresher_ = std::make_unique<PeriodicTask>(refresh, [this] { Refresh(); });
}

ClusterView::~ClusterView() { refresher_.reset(); }

void ClusterView::Refresh() {
  absl::MutexLock one(&refresh_mu_);
  absl::StatusOr<std::vector<KeyValue>> kvs = etcd_.GetPrefix("/ts/");
  if (!kvs.ok()) {
    absl::MutexLock lock(&mu_);
    etcd_up_ = false;  // keep the last picture
    return;
  }
  std::vector<std::optional<uint32_t>> primaries(topology_.storage.size());
  std::vector<std::vector<uint32_t>> live(topology_.index.size());
  for (const KeyValue& kv : *kvs) {
    for (uint32_t p = 0; p < topology_.storage.size(); ++p) {
      if (kv.key != PrimaryKey(p)) continue;
      std::string node;
      uint64_t epoch = 0;
      if (!ParsePrimaryValue(kv.value, &node, &epoch)) continue;
      for (uint32_t r = 0; r < topology_.storage[p].replicas.size(); ++r) {
        if (topology_.storage[p].replicas[r].node == node) primaries[p] = r;
      }
    }
  }
  absl::flat_hash_set<std::string> keys;
  for (const KeyValue& kv : *kvs) keys.insert(kv.key);
  for (uint32_t p = 0; p < topology_.index.size(); ++p) {
    for (uint32_t r = 0; r < topology_.index[p].replicas.size(); ++r) {
      if (keys.contains(MemberKey(Role::kIndex, topology_.index[p].replicas[r].node))) {
        live[p].push_back(r);
      }
    }
  }
  absl::MutexLock lock(&mu_);
  primaries_ = std::move(primaries);
  live_index_ = std::move(live);
  etcd_up_ = true;
}

std::optional<uint32_t> ClusterView::StoragePrimary(uint32_t p) const {
  absl::MutexLock lock(&mu_);
  return p < primaries_.size() ? primaries_[p] : std::nullopt;
}

std::vector<uint32_t> ClusterView::LiveIndexReplicas(uint32_t p) const {
  absl::MutexLock lock(&mu_);
  return p < live_index_.size() ? live_index_[p] : std::vector<uint32_t>();
}

bool ClusterView::etcd_up() const {
  absl::MutexLock lock(&mu_);
  return etcd_up_;
}

}  // namespace tweetsearch::cluster
