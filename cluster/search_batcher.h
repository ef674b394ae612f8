// SearchBatcher: a front door's newest-first searches to index replicas, several to
// a call (an index server refuses a ranked search in SearchMany; docs/cluster.md,
// "Searches").
//
// Each replica has at most `max_in_flight` SearchMany calls running. A search
// for a replica with fewer in flight leaves at once, in a call of its own;
// otherwise it waits in that replica's queue, and when a call returns, up to
// `max_batch` waiting searches leave together in the next one. A lightly loaded
// front door so adds no wait, and a loaded one makes a few calls that carry
// many searches: the work of a call (its HTTP/2 stream and headers, a wake-up
// of a thread on each side, a write and a read) is shared by its searches.
// Each search keeps its own answer and status: one refused search does not
// fail the others of its call.
//
// A search is named by the grpc::ClientContext its caller keeps for it: that
// context is never used for a call of its own; its deadline is the search's.
// Cancel(context) answers the search CANCELLED at once, whether it waits or was
// sent; a sent one's answer is then dropped.
//
// Thread-safety: every method may be called from any thread. `done` runs on a
// gRPC thread, in Cancel(), or inside Search() when gRPC fails a call at once;
// never with the batcher's lock held. The destructor waits for the calls in
// flight.
#ifndef TWEETSEARCH_CLUSTER_SEARCH_BATCHER_H_
#define TWEETSEARCH_CLUSTER_SEARCH_BATCHER_H_

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "proto/cluster.grpc.pb.h"

namespace tweetsearch::cluster {

struct SearchBatcherOptions {
  size_t max_in_flight = 2;  // SearchMany calls running per replica
  size_t max_batch = 32;     // searches per call
};

class SearchBatcher {
 public:
  using Stub = internal::v1::Index::StubInterface;
  // The stub of index partition p's replica r; it must outlive the batcher.
  using StubOf = std::function<Stub&(uint32_t p, uint32_t r)>;
  using Done = std::function<void(grpc::Status)>;

  SearchBatcher(StubOf stub_of, SearchBatcherOptions options = {});
  ~SearchBatcher();
  SearchBatcher(const SearchBatcher&) = delete;
  SearchBatcher& operator=(const SearchBatcher&) = delete;

  // Sends `request` to replica r of partition p; `response` is filled before
  // `done` is called with OK. `context` names the search until `done` runs.
  void Search(uint32_t p, uint32_t r, grpc::ClientContext* context,
              const internal::v1::PartitionSearchRequest& request,
              internal::v1::PartitionSearchResponse* response, Done done);
  // Answers the search named by `context` CANCELLED now, if it is not answered yet.
  void Cancel(grpc::ClientContext* context);

  // Calls made so far (for tests and benchmarks).
  uint64_t calls() const;

 private:
  using ReplicaKey = std::pair<uint32_t, uint32_t>;
  // A context may be reused for a later search once `done` ran: a search is its context and
  // a number, so a stale answer never reaches the next search of the same context.
  using Ticket = std::pair<grpc::ClientContext*, uint64_t>;
  struct Waiting {
    uint64_t number;
    ReplicaKey replica;
    bool sent = false;
    internal::v1::PartitionSearchRequest request;
    internal::v1::PartitionSearchResponse* response;
    Done done;
  };
  struct Call;
  struct Replica {
    std::deque<Ticket> queue;  // searches not sent yet, oldest first
    size_t in_flight = 0;
  };

  // Takes up to max_batch waiting searches of `key` into a call, counted in flight.
  std::unique_ptr<Call> TakeBatchLocked(const ReplicaKey& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Send(std::unique_ptr<Call> call);
  void Finished(Call* call, const grpc::Status& status);

  const StubOf stub_of_;
  const SearchBatcherOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<ReplicaKey, Replica> replicas_ ABSL_GUARDED_BY(mu_);
  // Every search not answered yet, queued or sent.
  absl::flat_hash_map<grpc::ClientContext*, Waiting> searches_ ABSL_GUARDED_BY(mu_);
  size_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t calls_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_number_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tweetsearch::cluster

#endif  // TWEETSEARCH_CLUSTER_SEARCH_BATCHER_H_
