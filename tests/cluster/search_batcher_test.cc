// SearchBatcher over real gRPC on loopback, against an index service that holds each
// SearchMany call until the test answers it, so what travels in which call is known.
#include "cluster/search_batcher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "net/grpc.h"

namespace tweetsearch::cluster {
namespace {

namespace ipb = internal::v1;

// Answers each search with total_hits = its limit; a sort outside 0..2 is refused.
class HeldIndex final : public ipb::Index::CallbackService {
 public:
  grpc::ServerUnaryReactor* SearchMany(grpc::CallbackServerContext* ctx,
                                       const ipb::PartitionSearchBatch* request,
                                       ipb::PartitionSearchAnswers* response) override {
    absl::MutexLock lock(&mu_);
    held_.push_back(Held{ctx->DefaultReactor(), request, response});
    sizes_.push_back(request->searches_size());
    return held_.back().reactor;
  }

  // Waits until `n` calls are held.
  void AwaitHeld(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return held_.size() >= n; };
    mu_.Await(absl::Condition(&enough));
  }

  // The number of searches each held call carries, in arrival order.
  std::vector<int> BatchSizes() {
    absl::MutexLock lock(&mu_);
    return sizes_;
  }

  // Answers held call i.
  void Answer(size_t i) {
    Held h;
    {
      absl::MutexLock lock(&mu_);
      h = held_.at(i);
    }
    for (const ipb::PartitionSearchRequest& r : h.request->searches()) {
      ipb::PartitionSearchAnswer* a = h.response->add_answers();
      if (r.sort() < 0 || r.sort() > 2) {
        a->set_code(grpc::StatusCode::INVALID_ARGUMENT);
        a->set_message("sort must be 0, 1 or 2");
      } else {
        a->mutable_response()->set_total_hits(r.limit());
      }
    }
    h.reactor->Finish(grpc::Status::OK);
  }

 private:
  struct Held {
    grpc::ServerUnaryReactor* reactor = nullptr;
    const ipb::PartitionSearchBatch* request = nullptr;
    ipb::PartitionSearchAnswers* response = nullptr;
  };
  absl::Mutex mu_;
  std::vector<Held> held_ ABSL_GUARDED_BY(mu_);  // a call's request and response: until answered
  std::vector<int> sizes_ ABSL_GUARDED_BY(mu_);
};

// One search as a caller keeps it.
struct Search {
  grpc::ClientContext context;
  ipb::PartitionSearchRequest request;
  ipb::PartitionSearchResponse response;
  absl::Mutex mu;
  bool answered ABSL_GUARDED_BY(mu) = false;
  grpc::Status status ABSL_GUARDED_BY(mu);

  explicit Search(uint32_t limit, int sort = 0) {
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    request.set_limit(limit);
    request.set_sort(sort);
  }
  SearchBatcher::Done Done() {
    return [this](grpc::Status s) {
      absl::MutexLock lock(&mu);
      EXPECT_FALSE(answered) << "answered twice";
      answered = true;
      status = std::move(s);
    };
  }
  grpc::Status Await() {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(&answered));
    return status;
  }
  bool answered_now() {
    absl::MutexLock lock(&mu);
    return answered;
  }
};

class SearchBatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<net::RunningServer> server = net::StartServer("127.0.0.1:0", {&service_});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    stub_ = ipb::Index::NewStub(net::Connect("127.0.0.1:" + std::to_string(server_.port)));
    batcher_ = std::make_unique<SearchBatcher>(
        [this](uint32_t, uint32_t) -> SearchBatcher::Stub& { return *stub_; },
        SearchBatcherOptions{.max_in_flight = 1, .max_batch = 3});
  }
  void TearDown() override {
    batcher_.reset();
    server_.server->Shutdown();
  }
  void Send(Search& s, uint32_t replica = 0) {
    batcher_->Search(0, replica, &s.context, s.request, &s.response, s.Done());
  }

  HeldIndex service_;
  net::RunningServer server_;
  std::unique_ptr<ipb::Index::Stub> stub_;
  std::unique_ptr<SearchBatcher> batcher_;
};

