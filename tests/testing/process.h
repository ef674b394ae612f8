// A real child process for tests: started with posix_spawn, output to a log file, killed with
// any signal, always reaped.
#ifndef TWEETSEARCH_TESTS_TESTING_PROCESS_H_
#define TWEETSEARCH_TESTS_TESTING_PROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tweetsearch::testing {

class ChildProcess {
 public:
  // Starts `argv[0]` with `argv`; stdout and stderr go to `log_path`.
  ChildProcess(const std::vector<std::string>& argv, const std::string& log_path);
  // SIGKILLs the process if it still runs, and reaps it.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool started() const { return pid_ > 0; }
  // Sends `signal_number`; for SIGSTOP, returns once the process is stopped.
  void Signal(int signal_number);
  // Waits for the exit; returns the exit code, or 128 + signal, or nullopt after `timeout`.
  std::optional<int> Wait(std::chrono::milliseconds timeout);

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

// A real tweetsearchd (the binary at `binary`) on a data directory, HTTP on a free loopback
// port, gRPC off, no sample, the demo key allowed to ingest (tests write with it). up() is false if
// it did not start within two minutes.
class TweetsearchdProcess {
 public:
  TweetsearchdProcess(const std::string& binary, const std::string& data_dir,
                      const std::string& log, std::vector<std::string> extra_flags = {});
  bool up() const { return !port_.empty(); }
  const std::string& port() const { return port_; }
  ChildProcess& process() { return *process_; }

 private:
  std::string port_file_;
  std::string port_;
  std::unique_ptr<ChildProcess> process_;
};

// Runs a command to its end (at most `timeout`), output to `log_path`; returns the exit code.
std::optional<int> RunCommand(const std::vector<std::string>& argv, const std::string& log_path,
                              std::chrono::milliseconds timeout);

// A port free on 127.0.0.1 at this moment, below the kernel's ephemeral range (so that no
// connection takes it as its source port before it is bound).
int FreeLoopbackPort();

// Polls `path` until it exists and is not empty (bounded by `timeout`); returns its contents.
std::optional<std::string> WaitForFile(const std::string& path, std::chrono::milliseconds timeout);

}  // namespace tweetsearch::testing

#endif  // TWEETSEARCH_TESTS_TESTING_PROCESS_H_
