#include "cluster/node.h"

#include <openssl/rand.h>
#include <spdlog/spdlog.h>

#include <filesystem>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "cluster/cluster_backend.h"
#include "cluster/cluster_usage.h"
#include "cluster/cluster_view.h"
#include "cluster/membership.h"
#include "cluster/shared_keys.h"
#include "common/clock.h"
#include "common/file_util.h"
#include "common/periodic.h"
#include "common/strings.h"
#include "indexer/builder/service.h"
#include "indexer/server/service.h"
#include "net/grpc.h"
#include "storage/service.h"

namespace tweetsearch::cluster {
namespace {

constexpr auto kPeerTimeout = std::chrono::seconds(3);

class StorageProcess final : public ClusterNode {
 public:
  absl::Status Stop() override {
    election_.reset();
    if (node_) node_->StepDown();  // also ends a copy in progress
    catch_up_.reset();
    if (server_.server)
      server_.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    membership_.reset();  // revokes the lease: the primary key goes at once
    return absl::OkStatus();
  }
  ~StorageProcess() override { (void)Stop(); }

  // One round of the election (every quarter second), and log trimming on
  // both roles (every two seconds).
  void Elect() {
    const bool housekeeping = ++rounds_ % 8 == 0;
    if (housekeeping) (void)node_->TrimLog();
    const std::string primary_key = PrimaryKey(place_.partition);
    if (node_->is_primary()) {
      if (housekeeping && !peer_name_.empty()) {
        // A peer that marked itself stale (it restarted empty) is not in sync,
        // whatever the last write said: catch it up, which clears the mark.
        absl::StatusOr<std::optional<KeyValue>> stale =
            etcd().Get(StaleKey(place_.partition, peer_name_));
        if (stale.ok() && stale->has_value() && node_->peer_in_sync()) {
          spdlog::warn("storage {}: {} is marked stale: catching it up", name_, peer_name_);
          node_->MarkPeerOutOfSync();
        }
      }
      switch (Standing(generation_)) {
        case storage::LeaseStanding::kLost:
          spdlog::warn("storage {}: primary lease lapsed, stepping down", name_);
          node_->StepDown();
          silent_logged_ = false;
          break;
        case storage::LeaseStanding::kSilent:
          if (!silent_logged_) {
            spdlog::warn(
                "storage {}: etcd has not renewed the primary lease; writes go on while the "
                "secondary accepts them",
                name_);
          }
          silent_logged_ = true;
          break;
        case storage::LeaseStanding::kHeld:
          silent_logged_ = false;
          break;
      }
      return;
    }
    absl::StatusOr<std::optional<KeyValue>> current = etcd().Get(primary_key);
    if (!current.ok()) return;  // etcd unreachable: try again next round
    if (current->has_value()) {
      // A key naming this replica on its live lease, while it is not primary: an election
      // whose answer was lost. Remove it so that the election runs again.
      std::string holder;
      uint64_t held_epoch = 0;
      if ((*current)->lease == membership_->lease() &&
          ParsePrimaryValue((*current)->value, &holder, &held_epoch) && holder == name_) {
        (void)etcd().Delete(primary_key);
      }
      return;
    }
    absl::StatusOr<std::optional<KeyValue>> stale = etcd().Get(StaleKey(place_.partition, name_));
    if (!stale.ok() || stale->has_value()) return;  // lacks acknowledged writes: never promote
    if (!membership_->Holds()) return;
    // A new epoch above every one handed out and every one this replica has
    // seen.
    absl::StatusOr<std::optional<KeyValue>> epoch_kv = etcd().Get(EpochKey(place_.partition));
    if (!epoch_kv.ok()) return;
    uint64_t epoch = node_->epoch();
    int64_t revision = 0;
    if (epoch_kv->has_value()) {
      uint64_t handed = 0;
      if (absl::SimpleAtoi((*epoch_kv)->value, &handed)) epoch = std::max(epoch, handed);
      revision = (*epoch_kv)->mod_revision;
    }
    ++epoch;
    absl::StatusOr<bool> reserved =
        revision == 0
            ? etcd().CreateIfAbsent(EpochKey(place_.partition), StrCat(epoch), 0)
            : etcd().CompareAndPut(EpochKey(place_.partition), revision, StrCat(epoch), 0);
    if (!reserved.ok() || !*reserved) return;
    const uint64_t generation = membership_->generation();
    absl::StatusOr<bool> created =
        etcd().CreateIfAbsent(primary_key, PrimaryValue(name_, epoch), membership_->lease());
    if (!created.ok() || !*created) return;
    generation_ = generation;
    const std::string stale_peer = peer_name_.empty() ? "" : StaleKey(place_.partition, peer_name_);
    absl::Status s = node_->BecomePrimary(
        epoch, peer_.get(), [this, generation] { return Standing(generation); },
        [this, stale_peer] { return etcd().Put(stale_peer, "1"); },
        [this, stale_peer] { return etcd().Delete(stale_peer); });
    if (!s.ok()) {
      spdlog::error("storage {}: cannot take the primary role: {}", name_, s.message());
      (void)etcd().Delete(primary_key);
      return;
    }
    spdlog::info("storage {}: primary of partition {} with epoch {}", name_, place_.partition,
                 epoch);
  }

