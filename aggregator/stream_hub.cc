#include "aggregator/stream_hub.h"

#include <pthread.h>

#include <algorithm>

#include "common/strings.h"
#include "indexer/query/doc_matcher.h"

namespace tweetsearch::aggregator {

struct Subscription::Standing {
  std::string key;
  query::Plan plan;
  std::vector<std::string> anchors;
  std::vector<Subscription*> subs;
  uint64_t stamp = 0;  // the tweet it was last tested against
};

struct StreamHub::Analyzed {
  StreamChange change;
  std::optional<query::AnalyzedTweet> tweet;  // absent if the analyzer refused it
};

namespace {

absl::StatusOr<query::AnalyzedTweet> Analyze(const storage::StoredTweet& t,
                                             const analysis::Analyzer& analyzer) {
  return query::AnalyzedTweet::Make(t.text, t.user_name, t.lang, t.created_at_ms, t.likes,
                                    analyzer);
}

// Identical queries share one standing entry.
std::string PlanKey(const query::Plan& plan) {
  return StrCat(query::ToString(plan.root), "|", plan.since_ms, "|", plan.until_ms, "|",
                plan.min_likes);
}

}  // namespace

Subscription::~Subscription() { Close(); }

void Subscription::OnReady(std::function<void()> wake) {
  std::lock_guard<std::mutex> lock(mu_);
  wake_ = std::move(wake);
}

void Subscription::Close() { hub_.Unsubscribe(*this); }

absl::StatusOr<Subscription::Batch> Subscription::Next(size_t max) {
  uint64_t after;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!queue_.empty()) {
      Batch batch;
      const size_t n = std::min(max, queue_.size());
      batch.events.assign(std::make_move_iterator(queue_.begin()),
                          std::make_move_iterator(queue_.begin() + static_cast<ptrdiff_t>(n)));
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(n));
      batch.more = !queue_.empty() || from_log_;
      return batch;
    }
    if (!ended_.ok()) return ended_;
    if (closed_) return absl::CancelledError("stream closed");
    if (!from_log_) return Batch{};
    after = log_after_;
  }
  absl::StatusOr<std::vector<storage::ReplicatedChange>> changes =
      hub_.log_.Read(after, std::max<size_t>(1, std::min(max, hub_.options_.log_read_batch)));
  if (!changes.ok()) {
    absl::Status ended =
        absl::IsFailedPrecondition(changes.status())
            ? absl::DataLossError(StrCat("the changes after ", after,
                                         " are no longer kept; reconnect to start again"))
            : absl::UnavailableError(
                  StrCat("reading the change log: ", changes.status().message()));
    std::lock_guard<std::mutex> lock(mu_);
    ended_ = ended;
    return ended;
  }
  Batch batch;
  batch.events = hub_.MatchLog(*this, *changes);
  const uint64_t read_through = changes->empty() ? after : changes->back().change.sequence;
  std::lock_guard<std::mutex> hub_lock(hub_.mu_);
  std::lock_guard<std::mutex> lock(mu_);
  log_after_ = std::max(log_after_, read_through);
  if (log_after_ >= hub_.position_) {
    // Caught up: the matcher has matched nothing past what was read, so live events follow on
    // (those the log already gave are skipped).
    from_log_ = false;
    live_after_ = std::max(live_after_, log_after_);
  }
  batch.more = from_log_ || !queue_.empty();
  return batch;
}

StreamHub::StreamHub(const analysis::Analyzer& analyzer, const ChangeLog& log, uint64_t position,
                     std::function<uint64_t(std::string_view)> rarity, StreamHubOptions options)
    : analyzer_(analyzer),
      log_(log),
      rarity_(std::move(rarity)),
      options_(options),
      position_(position) {
  matcher_ = std::thread([this] { Run(); });
}

StreamHub::~StreamHub() {
  {
    std::lock_guard<std::mutex> lock(queue_mu_);
    stop_ = true;
  }
  queue_cv_.notify_one();
  matcher_.join();
  std::lock_guard<std::mutex> lock(mu_);
  for (Subscription* s : subs_) {
    std::lock_guard<std::mutex> sub_lock(s->mu_);
    s->ended_ = absl::UnavailableError("the server is shutting down");
    if (s->wake_) s->wake_();
  }
}

