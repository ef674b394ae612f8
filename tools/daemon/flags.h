// The command line of tweetsearchd: every flag bound once to the DaemonConfig field it sets.
//
// The config is built in one order: the defaults (DaemonConfig's), then the keys of the
// --config file, then the flags that were given (each sets its own field). A flag not given
// leaves the file's value (or the default) alone.
//
// Thread-safety: none; build and read it on one thread.
#ifndef TWEETSEARCH_TOOLS_DAEMON_FLAGS_H_
#define TWEETSEARCH_TOOLS_DAEMON_FLAGS_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "aggregator/daemon.h"

namespace tweetsearch::tools {

class DaemonFlags {
 public:
  // Adds every flag to `app`, which must outlive this object's use of it (parsing).
  explicit DaemonFlags(CLI::App& app);

  DaemonFlags(const DaemonFlags&) = delete;
  DaemonFlags& operator=(const DaemonFlags&) = delete;

  // The config, once `app` parsed the command line. The error of LoadDaemonConfigFile for a
  // --config file that cannot be read or holds a bad key.
  absl::StatusOr<aggregator::DaemonConfig> Config() const;

  // With --topology: run one role of a cluster (cluster/node.h) rather than every role.
  const std::string& topology_file() const { return topology_file_; }
  const std::string& role() const { return role_; }
  const std::string& node() const { return node_; }

 private:
  using Override = std::function<void(aggregator::DaemonConfig&)>;
  // Adds `name`, which sets the field `field(config)` returns a reference to.
  template <typename Field>
  CLI::Option* Bind(CLI::App& app, const std::string& name, Field field, const std::string& help);

  std::string config_file_;
  std::string topology_file_, role_, node_;
  std::vector<Override> overrides_;  // one per flag given
};

}  // namespace tweetsearch::tools

#endif  // TWEETSEARCH_TOOLS_DAEMON_FLAGS_H_
