#include "storage/convert.h"

#include "common/strings.h"
#include "usage/usage_table.h"

namespace tweetsearch::storage {

void ToProto(const StoredTweet& t, v1::Tweet* out) {
  out->set_id(t.id);
  out->set_user_id(t.user_id);
  out->set_user_name(t.user_name);
  out->set_text(t.text);
  out->set_created_at_ms(t.created_at_ms);
  out->set_lang(t.lang);
  out->set_likes(t.likes);
}

StoredTweet FromProto(const v1::Tweet& t) {
  StoredTweet out;
  out.id = t.id();
  out.user_id = t.user_id();
  out.user_name = t.user_name();
  out.text = t.text();
  out.created_at_ms = t.created_at_ms();
  out.lang = t.lang();
  out.likes = t.likes();
  return out;
}

void ToProto(const ReplicatedChange& c, internal::v1::Change* out) {
  out->set_sequence(c.change.sequence);
  out->set_kind(ChangeKindToProto(c.change.kind));
  out->set_id(c.change.id);
  out->set_likes(c.change.likes);
  if (c.tweet.has_value()) ToProto(*c.tweet, out->mutable_tweet());
  if (c.request.has_value()) {
    out->set_request_key(c.request->key);
    out->set_request_value(c.request->value);
  }
  for (const usage::Increment& inc : c.usage) usage::ToProto(inc, out->add_usage());
}

absl::StatusOr<ReplicatedChange> FromProto(const internal::v1::Change& c) {
  ReplicatedChange out;
  out.change.sequence = c.sequence();
  out.change.id = c.id();
  out.change.likes = c.likes();
  std::optional<ChangeKind> kind = ChangeKindFromProto(c.kind());
  if (!kind.has_value()) {
    return absl::InvalidArgumentError(StrCat("change ", c.sequence(), ": unknown kind"));
  }
  out.change.kind = *kind;
  if (out.change.kind == ChangeKind::kRequest) {
    if (c.request_key().empty()) {
      return absl::InvalidArgumentError(StrCat("change ", c.sequence(), ": request without key"));
    }
    out.request = StoredRequest{c.request_key(), c.request_value()};
  }
  if (c.has_tweet()) out.tweet = FromProto(c.tweet());
  out.usage.reserve(c.usage_size());
  for (const v1::UsageIncrement& inc : c.usage()) out.usage.push_back(usage::FromProto(inc));
  return out;
}

}  // namespace tweetsearch::storage