void StreamHub::Push(std::vector<StreamChange> changes, uint64_t through, bool complete) {
  std::unique_lock<std::mutex> lock(queue_mu_);
  if (queued_changes_ + changes.size() > options_.max_backlog_changes) {
    // The matcher is far behind: forget what waits, and let the streams read it from the log.
    queue_.clear();
    queued_changes_ = 0;
    changes.clear();
    complete = false;
  }
  queued_changes_ += changes.size();
  queue_.push_back(Pending{std::move(changes), through, complete});
  lock.unlock();
  queue_cv_.notify_one();
}

void StreamHub::Run() {
  pthread_setname_np(pthread_self(), "stream-matcher");  // for top, perf and the benchmark
  for (;;) {
    Pending p;
    {
      std::unique_lock<std::mutex> lock(queue_mu_);
      queue_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      p = std::move(queue_.front());
      queue_.pop_front();
      queued_changes_ -= p.changes.size();
    }
    std::vector<Analyzed> tweets;
    if (wanted()) {
      tweets.reserve(p.changes.size());
      for (StreamChange& c : p.changes) {
        absl::StatusOr<query::AnalyzedTweet> a = Analyze(*c.tweet, analyzer_);
        tweets.push_back(
            Analyzed{std::move(c), a.ok() ? std::optional(*std::move(a)) : std::nullopt});
      }
    }
    MatchBatch(tweets, p.through, p.complete);
  }
}

void StreamHub::MatchBatch(const std::vector<Analyzed>& tweets, uint64_t through, bool complete) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!complete) AllToLog(through);
  for (const Analyzed& a : tweets) {
    if (!a.tweet.has_value() || a.change.sequence <= position_) continue;
    const uint64_t stamp = ++stamp_;
    tweets_matched_.fetch_add(1, std::memory_order_relaxed);
    const StreamEvent event{a.change.kind == StreamChange::Kind::kPut ? StreamEvent::Kind::kTweet
                                                                      : StreamEvent::Kind::kDelete,
                            a.change.sequence, a.change.tweet};
    uint64_t tests = 0;
    a.tweet->ForEachTerm([&](std::string_view term) {
      auto it = by_term_.find(AsAbsl(term));
      if (it == by_term_.end()) return;
      for (Subscription::Standing* q : it->second) {
        if (q->stamp == stamp) continue;
        q->stamp = stamp;
        ++tests;
        if (!query::Matches(q->plan, *a.tweet)) continue;
        for (Subscription* s : q->subs) Deliver(*s, event);
      }
    });
    query_tests_.fetch_add(tests, std::memory_order_relaxed);
  }
  position_ = std::max(position_, through);
}

void StreamHub::Deliver(Subscription& s, const StreamEvent& event) {
  std::lock_guard<std::mutex> lock(s.mu_);
  if (s.from_log_ || s.closed_ || !s.ended_.ok() || event.sequence <= s.live_after_) return;
  const bool was_empty = s.queue_.empty();
  if (s.queue_.size() >= options_.max_queued_events) {
    // The client reads too slowly: keep what is queued, read the rest from the log later.
    s.from_log_ = true;
    s.log_after_ = event.sequence - 1;
    catch_ups_.fetch_add(1, std::memory_order_relaxed);
  } else {
    s.queue_.push_back(event);
    events_.fetch_add(1, std::memory_order_relaxed);
  }
  if (was_empty && s.wake_) s.wake_();
}

void StreamHub::AllToLog(uint64_t through) {
  for (Subscription* s : subs_) {
    std::lock_guard<std::mutex> lock(s->mu_);
    // Streams that started at or after `through` missed nothing.
    if (s->from_log_ || s->live_after_ >= through) continue;
    s->from_log_ = true;
    s->log_after_ = std::max(position_, s->live_after_);
    catch_ups_.fetch_add(1, std::memory_order_relaxed);
    if (s->wake_) s->wake_();
  }
}

