#include "cluster/search_batcher.h"

#include <algorithm>
#include <utility>

#include "common/strings.h"

namespace tweetsearch::cluster {

namespace ipb = internal::v1;

struct SearchBatcher::Call {
  ReplicaKey replica;
  grpc::ClientContext context;
  ipb::PartitionSearchBatch request;
  ipb::PartitionSearchAnswers response;
  std::vector<Ticket> searches;  // in the order of request.searches()
};

SearchBatcher::SearchBatcher(StubOf stub_of, SearchBatcherOptions options)
    : stub_of_(std::move(stub_of)), options_(options) {}

SearchBatcher::~SearchBatcher() {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return in_flight_ == 0; };
  mu_.Await(absl::Condition(&idle));
}

uint64_t SearchBatcher::calls() const {
  absl::MutexLock lock(&mu_);
  return calls_;
}

void SearchBatcher::Search(uint32_t p, uint32_t r, grpc::ClientContext* context,
                           const ipb::PartitionSearchRequest& request,
                           ipb::PartitionSearchResponse* response, Done done) {
  std::unique_ptr<Call> call;
  {
    absl::MutexLock lock(&mu_);
    const ReplicaKey key{p, r};
    const uint64_t number = next_number_++;
    searches_.insert_or_assign(context,
                               Waiting{number, key, false, request, response, std::move(done)});
    Replica& replica = replicas_[key];
    replica.queue.emplace_back(context, number);
    if (replica.in_flight < options_.max_in_flight) call = TakeBatchLocked(key);
  }
  if (call != nullptr) Send(std::move(call));
}

std::unique_ptr<SearchBatcher::Call> SearchBatcher::TakeBatchLocked(const ReplicaKey& key) {
  Replica& replica = replicas_[key];
  auto call = std::make_unique<Call>();
  call->replica = key;
  auto deadline = std::chrono::system_clock::time_point::min();
  while (!replica.queue.empty() && call->searches.size() < options_.max_batch) {
    const Ticket ticket = replica.queue.front();
    replica.queue.pop_front();
    Waiting& w = searches_.at(ticket.first);
    w.sent = true;
    *call->request.add_searches() = std::move(w.request);
    call->searches.push_back(ticket);
    deadline = std::max(deadline, ticket.first->deadline());
  }
  call->context.set_deadline(deadline);
  ++replica.in_flight;
  ++in_flight_;
  ++calls_;
  return call;
}

void SearchBatcher::Send(std::unique_ptr<Call> call) {
  Call* raw = call.release();
  stub_of_(raw->replica.first, raw->replica.second)
      .async()
      ->SearchMany(&raw->context, &raw->request, &raw->response,
                   [this, raw](grpc::Status status) { Finished(raw, status); });
}

void SearchBatcher::Finished(Call* raw, const grpc::Status& status) {
  std::unique_ptr<Call> call(raw);
  std::vector<std::pair<Done, grpc::Status>> answered;
  std::unique_ptr<Call> next;
  {
    absl::MutexLock lock(&mu_);
    const int answers = call->response.answers_size();
    for (size_t i = 0; i < call->searches.size(); ++i) {
      const auto [context, number] = call->searches[i];
      auto it = searches_.find(context);
      if (it == searches_.end() || it->second.number != number) continue;  // cancelled
      grpc::Status s = status;
      if (status.ok() && static_cast<int>(i) >= answers) {
        s = grpc::Status(
            grpc::StatusCode::INTERNAL,
            StrCat("index replica answered ", answers, " of ", call->searches.size(), " searches"));
      } else if (status.ok()) {
        ipb::PartitionSearchAnswer& a = *call->response.mutable_answers(static_cast<int>(i));
        if (a.code() == 0) {
          *it->second.response = std::move(*a.mutable_response());
        } else {
          s = grpc::Status(static_cast<grpc::StatusCode>(a.code()), a.message());
        }
      }
      answered.emplace_back(std::move(it->second.done), std::move(s));
      searches_.erase(it);
    }
    Replica& replica = replicas_[call->replica];
    --replica.in_flight;
    --in_flight_;
    if (!replica.queue.empty()) next = TakeBatchLocked(call->replica);
  }
  call.reset();
  for (auto& [done, s] : answered) done(s);
  if (next != nullptr) Send(std::move(next));
}

void SearchBatcher::Cancel(grpc::ClientContext* context) {
  Done done;
  {
    absl::MutexLock lock(&mu_);
    auto it = searches_.find(context);
    if (it == searches_.end()) return;
    if (!it->second.sent) {
      std::deque<Ticket>& queue = replicas_[it->second.replica].queue;
      queue.erase(std::find(queue.begin(), queue.end(), Ticket{context, it->second.number}));
    }
    done = std::move(it->second.done);
    searches_.erase(it);
  }
  done(grpc::Status(grpc::StatusCode::CANCELLED, "search cancelled"));
}

}  // namespace tweetsearch::cluster
