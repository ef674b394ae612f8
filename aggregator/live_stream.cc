#include "aggregator/live_stream.h"

#include "absl/strings/numbers.h"
#include "aggregator/front_door.h"
#include "common/strings.h"

namespace tweetsearch::aggregator {

std::string StreamEventId(uint64_t sequence) { return StrCat(sequence); }

absl::StatusOr<uint64_t> ParseStreamEventId(std::string_view text) {
  uint64_t id = 0;
  if (text.empty() || text.size() > 20 || !absl::SimpleAtoi(AsAbsl(text), &id)) {
    return absl::InvalidArgumentError(
        StrCat("'", text.substr(0, 40), "' is not an event id of this server's streams"));
  }
  return id;
}

LiveStream::~LiveStream() {
  subscription_.reset();
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
  StreamHub* hub = backend_.streams();
  if (hub == nullptr) {
    return absl::UnimplementedError("this server does not serve streams");
  }
  absl::StatusOr<query::Plan> plan = query::PlanQuery(request.search_terms, backend_.analyzer());
  if (!plan.ok()) return plan.status();
  std::optional<uint64_t> resume;
  if (!request.last_event_id.empty()) {
    absl::StatusOr<uint64_t> id = ParseStreamEventId(request.last_event_id);
    if (!id.ok()) return id.status();
    resume = *id;
  }
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
  absl::StatusOr<std::unique_ptr<Subscription>> sub = hub->Subscribe(*std::move(plan), resume);
  if (!sub.ok()) {
    absl::MutexLock lock(&streams_mu_);
    if (--open_streams_[key->id] == 0) open_streams_.erase(key->id);
    return sub.status();
  }
  return std::unique_ptr<LiveStream>(new LiveStream(*this, *std::move(key), *std::move(sub),
                                                    request.search_terms, resume.has_value()));
}

}  // namespace tweetsearch::aggregator
