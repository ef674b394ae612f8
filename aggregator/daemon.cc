#include "aggregator/daemon.h"

#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "aggregator/api_keys.h"
#include "aggregator/front_door.h"
#include "aggregator/grpc_service.h"
#include "aggregator/limiter_gate.h"
#include "aggregator/metrics.h"
#include "aggregator/page_token.h"
#include "common/file_util.h"
#include "common/periodic.h"
#include "common/sample_tweets.h"
#include "common/strings.h"
#include "limiter/redis_limiter.h"
#include "usage/usage_recorder.h"
#include "usage/usage_store.h"

namespace tweetsearch::aggregator {
namespace {

// A secret file: read it, or create it with `make()` and mode 0600.
absl::StatusOr<std::string> ReadOrCreateSecret(
    const std::string& path, const std::function<absl::StatusOr<std::string>()>& make) {
  if (std::filesystem::exists(path)) return ReadFile(path);
  absl::StatusOr<std::string> value = make();
  if (!value.ok()) return value.status();
  if (absl::Status s = WriteFileAtomically(path, *value); !s.ok()) return s;
  chmod(path.c_str(), 0600);
  return value;
}

absl::Status LoadSample(Engine& engine, uint64_t count, const Clock& clock) {
  SampleOptions options;
  options.count = count;
  options.now_ms = clock.NowUnixMillis() - 1000;  // the newest a second old
  SampleTweetGenerator generator(options);
  const auto start = std::chrono::steady_clock::now();
  uint64_t accepted = 0;
  while (accepted < count) {
    std::vector<NewTweet> batch;
    const uint64_t n = std::min<uint64_t>(10'000, count - accepted);
    for (uint64_t i = 0; i < n; ++i) batch.push_back(ToNewTweet(generator.Next()));
    for (const IngestOutcome& o : engine.Ingest(std::move(batch))) {
      if (!o.status.ok()) return o.status;
      ++accepted;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  spdlog::info("loaded {} sample tweets in {:.1f} s ({:.0f} tweets/s)", accepted, seconds,
               accepted / std::max(seconds, 1e-9));
  return engine.Checkpoint();
}

class DaemonImpl final : public Daemon {
 public:
  uint16_t http_port() const override { return http_->port(); }
  uint16_t grpc_port() const override { return grpc_ ? grpc_->port() : 0; }
  const std::string& admin_key() const override { return admin_key_; }

  absl::Status ReloadLimits() override {
    if (gate_ == nullptr) return absl::OkStatus();
    absl::Status s = gate_->limiter().Reload();
    if (s.ok()) {
      spdlog::info("quota rules reloaded from {}", gate_->limiter().rules_path());
    } else {
      spdlog::error("quota rules rejected, the previous rules stay in force: {}", s.message());
    }
    return s;
  }

  // Reloads the rules whenever the file changes (its inode, size or modification time: a
  // file replaced twice within the kernel's coarse time stamp differs by inode), and logs when
  // the quota store (Redis) goes down or comes back.
  void WatchLimits(std::string path, int64_t poll_ms) {
    watcher_ = std::thread([this, path = std::move(path), poll_ms] {
      FileVersion seen = VersionOf(path);
      bool redis_up = true;
      absl::MutexLock lock(&watch_mu_);
      while (!watch_stop_) {
        watch_mu_.AwaitWithTimeout(absl::Condition(&watch_stop_), absl::Milliseconds(poll_ms));
        if (watch_stop_) break;
        const FileVersion now = VersionOf(path);
        if (now != FileVersion{} && now != seen) {
          seen = now;
          (void)ReloadLimits();  // logs its outcome
        }
        const limiter::LimiterStats stats = gate_->limiter().Stats();
        if (stats.uses_redis && stats.redis_up != redis_up) {
          redis_up = stats.redis_up;
          if (redis_up) {
            spdlog::info("Redis is back: quotas are shared again");
          } else {
            spdlog::warn(
                "Redis is unreachable: quotas are decided locally, within this front door's "
                "share (or refused, for fail: closed limits), until it returns");
          }
        }
      }
    });
  }

  absl::Status Stop() override {
    if (stopped_) return absl::OkStatus();
    stopped_ = true;
    if (watcher_.joinable()) {
      {
        absl::MutexLock lock(&watch_mu_);
        watch_stop_ = true;
      }
      watcher_.join();
    }
    // A start that failed half way stops here too: every part may be missing.
    if (http_ != nullptr) spdlog::info("shutting down: finishing requests in flight");
    if (handler_ != nullptr) handler_->set_ready(false);
    if (http_ != nullptr) http_->Shutdown(std::chrono::seconds(20));
    if (grpc_) grpc_->Shutdown(std::chrono::seconds(5));
    sampler_.reset();
    if (usage_recorder_ != nullptr) {
      usage_recorder_->Stop();
      if (usage_recorder_->Stats().flush_errors > 0) {
        spdlog::warn("some usage counts could not be saved ({} failed flushes)",
                     usage_recorder_->Stats().flush_errors);
      }
      // Gone before the backend, which a cluster's usage store writes through.
      if (handler_ != nullptr) handler_->set_usage(nullptr);
      if (door_ != nullptr) door_->set_usage_store(nullptr);
      usage_recorder_.reset();
    }
    usage_store_.reset();
    if (engine_ == nullptr) {
      backend_.reset();
      return absl::OkStatus();
    }
    absl::Status s = engine_->Checkpoint();
    if (s.ok()) {
      spdlog::info("index saved; stopped cleanly");
    } else {
      spdlog::error("saving the index failed ({}); the next start replays the change log",
                    s.ToString());
    }
    return s;
  }

  // Counts every call into `usage` (null: a store of its own in the data directory), flushed
  // every usage_flush_ms; the front door reads the series from it.
  absl::Status StartUsage(const DaemonConfig& config, std::unique_ptr<usage::UsageStore> usage) {
    if (usage != nullptr) {
      usage_store_ = std::move(usage);
    } else {
      absl::StatusOr<std::unique_ptr<usage::UsageStore>> store =
          usage::UsageStore::Open(config.data_dir + "/usage", SystemClock());
      if (!store.ok()) return store.status();
      usage_store_ = *std::move(store);
    }
    usage_recorder_ = std::make_unique<usage::UsageRecorder>(
        *usage_store_, SystemClock(),
        usage::UsageRecorderOptions{.flush_interval_ms = config.usage_flush_ms});
    usage_recorder_->Start();
    door_->set_usage_store(usage_store_.get());
    handler_->set_usage(usage_recorder_.get());
    return absl::OkStatus();
  }

  ~DaemonImpl() override {
    // Stop() logs what went wrong; a destructor has nobody to report to.
    (void)Stop();
  }

  std::unique_ptr<Backend> backend_;
  Engine* engine_ = nullptr;  // backend_ in the one-process shape
  std::unique_ptr<KeyRegistry> keys_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<FrontDoor> door_;
  std::unique_ptr<ApiHandler> handler_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<GrpcServer> grpc_;
  std::shared_ptr<LimiterGate> gate_;
  std::unique_ptr<usage::UsageStore> usage_store_;
  std::unique_ptr<usage::UsageRecorder> usage_recorder_;
  RateMeter ingest_rate_;
  std::unique_ptr<PeriodicTask> sampler_;  // samples the ingest rate once a second
  std::string admin_key_;
  bool stopped_ = false;
  std::thread watcher_;
  absl::Mutex watch_mu_;
  bool watch_stop_ ABSL_GUARDED_BY(watch_mu_) = false;
};

template <typename T>
absl::Status Read(const YAML::Node& node, const char* key, T* out) {
  try {
    *out = node.as<T>();
    return absl::OkStatus();
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(StrCat("config key '", key, "': ", e.what()));
  }
}

// Registers the demo key with the configured scopes (on first start), or gives it those scopes.
absl::Status SetUpDemoKey(const DaemonConfig& config, KeyRegistry& keys, bool first_start,
                          bool shared_keys) {
  uint8_t scopes = 0;
  for (const std::string& name : config.demo_key_scopes) {
    absl::StatusOr<Scope> scope = ParseScope(name);
    if (!scope.ok()) {
      return absl::InvalidArgumentError(StrCat("demo_key_scopes: ", scope.status().message()));
    }
    scopes |= static_cast<uint8_t>(*scope);
  }
  if (scopes == 0) {
    return absl::InvalidArgumentError(
        "demo_key_scopes is empty: give at least one scope, or turn the demo key off");
  }
  // A shared registry is older than this process: the demo key is registered by the first
  // front door to start, and given these scopes by every later one.
  absl::Status s = first_start || shared_keys ? keys.Register(kDemoKey, "demo", "demo", scopes)
                                              : keys.SetScopes(kDemoKey, scopes);
  if (shared_keys && absl::IsAlreadyExists(s)) s = keys.SetScopes(kDemoKey, scopes);
  if (!s.ok() && !absl::IsAlreadyExists(s) && !absl::IsNotFound(s)) return s;
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadDaemonConfigFile(const std::string& path, DaemonConfig* c) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(StrCat("config ", path, ": ", e.what()));
  }
  if (root.IsNull()) return absl::OkStatus();
  if (!root.IsMap()) return absl::InvalidArgumentError(StrCat("config ", path, " is not a map"));
  for (const auto& entry : root) {
    if (!entry.first.IsScalar()) {
      return absl::InvalidArgumentError(StrCat("config ", path, ": keys must be plain names"));
    }
    const std::string key = entry.first.Scalar();
    const YAML::Node& v = entry.second;
    absl::Status s;
    uint64_t block_cache_mb = 0, min_free_disk_mb = 0;
    int port = 0;
    if (key == "data_dir")
      s = Read(v, "data_dir", &c->data_dir);
    else if (key == "http_address")
      s = Read(v, "http_address", &c->http.address);
    else if (key == "http_port") {
      s = Read(v, "http_port", &port);
      if (s.ok() && (port < 0 || port > 65535))
        s = absl::InvalidArgumentError("http_port out of range");
      c->http.port = static_cast<uint16_t>(port);
    } else if (key == "grpc_port") {
      s = Read(v, "grpc_port", &c->grpc_port);
      if (s.ok() && (c->grpc_port < -1 || c->grpc_port > 65535)) {
        s = absl::InvalidArgumentError("grpc_port out of range");
      }
    } else if (key == "sample")
      s = Read(v, "sample", &c->sample);
    else if (key == "demo_key")
      s = Read(v, "demo_key", &c->demo_key);
    else if (key == "demo_key_scopes")
      s = Read(v, "demo_key_scopes", &c->demo_key_scopes);
    else if (key == "allowed_hosts")
      s = Read(v, "allowed_hosts", &c->http.allowed_hosts);
    else if (key == "max_connections")
      s = Read(v, "max_connections", &c->http.max_connections);
    else if (key == "max_connections_per_client") {
      s = Read(v, "max_connections_per_client", &c->http.max_connections_per_client);
    } else if (key == "max_body_bytes")
      s = Read(v, "max_body_bytes", &c->http.max_body_bytes);
    else if (key == "io_threads")
      s = Read(v, "io_threads", &c->http.io_threads);
    else if (key == "worker_threads")
      s = Read(v, "worker_threads", &c->http.worker_threads);
    else if (key == "max_text_bytes")
      s = Read(v, "max_text_bytes", &c->engine.max_text_bytes);
    else if (key == "checkpoint_every")
      s = Read(v, "checkpoint_every", &c->engine.checkpoint_every);
    else if (key == "segment_max_docs") {
      s = Read(v, "segment_max_docs", &c->engine.index.segment_max_docs);
    } else if (key == "merge_factor") {
      s = Read(v, "merge_factor", &c->engine.index.merge.merge_factor);
    } else if (key == "node_id")
      s = Read(v, "node_id", &c->engine.node_id);
    else if (key == "min_free_disk_mb") {
      s = Read(v, "min_free_disk_mb", &min_free_disk_mb);
      c->engine.store.min_free_disk_bytes = min_free_disk_mb << 20;
    } else if (key == "block_cache_mb") {
      s = Read(v, "block_cache_mb", &block_cache_mb);
      c->engine.store.block_cache_bytes = block_cache_mb << 20;
    } else if (key == "sync_writes")
      s = Read(v, "sync_writes", &c->engine.store.sync_writes);
    else if (key == "port_file")
      s = Read(v, "port_file", &c->port_file);
    else if (key == "log_level")
      s = Read(v, "log_level", &c->log_level);
    else if (key == "limits_file")
      s = Read(v, "limits_file", &c->limits_file);
    else if (key == "limits_poll_ms")
      s = Read(v, "limits_poll_ms", &c->limits_poll_ms);
    else if (key == "limiter_max_keys")
      s = Read(v, "limiter_max_keys", &c->limiter_max_keys);
    else if (key == "redis")
      s = Read(v, "redis", &c->redis);
    else if (key == "usage_flush_ms")
      s = Read(v, "usage_flush_ms", &c->usage_flush_ms);
    else
      s = absl::InvalidArgumentError(StrCat("config ", path, ": unknown key '", key, "'"));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(const DaemonConfig& config,
                                                      std::unique_ptr<Backend> backend,
                                                      std::unique_ptr<KeyRegistry> keys,
                                                      std::unique_ptr<usage::UsageStore> usage) {
  if (config.data_dir.empty()) return absl::InvalidArgumentError("data_dir is required");
  auto d = std::make_unique<DaemonImpl>();
  std::error_code ec;
  std::filesystem::create_directories(config.data_dir, ec);
  if (ec)
    return absl::UnavailableError(StrCat("cannot create ", config.data_dir, ": ", ec.message()));
  const bool first_start = !std::filesystem::exists(config.data_dir + "/keys/CURRENT");
  const bool shared_keys = keys != nullptr;

  if (backend != nullptr) {
    d->backend_ = std::move(backend);
  } else {
    EngineOptions engine_options = config.engine;
    engine_options.data_dir = config.data_dir;
    const auto open_start = std::chrono::steady_clock::now();
    absl::StatusOr<std::unique_ptr<Engine>> engine = Engine::Open(engine_options, SystemClock());
    if (!engine.ok()) return engine.status();
    d->engine_ = engine->get();
    d->backend_ = *std::move(engine);
    const EngineStats stats = d->engine_->Stats();
    spdlog::info(
        "opened {} in {:.2f} s: {} tweets indexed, change {} (index saved at {})", config.data_dir,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - open_start).count(),
        stats.indexed_documents, stats.last_change, stats.checkpoint_change);
  }

  if (shared_keys) {
    d->keys_ = std::move(keys);
  } else {
    absl::StatusOr<std::unique_ptr<KeyRegistry>> local =
        KeyRegistry::Open(config.data_dir + "/keys");
    if (!local.ok()) return local.status();
    d->keys_ = *std::move(local);
  }
  if (config.demo_key) {
    if (absl::Status s = SetUpDemoKey(config, *d->keys_, first_start, shared_keys); !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<std::string> admin = ReadOrCreateSecret(config.data_dir + "/admin.key", [&] {
    return d->keys_->Create(
        "admin", "admin",
        uint8_t(Scope::kSearch) | uint8_t(Scope::kIngest) | uint8_t(Scope::kAdmin));
  });
  if (!admin.ok()) return admin.status();
  d->admin_key_ = *admin;
  absl::StatusOr<std::string> secret =
      ReadOrCreateSecret(config.data_dir + "/page_token.secret",
                         []() -> absl::StatusOr<std::string> { return NewSecret(); });
  if (!secret.ok()) return secret.status();
  if (secret->size() < 16) {
    return absl::DataLossError(StrCat(config.data_dir, "/page_token.secret is under 16 bytes"));
  }

  if (first_start && config.sample > 0 && d->engine_ != nullptr) {
    if (absl::Status s = LoadSample(*d->engine_, config.sample, SystemClock()); !s.ok()) return s;
  }

  d->metrics_ = std::make_unique<Metrics>();
  d->door_ = std::make_unique<FrontDoor>(*d->backend_, *d->keys_, PageTokenCodec(*secret));
  d->handler_ = std::make_unique<ApiHandler>(*d->door_, *d->metrics_);
  d->handler_->set_ingest_rate(&d->ingest_rate_);
  d->sampler_ = std::make_unique<PeriodicTask>(absl::Seconds(1), [d = d.get()] {
    d->ingest_rate_.Sample(SystemClock().NowUnixMillis(), d->backend_->tweets_ingested());
  });
  if (config.usage_flush_ms > 0) {
    if (absl::Status st = d->StartUsage(config, std::move(usage)); !st.ok()) return st;
  }
  if (!config.limits_file.empty()) {
    limiter::LimiterOptions limiter_options;
    limiter_options.rules_path = config.limits_file;
    limiter_options.max_keys = config.limiter_max_keys;
    absl::StatusOr<std::unique_ptr<limiter::Limiter>> limiter;
    std::unique_ptr<limiter::StreamSlots> stream_slots;
    if (config.redis.empty()) {
      limiter = limiter::Limiter::Create(limiter_options, SystemClock());
    } else {
      limiter::RedisOptions redis;
      const size_t colon = config.redis.rfind(':');
      if (colon == std::string::npos ||
          !absl::SimpleAtoi(config.redis.substr(colon + 1), &redis.port)) {
        return absl::InvalidArgumentError(StrCat("redis '", config.redis, "' is not HOST:PORT"));
      }
      redis.host = config.redis.substr(0, colon);
      limiter = limiter::CreateRedisLimiter(limiter_options, redis, SystemClock());
      // Open streams count against max_streams on every front door together; a dead front
      // door's lapse within 15 s. Opening a stream is rare and not latency-bound: its Redis
      // calls may take longer than a quota check's before the front door counts alone.
      limiter::RedisOptions slots_redis = redis;
      slots_redis.command_timeout_ms = 500;
      stream_slots = std::make_unique<limiter::StreamSlots>(slots_redis, std::chrono::seconds(15));
      spdlog::info("quota state in Redis at {}", config.redis);
    }
    if (!limiter.ok()) return limiter.status();
    d->gate_ = std::make_shared<LimiterGate>(*std::move(limiter), std::move(stream_slots));
    d->door_->set_gate(d->gate_);
    d->handler_->add_extra_metrics(
        [gate = d->gate_](std::string* out) { gate->RenderMetrics(out); });
    if (config.limits_poll_ms > 0) d->WatchLimits(config.limits_file, config.limits_poll_ms);
    spdlog::info("quota rules from {}", config.limits_file);
  }
  absl::StatusOr<std::unique_ptr<HttpServer>> http = HttpServer::Start(config.http, *d->handler_);
  if (!http.ok()) return http.status();
  d->http_ = *std::move(http);
  d->handler_->add_extra_metrics(
      [server = d->http_.get()](std::string* out) { server->RenderMetrics(out); });
  spdlog::info("HTTP connections capped at {} ({} per client address)", d->http_->max_connections(),
               config.http.max_connections_per_client);
  if (config.grpc_port >= 0) {
    absl::StatusOr<std::unique_ptr<GrpcServer>> grpc = GrpcServer::Start(
        config.http.address, static_cast<uint16_t>(config.grpc_port), *d->door_, *d->metrics_);
    if (!grpc.ok()) return grpc.status();
    d->grpc_ = *std::move(grpc);
  }
  d->handler_->set_ready(true);

  const std::string host = config.http.address == "0.0.0.0" || config.http.address == "::"
                               ? "127.0.0.1"
                               : config.http.address;
  spdlog::info("HTTP on http://{}:{}  gRPC on {}", host, d->http_port(),
               d->grpc_ ? StrCat(host, ":", d->grpc_port()) : std::string("(off)"));
  if (config.demo_key) {
    spdlog::info("try: curl 'http://{}:{}/v1/search?api_dev_key={}&search_terms=love'", host,
                 d->http_port(), kDemoKey);
  }
  spdlog::info("web page: http://{}:{}/  (dashboard: /dashboard, with the admin key)", host,
               d->http_port());
  spdlog::info("admin key in {}/admin.key", config.data_dir);
  if (!config.port_file.empty()) {
    if (absl::Status s = WriteFileAtomically(
            config.port_file,
            StrCat("{\"http_port\": ", d->http_port(), ", \"grpc_port\": ", d->grpc_port(), "}\n"));
        !s.ok()) {
      return s;
    }
  }
  return std::unique_ptr<Daemon>(std::move(d));
}

}  // namespace tweetsearch::aggregator
