#include "tools/daemon/flags.h"

#include <type_traits>

namespace tweetsearch::tools {

using aggregator::DaemonConfig;

template <typename Field>
CLI::Option* DaemonFlags::Bind(CLI::App& app, const std::string& name, Field field,
                               const std::string& help) {
  using T = std::remove_reference_t<std::invoke_result_t<Field, DaemonConfig&>>;
  return app.add_option_function<T>(
      name,
      [this, field](const T& value) {
        overrides_.push_back([field, value](DaemonConfig& c) { field(c) = value; });
      },
      help);
}

DaemonFlags::DaemonFlags(CLI::App& app) {
  app.add_option("--config", config_file_, "YAML config file (flags given here win)");
  Bind(
      app, "--data-dir", [](DaemonConfig & c) -> auto& { return c.data_dir; }, "Data directory");
  Bind(
      app, "--http-address", [](DaemonConfig & c) -> auto& { return c.http.address; },
      "Listen address");
  Bind(
      app, "--http-port", [](DaemonConfig & c) -> auto& { return c.http.port; },
      "HTTP port (0 picks a free one; default 8080)")
      ->check(CLI::Range(0, 65535));
  Bind(
      app, "--grpc-port", [](DaemonConfig & c) -> auto& { return c.grpc_port; },
      "gRPC port (0 free, -1 off; default 9090)")
      ->check(CLI::Range(-1, 65535));
  Bind(
      app, "--sample", [](DaemonConfig & c) -> auto& { return c.sample; },
      "Synthetic tweets loaded on first start (0: none; default 300000)");
  Bind(
      app, "--max-body-bytes", [](DaemonConfig & c) -> auto& { return c.http.max_body_bytes; },
      "Largest request body (larger: 413)");
  Bind(
      app, "--io-threads", [](DaemonConfig & c) -> auto& { return c.http.io_threads; },
      "Network threads (0: 2; a cluster's front door 16)");
  Bind(
      app, "--worker-threads", [](DaemonConfig & c) -> auto& { return c.http.worker_threads; },
      "Threads for ingest and other disk work");
  Bind(
      app, "--checkpoint-every",
      [](DaemonConfig & c) -> auto& { return c.engine.checkpoint_every; },
      "Changes between index checkpoints");
  Bind(
      app, "--segment-max-docs",
      [](DaemonConfig & c) -> auto& { return c.engine.index.segment_max_docs; },
      "Tweets an index segment takes before it is sealed");
  Bind(
      app, "--merge-factor",
      [](DaemonConfig & c) -> auto& { return c.engine.index.merge.merge_factor; },
      "Index segments merged at once (and the size ratio of tiers)");
  Bind(
      app, "--port-file", [](DaemonConfig & c) -> auto& { return c.port_file; },
      "Write {\"http_port\",\"grpc_port\"} JSON here once serving");
  Bind(
      app, "--log-level", [](DaemonConfig & c) -> auto& { return c.log_level; },
      "trace, debug, info, warn, error");
  Bind(
      app, "--limits", [](DaemonConfig & c) -> auto& { return c.limits_file; },
      "Quota rules (YAML); reloaded on SIGHUP and when the file changes");
  Bind(
      app, "--redis", [](DaemonConfig & c) -> auto& { return c.redis; },
      "HOST:PORT of a Redis holding quota state shared by front doors");
  Bind(
      app, "--usage-flush-ms", [](DaemonConfig & c) -> auto& { return c.usage_flush_ms; },
      "Milliseconds between usage flushes (0: usage off)")
      ->check(CLI::Range(int64_t{0}, int64_t{3'600'000}));
  Bind(
      app, "--demo-key-scopes", [](DaemonConfig & c) -> auto& { return c.demo_key_scopes; },
      "The public demo key's scopes (default: search only)")
      ->delimiter(',');
  Bind(
      app, "--allowed-hosts", [](DaemonConfig & c) -> auto& { return c.http.allowed_hosts; },
      "Host names answered besides IP literals and localhost (* any)")
      ->delimiter(',');
  Bind(
      app, "--max-connections", [](DaemonConfig & c) -> auto& { return c.http.max_connections; },
      "Most open HTTP connections (0: from the open-file limit)");
  Bind(
      app, "--max-connections-per-client",
      [](DaemonConfig & c) -> auto& { return c.http.max_connections_per_client; },
      "Most open HTTP connections from one address");
  app.add_option_function<uint64_t>(
      "--min-free-disk-mb",
      [this](uint64_t mb) {
        overrides_.push_back(
            [mb](DaemonConfig& c) { c.engine.store.min_free_disk_bytes = mb << 20; });
      },
      "Refuse writes while the data disk has less free (0: off; default 64)");
  app.add_flag_callback(
      "--no-demo-key",
      [this] { overrides_.push_back([](DaemonConfig& c) { c.demo_key = false; }); },
      "Do not register the demo key on first start");
  app.add_option("--topology", topology_file_, "Cluster topology (YAML): run one role of it");
  app.add_option("--role", role_, "With --topology: storage, index or aggregator");
  app.add_option("--node", node_, "With --topology: this process's node name");
}

absl::StatusOr<DaemonConfig> DaemonFlags::Config() const {
  DaemonConfig config;
  if (!config_file_.empty()) {
    if (absl::Status s = aggregator::LoadDaemonConfigFile(config_file_, &config); !s.ok()) {
      return s;
    }
  }
  for (const Override& apply : overrides_) apply(config);
  return config;
}

}  // namespace tweetsearch::tools
