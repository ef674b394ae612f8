#include "cluster/rebuild.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <future>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "cluster/cluster_view.h"
#include "cluster/etcd_client.h"
#include "net/grpc.h"
#include "common/strings.h"
#include "nlohmann/json.hpp"
#include "proto/cluster.grpc.pb.h"

namespace tweetsearch::cluster {
namespace {

namespace ipb = internal::v1;

constexpr auto kCallTimeout = std::chrono::seconds(60);
constexpr uint32_t kIdPage = 65536;

std::unique_ptr<grpc::ClientContext> Context(std::chrono::seconds timeout = kCallTimeout) {
  return net::DeadlineContext(timeout);
}

absl::Status Failed(const grpc::Status& s, std::string_view what) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      StrCat(what, ": ", s.error_message()));
}

// The partition's ids from the builder, in ascending order, a page at a time.
class IdStream {
 public:
  IdStream(ipb::Builder::Stub& builder, uint32_t partition, TweetId after)
      : builder_(builder), partition_(partition), after_(after) {}

  // Up to `n` next ids; empty at the end.
  absl::StatusOr<std::vector<TweetId>> Next(size_t n) {
    std::vector<TweetId> out;
    while (out.size() < n) {
      if (pos_ == page_.size()) {
        if (done_) break;
        ipb::PartitionIdsRequest request;
        request.set_index_partition(partition_);
        request.set_after(after_);
        request.set_max(kIdPage);
        ipb::PartitionIdsResponse response;
        grpc::Status s = builder_.PartitionIds(Context().get(), request, &response);
        if (!s.ok()) return Failed(s, "builder");
        page_.assign(response.ids().begin(), response.ids().end());
        pos_ = 0;
        done_ = response.done();
        if (!page_.empty()) after_ = page_.back();
        continue;
      }
      const size_t take = std::min(n - out.size(), page_.size() - pos_);
      out.insert(out.end(), page_.begin() + pos_, page_.begin() + pos_ + take);
      pos_ += take;
    }
    return out;
  }

 private:
  ipb::Builder::Stub& builder_;
  const uint32_t partition_;
  TweetId after_;
  std::vector<TweetId> page_;
  size_t pos_ = 0;
  bool done_ = false;
};

struct Batch {
  ipb::AddTweetsRequest request;
  size_t ids = 0;
  size_t missing = 0;
};

// Fetches tweets from storage: one MultiGet per storage partition, in
// parallel, each from whichever replica answers.
class TweetFetcher {
 public:
  explicit TweetFetcher(const Topology& t) {
    for (const Partition& p : t.storage) {
      auto& replicas = stubs_.emplace_back();
      for (const NodeSpec& n : p.replicas)
        replicas.push_back(ipb::Storage::NewStub(net::Connect(n.grpc)));
    }
  }

  absl::StatusOr<Batch> Fetch(const std::vector<TweetId>& ids) {
    const uint32_t partitions = static_cast<uint32_t>(stubs_.size());
    std::vector<ipb::MultiGetRequest> requests(partitions);
    for (TweetId id : ids) requests[StoragePartitionOf(id, partitions)].add_ids(id);
    std::vector<std::future<absl::StatusOr<ipb::MultiGetResponse>>> calls;
    for (uint32_t p = 0; p < partitions; ++p) {
      calls.push_back(std::async(std::launch::async,
                                 [this, p, &requests] { return MultiGet(p, requests[p]); }));
    }
    Batch batch;
    batch.ids = ids.size();
    absl::Status failed;
    for (auto& call : calls) {
      absl::StatusOr<ipb::MultiGetResponse> response = call.get();
      if (!response.ok()) {
        failed = response.status();
        continue;
      }
      for (v1::Tweet& t : *response->mutable_tweets()) batch.request.add_tweets()->Swap(&t);
    }
    if (!failed.ok()) return failed;
    auto* tweets = batch.request.mutable_tweets();
    std::sort(tweets->begin(), tweets->end(),
              [](const v1::Tweet& a, const v1::Tweet& b) { return a.id() < b.id(); });
    batch.missing = ids.size() - tweets->size();
    if (!ids.empty()) batch.request.set_through(ids.back());
    return batch;
  }

 private:
  absl::StatusOr<ipb::MultiGetResponse> MultiGet(uint32_t p, const ipb::MultiGetRequest& request) {
    ipb::MultiGetResponse response;
    if (request.ids_size() == 0) return response;
    grpc::Status last;
    for (auto& stub : stubs_[p]) {
      response.Clear();
      last = stub->MultiGet(Context().get(), request, &response);
      if (last.ok()) return response;
    }
    return Failed(last, StrCat("storage partition ", p));
  }