  // The primary's catch-up of its peer, on its own thread: a full copy can
  // take minutes and must not hold up the election.
  void CatchUp() {
    if (!node_->is_primary()) return;
    const uint64_t copies = node_->copies_sent();
    absl::Status s = node_->CatchUpPeer();
    if (node_->copies_sent() > copies) {
      spdlog::info("storage {}: sent {} a full copy ({} tweets in all copies so far)", name_,
                   peer_name_, node_->Status().tweets_copied);
    }
    if (!s.ok() && ++catch_up_errors_ % 40 == 1) {
      spdlog::info("storage {}: the secondary is not in sync yet: {}", name_, s.message());
    }
  }

  EtcdClient& etcd() { return *etcd_; }

  // Where the primary lease taken with membership generation `generation` stands.
  storage::LeaseStanding Standing(uint64_t generation) const {
    if (membership_->generation() != generation || membership_->LeaseKnownLost()) {
      return storage::LeaseStanding::kLost;
    }
    return membership_->Holds() ? storage::LeaseStanding::kHeld : storage::LeaseStanding::kSilent;
  }

  std::string name_;
  Topology::Place place_;
  std::unique_ptr<storage::StorageNode> node_;
  std::unique_ptr<grpc::Service> service_;
  net::RunningServer server_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<EtcdClient> etcd_;  // the election's own connection
  std::unique_ptr<storage::StoragePeer> peer_;
  std::string peer_name_;
  uint64_t generation_ = 0;
  bool silent_logged_ = false;
  uint64_t rounds_ = 0, catch_up_errors_ = 0;
  std::unique_ptr<PeriodicTask> election_, catch_up_;
};

class IndexProcess final : public ClusterNode {
 public:
  absl::Status Stop() override {
    watcher_.reset();
    membership_.reset();
    if (server_.server)
      server_.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    if (node_) {
      node_->Stop();
      absl::Status s = node_->Checkpoint();
      node_.reset();
      return s;
    }
    return absl::OkStatus();
  }
  ~IndexProcess() override { (void)Stop(); }

  // Serving index replicas are members; others are not searched.
  void Watch() {
    const bool serving = node_->Status().state == indexer::IndexState::kServing;
    if (serving == member_) return;
    absl::Status s = serving ? membership_->Put(key_, address_) : membership_->Remove(key_);
    if (!s.ok()) return;
    member_ = serving;
    spdlog::info("index {}: {}", key_, serving ? "serving: joined" : "not serving: left");
  }

  std::string key_, address_;
  bool member_ = false;
  std::unique_ptr<indexer::IndexNode> node_;
  std::unique_ptr<grpc::Service> service_;
  net::RunningServer server_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<PeriodicTask> watcher_;
};

class BuilderProcess final : public ClusterNode {
 public:
  absl::Status Stop() override {
    leader_task_.reset();
    membership_.reset();  // revokes the lease: the leader key goes at once
    if (server_.server)
      server_.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    if (node_) node_->Stop();
    node_.reset();
    return absl::OkStatus();
  }
  ~BuilderProcess() override { (void)Stop(); }