std::vector<StreamEvent> StreamHub::MatchLog(
    const Subscription& s, std::vector<storage::ReplicatedChange>& changes) const {
  std::vector<StreamEvent> events;
  for (storage::ReplicatedChange& rc : changes) {
    if (rc.change.kind == storage::ChangeKind::kLikes || !storage::ConcernsATweet(rc.change.kind) ||
        !rc.tweet.has_value()) {
      continue;
    }
    absl::StatusOr<query::AnalyzedTweet> a = Analyze(*rc.tweet, analyzer_);
    if (!a.ok() || !query::Matches(s.plan_, *a)) continue;
    events.push_back(StreamEvent{
        rc.change.kind == storage::ChangeKind::kPut ? StreamEvent::Kind::kTweet
                                                    : StreamEvent::Kind::kDelete,
        rc.change.sequence, std::make_shared<const storage::StoredTweet>(*std::move(rc.tweet))});
  }
  return events;
}

absl::StatusOr<std::unique_ptr<Subscription>> StreamHub::Subscribe(
    query::Plan plan, std::optional<uint64_t> resume_after) {
  std::vector<std::string> anchors = query::AnchorTerms(plan.root, rarity_);
  std::string key = PlanKey(plan);
  // Every change acknowledged before this call is in the log by now (read before the lock: the
  // store may be busy writing).
  const uint64_t logged = log_.LastSequence();
  std::lock_guard<std::mutex> lock(mu_);
  // A new stream starts after every acknowledged change, even those the matcher has not
  // reached yet (it skips them for this stream).
  uint64_t start = std::max(position_, logged);
  std::optional<uint64_t> gap_after;
  if (resume_after.has_value()) {
    const uint64_t last = start;
    if (*resume_after > last) {
      return absl::InvalidArgumentError(StrCat(
          "event id ", *resume_after, " is ahead of this server's change log (at ", last, ")"));
    }
    start = *resume_after;
    if (const uint64_t first = log_.FirstSequence(); start + 1 < first) {
      gap_after = start;
      start = first - 1;
    }
  }
  std::unique_ptr<Subscription> s(new Subscription(*this, start));
  s->gap_after_ = gap_after;
  s->plan_ = plan;
  {
    std::lock_guard<std::mutex> sub_lock(s->mu_);
    s->live_after_ = start;
    if (resume_after.has_value() && start < position_) {
      s->from_log_ = true;
      s->log_after_ = start;
    }
  }
  std::unique_ptr<Subscription::Standing>& q = by_key_[key];
  if (q == nullptr) {
    q = std::make_unique<Subscription::Standing>();
    q->key = std::move(key);
    q->plan = std::move(plan);
    q->anchors = std::move(anchors);
    for (const std::string& term : q->anchors) by_term_[term].push_back(q.get());
  }
  q->subs.push_back(s.get());
  s->standing_ = q.get();
  subs_.push_back(s.get());
  open_.fetch_add(1, std::memory_order_release);
  return s;
}

void StreamHub::Unsubscribe(Subscription& s) {
  std::lock_guard<std::mutex> lock(mu_);
  {
    std::lock_guard<std::mutex> sub_lock(s.mu_);
    s.closed_ = true;
    s.queue_.clear();
  }
  Subscription::Standing* q = s.standing_;
  if (q == nullptr) return;
  s.standing_ = nullptr;
  std::erase(subs_, &s);
  open_.fetch_sub(1, std::memory_order_release);
  std::erase(q->subs, &s);
  if (!q->subs.empty()) return;
  for (const std::string& term : q->anchors) {
    auto it = by_term_.find(term);
    if (it == by_term_.end()) continue;
    std::erase(it->second, q);
    if (it->second.empty()) by_term_.erase(it);
  }
  by_key_.erase(q->key);
}

StreamHubStats StreamHub::Stats() const {
  StreamHubStats out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out.open_streams = subs_.size();
    out.standing_queries = by_key_.size();
    out.position = position_;
  }
  out.events = events_.load(std::memory_order_relaxed);
  out.tweets_matched = tweets_matched_.load(std::memory_order_relaxed);
  out.query_tests = query_tests_.load(std::memory_order_relaxed);
  out.catch_ups = catch_ups_.load(std::memory_order_relaxed);
  return out;
}

}  // namespace tweetsearch::aggregator
