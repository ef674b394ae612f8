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
#include "common/strings.h"
#include "net/grpc.h"
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
                     std::string_view state, const Clock& clock) {
  nlohmann::json j = {{"state", state},
                      {"phase", p.phase},
                      {"builder", p.builder},
                      {"total", p.total},
                      {"done", p.done},
                      {"missing", p.missing},
                      {"rate", p.tweets_per_s},
                      {"elapsed_s", absl::ToDoubleSeconds(p.elapsed)},
                      {"updated_ms", clock.NowUnixMillis()}};
  (void)etcd.Put(key, j.dump());
}

// One run of a rebuild: find the replica and the builder, begin or resume, load the
// partition's tweets batch by batch, then wait until the replica serves again.
class Rebuilder {
 public:
  Rebuilder(const Topology& topology, const RebuildOptions& options,
            const std::function<void(const RebuildProgress&)>& report)
      : topology_(topology),
        options_(options),
        report_(report),
        clock_(options.clock != nullptr ? *options.clock : SystemClock()),
        etcd_(topology.etcd) {}

  absl::Status Run() {
    if (absl::Status s = Connect(); !s.ok()) return s;
    if (absl::Status s = BeginOrResume(); !s.ok()) return s;
    ipb::PartitionCountRequest count_request;
    count_request.set_index_partition(partition_);
    ipb::PartitionCountResponse count;
    if (grpc::Status s = builder_->PartitionCount(Context().get(), count_request, &count);
        !s.ok()) {
      return Failed(s, "builder");
    }
    progress_.total = count.ids();
    progress_.phase = "loading";
    key_ = RebuildKey(partition_, options_.replica);
    start_ = Now();
    Tick(true);
    bool stopped = false;
    if (absl::Status s = Load(&stopped); !s.ok() || stopped) return s;
    ipb::Empty empty;
    if (grpc::Status s = index_->FinishRebuild(Context().get(), {}, &empty); !s.ok()) {
      return Interrupted(Failed(s, "finish rebuild"));
    }
    progress_.phase = "catching_up";
    Tick(true);
    return WaitUntilServing();
  }

 private:
  // Reaches the index replica and the builder that leads, and reads their status.
  absl::Status Connect() {
    std::optional<Topology::Place> place = topology_.Find(options_.replica);
    if (!place.has_value() || place->role != Role::kIndex) {
      return absl::InvalidArgumentError(
          StrCat("\"", options_.replica, "\" is not an index replica in the topology"));
    }
    partition_ = place->partition;
    index_ = ipb::Index::NewStub(net::Connect(place->spec->grpc));
    if (grpc::Status s = index_->Status(Context(std::chrono::seconds(5)).get(), {}, &status_);
        !s.ok()) {
      return Failed(s, StrCat("index replica ", options_.replica, " (is it running?)"));
    }
    absl::StatusOr<std::optional<KeyValue>> leader = etcd_.Get(kBuilderLeaderKey);
    if (!leader.ok()) return leader.status();
    if (!leader->has_value()) {
      return absl::UnavailableError(
          "no builder leads: none is running and caught up (see tweetctl status)");
    }
    progress_.builder = (*leader)->value;
    std::optional<Topology::Place> builder_place = topology_.Find(progress_.builder);
    if (!builder_place.has_value() || builder_place->role != Role::kBuilder) {
      return absl::FailedPreconditionError(
          StrCat("the builder leader \"", progress_.builder, "\" is not in the topology"));
    }
    builder_ = ipb::Builder::NewStub(net::Connect(builder_place->spec->grpc));
    if (grpc::Status s = builder_->Status(Context().get(), {}, &builder_status_); !s.ok()) {
      return Failed(s, StrCat("builder ", progress_.builder));
    }
    return absl::OkStatus();
  }