  // A serving builder takes the leader key when it is free; one that cannot
  // serve gives it up.
  void Lead() {
    const bool serving = node_->Status().state == indexer::BuilderState::kServing;
    absl::StatusOr<std::optional<KeyValue>> current = etcd_->Get(kBuilderLeaderKey);
    if (!current.ok()) return;
    const bool mine = current->has_value() && (*current)->value == name_ &&
                      (*current)->lease == membership_->lease();
    if (mine && !serving) {
      (void)etcd_->Delete(kBuilderLeaderKey);
      spdlog::warn("builder {}: not serving, gave up the leader role", name_);
    } else if (!current->has_value() && serving && membership_->Holds()) {
      absl::StatusOr<bool> created =
          etcd_->CreateIfAbsent(kBuilderLeaderKey, name_, membership_->lease());
      if (created.ok() && *created) spdlog::info("builder {}: leader", name_);
    }
  }

  std::string name_;
  std::unique_ptr<indexer::BuilderNode> node_;
  std::unique_ptr<grpc::Service> service_;
  net::RunningServer server_;
  std::unique_ptr<Membership> membership_;
  std::unique_ptr<EtcdClient> etcd_;
  std::unique_ptr<PeriodicTask> leader_task_;
};

class AggregatorProcess final : public ClusterNode {
 public:
  absl::Status Stop() override {
    membership_.reset();
    absl::Status s = daemon_ ? daemon_->Stop() : absl::OkStatus();
    daemon_.reset();
    view_.reset();
    return s;
  }
  ~AggregatorProcess() override { (void)Stop(); }
  absl::Status ReloadLimits() override { return daemon_->ReloadLimits(); }

