#include "aggregator/live_stream.h"

#include "aggregator/front_door.h"
#include "common/strings.h"

namespace tweetsearch::aggregator {

LiveStream::~LiveStream() {
  feed_.reset();
  slot_.reset();
  absl::MutexLock lock(&door_.streams_mu_);
  auto it = door_.open_streams_.find(key_.id);
  if (it != door_.open_streams_.end() && --it->second == 0) door_.open_streams_.erase(it);
}

absl::Status LiveStream::Charge(size_t events) {
  if (events == 0 || door_.gate_ == nullptr) return absl::OkStatus();
  return door_.gate_->Admit(&key_, Endpoint::kStreamEvents, events, nullptr);
}

absl::StatusOr<std::unique_ptr<LiveStream>> FrontDoor::OpenStream(const StreamRequest& request,
                                                                  CallContext* call) const {
  absl::StatusOr<ApiKey> key =
      Authorize(request.api_dev_key, Scope::kSearch, Endpoint::kSearch, 1, call);
  if (!key.ok()) return key.status();
  absl::StatusOr<query::Plan> plan = query::PlanQuery(request.search_terms, backend_.analyzer());
  if (!plan.ok()) return plan.status();
  const std::optional<uint32_t> cap = gate_ != nullptr ? gate_->MaxStreams(*key) : std::nullopt;
  {
    absl::MutexLock lock(&streams_mu_);
    uint32_t& open = open_streams_[key->id];
    if (cap.has_value() && open >= *cap) {
      if (open == 0) open_streams_.erase(key->id);
      return absl::ResourceExhaustedError(StrCat("this key may hold ", *cap,
                                                 " streams open at once (its tier's max_streams); ",
                                                 "close one first"));
    }
    ++open;  // taken now, so that concurrent opens cannot pass the cap together
  }
  auto give_back = [&](const absl::Status& why) {
    absl::MutexLock lock(&streams_mu_);
    if (--open_streams_[key->id] == 0) open_streams_.erase(key->id);
    return why;
  };
  // Where front doors share the count (Redis), the cap holds for all of them together.
  absl::StatusOr<std::unique_ptr<StreamSlot>> slot =
      cap.has_value() ? gate_->TakeStreamSlot(*key, *cap) : nullptr;
  if (!slot.ok()) {
    return give_back(absl::ResourceExhaustedError(
        StrCat("this key may hold ", *cap, " streams open at once (its tier's max_streams), ",
               "on all front doors together; close one first")));
  }
  absl::StatusOr<std::unique_ptr<StreamFeed>> feed =
      backend_.OpenStream(StreamCall{request.search_terms, &*plan, request.last_event_id});
  if (!feed.ok()) return give_back(feed.status());
  return std::unique_ptr<LiveStream>(new LiveStream(*this, *std::move(key), *std::move(feed),
                                                    *std::move(slot), request.search_terms,
                                                    !request.last_event_id.empty()));
}

}  // namespace tweetsearch::aggregator
