// Server-Sent Events framing of streams (GET /v1/stream), per the WHATWG HTML standard's
// "text/event-stream": each event is "id:", "event:" and one "data:" line of JSON, then a blank
// line. A browser's EventSource sends the last id back as Last-Event-ID when it reconnects.
//
//   retry: 2000                          (first: how long a client waits before reconnecting)
//   id: 41  event: ready                 {"query": "...", "resumed": false}
//   event: gap                           {"after": "12", "message": "..."} (resume point lost)
//   id: 57  event: tweet                 the tweet, as a search result shows it (no score)
//   id: 60  event: delete                {"tweet_id": "..."}
//   event: end                           {"error": {"code": ..., "message": ...}} (last event)
//   : keep-alive                         (a comment, every 15 s without events)
#ifndef TWEETSEARCH_AGGREGATOR_HTTP_SSE_H_
#define TWEETSEARCH_AGGREGATOR_HTTP_SSE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "aggregator/live_stream.h"

namespace tweetsearch::aggregator {

// The first bytes of a stream: the retry hint, its ready event, and a gap event if its resume
// point was no longer kept.
std::string SsePrelude(LiveStream& stream);
// Appends each event to `*out`.
void AppendSseEvents(std::string* out, const std::vector<FeedEvent>& events);
// The final event of a stream that the server ends.
std::string SseEnd(const absl::Status& why);
inline constexpr std::string_view kSseKeepAlive = ": keep-alive\n\n";

}  // namespace tweetsearch::aggregator

#endif  // TWEETSEARCH_AGGREGATOR_HTTP_SSE_H_
