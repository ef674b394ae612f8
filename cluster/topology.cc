#include "cluster/topology.h"

#include <xxhash.h>
#include <yaml-cpp/yaml.h>

#include <set>

#include "common/file_util.h"
#include "common/strings.h"

namespace tweetsearch::cluster {
namespace {

bool IsHostPort(const std::string& s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == s.size()) return false;
  for (size_t i = colon + 1; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return s.size() - colon - 1 <= 5;
}

absl::StatusOr<NodeSpec> ReadNode(const YAML::Node& n, const std::string& where, bool http) {
  if (!n.IsMap()) return absl::InvalidArgumentError(StrCat(where, ": expected a map"));
  NodeSpec spec;
  for (const auto& entry : n) {
    const std::string key = entry.first.as<std::string>();
    const std::string value = entry.second.as<std::string>();
    if (key == "node") {
      spec.node = value;
    } else if (key == "grpc") {
      spec.grpc = value;
    } else if (key == "http" && http) {
      spec.http = value;
    } else if (key == "data") {
      spec.data = value;
    } else {
      return absl::InvalidArgumentError(StrCat(where, ": unknown key \"", key, "\""));
    }
  }
  if (spec.node.empty()) return absl::InvalidArgumentError(StrCat(where, ": node is required"));
  if (!IsHostPort(spec.grpc)) {
    return absl::InvalidArgumentError(StrCat(where, " (", spec.node, "): grpc must be HOST:PORT"));
  }
  if (http && !IsHostPort(spec.http)) {
    return absl::InvalidArgumentError(StrCat(where, " (", spec.node, "): http must be HOST:PORT"));
  }
  return spec;
}

absl::StatusOr<std::vector<Partition>> ReadPartitions(const YAML::Node& n,
                                                      const std::string& name) {
  if (!n.IsSequence() || n.size() == 0) {
    return absl::InvalidArgumentError(StrCat(name, ": expected a list of partitions"));
  }
  std::vector<Partition> out;
  for (size_t p = 0; p < n.size(); ++p) {
    const std::string where = StrCat(name, "[", p, "]");
    const YAML::Node replicas = n[p]["replicas"];
    if (!replicas.IsSequence() || replicas.size() < 1 || replicas.size() > 2) {
      return absl::InvalidArgumentError(StrCat(where, ": replicas must list one or two nodes"));
    }
    Partition partition;
    for (size_t r = 0; r < replicas.size(); ++r) {
      absl::StatusOr<NodeSpec> spec =
          ReadNode(replicas[r], StrCat(where, ".replicas[", r, "]"), false);
      if (!spec.ok()) return spec.status();
      partition.replicas.push_back(*std::move(spec));
    }
    out.push_back(std::move(partition));
  }
  return out;
}

absl::StatusOr<std::vector<NodeSpec>> ReadNodes(const YAML::Node& n, const std::string& name,
                                                bool http) {
  std::vector<NodeSpec> out;
  if (!n) return out;
  if (!n.IsSequence()) return absl::InvalidArgumentError(StrCat(name, ": expected a list"));
  for (size_t i = 0; i < n.size(); ++i) {
    absl::StatusOr<NodeSpec> spec = ReadNode(n[i], StrCat(name, "[", i, "]"), http);
    if (!spec.ok()) return spec.status();
    out.push_back(*std::move(spec));
  }
  return out;
}

uint32_t HashToPartition(TweetId id, uint64_t seed, uint32_t count) {
  unsigned char bytes[8];
  for (int i = 7; i >= 0; --i) {
    bytes[i] = static_cast<unsigned char>(id & 0xff);
    id >>= 8;
  }
  return count <= 1 ? 0 : static_cast<uint32_t>(XXH64(bytes, sizeof bytes, seed) % count);
}

}  // namespace

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kStorage:
      return "storage";
    case Role::kIndex:
      return "index";
    case Role::kBuilder:
      return "builder";
    case Role::kAggregator:
      return "aggregator";
  }
  return "?";
}

absl::StatusOr<Role> ParseRole(std::string_view name) {
  for (Role r : {Role::kStorage, Role::kIndex, Role::kBuilder, Role::kAggregator}) {
    if (name == RoleName(r)) return r;
  }
  return absl::InvalidArgumentError(
      StrCat("unknown role \"", name, "\": storage, index, builder or aggregator"));
}

std::optional<Topology::Place> Topology::Find(std::string_view node) const {
  for (uint32_t p = 0; p < storage.size(); ++p) {
    for (uint32_t r = 0; r < storage[p].replicas.size(); ++r) {
      if (storage[p].replicas[r].node == node)
        return Place{Role::kStorage, p, r, &storage[p].replicas[r]};
    }
  }
  for (uint32_t p = 0; p < index.size(); ++p) {
    for (uint32_t r = 0; r < index[p].replicas.size(); ++r) {
      if (index[p].replicas[r].node == node)
        return Place{Role::kIndex, p, r, &index[p].replicas[r]};
    }
  }
  for (uint32_t i = 0; i < builders.size(); ++i) {
    if (builders[i].node == node) return Place{Role::kBuilder, 0, i, &builders[i]};
  }
  for (uint32_t i = 0; i < aggregators.size(); ++i) {
    if (aggregators[i].node == node) return Place{Role::kAggregator, 0, i, &aggregators[i]};
  }
  return std::nullopt;
}