  // Whether a replica of this partition other than the one rebuilt answers as serving.
  bool AnotherReplicaServes() const {
    for (const NodeSpec& spec : topology_.index[partition_].replicas) {
      if (spec.node == options_.replica) continue;
      ipb::IndexStatus other;
      auto stub = ipb::Index::NewStub(net::Connect(spec.grpc));
      if (stub->Status(Context(std::chrono::seconds(5)).get(), {}, &other).ok() &&
          other.state() == "serving") {
        return true;
      }
    }
    return false;
  }

  // Resumes a rebuild the replica is in (unless asked to restart), or begins one.
  absl::Status BeginOrResume() {
    if (status_.state() == "rebuilding" && !options_.restart) {
      // Resume: the replica keeps its starting sequences; the builder must have
      // read at least that far, or its listing could miss tweets.
      progress_.resumed = true;
      after_ = status_.rebuild_through();
      progress_.done = status_.documents();
      for (int s = 0; s < status_.applied_size(); ++s) {
        if (s >= builder_status_.applied_size() ||
            builder_status_.applied(s) < status_.applied(s)) {
          return absl::UnavailableError(StrCat("builder ", progress_.builder,
                                               " is behind the rebuild's starting point on "
                                               "storage partition ",
                                               s, "; try again shortly"));
        }
      }
      return absl::OkStatus();
    }
    if (status_.state() == "serving") {
      if (!options_.force) {
        return absl::FailedPreconditionError(StrCat(options_.replica, " is serving ",
                                                    status_.documents(),
                                                    " tweets; add --force to rebuild it anyway"));
      }
      progress_.partition_offline = !AnotherReplicaServes();
      if (progress_.partition_offline && !options_.take_offline) {
        return absl::FailedPreconditionError(StrCat(
            options_.replica, " is the only serving replica of index partition ", partition_,
            ": rebuilding it takes the partition offline until the rebuild ends (searches "
            "answer 503, or partial with allow_partial). Rebuild while another replica serves, "
            "or add --yes-take-offline"));
      }
    }
    if (builder_status_.state() != "serving") {
      return absl::UnavailableError(
          StrCat("builder ", progress_.builder, " is ", builder_status_.state()));
    }
    ipb::BeginRebuildRequest begin;
    *begin.mutable_from_sequences() = builder_status_.applied();
    ipb::Empty empty;
    if (grpc::Status s = index_->BeginRebuild(Context().get(), begin, &empty); !s.ok()) {
      return Failed(s, "begin rebuild");
    }
    return absl::OkStatus();
  }

  // Sends the partition's tweets to the replica, fetching batch k+1 while it indexes batch k.
  // With options.stop_after, stops after that many and sets `*stopped`.
  absl::Status Load(bool* stopped) {
    IdStream ids(*builder_, partition_, after_);
    TweetFetcher fetcher(topology_);
    uint64_t to_fetch = options_.stop_after == 0 ? UINT64_MAX : options_.stop_after;
    auto fetch_next = [&]() -> absl::StatusOr<Batch> {
      absl::StatusOr<std::vector<TweetId>> next =
          ids.Next(std::min<uint64_t>(options_.batch, to_fetch));
      if (!next.ok()) return next.status();
      to_fetch -= next->size();
      return fetcher.Fetch(*next);
    };
    uint64_t since_checkpoint = 0;
    std::future<absl::StatusOr<Batch>> pending = std::async(std::launch::async, fetch_next);
    for (;;) {
      absl::StatusOr<Batch> batch = pending.get();
      if (!batch.ok()) return Interrupted(batch.status());
      if (batch->ids == 0) return absl::OkStatus();
      pending = std::async(std::launch::async, fetch_next);
      since_checkpoint += batch->ids;
      const bool last_of_run =
          options_.stop_after != 0 && sent_this_run_ + batch->ids >= options_.stop_after;
      if (since_checkpoint >= options_.checkpoint_every || last_of_run) {
        batch->request.set_checkpoint(true);
        since_checkpoint = 0;
      }
      ipb::AddTweetsResponse added;
      if (grpc::Status s = index_->AddTweets(Context().get(), batch->request, &added); !s.ok()) {
        pending.wait();
        return Interrupted(Failed(s, StrCat("index replica ", options_.replica)));
      }
      sent_this_run_ += batch->ids;
      progress_.done += batch->ids;
      progress_.missing += batch->missing;
      Tick(false);
      if (last_of_run) {
        pending.wait();
        progress_.phase = "stopped";
        Tick(true);
        PublishProgress(etcd_, key_, progress_, "stopped", clock_);
        *stopped = true;
        return absl::OkStatus();
      }
    }
  }

