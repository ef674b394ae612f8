// FanOut: one call per partition, in parallel, with failover, hedging on each partition's
// observed latency (within its hedge budget) and a deadline; what each replica did is told to
// a ReplicaHealth (cluster/replica_health.h). The front door's reads (cluster_backend.cc)
// fan out through it: searches, statistics, counts, hydration and status.
//
// Thread-safety: Start() or Run() once, from one thread; the calls' callbacks may come on any
// thread.
#ifndef TWEETSEARCH_CLUSTER_FAN_OUT_H_
#define TWEETSEARCH_CLUSTER_FAN_OUT_H_

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cluster/replica_health.h"
#include "cluster/timer_thread.h"
#include "common/clock.h"
#include "common/strings.h"
#include "net/grpc.h"

namespace tweetsearch::cluster {

// A call that the hedge budget refused a hedge is hedged anyway after this many hedge delays.
inline constexpr int kLateHedge = 4;

// One call per partition, in parallel, each to the first of its `replicas`; a
// failed call goes on to the next replica at once, a slow one is hedged to the
// next once it has run for its partition's hedge delay (`health`'s, at most
// `max_hedge`), or kLateHedge times that while the partition's hedge budget is
// spent. Answers per partition the first successful response, or the
// last error. What each replica did is told to `health`.
//
// Nothing waits beside the calls: Start() returns once they are sent, and the
// answer is handed on by the call that settles the fan-out, or by `timers` at a
// hedge's time or the deadline. Run() is Start() and a wait. Held by shared_ptr:
// each call's callback keeps it alive until the callback has returned.
template <typename Response>
class FanOut : public std::enable_shared_from_this<FanOut<Response>> {
 public:
  // Starts the call for partition p on replica r; must call `done` exactly
  // once, perhaps before it returns, but not while holding a lock that `cancel`
  // takes (the answer may settle the fan-out, which cancels the other calls).
  // Whatever it reads must outlive the call.
  using Call = std::function<void(uint32_t p, uint32_t r, grpc::ClientContext* ctx,
                                  Response* response, std::function<void(grpc::Status)> done)>;

  // Cancels a call that `start` began with this context (by default, the call itself).
  using Cancel = std::function<void(grpc::ClientContext* ctx)>;

  using Answers = std::vector<absl::StatusOr<Response>>;
  using Done = absl::AnyInvocable<void(Answers) &&>;

  FanOut(
      std::vector<std::vector<uint32_t>> replicas, ReplicaHealth& health, const Clock& clock,
      TimerThread& timers, Call start,
      Cancel cancel = [](grpc::ClientContext* ctx) { ctx->TryCancel(); })
      : start_(std::move(start)),
        cancel_(std::move(cancel)),
        health_(health),
        clock_(clock),
        timers_(timers),
        parts_(replicas.size()) {
    for (size_t p = 0; p < replicas.size(); ++p) parts_[p].replicas = std::move(replicas[p]);
  }

  // Sends the calls and returns. `done` runs once, with an answer per partition, when every
  // partition has one or has run out of replicas, or at the deadline: on the thread of the
  // call that settled it (in Start() itself when a call ends at once), or on `timers`'. It
  // must not block. The calls still running then are cancelled; their callbacks come later.
  void Start(std::chrono::milliseconds deadline, std::chrono::milliseconds max_hedge, Done done) {
    const auto now = std::chrono::system_clock::now();
    std::vector<Attempt*> to_start;
    {
      absl::MutexLock lock(&mu_);
      done_ = std::move(done);
      deadline_ = now + deadline;
      for (uint32_t p = 0; p < parts_.size(); ++p) {
        Part& part = parts_[p];
        part.hedge_delay = std::min<std::chrono::microseconds>(max_hedge, health_.HedgeDelay(p));
        part.hedge_at = now + part.hedge_delay;
        if (Attempt* a = LaunchLocked(p))
          to_start.push_back(a);
        else
          part.error = absl::UnavailableError(StrCat("partition ", p, " has no live replica"));
      }
      ++starting_;  // the fan-out is not settled while its first calls are being sent
    }
    StartAll(to_start);
    Settled settled;
    {
      absl::MutexLock lock(&mu_);
      --starting_;
      settled = SettleIfDoneLocked(/*timed_out=*/false);
      if (!settled.done) ArmTimerLocked();
    }
    Deliver(std::move(settled));
  }