absl::StatusOr<Topology> ParseTopology(std::string_view yaml) {
  Topology t;
  try {
    const YAML::Node root = YAML::Load(std::string(yaml));
    if (!root.IsMap()) return absl::InvalidArgumentError("topology: expected a map");
    static const std::set<std::string> kKeys = {"etcd",
                                                "redis",
                                                "storage_partitions",
                                                "index_partitions",
                                                "builders",
                                                "aggregators",
                                                "allow_single_replica",
                                                "lease_ttl_s",
                                                "max_log_changes",
                                                "live_reader_window_s",
                                                "write_retry_s",
                                                "stats_ttl_ms"};
    for (const auto& entry : root) {
      const std::string key = entry.first.as<std::string>();
      if (!kKeys.contains(key)) {
        return absl::InvalidArgumentError(StrCat("topology: unknown key \"", key, "\""));
      }
    }
    const YAML::Node etcd = root["etcd"];
    if (etcd.IsScalar()) {
      t.etcd.push_back(etcd.as<std::string>());
    } else if (etcd.IsSequence()) {
      for (const auto& e : etcd) t.etcd.push_back(e.as<std::string>());
    }
    if (t.etcd.empty()) return absl::InvalidArgumentError("topology: etcd is required");
    for (const std::string& e : t.etcd) {
      if (!IsHostPort(e))
        return absl::InvalidArgumentError(StrCat("etcd: \"", e, "\" is not HOST:PORT"));
    }
    if (root["redis"]) t.redis = root["redis"].as<std::string>();
    if (root["allow_single_replica"])
      t.allow_single_replica = root["allow_single_replica"].as<bool>();
    if (root["lease_ttl_s"]) t.lease_ttl_s = root["lease_ttl_s"].as<int64_t>();
    if (t.lease_ttl_s < 2 || t.lease_ttl_s > 600) {
      return absl::InvalidArgumentError("lease_ttl_s must be from 2 to 600");
    }
    if (root["max_log_changes"]) t.max_log_changes = root["max_log_changes"].as<uint64_t>();
    if (t.max_log_changes < 1) return absl::InvalidArgumentError("max_log_changes must be >= 1");
    if (root["live_reader_window_s"]) {
      t.live_reader_window_s = root["live_reader_window_s"].as<uint32_t>();
    }
    if (t.live_reader_window_s < 1 || t.live_reader_window_s > 86400) {
      return absl::InvalidArgumentError("live_reader_window_s must be 1..86400");
    }
    if (root["write_retry_s"]) t.write_retry_s = root["write_retry_s"].as<uint32_t>();
    if (t.write_retry_s < 1 || t.write_retry_s > 600) {
      return absl::InvalidArgumentError("write_retry_s must be 1..600");
    }
    if (root["stats_ttl_ms"]) t.stats_ttl_ms = root["stats_ttl_ms"].as<uint32_t>();
    if (t.stats_ttl_ms > 60'000) return absl::InvalidArgumentError("stats_ttl_ms must be 0..60000");
    absl::StatusOr<std::vector<Partition>> storage =
        ReadPartitions(root["storage_partitions"], "storage_partitions");
    if (!storage.ok()) return storage.status();
    t.storage = *std::move(storage);
    absl::StatusOr<std::vector<Partition>> index =
        ReadPartitions(root["index_partitions"], "index_partitions");
    if (!index.ok()) return index.status();
    t.index = *std::move(index);
    absl::StatusOr<std::vector<NodeSpec>> builders = ReadNodes(root["builders"], "builders", false);
    if (!builders.ok()) return builders.status();
    t.builders = *std::move(builders);
    absl::StatusOr<std::vector<NodeSpec>> aggregators =
        ReadNodes(root["aggregators"], "aggregators", true);
    if (!aggregators.ok()) return aggregators.status();
    t.aggregators = *std::move(aggregators);
    if (t.aggregators.empty())
      return absl::InvalidArgumentError("aggregators: at least one is required");
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(StrCat("topology: ", e.what()));
  }
  if (t.storage.size() > 65535 || t.index.size() > 65535) {
    return absl::InvalidArgumentError("topology: at most 65535 partitions of each kind");
  }
  std::set<std::string> names;
  auto unique = [&](const NodeSpec& n) { return names.insert(n.node).second; };
  for (const auto* list : {&t.storage, &t.index}) {
    for (const Partition& p : *list) {
      for (const NodeSpec& n : p.replicas) {
        if (!unique(n))
          return absl::InvalidArgumentError(StrCat("node \"", n.node, "\" appears twice"));
      }
    }
  }
  for (const auto* list : {&t.builders, &t.aggregators}) {
    for (const NodeSpec& n : *list) {
      if (!unique(n))
        return absl::InvalidArgumentError(StrCat("node \"", n.node, "\" appears twice"));
    }
  }
  return t;
}

absl::StatusOr<Topology> LoadTopology(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<Topology> t = ParseTopology(*text);
  if (!t.ok()) return absl::InvalidArgumentError(StrCat(path, ": ", t.status().message()));
  return t;
}

uint32_t StoragePartitionOf(TweetId id, uint32_t count) { return HashToPartition(id, 0, count); }
uint32_t IndexPartitionOf(TweetId id, uint32_t count) { return HashToPartition(id, 1, count); }

uint32_t StoragePartitionOfKey(std::string_view key, uint32_t count) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : key) h = (h ^ c) * 1099511628211ull;
  return StoragePartitionOf(h, count);
}

}  // namespace tweetsearch::cluster
