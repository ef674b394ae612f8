#include "aggregator/stream_feed.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/strings.h"

namespace tweetsearch::aggregator {

std::string StreamEventId(std::span<const uint64_t> position) {
  std::string out;
  for (size_t i = 0; i < position.size(); ++i) {
    if (i > 0) out += '-';
    StrAppend(&out, position[i]);
  }
  return out;
}

absl::StatusOr<StreamPosition> ParseStreamEventId(std::string_view text, size_t logs) {
  const auto refuse = [&](std::string_view why) {
    return absl::InvalidArgumentError(
        StrCat("'", text.substr(0, 40), "' is not an event id of this server's streams: ", why));
  };
  // 20 digits and a dash per log at most: longer text is refused before it is split.
  if (text.empty() || text.size() > logs * 21) return refuse("wrong length");
  StreamPosition position;
  for (absl::string_view part : absl::StrSplit(AsAbsl(text), '-')) {
    uint64_t sequence = 0;
    const bool digits = std::all_of(part.begin(), part.end(), [](char c) {
      return absl::ascii_isdigit(static_cast<unsigned char>(c));
    });
    if (part.empty() || part.size() > 20 || !digits || !absl::SimpleAtoi(part, &sequence)) {
      return refuse("expected decimal sequences joined by '-'");
    }
    position.push_back(sequence);
  }
  if (position.size() != logs) {
    return refuse(StrCat("it holds ", position.size(), " positions and this server follows ", logs,
                         logs == 1 ? " change log" : " change logs (storage partitions)"));
  }
  return position;
}

absl::StatusOr<std::unique_ptr<StreamFeed>> StreamFeed::Open(
    std::span<StreamHub* const> hubs, const query::Plan& plan,
    const std::optional<StreamPosition>& resume) {
  std::unique_ptr<StreamFeed> feed(new StreamFeed());
  bool gap = false;
  for (size_t i = 0; i < hubs.size(); ++i) {
    std::optional<uint64_t> after;
    if (resume.has_value()) after = (*resume)[i];
    absl::StatusOr<std::unique_ptr<Subscription>> s = hubs[i]->Subscribe(plan, after);
    if (!s.ok()) return s.status();  // the subscriptions made so far close with the feed
    gap = gap || (*s)->gap_after().has_value();
    feed->position_.push_back((*s)->start());
    feed->subscriptions_.push_back(*std::move(s));
  }
  feed->start_id_ = StreamEventId(feed->position_);
  if (gap) feed->gap_after_ = StreamEventId(*resume);
  return feed;
}

void StreamFeed::OnReady(const std::function<void()>& wake) {
  for (const std::unique_ptr<Subscription>& s : subscriptions_) s->OnReady(wake);
}

absl::StatusOr<StreamFeed::Batch> StreamFeed::Next(size_t max) {
  Batch out;
  const size_t n = subscriptions_.size();
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (turn_ + k) % n;
    if (out.events.size() >= max) {
      out.more = true;
      break;
    }
    absl::StatusOr<Subscription::Batch> batch = subscriptions_[i]->Next(max - out.events.size());
    if (!batch.ok()) {
      // The events already taken go first; the subscription answers the same next time.
      if (out.events.empty()) return batch.status();
      out.more = true;
      break;
    }
    for (StreamEvent& e : batch->events) {
      position_[i] = e.sequence;
      out.events.push_back(FeedEvent{e.kind, StreamEventId(position_), std::move(e.tweet)});
    }
    out.more = out.more || batch->more;
  }
  turn_ = (turn_ + 1) % std::max<size_t>(n, 1);
  return out;
}

}  // namespace tweetsearch::aggregator