  // Start(), then waits for the answer and for every call's callback (the calls may read
  // what the caller holds).
  Answers Run(std::chrono::milliseconds deadline, std::chrono::milliseconds max_hedge) {
    Answers out;
    bool answered = false;
    Start(deadline, max_hedge, [&](Answers answers) {
      absl::MutexLock lock(&mu_);
      out = std::move(answers);
      answered = true;
    });
    absl::MutexLock lock(&mu_);
    auto idle = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return answered && running_ == 0; };
    mu_.Await(absl::Condition(&idle));
    return out;
  }

 private:
  struct Attempt {
    grpc::ClientContext ctx;
    Response response;
    uint32_t partition = 0;
    uint32_t replica = 0;
    int index = 0;  // in its part's attempts
    int64_t started_us = 0;
    bool finished = false;
    bool cancelled = false;  // by this fan-out: says nothing of the replica
  };
  struct Part {
    std::vector<uint32_t> replicas;
    size_t next = 0;
    std::vector<std::unique_ptr<Attempt>> attempts;
    int outstanding = 0;
    int winner = -1;
    bool hedged = false;
    bool over_budget = false;  // its hedge was refused once, and waits for kLateHedge delays
    std::chrono::microseconds hedge_delay{0};
    std::chrono::system_clock::time_point hedge_at;
    absl::Status error;
  };
  // What settling the fan-out leaves to do unlocked: cancel the calls still running, and
  // hand on the answers.
  struct Settled {
    bool done = false;
    Done callback;
    Answers answers;
    std::vector<grpc::ClientContext*> to_cancel;
  };