  std::vector<std::vector<std::unique_ptr<ipb::Storage::Stub>>> stubs_;
};

// Rebuild progress in etcd, for tweetctl status (best effort).
void PublishProgress(EtcdClient& etcd, const std::string& key, const RebuildProgress& p,
                     std::string_view state) {
  nlohmann::json j = {{"state", state},
                      {"phase", p.phase},
                      {"builder", p.builder},
                      {"total", p.total},
                      {"done", p.done},
                      {"missing", p.missing},
                      {"rate", p.tweets_per_s},
                      {"elapsed_s", absl::ToDoubleSeconds(p.elapsed)},
                      {"updated_ms", absl::ToUnixMillis(absl::Now())}};
  (void)etcd.Put(key, j.dump());
}

}  // namespace

absl::Status RunRebuild(const Topology& topology, const RebuildOptions& options,
                        const std::function<void(const RebuildProgress&)>& report) {
  std::optional<Topology::Place> place = topology.Find(options.replica);
  if (!place.has_value() || place->role != Role::kIndex) {
    return absl::InvalidArgumentError(
        StrCat("\"", options.replica, "\" is not an index replica in the topology"));
  }
  const uint32_t partition = place->partition;
  auto index = ipb::Index::NewStub(net::Connect(place->spec->grpc));
  ipb::IndexStatus status;
  if (grpc::Status s = index->Status(Context(std::chrono::seconds(5)).get(), {}, &status);
      !s.ok()) {
    return Failed(s, StrCat("index replica ", options.replica, " (is it running?)"));
  }

  EtcdClient etcd(topology.etcd);
  absl::StatusOr<std::optional<KeyValue>> leader = etcd.Get(kBuilderLeaderKey);
  if (!leader.ok()) return leader.status();
  if (!leader->has_value()) {
    return absl::UnavailableError(
        "no builder leads: none is running and caught up (see tweetctl status)");
  }
  RebuildProgress progress;
  progress.builder = (*leader)->value;
  std::optional<Topology::Place> builder_place = topology.Find(progress.builder);
  if (!builder_place.has_value() || builder_place->role != Role::kBuilder) {
    return absl::FailedPreconditionError(
        StrCat("the builder leader \"", progress.builder, "\" is not in the topology"));
  }
  auto builder = ipb::Builder::NewStub(net::Connect(builder_place->spec->grpc));
  ipb::BuilderStatus builder_status;
  if (grpc::Status s = builder->Status(Context().get(), {}, &builder_status); !s.ok()) {
    return Failed(s, StrCat("builder ", progress.builder));
  }

  TweetId after = 0;
  if (status.state() == "rebuilding" && !options.restart) {
    // Resume: the replica keeps its starting sequences; the builder must have
    // read at least that far, or its listing could miss tweets.
    progress.resumed = true;
    after = status.rebuild_through();
    progress.done = status.documents();
    for (int s = 0; s < status.applied_size(); ++s) {
      if (s >= builder_status.applied_size() || builder_status.applied(s) < status.applied(s)) {
        return absl::UnavailableError(StrCat("builder ", progress.builder,
                                             " is behind the rebuild's starting point on "
                                             "storage partition ",
                                             s, "; try again shortly"));
      }
    }
  } else {
    if (status.state() == "serving" && !options.force) {
      return absl::FailedPreconditionError(StrCat(options.replica, " is serving ",
                                                  status.documents(),
                                                  " tweets; add --force to rebuild it anyway"));
    }
    if (builder_status.state() != "serving") {
      return absl::UnavailableError(
          StrCat("builder ", progress.builder, " is ", builder_status.state()));
    }
    ipb::BeginRebuildRequest begin;
    *begin.mutable_from_sequences() = builder_status.applied();
    ipb::Empty empty;
    if (grpc::Status s = index->BeginRebuild(Context().get(), begin, &empty); !s.ok()) {
      return Failed(s, "begin rebuild");
    }
  }
  ipb::PartitionCountRequest count_request;
  count_request.set_index_partition(partition);
  ipb::PartitionCountResponse count;
  if (grpc::Status s = builder->PartitionCount(Context().get(), count_request, &count); !s.ok()) {
    return Failed(s, "builder");
  }
  progress.total = count.ids();
  progress.phase = "loading";

  const std::string key = RebuildKey(partition, options.replica);
  const absl::Time start = absl::Now();
  absl::Time last_report = absl::InfinitePast(), last_publish = absl::InfinitePast();
  uint64_t sent_this_run = 0, since_checkpoint = 0;
  absl::Duration loading_time;
  auto tick = [&](bool force) {
    const absl::Time now = absl::Now();
    progress.elapsed = now - start;
    if (progress.phase == "loading") loading_time = progress.elapsed;
    const double seconds = absl::ToDoubleSeconds(loading_time);
    progress.tweets_per_s = seconds > 0 ? static_cast<double>(sent_this_run) / seconds : 0;
    if (force || now - last_report >= absl::Milliseconds(200)) {
      report(progress);
      last_report = now;
    }
    if (force || now - last_publish >= absl::Seconds(1)) {
      PublishProgress(etcd, key, progress, "running");
      last_publish = now;
    }
  };
  tick(true);

  IdStream ids(*builder, partition, after);
  TweetFetcher fetcher(topology);
  uint64_t to_fetch = options.stop_after == 0 ? UINT64_MAX : options.stop_after;
  auto fetch_next = [&]() -> absl::StatusOr<Batch> {
    absl::StatusOr<std::vector<TweetId>> next =
        ids.Next(std::min<uint64_t>(options.batch, to_fetch));
    if (!next.ok()) return next.status();
    to_fetch -= next->size();
    return fetcher.Fetch(*next);
  };
  auto interrupted = [&](const absl::Status& s) {
    PublishProgress(etcd, key, progress, "interrupted");
    return absl::Status(s.code(), StrCat(s.message(), " (run the same command again to resume)"));
  };
  // Fetch batch k+1 while the replica indexes batch k.
  std::future<absl::StatusOr<Batch>> pending = std::async(std::launch::async, fetch_next);
  for (;;) {
    absl::StatusOr<Batch> batch = pending.get();
    if (!batch.ok()) return interrupted(batch.status());
    if (batch->ids == 0) break;
    pending = std::async(std::launch::async, fetch_next);
    since_checkpoint += batch->ids;
    const bool last_of_run =
        options.stop_after != 0 && sent_this_run + batch->ids >= options.stop_after;
    if (since_checkpoint >= options.checkpoint_every || last_of_run) {
      batch->request.set_checkpoint(true);
      since_checkpoint = 0;
    }
    ipb::AddTweetsResponse added;
    if (grpc::Status s = index->AddTweets(Context().get(), batch->request, &added); !s.ok()) {
      pending.wait();
      return interrupted(Failed(s, StrCat("index replica ", options.replica)));
    }
    sent_this_run += batch->ids;
    progress.done += batch->ids;
    progress.missing += batch->missing;
    tick(false);
    if (last_of_run) {
      pending.wait();
      progress.phase = "stopped";
      tick(true);
      PublishProgress(etcd, key, progress, "stopped");
      return absl::OkStatus();
    }
  }

  ipb::Empty empty;
  if (grpc::Status s = index->FinishRebuild(Context().get(), {}, &empty); !s.ok()) {
    return interrupted(Failed(s, "finish rebuild"));
  }
  progress.phase = "catching_up";
  tick(true);
  const absl::Time join_deadline = absl::Now() + options.join_timeout;
  while (absl::Now() < join_deadline) {
    if (grpc::Status s = index->Status(Context(std::chrono::seconds(5)).get(), {}, &status);
        s.ok()) {
      // Serving, and joined: the replica puts its member key within a moment
      // of serving, and from then on front doors send it searches.
      absl::StatusOr<std::optional<KeyValue>> member =
          status.state() == "serving" ? etcd.Get(MemberKey(Role::kIndex, options.replica))
                                      : std::optional<KeyValue>();
      if (member.ok() && member->has_value()) {
        progress.phase = "serving";
        tick(true);
        PublishProgress(etcd, key, progress, "done");
        return absl::OkStatus();
      }
      if (status.state() == "needs_rebuild") {
        PublishProgress(etcd, key, progress, "failed");
        return absl::FailedPreconditionError(
            "the storage logs no longer hold the changes made since the rebuild began (the "
            "topology's max_log_changes is too small for this rebuild); run it again");
      }
    }
    tick(false);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return interrupted(absl::DeadlineExceededError(StrCat(
      options.replica, " did not catch up within ", absl::FormatDuration(options.join_timeout))));
}

}  // namespace tweetsearch::cluster
