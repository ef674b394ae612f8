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

// A port the kernel just handed out on loopback (free at this moment).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t length = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

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

RedisServer::RedisServer(const std::string& dir) : dir_(dir), port_(FreePort()) {}

bool RedisServer::Start() {
  process_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{"/usr/bin/redis-server", "--port", std::to_string(port_),
                               "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                               "--dir", dir_, "--protected-mode", "no"},
      dir_ + "/redis.log");
  for (int i = 0; i < 500; ++i) {
    if (Pings(port_)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void RedisServer::Stop() {
  if (process_ == nullptr) return;
  process_->Signal(SIGKILL);
  process_->Wait(std::chrono::seconds(10));
  process_.reset();
}

}  // namespace tweetsearch::testing
