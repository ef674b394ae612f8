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
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "absl/synchronization/mutex.h"
#include "aggregator/daemon.h"
#include "cluster/node.h"
#include "common/file_util.h"
#include "common/memory.h"
#include "tools/daemon/flags.h"

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
  spdlog::info("received {}: stopping {}", signal_number == SIGTERM ? "SIGTERM" : "SIGINT",
               node_name);
  absl::Status stopped = (*node)->Stop();
  node->reset();
  return stopped.ok() ? 0 : 1;
}

// Blocks the signals sigwait takes, before any thread starts, so that none of the service's
// threads is interrupted by them.
sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signals;
}

// Every role in one process, until SIGTERM or SIGINT.
int RunOneProcess(const agg::DaemonConfig& config, sigset_t& signals) {
  if (config.data_dir.empty()) {
    std::cerr << "tweetsearchd: --data-dir (or data_dir in --config) is required\n";
    return 2;
  }
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

}  // namespace

int main(int argc, char** argv) {
  sigset_t signals = BlockStopSignals();
  // Abseil's lock-order graph (on in Debian's build) costs every mutex acquisition a lookup; it
  // is for tests, which keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  tweetsearch::ReturnLargeBuffersToTheSystem();
  const uint64_t open_files = tweetsearch::RaiseOpenFileLimit();

  CLI::App app{
      "tweetsearchd: the tweetsearch service (all roles in one process, or one role of a "
      "cluster)"};
  tweetsearch::tools::DaemonFlags flags(app);
  CLI11_PARSE(app, argc, argv);
  absl::StatusOr<agg::DaemonConfig> config = flags.Config();
  if (!config.ok()) {
    std::cerr << "tweetsearchd: " << config.status().message() << "\n";
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(config->log_level));
  spdlog::debug("open-file limit: {}", open_files);
  if (!flags.topology_file().empty()) {
    return RunClusterNode(flags.topology_file(), flags.role(), flags.node(), *config, signals);
  }
  return RunOneProcess(*config, signals);
}
