#include "aggregator/limiter_gate.h"

#include <chrono>
#include <thread>

#include "common/strings.h"

namespace tweetsearch::aggregator {
namespace {

std::string_view RuleEndpoint(Endpoint e) {
  switch (e) {
    case Endpoint::kSearch:
    case Endpoint::kRead:
      return "search";
    case Endpoint::kIngest:
    case Endpoint::kWrite:
      return "ingest";
    case Endpoint::kAdmin:
      return "admin";
    case Endpoint::kStreamEvents:
      return "stream";
  }
  return "search";
}

int64_t Seconds(int64_t ms) { return (ms + 999) / 1000; }

}  // namespace

LimiterGate::LimiterGate(std::unique_ptr<limiter::Limiter> limiter,
                         std::unique_ptr<limiter::StreamSlots> slots)
    : limiter_(std::move(limiter)), slots_(std::move(slots)) {}

absl::Status LimiterGate::Admit(const ApiKey* key, Endpoint endpoint, uint64_t cost,
                                CallContext* call) {
  limiter::CheckRequest request;
  if (key != nullptr) {
    request.key_id = key->id;
    request.key_prefix = key->prefix;
    request.tier = key->tier;
  }
  request.endpoint = RuleEndpoint(endpoint);
  request.client_ip = call != nullptr ? std::string_view(call->client_ip) : std::string_view();
  request.units = cost;
  const limiter::Verdict v = limiter_->Check(request);
  if (!v.shadow_exceeded.empty() || !v.allowed) {
    absl::MutexLock lock(&mu_);
    for (const std::string& name : v.shadow_exceeded) ++shadow_by_[name];
    if (!v.allowed) ++refused_by_[v.limited_by];
  }
  if (call != nullptr && v.has_quota) {
    call->headers.emplace_back("X-Ratelimit-Limit", StrCat(v.limit));
    call->headers.emplace_back("X-Ratelimit-Remaining", StrCat(v.remaining));
    call->headers.emplace_back("RateLimit-Policy", v.Policy());
    call->headers.emplace_back("RateLimit", StrCat("limit=", v.limit, ", remaining=", v.remaining,
                                                   ", reset=", Seconds(v.reset_ms)));
  }
  if (!v.allowed) {
    const int64_t retry = std::max<int64_t>(1, Seconds(v.retry_after_ms));
    if (call != nullptr) {
      call->limited_by = v.limited_by;
      call->headers.emplace_back("X-Ratelimit-Retry-After", StrCat(retry));
      call->headers.emplace_back("Retry-After", StrCat(retry));
    }
    return absl::ResourceExhaustedError(
        StrCat("rate limit '", v.limited_by, "' exceeded; retry after ", retry, " s"));
  }
  if (v.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(v.delay_ms));
  return absl::OkStatus();
}

std::optional<uint32_t> LimiterGate::MaxStreams(const ApiKey& key) {
  return limiter_->MaxStreams(key.prefix, key.tier);
}

namespace {

class SharedStreamSlot final : public StreamSlot {
 public:
  SharedStreamSlot(limiter::StreamSlots& slots, std::string key, std::string slot)
      : slots_(slots), key_(std::move(key)), slot_(std::move(slot)) {}
  ~SharedStreamSlot() override { slots_.Give(key_, slot_); }

 private:
  limiter::StreamSlots& slots_;
  const std::string key_, slot_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StreamSlot>> LimiterGate::TakeStreamSlot(const ApiKey& key,
                                                                        uint32_t cap) {
  if (slots_ == nullptr) return nullptr;
  absl::StatusOr<std::string> slot = slots_->Take(key.id, cap);
  if (absl::IsUnavailable(slot.status())) return nullptr;  // each front door counts alone
  if (!slot.ok()) return slot.status();
  return std::make_unique<SharedStreamSlot>(*slots_, key.id, *std::move(slot));
}

void LimiterGate::RenderMetrics(std::string* out) const {
  const limiter::LimiterStats s = limiter_->Stats();
  StrAppend(out,
            "# HELP tweetsearch_ratelimit_checks_total Quota checks made.\n"
            "# TYPE tweetsearch_ratelimit_checks_total counter\n"
            "tweetsearch_ratelimit_checks_total ",
            s.checks, "\n",
            "# HELP tweetsearch_ratelimit_keys Keys with quota state in memory.\n"
            "# TYPE tweetsearch_ratelimit_keys gauge\n"
            "tweetsearch_ratelimit_keys ",
            s.keys, "\n",
            "# HELP tweetsearch_ratelimit_evicted_total States dropped to bound memory.\n"
            "# TYPE tweetsearch_ratelimit_evicted_total counter\n"
            "tweetsearch_ratelimit_evicted_total ",
            s.evicted, "\n",
            "# HELP tweetsearch_ratelimit_reloads_total Rule reloads, by result.\n"
            "# TYPE tweetsearch_ratelimit_reloads_total counter\n"
            "tweetsearch_ratelimit_reloads_total{result=\"ok\"} ",
            s.reloads, "\n", "tweetsearch_ratelimit_reloads_total{result=\"error\"} ",
            s.reload_errors, "\n");
  if (s.uses_redis) {
    StrAppend(out,
              "# HELP tweetsearch_ratelimit_redis_up Whether the quota store (Redis) answers.\n"
              "# TYPE tweetsearch_ratelimit_redis_up gauge\n"
              "tweetsearch_ratelimit_redis_up ",
              s.redis_up ? 1 : 0, "\n",
              "# HELP tweetsearch_ratelimit_redis_errors_total Failed or timed-out Redis calls.\n"
              "# TYPE tweetsearch_ratelimit_redis_errors_total counter\n"
              "tweetsearch_ratelimit_redis_errors_total ",
              s.redis_errors, "\n",
              "# HELP tweetsearch_ratelimit_local_fallbacks_total Checks decided locally while "
              "Redis was down.\n"
              "# TYPE tweetsearch_ratelimit_local_fallbacks_total counter\n"
              "tweetsearch_ratelimit_local_fallbacks_total ",
              s.local_fallbacks, "\n",
              "# HELP tweetsearch_ratelimit_refused_again_total Checks refused without asking "
              "Redis, which had refused them until a later time.\n"
              "# TYPE tweetsearch_ratelimit_refused_again_total counter\n"
              "tweetsearch_ratelimit_refused_again_total ",
              s.refused_again, "\n");
  }
  absl::MutexLock lock(&mu_);
  StrAppend(out, "# HELP tweetsearch_ratelimit_refused_total Requests refused, by limit.\n",
            "# TYPE tweetsearch_ratelimit_refused_total counter\n");
  for (const auto& [name, n] : refused_by_) {
    StrAppend(out, "tweetsearch_ratelimit_refused_total{limit=\"", name, "\"} ", n, "\n");
  }
  StrAppend(out,
            "# HELP tweetsearch_ratelimit_shadow_exceeded_total Requests over a shadow limit.\n",
            "# TYPE tweetsearch_ratelimit_shadow_exceeded_total counter\n");
  for (const auto& [name, n] : shadow_by_) {
    StrAppend(out, "tweetsearch_ratelimit_shadow_exceeded_total{limit=\"", name, "\"} ", n, "\n");
  }
}

}  // namespace tweetsearch::aggregator
