#include "cluster/cluster_streams.h"

#include <algorithm>
#include <condition_variable>
#include <limits>
#include <optional>

#include "common/strings.h"
#include "net/grpc.h"
#include "storage/change_tail.h"
#include "storage/service.h"

namespace tweetsearch::cluster {

namespace ipb = internal::v1;

// One storage partition's change log, read from whichever replica answers.
class ClusterStreams::PartitionLog final : public aggregator::ChangeLog {
 public:
  PartitionLog(const ClusterView& view, uint32_t partition)
      : view_(view), partition_(partition), source_(MakeSource(view, partition)) {}

  absl::StatusOr<std::vector<storage::ReplicatedChange>> Read(uint64_t after,
                                                              size_t max) const override {
    return source_->ReadChanges(after, max, absl::ZeroDuration(), 0);
  }
  // The oldest change kept by a replica that answers (0 when none does).
  uint64_t FirstSequence() const override { return Ends().first.value_or(0); }
  // The last change of the replicas that answer; when none does, the last one read.
  uint64_t LastSequence() const override {
    const std::optional<uint64_t> last = Ends().second;
    if (last.has_value()) Note(*last);
    return known_last_.load(std::memory_order_relaxed);
  }
  // The follower read through `sequence`.
  void Note(uint64_t sequence) const {
    uint64_t known = known_last_.load(std::memory_order_relaxed);
    while (known < sequence && !known_last_.compare_exchange_weak(known, sequence)) {
    }
  }
  storage::ChangeSource& source() const { return *source_; }

 private:
  static std::unique_ptr<storage::ChangeSource> MakeSource(const ClusterView& view,
                                                           uint32_t partition) {
    std::vector<std::string> replicas;
    for (const NodeSpec& n : view.topology().storage[partition].replicas) {
      replicas.push_back(n.grpc);
    }
    // No reader name: a front door holds no change back from trimming.
    return storage::MakeChangeSource(std::move(replicas), "", storage::ChangeBodies::kInclude);
  }

  // Of the replicas that answer: the smallest first sequence and the largest last one. Every
  // acknowledged change is on both replicas (the secondary applies first), so the largest last
  // sequence is at or past every acknowledged change.
  std::pair<std::optional<uint64_t>, std::optional<uint64_t>> Ends() const {
    std::optional<uint64_t> first, last;
    const size_t replicas = view_.topology().storage[partition_].replicas.size();
    for (uint32_t r = 0; r < replicas; ++r) {
      grpc::ClientContext context;
      context.set_deadline(net::Deadline(std::chrono::seconds(1)));
      ipb::StorageStatus status;
      if (!view_.storage(partition_, r).Status(&context, {}, &status).ok()) continue;
      if (status.installing()) continue;  // its log is not whole yet
      first = std::min(first.value_or(status.first_sequence()), status.first_sequence());
      last = std::max(last.value_or(0), status.last_sequence());
    }
    return {first, last};
  }

  const ClusterView& view_;
  const uint32_t partition_;
  const std::unique_ptr<storage::ChangeSource> source_;
  mutable std::atomic<uint64_t> known_last_{0};
};

// Reads one partition's log into its hub while streams are open (storage::TailChangeLog calls
// it on the follower's thread).
class ClusterStreams::Follower final : public storage::ChangeConsumer {
 public:
  Follower(const PartitionLog& log, aggregator::StreamHub& hub) : log_(log), hub_(hub) {}

