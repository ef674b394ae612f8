// tweetsearchd: the tweetsearch service. With no topology it runs every role in one process on
// a data directory (see aggregator/daemon.h and docs/operations.md).
//
//   tweetsearchd --data-dir data --http-port 8080 --grpc-port 9090
//   tweetsearchd --config tweetsearchd.yaml --http-port 0     # flags win over the file
//   tweetsearchd --topology cluster.yaml --role index --node i0a   # one process of a cluster
//
// SIGTERM or SIGINT: graceful stop (finish requests in flight, save the index), exit 0.
// SIGHUP: reload the quota rules (--limits).
#include <signal.h>

#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "absl/synchronization/mutex.h"
#include "aggregator/daemon.h"
#include "cluster/node.h"
#include "common/file_util.h"
#include "common/memory.h"

namespace agg = tweetsearch::aggregator;
namespace cluster = tweetsearch::cluster;

namespace {

// One process of a cluster, until SIGTERM or SIGINT.
int RunClusterNode(const std::string& topology_file, const std::string& role_name,
                   const std::string& node_name, const agg::DaemonConfig& config,
                   sigset_t& signals) {
  absl::StatusOr<cluster::Topology> topology = cluster::LoadTopology(topology_file);
  if (!topology.ok()) {
    std::cerr << "tweetsearchd: " << topology.status().message() << "\n";
    return 2;
  }
  absl::StatusOr<cluster::Role> role = cluster::ParseRole(role_name);
  if (!role.ok() || node_name.empty()) {
    std::cerr << "tweetsearchd: --topology needs --role (storage, index, aggregator) and --node\n";
    return 2;
  }
  absl::StatusOr<std::unique_ptr<cluster::ClusterNode>> node =
      cluster::ClusterNode::Start(*topology, *role, node_name, config);
  if (!node.ok()) {
    spdlog::error("cannot start {} {}: {}", role_name, node_name, node.status().ToString());
    return 1;
  }
  int signal_number = 0;
  while (sigwait(&signals, &signal_number) == 0 && signal_number == SIGHUP) {
    (void)(*node)->ReloadLimits();
  }
  spdlog::info("received {}: stopping {}", signal_number == SIGTERM ? "SIGTERM" : "SIGINT", node_name);
  absl::Status stopped = (*node)->Stop();
  node->reset();
  return stopped.ok() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Signals are taken by sigwait below; block them before any thread starts so none of the
  // service's threads is interrupted by them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // Abseil's lock-order graph (on in Debian's build) costs every mutex acquisition a lookup; it
  // is for tests, which keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  tweetsearch::ReturnLargeBuffersToTheSystem();
  const uint64_t open_files = tweetsearch::RaiseOpenFileLimit();

  CLI::App app{"tweetsearchd: the tweetsearch service (all roles in one process, or one role of a cluster)"};
  agg::DaemonConfig config;
  std::string config_file;
  int http_port = 8080;
  app.add_option("--config", config_file, "YAML config file (flags given here win)");
  auto* data_dir = app.add_option("--data-dir", config.data_dir, "Data directory");
  auto* address = app.add_option("--http-address", config.http.address, "Listen address");
  auto* port = app.add_option("--http-port", http_port, "HTTP port (0 picks a free one)")
                   ->check(CLI::Range(0, 65535));
  auto* grpc = app.add_option("--grpc-port", config.grpc_port, "gRPC port (0 free, -1 off)")
                   ->check(CLI::Range(-1, 65535));
  auto* sample = app.add_option("--sample", config.sample,
                                "Synthetic tweets loaded on first start (0: none)");
  auto* body = app.add_option("--max-body-bytes", config.http.max_body_bytes,
                              "Largest request body (larger: 413)");
  auto* io = app.add_option("--io-threads", config.http.io_threads, "Network threads");
  auto* workers = app.add_option("--worker-threads", config.http.worker_threads,
                                 "Threads for ingest and other disk work");
  auto* checkpoint = app.add_option("--checkpoint-every", config.engine.checkpoint_every,
                                    "Changes between index checkpoints");
  auto* segment_docs = app.add_option("--segment-max-docs", config.engine.index.segment_max_docs,
                                      "Tweets an index segment takes before it is sealed");
  auto* merge_factor = app.add_option("--merge-factor", config.engine.index.merge.merge_factor,
                                      "Index segments merged at once (and the size ratio of tiers)");
  auto* port_file = app.add_option("--port-file", config.port_file,
                                   "Write {\"http_port\",\"grpc_port\"} JSON here once serving");
  auto* level = app.add_option("--log-level", config.log_level, "trace, debug, info, warn, error");
  auto* limits = app.add_option("--limits", config.limits_file,
                                "Quota rules (YAML); reloaded on SIGHUP and when the file changes");
  auto* redis = app.add_option("--redis", config.redis,
                               "HOST:PORT of a Redis holding quota state shared by front doors");
  auto* usage_flush = app.add_option("--usage-flush-ms", config.usage_flush_ms,
                                     "Milliseconds between usage flushes (0: usage off)")
                          ->check(CLI::Range(int64_t{0}, int64_t{3'600'000}));
  std::string topology_file, role_name, node_name;
  app.add_option("--topology", topology_file, "Cluster topology (YAML): run one role of it");
  app.add_option("--role", role_name, "With --topology: storage, index or aggregator");
  app.add_option("--node", node_name, "With --topology: this process's node name");
  auto* demo_scopes = app.add_option("--demo-key-scopes", config.demo_key_scopes,
                                     "The public demo key's scopes (default: search only)")
                          ->delimiter(',');
  auto* hosts = app.add_option("--allowed-hosts", config.http.allowed_hosts,
                               "Host names answered besides IP literals and localhost (* any)")
                    ->delimiter(',');
  auto* max_conns = app.add_option("--max-connections", config.http.max_connections,
                                   "Most open HTTP connections (0: from the open-file limit)");
  auto* per_client = app.add_option("--max-connections-per-client",
                                    config.http.max_connections_per_client,
                                    "Most open HTTP connections from one address");
  uint64_t min_free_disk_mb = 64;
  auto* min_free = app.add_option("--min-free-disk-mb", min_free_disk_mb,
                                  "Refuse writes while the data disk has less free (0: off)");
  bool no_demo_key = false;
  app.add_flag("--no-demo-key", no_demo_key, "Do not register the demo key on first start");
  CLI11_PARSE(app, argc, argv);

  // The file first, then the flags that were given.
  if (!config_file.empty()) {
    agg::DaemonConfig from_file;
    if (absl::Status s = agg::LoadDaemonConfigFile(config_file, &from_file); !s.ok()) {
      std::cerr << "tweetsearchd: " << s.message() << "\n";
      return 2;
    }
    agg::DaemonConfig flags = config;
    config = from_file;
    if (*data_dir) config.data_dir = flags.data_dir;
    if (*address) config.http.address = flags.http.address;
    if (*grpc) config.grpc_port = flags.grpc_port;
    if (*sample) config.sample = flags.sample;
    if (*body) config.http.max_body_bytes = flags.http.max_body_bytes;
    if (*io) config.http.io_threads = flags.http.io_threads;
    if (*workers) config.http.worker_threads = flags.http.worker_threads;
    if (*checkpoint) config.engine.checkpoint_every = flags.engine.checkpoint_every;
    if (*segment_docs) config.engine.index.segment_max_docs = flags.engine.index.segment_max_docs;
    if (*merge_factor) config.engine.index.merge.merge_factor = flags.engine.index.merge.merge_factor;
    if (*port_file) config.port_file = flags.port_file;
    if (*level) config.log_level = flags.log_level;
    if (*limits) config.limits_file = flags.limits_file;
    if (*redis) config.redis = flags.redis;
    if (*usage_flush) config.usage_flush_ms = flags.usage_flush_ms;
    if (*demo_scopes) config.demo_key_scopes = flags.demo_key_scopes;
    if (*min_free) config.engine.store.min_free_disk_bytes = min_free_disk_mb << 20;
    if (*hosts) config.http.allowed_hosts = flags.http.allowed_hosts;
    if (*max_conns) config.http.max_connections = flags.http.max_connections;
    if (*per_client) config.http.max_connections_per_client = flags.http.max_connections_per_client;
    if (*port) config.http.port = static_cast<uint16_t>(http_port);
  } else {
    config.http.port = static_cast<uint16_t>(http_port);
  }
  if (no_demo_key) config.demo_key = false;
  if (config_file.empty()) config.engine.store.min_free_disk_bytes = min_free_disk_mb << 20;
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  spdlog::debug("open-file limit: {}", open_files);
  if (!topology_file.empty()) {
    return RunClusterNode(topology_file, role_name, node_name, config, signals);
  }
  if (config.data_dir.empty()) {
    std::cerr << "tweetsearchd: --data-dir (or data_dir in --config) is required\n";
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(config.log_level));

  absl::StatusOr<std::unique_ptr<agg::Daemon>> daemon = agg::Daemon::Start(config);
  if (!daemon.ok()) {
    spdlog::error("cannot start: {}", daemon.status().ToString());
    return 1;
  }
  int signal_number = 0;
  while (sigwait(&signals, &signal_number) == 0 && signal_number == SIGHUP) {
    spdlog::info("received SIGHUP: reloading the quota rules");
    (void)(*daemon)->ReloadLimits();  // logs its outcome
  }
  spdlog::info("received {}", signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
  absl::Status stopped = (*daemon)->Stop();
  daemon->reset();
  return stopped.ok() ? 0 : 1;
}
