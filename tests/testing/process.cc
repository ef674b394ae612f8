#include "tests/testing/process.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "tests/testing/wait.h"

extern char** environ;

namespace tweetsearch::testing {

namespace {

// Binds 127.0.0.1:`port` (0: any) and closes it again; the port bound, or 0.
int TryBind(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t length = sizeof(addr);
  int bound = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) == 0) {
    bound = ntohs(addr.sin_port);
  }
  close(fd);
  return bound;
}

// The first port of the kernel's ephemeral range (where connections get their source ports).
int EphemeralLow() {
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 32768, high = 60999;
  range >> low >> high;
  return low;
}

}  // namespace

int FreeLoopbackPort() {
  // Below the ephemeral range: a port handed out there could become some connection's source
  // port before the process it was picked for binds it (tests run in parallel and open many
  // connections). Random, so that parallel tests rarely pick the same one; checked by binding.
  // A port handed out before is not handed out again by this process (it may not be bound
  // yet by the process it went to).
  static const int low = std::max(1024, EphemeralLow() - 12000);
  static std::mutex mu;
  static std::mt19937 random{std::random_device{}()};
  static std::vector<bool> handed_out(12000);
  std::lock_guard<std::mutex> lock(mu);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const int offset = static_cast<int>(random() % 12000);
    if (handed_out[offset] || TryBind(low + offset) != low + offset) continue;
    handed_out[offset] = true;
    return low + offset;
  }
  return TryBind(0);
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::string& log_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                   0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  // Through setpriv (util-linux, on every Debian) the child gets SIGKILL when the test process
  // dies, even by a signal that skips the destructors: a crashed test leaves nothing running.
  static const bool kSetpriv = access("/usr/bin/setpriv", X_OK) == 0;
  std::vector<std::string> full;
  if (kSetpriv) full = {"/usr/bin/setpriv", "--pdeathsig", "KILL", "--"};
  full.insert(full.end(), argv.begin(), argv.end());
  std::vector<char*> args;
  for (const std::string& a : full) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // posix_spawnp: a bare program name (etcd, redis-server) is looked up in PATH.
  if (posix_spawnp(&pid_, args[0], &actions, nullptr, args.data(), environ) != 0) pid_ = -1;
  posix_spawn_file_actions_destroy(&actions);
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
}

void ChildProcess::Signal(int signal_number) {
  if (pid_ <= 0 || reaped_) return;
  kill(pid_, signal_number);
  if (signal_number != SIGSTOP) return;
  // kill() returns before the process stops (a thread may be running on another core and
  // answer one more request): wait until the kernel reports it stopped ('T' in its stat).
  const std::string stat = "/proc/" + std::to_string(pid_) + "/stat";
  WaitUntil(
      [&] {
        std::ifstream in(stat);
        std::string line;
        std::getline(in, line);
        const size_t paren = line.rfind(')');
        return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] == 'T';
      },
      std::chrono::seconds(2), std::chrono::milliseconds(1));
}

std::optional<int> ChildProcess::Wait(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return std::nullopt;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      return -1;
    }
    if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::optional<std::string> WaitForFile(const std::string& path, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(path);
    std::stringstream contents;
    contents << in.rdbuf();
    if (in && !contents.str().empty()) return contents.str();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

TweetsearchdProcess::TweetsearchdProcess(const std::string& binary, const std::string& data_dir,
                                         const std::string& log,
                                         std::vector<std::string> extra_flags)
    : port_file_(data_dir + ".ports") {
  std::remove(port_file_.c_str());
  std::vector<std::string> argv = {
      binary,         "--data-dir", data_dir, "--http-port", "0",        "--grpc-port",
      "-1",           "--sample",   "0",      "--port-file", port_file_, "--demo-key-scopes",
      "search,ingest"};
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  process_ = std::make_unique<ChildProcess>(argv, log);
  std::optional<std::string> ports = WaitForFile(port_file_, std::chrono::minutes(2));
  if (!ports.has_value()) return;
  // {"http_port": N, "grpc_port": N}
  const size_t colon = ports->find(':');
  const size_t end = ports->find(',', colon);
  if (colon == std::string::npos || end == std::string::npos) return;
  port_ = std::to_string(std::stoi(ports->substr(colon + 1, end - colon - 1)));
}

std::optional<int> RunCommand(const std::vector<std::string>& argv, const std::string& log_path,
                              std::chrono::milliseconds timeout) {
  ChildProcess child(argv, log_path);
  return child.Wait(timeout);
}

}  // namespace tweetsearch::testing
