#include "tests/testing/redis_server.h"

#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace tweetsearch::testing {
namespace {

bool Pings(int port) {
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, timeval{0, 200'000});
  bool ok = false;
  if (c != nullptr && c->err == 0) {
    auto* reply = static_cast<redisReply*>(redisCommand(c, "PING"));
    ok = reply != nullptr && reply->type == REDIS_REPLY_STATUS;
    if (reply != nullptr) freeReplyObject(reply);
  }
  if (c != nullptr) redisFree(c);
  return ok;
}

}  // namespace

RedisServer::RedisServer(const std::string& dir) : dir_(dir), port_(FreeLoopbackPort()) {}

bool RedisServer::Start() {
  process_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{"/usr/bin/redis-server", "--port", std::to_string(port_), "--bind",
                               "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir_,
                               "--protected-mode", "no"},
      dir_ + "/redis.log");
  for (int i = 0; i < 500; ++i) {
    if (Pings(port_)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void RedisServer::Pause() {
  if (process_ != nullptr) process_->Signal(SIGSTOP);
}

void RedisServer::Resume() {
  if (process_ != nullptr) process_->Signal(SIGCONT);
}

void RedisServer::Stop() {
  if (process_ == nullptr) return;
  process_->Signal(SIGKILL);
  process_->Wait(std::chrono::seconds(10));
  process_.reset();
}

}  // namespace tweetsearch::testing