  // Waits until the replica serves and has joined (its member key is in etcd).
  absl::Status WaitUntilServing() {
    const absl::Time join_deadline = Now() + options_.join_timeout;
    while (Now() < join_deadline) {
      if (grpc::Status s = index_->Status(Context(std::chrono::seconds(5)).get(), {}, &status_);
          s.ok()) {
        // Serving, and joined: the replica puts its member key within a moment
        // of serving, and from then on front doors send it searches.
        absl::StatusOr<std::optional<KeyValue>> member =
            status_.state() == "serving" ? etcd_.Get(MemberKey(Role::kIndex, options_.replica))
                                         : std::optional<KeyValue>();
        if (member.ok() && member->has_value()) {
          progress_.phase = "serving";
          Tick(true);
          PublishProgress(etcd_, key_, progress_, "done", clock_);
          return absl::OkStatus();
        }
        if (status_.state() == "needs_rebuild") {
          PublishProgress(etcd_, key_, progress_, "failed", clock_);
          return absl::FailedPreconditionError(
              "the storage logs no longer hold the changes made since the rebuild began (the "
              "topology's max_log_changes is too small for this rebuild); run it again");
        }
      }
      Tick(false);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return Interrupted(
        absl::DeadlineExceededError(StrCat(options_.replica, " did not catch up within ",
                                           absl::FormatDuration(options_.join_timeout))));
  }

  // Reports progress (at most every 200 ms unless `force`) and publishes it in etcd (every
  // second).
  void Tick(bool force) {
    const absl::Time now = Now();
    progress_.elapsed = now - start_;
    if (progress_.phase == "loading") loading_time_ = progress_.elapsed;
    const double seconds = absl::ToDoubleSeconds(loading_time_);
    progress_.tweets_per_s = seconds > 0 ? static_cast<double>(sent_this_run_) / seconds : 0;
    if (force || now - last_report_ >= absl::Milliseconds(200)) {
      report_(progress_);
      last_report_ = now;
    }
    if (force || now - last_publish_ >= absl::Seconds(1)) {
      PublishProgress(etcd_, key_, progress_, "running", clock_);
      last_publish_ = now;
    }
  }

  absl::Status Interrupted(const absl::Status& s) {
    PublishProgress(etcd_, key_, progress_, "interrupted", clock_);
    return absl::Status(s.code(), StrCat(s.message(), " (run the same command again to resume)"));
  }

  // The clock's monotonic time.
  absl::Time Now() const { return absl::FromUnixMicros(clock_.NowMonotonicMicros()); }

  const Topology& topology_;
  const RebuildOptions& options_;
  const std::function<void(const RebuildProgress&)>& report_;
  const Clock& clock_;
  EtcdClient etcd_;
  uint32_t partition_ = 0;
  std::unique_ptr<ipb::Index::Stub> index_;
  std::unique_ptr<ipb::Builder::Stub> builder_;
  ipb::IndexStatus status_;
  ipb::BuilderStatus builder_status_;
  TweetId after_ = 0;  // resume after this id
  RebuildProgress progress_;
  std::string key_;  // of the progress in etcd
  absl::Time start_, last_report_ = absl::InfinitePast(), last_publish_ = absl::InfinitePast();
  absl::Duration loading_time_;
  uint64_t sent_this_run_ = 0;
};

}  // namespace

absl::Status RunRebuild(const Topology& topology, const RebuildOptions& options,
                        const std::function<void(const RebuildProgress&)>& report) {
  return Rebuilder(topology, options, report).Run();
}

}  // namespace tweetsearch::cluster