  std::optional<Position> Next(uint32_t /*partition*/) override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!hub_.wanted()) idle_ = true;
      cv_.wait(lock, [this] { return stop_ || hub_.wanted(); });
      if (stop_) return std::nullopt;
    }
    if (idle_) {
      idle_ = false;
      SkipToEnd();
    }
    return Position{position_, 0};
  }

  void Apply(uint32_t /*partition*/,
             const std::vector<storage::ReplicatedChange>& changes) override {
    const uint64_t through = changes.back().change.sequence;
    if (hub_.wanted()) {
      std::vector<aggregator::StreamChange> published;
      for (const storage::ReplicatedChange& rc : changes) {
        // Likes changes concern no stream; a put whose tweet was deleted since has its delete
        // later in the log.
        if (rc.change.kind == storage::ChangeKind::kLikes ||
            !storage::ConcernsATweet(rc.change.kind) || !rc.tweet.has_value()) {
          continue;
        }
        published.push_back(aggregator::StreamChange{
            rc.change.sequence,
            rc.change.kind == storage::ChangeKind::kPut ? aggregator::StreamChange::Kind::kPut
                                                        : aggregator::StreamChange::Kind::kDelete,
            std::make_shared<const storage::StoredTweet>(*rc.tweet)});
      }
      hub_.Publish(std::move(published), through);
    } else {
      hub_.Advance(through);
    }
    position_ = through;
    log_.Note(through);
  }

  void AtEnd(uint32_t /*partition*/) override {}

  // The streams that needed the trimmed changes find out from the log themselves.
  void Trimmed(uint32_t /*partition*/) override { SkipToEnd(); }

  // A stream opened: read again if idle.
  void Wake() {
    std::lock_guard<std::mutex> lock(mu_);
    cv_.notify_all();
  }
  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    cv_.notify_all();
  }

 private:
  // Goes on from the partition's last change: the hub sends every stream that started before it
  // to the log for what lies between.
  void SkipToEnd() {
    const uint64_t last = log_.LastSequence();
    if (last <= position_) return;
    position_ = last;
    hub_.Advance(position_);
  }

  const PartitionLog& log_;
  aggregator::StreamHub& hub_;
  uint64_t position_ = 0;  // the follower's thread only, as idle_
  bool idle_ = true;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
};

ClusterStreams::ClusterStreams(const ClusterView& view, const analysis::Analyzer& analyzer,
                               aggregator::StreamHubOptions options) {
  const uint32_t partitions = static_cast<uint32_t>(view.topology().storage.size());
  for (uint32_t p = 0; p < partitions; ++p) {
    logs_.push_back(std::make_unique<PartitionLog>(view, p));
    hubs_.push_back(std::make_unique<aggregator::StreamHub>(
        analyzer, *logs_.back(), 0, [this](std::string_view term) { return Rarity(term); },
        options));
    followers_.push_back(std::make_unique<Follower>(*logs_.back(), *hubs_.back()));
  }
  for (uint32_t p = 0; p < partitions; ++p) {
    threads_.emplace_back([this, p] {
      storage::TailChangeLog(logs_[p]->source(), p, *followers_[p], storage::TailOptions{});
    });
  }
}

ClusterStreams::~ClusterStreams() {
  for (const std::unique_ptr<Follower>& f : followers_) f->Stop();
  for (std::thread& t : threads_) t.join();
  hubs_.clear();  // ends the streams before the logs they read go
}

absl::StatusOr<std::unique_ptr<aggregator::StreamFeed>> ClusterStreams::Open(
    const query::Plan& plan, std::string_view last_event_id,
    const absl::flat_hash_map<std::string, uint64_t>& doc_freq) {
  std::optional<aggregator::StreamPosition> resume;
  if (!last_event_id.empty()) {
    absl::StatusOr<aggregator::StreamPosition> position =
        aggregator::ParseStreamEventId(last_event_id, hubs_.size());
    if (!position.ok()) return position.status();
    resume = *std::move(position);
  }
  {
    std::lock_guard<std::mutex> lock(rarity_mu_);
    if (rarity_.size() > 100'000) rarity_.clear();  // a bound; streams open with fresh figures
    for (const auto& [term, df] : doc_freq) rarity_[term] = df;
  }
  std::vector<aggregator::StreamHub*> hubs;
  for (const std::unique_ptr<aggregator::StreamHub>& h : hubs_) hubs.push_back(h.get());
  absl::StatusOr<std::unique_ptr<aggregator::StreamFeed>> feed =
      aggregator::StreamFeed::Open(hubs, plan, resume);
  if (feed.ok()) {
    for (const std::unique_ptr<Follower>& f : followers_) f->Wake();
  }
  return feed;
}

uint64_t ClusterStreams::Rarity(std::string_view term) const {
  std::lock_guard<std::mutex> lock(rarity_mu_);
  auto it = rarity_.find(AsAbsl(term));
  // A term of unknown frequency is taken for a common one: known rare terms are filed first.
  return it == rarity_.end() ? std::numeric_limits<uint64_t>::max() : it->second;
}

aggregator::StreamHubStats ClusterStreams::Stats() const {
  aggregator::StreamHubStats total;
  for (size_t p = 0; p < hubs_.size(); ++p) {
    const aggregator::StreamHubStats s = hubs_[p]->Stats();
    if (p == 0) {
      total.open_streams = s.open_streams;
      total.standing_queries = s.standing_queries;
    }
    total.position += s.position;
    total.events += s.events;
    total.tweets_matched += s.tweets_matched;
    total.query_tests += s.query_tests;
    total.catch_ups += s.catch_ups;
  }
  return total;
}

}  // namespace tweetsearch::cluster