TEST_F(SearchBatcherTest, SearchesThatFindACallInFlightLeaveTogetherWithTheirOwnAnswers) {
  Search first(1);
  Send(first);  // an idle replica: it leaves at once, alone
  service_.AwaitHeld(1);
  std::vector<std::unique_ptr<Search>> waiting;
  for (uint32_t limit = 2; limit <= 6; ++limit) {
    waiting.push_back(std::make_unique<Search>(limit, limit == 3 ? 9 : 0));
    Send(*waiting.back());
  }
  Search other_replica(7);
  Send(other_replica, 1);  // its own replica is idle: not held behind the others
  service_.AwaitHeld(2);
  EXPECT_EQ(service_.BatchSizes(), (std::vector<int>{1, 1}));

  service_.Answer(0);
  ASSERT_TRUE(first.Await().ok());
  EXPECT_EQ(first.response.total_hits(), 1u);
  service_.AwaitHeld(3);  // the next call: the three oldest waiting searches
  service_.Answer(2);
  service_.AwaitHeld(4);  // then the last two
  service_.Answer(3);
  service_.Answer(1);
  EXPECT_EQ(service_.BatchSizes(), (std::vector<int>{1, 1, 3, 2}));
  for (auto& s : waiting) {
    const grpc::Status status = s->Await();
    if (s->request.sort() == 9) {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    } else {
      ASSERT_TRUE(status.ok()) << status.error_message();
      EXPECT_EQ(s->response.total_hits(), s->request.limit());
    }
  }
  ASSERT_TRUE(other_replica.Await().ok());
  EXPECT_EQ(other_replica.response.total_hits(), 7u);
  EXPECT_EQ(batcher_->calls(), 4u);
}

TEST_F(SearchBatcherTest, ACancelledSearchIsAnsweredAtOnceAndNeverGetsAStaleAnswer) {
  Search sent(1);
  Send(sent);
  service_.AwaitHeld(1);
  Search queued(2), kept(3);
  Send(queued);
  Send(kept);

  batcher_->Cancel(&queued.context);  // waiting: answered now, and never sent
  EXPECT_EQ(queued.Await().error_code(), grpc::StatusCode::CANCELLED);
  batcher_->Cancel(&sent.context);  // sent: answered now; its call goes on
  EXPECT_EQ(sent.Await().error_code(), grpc::StatusCode::CANCELLED);

  // The sent search's context names a new search before the old call returns.
  Search reused(4);
  reused.request.set_limit(40);
  batcher_->Search(0, 0, &sent.context, reused.request, &reused.response, reused.Done());

  service_.Answer(0);  // answers the cancelled search: dropped
  service_.AwaitHeld(2);
  EXPECT_EQ(service_.BatchSizes(), (std::vector<int>{1, 2}));  // kept and reused, not queued
  EXPECT_FALSE(reused.answered_now());
  EXPECT_EQ(sent.response.total_hits(), 0u);
  service_.Answer(1);
  ASSERT_TRUE(kept.Await().ok());
  EXPECT_EQ(kept.response.total_hits(), 3u);
  ASSERT_TRUE(reused.Await().ok());
  EXPECT_EQ(reused.response.total_hits(), 40u);
  batcher_->Cancel(&kept.context);  // already answered: nothing happens
}

TEST_F(SearchBatcherTest, AFailedCallFailsEverySearchItCarried) {
  // Replica 1 is a port nobody listens on.
  const int dead_port = [] {
    HeldIndex unused;
    absl::StatusOr<net::RunningServer> s = net::StartServer("127.0.0.1:0", {&unused});
    EXPECT_TRUE(s.ok());
    const int port = s->port;
    s->server->Shutdown();
    return port;
  }();
  auto dead = ipb::Index::NewStub(net::Connect("127.0.0.1:" + std::to_string(dead_port)));
  SearchBatcher batcher(
      [&](uint32_t, uint32_t r) -> SearchBatcher::Stub& { return r == 1 ? *dead : *stub_; });
  std::vector<std::unique_ptr<Search>> searches;
  for (uint32_t limit = 1; limit <= 5; ++limit) {
    searches.push_back(std::make_unique<Search>(limit));
    Search& s = *searches.back();
    batcher.Search(0, 1, &s.context, s.request, &s.response, s.Done());
  }
  for (auto& s : searches) EXPECT_FALSE(s->Await().ok()) << "a search to a dead replica";
}

}  // namespace
}  // namespace tweetsearch::cluster
