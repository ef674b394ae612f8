// Daemon: every role of tweetsearchd in one process (the embedded shape): the Engine (storage
// and index) on a data directory, the key registry, the front door over HTTP and gRPC.
//
// Data directory layout:
//   storage/           RocksDB: tweets and the change log
//   index/             saved index segments, MANIFEST, CHECKPOINT
//   keys/              RocksDB: API key registry
//   usage/             RocksDB: usage series per key (usage/usage_store.h); in a cluster they
//                      are kept in the storage partitions (cluster/cluster_usage.h)
//   page_token.secret  HMAC key of page tokens (created on first start, mode 0600)
//   admin.key          the first admin API key (created on first start, mode 0600)
//
// Thread-safety: Start/Stop from one controlling thread.
#ifndef TWEETSEARCH_AGGREGATOR_DAEMON_H_
#define TWEETSEARCH_AGGREGATOR_DAEMON_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "aggregator/api_keys.h"
#include "aggregator/backend.h"
#include "aggregator/engine.h"
#include "aggregator/http/http_server.h"
#include "usage/usage_store.h"

namespace tweetsearch::aggregator {

struct DaemonConfig {
  // Where everything lives. Required.
  std::string data_dir;
  // HTTP front door (address, port 8080; 0 picks a free port, body limit, threads).
  HttpServerOptions http;
  // gRPC front door port; 0 picks a free one; -1 turns gRPC off. Default 9090.
  int grpc_port = 9090;
  // Synthetic tweets loaded on the first start with an empty data directory. Default 300,000;
  // 0 loads nothing.
  uint64_t sample = 300'000;
  // Register the documented demo key (kDemoKey) on first start. Default true.
  bool demo_key = true;
  // The demo key's scopes ("search", "ingest", "admin"), set at every start. The key is
  // public, so the default is {"search"}: any web page a user visits could otherwise write
  // through it (docs/security.md).
  std::vector<std::string> demo_key_scopes = {"search"};
  // Engine settings (text limit, checkpoint interval, snowflake node id, store tuning).
  EngineOptions engine;
  // When set, a JSON file {"http_port": N, "grpc_port": N} is written here once serving (for
  // scripts and tests that start the daemon on port 0).
  std::string port_file;
  // spdlog level: trace, debug, info, warn, error. Default info.
  std::string log_level = "info";
  // The quota rules (YAML, docs/limiter.md); empty: no quotas. Reloaded on SIGHUP
  // (ReloadLimits) and when the file changes.
  std::string limits_file;
  // How often the rules file is checked for changes, ms; 0 turns the check off. Default 1000.
  int64_t limits_poll_ms = 1000;
  // Most per-key quota states kept in memory. Default 1,000,000.
  size_t limiter_max_keys = 1'000'000;
  // "HOST:PORT" of a Redis that holds the quota state, shared by every front door using it;
  // empty: state in process memory. Redis being down never stops the service (docs/limiter.md).
  std::string redis;
  // Milliseconds between flushes of the usage counts to <data_dir>/usage; a crash loses at most
  // this much. 0 turns usage analytics off. Default 5000.
  int64_t usage_flush_ms = 5000;
};

// Reads a YAML config file into `config` (only the keys present change). Keys: data_dir,
// http_address, http_port, grpc_port, sample, demo_key, demo_key_scopes, allowed_hosts,
// max_connections, max_connections_per_client, min_free_disk_mb, max_body_bytes, io_threads,
// worker_threads, max_text_bytes, checkpoint_every, segment_max_docs, merge_factor, node_id,
// block_cache_mb, sync_writes,
// port_file, log_level, limits_file, limits_poll_ms, limiter_max_keys, redis, usage_flush_ms.
// InvalidArgument naming the key for a bad value or an unknown key.
absl::Status LoadDaemonConfigFile(const std::string& path, DaemonConfig* config);

class Daemon {
 public:
  // Opens the data directory, loads the sample on first start, and starts serving. With a
  // `backend` (a cluster's front door) the daemon serves it instead of opening an Engine on
  // the data directory, which then only holds the keys, usage series and secrets. With `keys`
  // (a cluster's shared registry) the API keys are those, not the data directory's; with
  // `usage` (a cluster's shared series) the usage series are kept there. A `usage` store that
  // refers to `backend` is fine: the daemon lets go of it first.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(
      const DaemonConfig& config, std::unique_ptr<Backend> backend = nullptr,
      std::unique_ptr<KeyRegistry> keys = nullptr,
      std::unique_ptr<usage::UsageStore> usage = nullptr);
  virtual ~Daemon() = default;

  virtual uint16_t http_port() const = 0;
  virtual uint16_t grpc_port() const = 0;  // 0 when gRPC is off
  // The admin key made on first start (read back from the data directory).
  virtual const std::string& admin_key() const = 0;
  // Graceful stop: not ready, stop accepting, finish requests in flight, checkpoint the index.
  virtual absl::Status Stop() = 0;
  // Re-reads the quota rules; a broken file is logged and the previous rules stay.
  virtual absl::Status ReloadLimits() = 0;
};

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_DAEMON_H_
