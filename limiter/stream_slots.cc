#include "limiter/stream_slots.h"

#include <vector>

#include "common/strings.h"
#include "limiter/redis_util.h"

namespace tweetsearch::limiter {
namespace {

// KEYS[1]: the key's set; ARGV: the slot, the cap, the lease (ms). 1 if taken, 0 if the key
// holds the cap already. Lapsed slots (of front doors that died) are dropped first.
constexpr char kTakeScript[] = R"lua(
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ms + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
return 1
)lua";

// KEYS[1]: the key's set; ARGV: the lease (ms), then this front door's slots of that key. Their
// leases start again (a slot that lapsed while Redis was away is put back: its stream is open).
constexpr char kRenewScript[] = R"lua(
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], ms + lease, ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], lease)
return 1
)lua";

using Reply = RedisReply;

// Sends `args` as one command.
Reply Command(redisContext* c, const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<size_t> lengths;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  return Reply(static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lengths.data())));
}

}  // namespace

void StreamSlots::ContextDeleter::operator()(redisContext* c) const { redisFree(c); }

StreamSlots::StreamSlots(const RedisOptions& redis, std::chrono::milliseconds lease)
    : redis_(redis), lease_(lease), front_door_(RandomId()) {
  renewer_ = std::thread([this] { RenewLoop(); });
}

StreamSlots::~StreamSlots() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  renewer_.join();
}

redisContext* StreamSlots::Connected() {
  if (connection_ != nullptr) return connection_.get();
  if (std::chrono::steady_clock::now() < retry_at_) return nullptr;
  connection_.reset(redisConnectWithTimeout(redis_.host.c_str(), redis_.port,
                                            Micros(int64_t{redis_.connect_timeout_ms} * 1000)));
  if (connection_ == nullptr || connection_->err != 0 ||
      redisSetTimeout(connection_.get(), Micros(int64_t{redis_.command_timeout_ms} * 1000)) !=
          REDIS_OK) {
    Failed();
    return nullptr;
  }
  return connection_.get();
}

void StreamSlots::Failed() {
  connection_.reset();
  retry_at_ =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(redis_.retry_interval_ms);
}

absl::StatusOr<std::string> StreamSlots::Take(std::string_view key, uint32_t cap) {
  std::lock_guard<std::mutex> lock(mu_);
  redisContext* c = Connected();
  if (c == nullptr) return absl::UnavailableError("Redis is unreachable");
  std::string slot = StrCat(front_door_, ":", ++next_slot_);
  Reply reply = Command(c, {"EVAL", kTakeScript, "1", StrCat(redis_.key_prefix, "streams:", key),
                            slot, StrCat(cap), StrCat(lease_.count())});
  if (reply == nullptr || reply->type != REDIS_REPLY_INTEGER) {
    Failed();
    return absl::UnavailableError("Redis did not answer");
  }
  if (reply->integer == 0) {
    return absl::ResourceExhaustedError(StrCat("the key holds ", cap, " streams open already"));
  }
  held_[std::string(key)].insert(slot);
  return slot;
}

void StreamSlots::Give(std::string_view key, const std::string& slot) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = held_.find(key);
  if (it == held_.end() || it->second.erase(slot) == 0) return;
  if (it->second.empty()) held_.erase(it);
  redisContext* c = Connected();
  if (c == nullptr) return;
  Reply reply = Command(c, {"ZREM", StrCat(redis_.key_prefix, "streams:", key), slot});
  if (reply == nullptr || reply->type == REDIS_REPLY_ERROR) Failed();
}

size_t StreamSlots::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [key, slots] : held_) n += slots.size();
  return n;
}

void StreamSlots::RenewLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, lease_ / 3, [this] { return stop_; })) RenewAll();
}

void StreamSlots::RenewAll() {
  for (const auto& [key, slots] : held_) {
    redisContext* c = Connected();
    if (c == nullptr) return;
    std::vector<std::string> args = {"EVAL", kRenewScript, "1",
                                     StrCat(redis_.key_prefix, "streams:", key),
                                     StrCat(lease_.count())};
    args.insert(args.end(), slots.begin(), slots.end());
    Reply reply = Command(c, args);
    if (reply == nullptr || reply->type != REDIS_REPLY_INTEGER) return Failed();
  }
  renewals_.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace tweetsearch::limiter
