#include "aggregator/http/sse.h"

#include "aggregator/front_door.h"
#include "aggregator/http/json_writer.h"
#include "common/strings.h"
#include "common/utf8.h"

namespace tweetsearch::aggregator {

std::string SsePrelude(LiveStream& stream) {
  StreamFeed& feed = stream.feed();
  std::string out =
      StrCat("retry: 2000\n\nid: ", feed.start_id(), "\nevent: ready\ndata: {\"query\":");
  AppendJsonString(&out, SanitizeUtf8(stream.query()));
  StrAppend(&out, ",\"resumed\":", stream.resumed() ? "true" : "false", "}\n\n");
  if (const std::optional<std::string>& gap = feed.gap_after()) {
    StrAppend(&out, "event: gap\ndata: {\"after\":\"", *gap,
              "\",\"message\":\"events after this id are no longer kept; the stream goes on "
              "from the oldest kept\"}\n\n");
  }
  return out;
}

void AppendSseEvents(std::string* out, const std::vector<FeedEvent>& events) {
  for (const FeedEvent& e : events) {
    StrAppend(out, "id: ", e.id, "\n");
    if (e.kind == StreamEvent::Kind::kTweet) {
      *out += "event: tweet\ndata: ";
      AppendTweetJson(out, *e.tweet, e.tweet->likes, /*with_score=*/false, 0);
    } else {
      StrAppend(out, "event: delete\ndata: {\"tweet_id\":\"", e.tweet->id, "\"}");
    }
    *out += "\n\n";
  }
}

std::string SseEnd(const absl::Status& why) {
  std::string out =
      StrCat("event: end\ndata: {\"error\":{\"code\":\"", ErrorCodeName(why), "\",\"message\":");
  AppendJsonString(&out, SanitizeUtf8(AsStd(why.message())));
  out += "}}\n\n";
  return out;
}

}  // namespace tweetsearch::aggregator
