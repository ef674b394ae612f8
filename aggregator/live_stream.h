// LiveStream: a stream (GET /v1/stream, the gRPC Stream call) as its transport holds it once
// the front door opened it: the subscription to read events from, and the key's quota on them.
//
// Opening (FrontDoor::OpenStream) authenticates the key (scope search), charges one search,
// plans the query, checks the key's cap on open streams (the rules' max_streams) and opens the
// backend's feed of the query's matches (stream_feed.h). Each batch of events is charged to the
// key's "stream" limits before it is sent; a refusal ends the stream with a final event naming the
// limit (the client may resume after the last event it received once the quota allows).
//
// Thread-safety: one transport thread at a time uses a stream; the front door's counts of open
// streams are shared.
#ifndef TWEETSEARCH_AGGREGATOR_LIVE_STREAM_H_
#define TWEETSEARCH_AGGREGATOR_LIVE_STREAM_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "aggregator/api_keys.h"
#include "aggregator/stream_feed.h"

namespace tweetsearch::aggregator {

class FrontDoor;

// A stream's place in its key's max_streams where front doors share the count (the quota
// store), given back when destroyed.
class StreamSlot {
 public:
  virtual ~StreamSlot() = default;
};

struct StreamRequest {
  std::string api_dev_key;
  std::string search_terms;
  // The id of the last event the client received (SSE's Last-Event-ID, gRPC's resume token):
  // the stream resumes after it. Empty: new tweets only.
  std::string last_event_id;
};

class LiveStream {
 public:
  ~LiveStream();  // frees the key's slots
  LiveStream(const LiveStream&) = delete;
  LiveStream& operator=(const LiveStream&) = delete;

  StreamFeed& feed() { return *feed_; }
  const ApiKey& key() const { return key_; }
  const std::string& query() const { return query_; }
  bool resumed() const { return resumed_; }  // opened with a last event id
  // Charges `events` to the key's stream quota: OK, or ResourceExhausted naming the limit.
  absl::Status Charge(size_t events);

 private:
  friend class FrontDoor;
  LiveStream(const FrontDoor& door, ApiKey key, std::unique_ptr<StreamFeed> feed,
             std::unique_ptr<StreamSlot> slot, std::string query, bool resumed)
      : door_(door),
        key_(std::move(key)),
        query_(std::move(query)),
        resumed_(resumed),
        feed_(std::move(feed)),
        slot_(std::move(slot)) {}

  const FrontDoor& door_;
  const ApiKey key_;
  const std::string query_;
  const bool resumed_;
  std::unique_ptr<StreamFeed> feed_;
  std::unique_ptr<StreamSlot> slot_;  // null where front doors do not share the count
};

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_LIVE_STREAM_H_
