#include "tests/testing/etcd_server.h"

#include <chrono>
#include <thread>
#include <vector>

#include "common/strings.h"
#include "net/http_client.h"

namespace tweetsearch::testing {

EtcdServer::EtcdServer(const std::string& dir, const std::string& host,
                       std::vector<std::string> exec)
    : dir_(dir),
      endpoint_(host.empty() ? StrCat("127.0.0.1:", FreeLoopbackPort()) : host + ":2379"),
      peer_url_(host.empty() ? StrCat("http://127.0.0.1:", FreeLoopbackPort())
                             : StrCat("http://", host, ":2380")),
      exec_(std::move(exec)) {}

bool EtcdServer::Start() {
  const std::string& peer = peer_url_;
  std::vector<std::string> argv = exec_;
  argv.insert(argv.end(),
              {"etcd", "--name", "test", "--data-dir", dir_ + "/etcd", "--listen-client-urls",
               StrCat("http://", endpoint_), "--advertise-client-urls",
               StrCat("http://", endpoint_), "--listen-peer-urls", peer,
               "--initial-advertise-peer-urls", peer, "--initial-cluster", StrCat("test=", peer)});
  process_ = std::make_unique<ChildProcess>(argv, dir_ + "/etcd.log");
  const size_t colon = endpoint_.rfind(':');
  for (int i = 0; i < 100; ++i) {
    net::HttpClient c(endpoint_.substr(0, colon), endpoint_.substr(colon + 1),
                      std::chrono::seconds(1));
    absl::StatusOr<net::HttpReply> r = c.Send("POST", "/v3/kv/range", R"({"key":"AA=="})");
    if (r.ok() && r->status == 200) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

}  // namespace tweetsearch::testing