  bool AllResolvedLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    for (const Part& p : parts_) {
      if (p.winner < 0 && p.outstanding > 0) return false;
    }
    return true;
  }

  // Settles the fan-out when every partition is resolved, or `timed_out`: takes the answers
  // and marks the calls still running cancelled.
  Settled SettleIfDoneLocked(bool timed_out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Settled s;
    if (settled_ || starting_ > 0 || (!timed_out && !AllResolvedLocked())) return s;
    settled_ = true;
    s.done = true;
    s.callback = std::move(done_);
    s.answers.reserve(parts_.size());
    for (uint32_t p = 0; p < parts_.size(); ++p) {
      Part& part = parts_[p];
      for (auto& a : part.attempts) {
        if (a->finished) continue;
        if (part.winner < 0) health_.Failed(p, a->replica);  // ran past the deadline
        a->cancelled = true;
        s.to_cancel.push_back(&a->ctx);
      }
      if (part.winner >= 0) {
        s.answers.push_back(std::move(part.attempts[part.winner]->response));
      } else if (!part.error.ok()) {
        s.answers.push_back(part.error);
      } else {
        s.answers.push_back(
            absl::DeadlineExceededError(StrCat("partition ", p, " did not answer in time")));
      }
    }
    return s;
  }

  // Cancels unlocked (one may answer its call at once), then hands the answers on.
  void Deliver(Settled settled) {
    if (!settled.done) return;
    for (grpc::ClientContext* ctx : settled.to_cancel) cancel_(ctx);
    std::move(settled.callback)(std::move(settled.answers));
  }

  // Sets the timer for the next hedge of a partition still waiting, or for the deadline.
  void ArmTimerLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto wake = deadline_;
    for (const Part& part : parts_) {
      if (part.winner < 0 && part.outstanding > 0 && !part.hedged)
        wake = std::min(wake, part.hedge_at);
    }
    timers_.At(wake, [weak = this->weak_from_this()] {
      if (auto self = weak.lock()) self->OnTimer();
    });
  }

  // At a hedge's time or the deadline: settles the fan-out at the deadline, else hedges each
  // partition whose call outlived its hedge delay, once.
  void OnTimer() {
    std::vector<Attempt*> hedges;
    Settled settled;
    {
      absl::MutexLock lock(&mu_);
      if (settled_) return;
      const auto now = std::chrono::system_clock::now();
      if (now >= deadline_) {
        settled = SettleIfDoneLocked(/*timed_out=*/true);
      } else {
        for (uint32_t p = 0; p < parts_.size(); ++p) {
          if (Attempt* a = HedgeLocked(p, now)) hedges.push_back(a);
        }
        ArmTimerLocked();
      }
    }
    Deliver(std::move(settled));
    StartAll(hedges);
  }

  // The hedge for partition p when its call has outlived its hedge delay, or null.
  Attempt* HedgeLocked(uint32_t p, std::chrono::system_clock::time_point now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Part& part = parts_[p];
    if (part.winner >= 0 || part.outstanding == 0 || part.hedged || now < part.hedge_at)
      return nullptr;
    if (part.next >= part.replicas.size()) {  // no replica left to hedge to
      part.hedged = true;
      return nullptr;
    }
    const auto slow = std::find_if(part.attempts.begin(), part.attempts.end(),
                                   [](const auto& a) { return !a->finished; });
    // Over the partition's hedge budget (replica_health.h) the call runs on, and is
    // hedged anyway once it has run kLateHedge times the delay: a busy replica's calls
    // seldom get there, a frozen one's all do.
    if (!part.over_budget && !health_.TakeHedge(p, (*slow)->replica)) {
      part.over_budget = true;
      part.hedge_at += (kLateHedge - 1) * part.hedge_delay;
      return nullptr;
    }
    part.hedged = true;
    for (const auto& a : part.attempts) {
      if (!a->finished) health_.Hedged(p, a->replica);
    }
    return LaunchLocked(p);
  }

  // The next attempt for partition p, or null when every replica was tried.
  Attempt* LaunchLocked(uint32_t p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Part& part = parts_[p];
    if (part.next >= part.replicas.size()) return nullptr;
    auto a = std::make_unique<Attempt>();
    a->ctx.set_deadline(deadline_);
    a->partition = p;
    a->replica = part.replicas[part.next];
    a->index = static_cast<int>(part.attempts.size());
    a->started_us = clock_.NowMonotonicMicros();
    Attempt* raw = a.get();
    part.attempts.push_back(std::move(a));
    ++part.next;
    ++part.outstanding;
    ++running_;
    return raw;
  }

  void StartAll(const std::vector<Attempt*>& attempts) {
    for (Attempt* a : attempts) {
      start_(a->partition, a->replica, &a->ctx, &a->response,
             [self = this->shared_from_this(), a](grpc::Status s) { self->Finished(a, s); });
    }
  }

  void Finished(Attempt* a, const grpc::Status& s) {
    const int64_t now_us = clock_.NowMonotonicMicros();
    const uint32_t p = a->partition;
    Attempt* retry = nullptr;
    Settled settled;
    {
      absl::MutexLock lock(&mu_);
      Part& part = parts_[p];
      a->finished = true;
      --part.outstanding;
      --running_;
      if (s.ok()) {
        if (part.winner < 0) Won(part, *a, now_us);
      } else if (part.winner < 0 && !a->cancelled) {
        part.error = net::FromGrpc(s);
        // A refused request (bad query) would be refused by every replica: do
        // not retry it, and do not hold it against the replica.
        if (s.error_code() != grpc::StatusCode::INVALID_ARGUMENT) {
          health_.Failed(p, a->replica);
          if (s.error_code() != grpc::StatusCode::CANCELLED &&
              std::chrono::system_clock::now() < deadline_) {
            retry = LaunchLocked(p);
          }
        }
      }
      settled = SettleIfDoneLocked(/*timed_out=*/false);
    }
    Deliver(std::move(settled));
    if (retry != nullptr) StartAll({retry});
  }

  // `a` answered first: its latency is a sample, and the calls to this
  // partition that started no later and are still running were overtaken.
  void Won(Part& part, const Attempt& a, int64_t now_us) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    part.winner = a.index;
    health_.Answered(a.partition, a.replica, std::chrono::microseconds(now_us - a.started_us));
    for (const auto& other : part.attempts) {
      if (!other->finished && other->started_us <= a.started_us)
        health_.Overtaken(a.partition, other->replica);
    }
  }

  Call start_;
  Cancel cancel_;
  ReplicaHealth& health_;
  const Clock& clock_;
  TimerThread& timers_;
  absl::Mutex mu_;
  std::chrono::system_clock::time_point deadline_ ABSL_GUARDED_BY(mu_);
  std::vector<Part> parts_ ABSL_GUARDED_BY(mu_);
  Done done_ ABSL_GUARDED_BY(mu_);
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  int starting_ ABSL_GUARDED_BY(mu_) = 0;
  bool settled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tweetsearch::cluster

#endif  // TWEETSEARCH_CLUSTER_FAN_OUT_H_
