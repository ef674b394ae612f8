// StreamFeed: the events of one stream (GET /v1/stream, the gRPC Stream call) over every change
// log the server follows: one in one process, one per storage partition in a cluster.
//
// A stream subscribes to each log's StreamHub and hands on their events as they come, each
// log's in its order. Logs have no order between them, so a stream's position is a vector: per
// log, the sequence of the last change it has delivered. Every event's id is that vector just
// after the event ("812" in one process, "812-977-640" with three storage partitions), so a
// client that reconnects with the last id it received, to this front door or another one,
// resumes every log exactly where it stopped: nothing lost, nothing twice.
//
// Thread-safety: one transport thread at a time calls Next(); the wake function may be called
// from the hubs' threads.
#ifndef TWEETSEARCH_AGGREGATOR_STREAM_FEED_H_
#define TWEETSEARCH_AGGREGATOR_STREAM_FEED_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "aggregator/stream_hub.h"

namespace tweetsearch::aggregator {

// Per change log, the sequence of the last change a stream has delivered.
using StreamPosition = std::vector<uint64_t>;

// The event id of `position`: its sequences in decimal, joined by '-'.
std::string StreamEventId(std::span<const uint64_t> position);
// The position of an event id given back by a client, for a server following `logs` change
// logs. InvalidArgument, saying why, for text that is not one.
absl::StatusOr<StreamPosition> ParseStreamEventId(std::string_view text, size_t logs);

struct FeedEvent {
  StreamEvent::Kind kind = StreamEvent::Kind::kTweet;
  std::string id;  // the stream's position just after this event
  std::shared_ptr<const storage::StoredTweet> tweet;
};

class StreamFeed {
 public:
  // Subscribes `plan` to every hub (hubs[i] follows log i): new changes only, or those after
  // `resume` (one sequence per hub). The hubs must outlive the feed.
  static absl::StatusOr<std::unique_ptr<StreamFeed>> Open(
      std::span<StreamHub* const> hubs, const query::Plan& plan,
      const std::optional<StreamPosition>& resume);

  // The id of the first ("ready") event: where the stream starts.
  const std::string& start_id() const { return start_id_; }
  // For a resumed stream some of whose changes were trimmed from a log: the id asked for (events
  // after it were lost).
  const std::optional<std::string>& gap_after() const { return gap_after_; }

  // `wake` is called (on a hub's thread, briefly, holding its locks) when events become
  // available or the stream ends. Set before the first Next().
  void OnReady(const std::function<void()>& wake);

  struct Batch {
    std::vector<FeedEvent> events;
    bool more = false;  // call again at once
  };
  // The next events, at most `max`; none if nothing is waiting. Returns why the stream ended
  // once it has (see Subscription::Next), after the events that came before.
  absl::StatusOr<Batch> Next(size_t max);

 private:
  StreamFeed() = default;

  std::vector<std::unique_ptr<Subscription>> subscriptions_;
  StreamPosition position_;
  std::string start_id_;
  std::optional<std::string> gap_after_;
  size_t turn_ = 0;  // the subscription asked first next time, so none is starved
};

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_STREAM_FEED_H_