  std::unique_ptr<ClusterView> view_;
  std::unique_ptr<aggregator::Daemon> daemon_;
  std::unique_ptr<Membership> membership_;
};

std::vector<std::string> ReadersOf(const Topology& t) {
  std::vector<std::string> readers;
  for (const Partition& p : t.index) {
    for (const NodeSpec& n : p.replicas) readers.push_back(n.node);
  }
  for (const NodeSpec& n : t.builders) readers.push_back(n.node);
  return readers;
}

// One change source per storage partition, reading as `reader`.
std::vector<std::unique_ptr<storage::ChangeSource>> ChangeSourcesOf(const Topology& t,
                                                                    const std::string& reader,
                                                                    storage::ChangeBodies bodies) {
  std::vector<std::unique_ptr<storage::ChangeSource>> sources;
  for (const Partition& sp : t.storage) {
    std::vector<std::string> replicas;
    for (const NodeSpec& n : sp.replicas) replicas.push_back(n.grpc);
    sources.push_back(storage::MakeChangeSource(std::move(replicas), reader, bodies));
  }
  return sources;
}

absl::StatusOr<std::pair<std::string, uint16_t>> SplitHostPort(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(StrCat("\"", address, "\" is not HOST:PORT"));
  }
  return std::make_pair(address.substr(0, colon), static_cast<uint16_t>(port));
}

// Serves `service` on the node's gRPC address and takes the node's etcd lease.
absl::Status ServeAndJoin(const Topology& t, const NodeSpec& spec, grpc::Service* service,
                          net::RunningServer* server, std::unique_ptr<Membership>* membership) {
  absl::StatusOr<net::RunningServer> running = net::StartServer(spec.grpc, {service});
  if (!running.ok()) return running.status();
  *server = *std::move(running);
  absl::StatusOr<std::unique_ptr<Membership>> joined = Membership::Start(t.etcd, t.lease_ttl_s);
  if (!joined.ok()) return joined.status();
  *membership = *std::move(joined);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ClusterNode>> StartStorage(const Topology& t,
                                                          const Topology::Place& place,
                                                          const std::string& data_dir) {
  auto p = std::make_unique<StorageProcess>();
  p->name_ = place.spec->node;
  p->place_ = place;
  storage::StorageNodeOptions options;
  options.node = place.spec->node;
  options.partition = place.partition;
  options.data_dir = data_dir;
  options.allow_single_replica = t.allow_single_replica;
  options.readers = ReadersOf(t);
  options.max_log_changes = t.max_log_changes;
  options.live_reader_window = absl::Seconds(t.live_reader_window_s);
  // A replica that has never seen a term (no EPOCH file) holds nothing
  // confirmed: it is new, or its disk was replaced.
  const bool fresh = !std::filesystem::exists(data_dir + "/EPOCH");
  absl::StatusOr<std::unique_ptr<storage::StorageNode>> node = storage::StorageNode::Open(options);
  if (!node.ok()) return node.status();
  p->node_ = *std::move(node);
  p->etcd_ = std::make_unique<EtcdClient>(t.etcd, std::chrono::seconds(2));
  if (fresh) {
    // In a partition that has had a primary, it may lack acknowledged writes:
    // it must not be promoted until the primary has brought it up to date.
    absl::StatusOr<std::optional<KeyValue>> epoch = p->etcd_->Get(EpochKey(place.partition));
    if (!epoch.ok()) return epoch.status();
    if (epoch->has_value()) {
      if (absl::Status s = p->etcd_->Put(StaleKey(place.partition, p->name_), "1"); !s.ok()) {
        return s;
      }
      spdlog::warn(
          "storage {}: empty data directory in a partition that has had a primary: "
          "marked stale until the primary has copied it up to date",
          p->name_);
    }
  }
  const Partition& partition = t.storage[place.partition];
  if (partition.replicas.size() == 2) {
    const NodeSpec& peer = partition.replicas[1 - place.replica];
    p->peer_ = storage::MakeStoragePeer(peer.grpc, kPeerTimeout);
    p->peer_name_ = peer.node;
  }
  p->service_ = storage::MakeStorageService(*p->node_);
  if (absl::Status s =
          ServeAndJoin(t, *place.spec, p->service_.get(), &p->server_, &p->membership_);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = p->membership_->Put(MemberKey(Role::kStorage, p->name_), place.spec->grpc);
      !s.ok()) {
    return s;
  }
  p->election_ =
      std::make_unique<PeriodicTask>(absl::Milliseconds(250), [p = p.get()] { p->Elect(); });
  p->catch_up_ =
      std::make_unique<PeriodicTask>(absl::Milliseconds(250), [p = p.get()] { p->CatchUp(); });
  spdlog::info("storage {} (partition {}, replica {}) on {}, data in {}", p->name_, place.partition,
               place.replica, place.spec->grpc, data_dir);
  return std::unique_ptr<ClusterNode>(std::move(p));
}

absl::StatusOr<std::unique_ptr<ClusterNode>> StartIndex(const Topology& t,
                                                        const Topology::Place& place,
                                                        const std::string& data_dir) {
  auto p = std::make_unique<IndexProcess>();
  indexer::IndexNodeOptions options;
  options.node = place.spec->node;
  options.partition = place.partition;
  options.partitions = static_cast<uint32_t>(t.index.size());
  options.data_dir = data_dir;
  absl::StatusOr<std::unique_ptr<indexer::IndexNode>> node = indexer::IndexNode::Open(
      options, ChangeSourcesOf(t, options.node, storage::ChangeBodies::kInclude));
  if (!node.ok()) return node.status();
  p->node_ = *std::move(node);
  p->node_->Start();
  p->service_ = indexer::MakeIndexService(*p->node_);
  if (absl::Status s =
          ServeAndJoin(t, *place.spec, p->service_.get(), &p->server_, &p->membership_);
      !s.ok()) {
    return s;
  }
  p->key_ = MemberKey(Role::kIndex, place.spec->node);
  p->address_ = place.spec->grpc;
  // A key left by this node's previous run lives until that run's lease
  // expires; this run is not serving yet, so front doors must not use it.
  if (absl::Status s = EtcdClient(t.etcd).Delete(p->key_); !s.ok()) return s;
  p->watcher_ =
      std::make_unique<PeriodicTask>(absl::Milliseconds(200), [p = p.get()] { p->Watch(); });
  spdlog::info("index {} (partition {}, replica {}) on {}, data in {}", place.spec->node,
               place.partition, place.replica, place.spec->grpc, data_dir);
  return std::unique_ptr<ClusterNode>(std::move(p));
}

absl::StatusOr<std::unique_ptr<ClusterNode>> StartBuilder(const Topology& t,
                                                          const Topology::Place& place,
                                                          const std::string& data_dir) {
  auto p = std::make_unique<BuilderProcess>();
  p->name_ = place.spec->node;
  indexer::BuilderNodeOptions options;
  options.node = place.spec->node;
  options.index_partitions = static_cast<uint32_t>(t.index.size());
  options.data_dir = data_dir;
  absl::StatusOr<std::unique_ptr<indexer::BuilderNode>> node = indexer::BuilderNode::Open(
      options, ChangeSourcesOf(t, options.node, storage::ChangeBodies::kOmit));
  if (!node.ok()) return node.status();
  p->node_ = *std::move(node);
  p->node_->Start();
  p->service_ = indexer::MakeBuilderService(*p->node_);
  if (absl::Status s =
          ServeAndJoin(t, *place.spec, p->service_.get(), &p->server_, &p->membership_);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = p->membership_->Put(MemberKey(Role::kBuilder, p->name_), place.spec->grpc);
      !s.ok()) {
    return s;
  }
  p->etcd_ = std::make_unique<EtcdClient>(t.etcd, std::chrono::seconds(2));
  p->leader_task_ =
      std::make_unique<PeriodicTask>(absl::Milliseconds(500), [p = p.get()] { p->Lead(); });
  spdlog::info("builder {} on {}, data in {}", p->name_, place.spec->grpc, data_dir);
  return std::unique_ptr<ClusterNode>(std::move(p));
}

// The cluster's API keys (etcd), with the keys this front door held on its own before (a data
// directory from before keys were shared) carried over.
absl::StatusOr<std::unique_ptr<SharedKeyRegistry>> OpenSharedKeys(const Topology& t,
                                                                  const std::string& data_dir) {
  absl::StatusOr<std::unique_ptr<SharedKeyRegistry>> keys =
      SharedKeyRegistry::Open(SharedKeyOptions{.etcd = t.etcd}, SystemClock());
  if (!keys.ok()) return keys.status();
  if (std::filesystem::exists(data_dir + "/keys/CURRENT")) {
    absl::StatusOr<aggregator::KeyTable> local = aggregator::ReadKeyTable(data_dir + "/keys");
    if (!local.ok()) return local.status();
    absl::StatusOr<size_t> put = (*keys)->Import(*local);
    if (!put.ok()) return put.status();
    // Once carried over, the local registry is kept aside (never read again), so that a key
    // deleted from etcd later does not come back from it.
    std::error_code ec;
    std::filesystem::rename(data_dir + "/keys", data_dir + "/keys.imported", ec);
    if (ec)
      return absl::UnavailableError(StrCat("cannot rename ", data_dir, "/keys: ", ec.message()));
    spdlog::info("{} API keys of {}/keys now shared by the cluster", *put, data_dir);
  }
  (*keys)->Start();
  return keys;
}

absl::StatusOr<std::unique_ptr<ClusterNode>> StartAggregator(const Topology& t,
                                                             const Topology::Place& place,
                                                             const aggregator::DaemonConfig& base) {
  auto p = std::make_unique<AggregatorProcess>();
  aggregator::DaemonConfig config = base;
  if (config.data_dir.empty()) config.data_dir = place.spec->data;
  absl::StatusOr<std::pair<std::string, uint16_t>> http = SplitHostPort(place.spec->http);
  if (!http.ok()) return http.status();
  absl::StatusOr<std::pair<std::string, uint16_t>> grpc = SplitHostPort(place.spec->grpc);
  if (!grpc.ok()) return grpc.status();
  config.http.address = http->first;
  config.http.port = http->second;
  config.grpc_port = grpc->second;
  if (config.redis.empty()) config.redis = t.redis;
  config.sample = 0;
  // A search holds no network thread while the index servers answer (it is answered from
  // their calls' completion), so the front door keeps one process's two: sixteen, needed while
  // searches held them, cost a thread woken for every answer written (docs/benchmarks.md).
  config.http.best_match_inline = true;  // a wait on the index servers, like other searches
  // Front doors share one page-token secret (a page from one, the next page
  // from another): the first to start puts one in etcd, the others take it.
  {
    EtcdClient etcd(t.etcd, std::chrono::seconds(2));
    unsigned char random[32];
    if (RAND_bytes(random, sizeof random) != 1) return absl::InternalError("no randomness");
    KeyValue current;
    const std::string mine = absl::BytesToHexString(
        absl::string_view(reinterpret_cast<const char*>(random), sizeof random));
    absl::StatusOr<bool> created = etcd.CreateIfAbsent("/ts/secrets/page_token", mine, 0, &current);
    if (!created.ok()) return created.status();
    std::error_code ec;
    std::filesystem::create_directories(config.data_dir, ec);
    const std::string secret = *created ? mine : current.value;
    if (absl::Status s = WriteFileAtomically(config.data_dir + "/page_token.secret", secret);
        !s.ok()) {
      return s;
    }
    std::filesystem::permissions(
        config.data_dir + "/page_token.secret",
        std::filesystem::perms::owner_read | std::filesystem::perms::owner_write, ec);
  }
  p->view_ = std::make_unique<ClusterView>(t);
  ClusterBackendOptions options;
  options.max_text_bytes = config.engine.max_text_bytes;
  options.node_id = config.engine.node_id != 0 ? config.engine.node_id : 1 + place.replica;
  options.write_deadline = std::chrono::seconds(t.write_retry_s);
  options.keep_answering = std::chrono::seconds(t.lease_ttl_s);
  options.stats_ttl = std::chrono::milliseconds(t.stats_ttl_ms);
  absl::StatusOr<std::unique_ptr<ClusterBackend>> backend =
      ClusterBackend::Create(*p->view_, options, SystemClock());
  if (!backend.ok()) return backend.status();
  absl::StatusOr<std::unique_ptr<SharedKeyRegistry>> keys = OpenSharedKeys(t, config.data_dir);
  if (!keys.ok()) return keys.status();
  // Usage series shared by every front door: the storage partitions keep them.
  auto usage = std::make_unique<ClusterUsageStore>(**backend, *p->view_, SystemClock());
  absl::StatusOr<std::unique_ptr<aggregator::Daemon>> daemon =
      aggregator::Daemon::Start(config, *std::move(backend), *std::move(keys), std::move(usage));
  if (!daemon.ok()) return daemon.status();
  p->daemon_ = *std::move(daemon);
  absl::StatusOr<std::unique_ptr<Membership>> membership = Membership::Start(t.etcd, t.lease_ttl_s);
  if (!membership.ok()) return membership.status();
  p->membership_ = *std::move(membership);
  (void)p->membership_->Put(MemberKey(Role::kAggregator, place.spec->node), place.spec->http);
  return std::unique_ptr<ClusterNode>(std::move(p));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ClusterNode>> ClusterNode::Start(
    const Topology& topology, Role role, const std::string& node,
    const aggregator::DaemonConfig& base) {
  std::optional<Topology::Place> place = topology.Find(node);
  if (!place.has_value())
    return absl::NotFoundError(StrCat("node \"", node, "\" is not in the topology"));
  if (place->role != role) {
    return absl::InvalidArgumentError(StrCat("node \"", node, "\" is a ", RoleName(place->role),
                                             " node in the topology, not ", RoleName(role)));
  }
  const std::string data_dir = base.data_dir.empty() ? place->spec->data : base.data_dir;
  if (data_dir.empty() && role != Role::kAggregator) {
    return absl::InvalidArgumentError(StrCat("node \"", node, "\" has no data directory"));
  }
  switch (role) {
    case Role::kStorage:
      return StartStorage(topology, *place, data_dir);
    case Role::kIndex:
      return StartIndex(topology, *place, data_dir);
    case Role::kAggregator:
      return StartAggregator(topology, *place, base);
    case Role::kBuilder:
      return StartBuilder(topology, *place, data_dir);
  }
  return absl::InvalidArgumentError("unknown role");
}

}  // namespace tweetsearch::cluster
