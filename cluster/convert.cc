#include "cluster/convert.h"

#include "common/strings.h"

namespace tweetsearch::cluster {

void ToProto(const storage::StoredTweet& t, v1::Tweet* out) {
  out->set_id(t.id);
  out->set_user_id(t.user_id);
  out->set_user_name(t.user_name);
  out->set_text(t.text);
  out->set_created_at_ms(t.created_at_ms);
  out->set_lang(t.lang);
  out->set_likes(t.likes);
}

storage::StoredTweet FromProto(const v1::Tweet& t) {
  storage::StoredTweet out;
  out.id = t.id();
  out.user_id = t.user_id();
  out.user_name = t.user_name();
  out.text = t.text();
  out.created_at_ms = t.created_at_ms();
  out.lang = t.lang();
  out.likes = t.likes();
  return out;
}

void ToProto(const storage::ReplicatedChange& c, internal::v1::Change* out) {
  out->set_sequence(c.change.sequence);
  out->set_kind(c.change.kind == storage::ChangeKind::kPut      ? v1::ChangeRecord::KIND_PUT
                : c.change.kind == storage::ChangeKind::kDelete ? v1::ChangeRecord::KIND_DELETE
                                                                : v1::ChangeRecord::KIND_LIKES);
  out->set_id(c.change.id);
  out->set_likes(c.change.likes);
  if (c.tweet.has_value()) ToProto(*c.tweet, out->mutable_tweet());
}

absl::StatusOr<storage::ReplicatedChange> FromProto(const internal::v1::Change& c) {
  storage::ReplicatedChange out;
  out.change.sequence = c.sequence();
  out.change.id = c.id();
  out.change.likes = c.likes();
  switch (c.kind()) {
    case v1::ChangeRecord::KIND_PUT:
      out.change.kind = storage::ChangeKind::kPut;
      break;
    case v1::ChangeRecord::KIND_DELETE:
      out.change.kind = storage::ChangeKind::kDelete;
      break;
    case v1::ChangeRecord::KIND_LIKES:
      out.change.kind = storage::ChangeKind::kLikes;
      break;
    default:
      return absl::InvalidArgumentError(StrCat("change ", c.sequence(), ": unknown kind"));
  }
  if (c.has_tweet()) out.tweet = FromProto(c.tweet());
  return out;
}

void ToProto(const query::CollectionStats& s, internal::v1::CollectionStats* out) {
  out->set_num_docs(s.num_docs);
  out->set_total_length(static_cast<double>(s.total_length));
  for (const auto& [term, df] : s.doc_freq) {
    internal::v1::TermStat* t = out->add_terms();
    t->set_term(term);
    t->set_doc_freq(df);
  }
}

query::CollectionStats FromProto(const internal::v1::CollectionStats& s) {
  query::CollectionStats out;
  for (const internal::v1::TermStat& t : s.terms()) out.doc_freq[t.term()] = t.doc_freq();
  query::CollectionStats total;
  out.num_docs = s.num_docs();
  out.total_length = static_cast<uint64_t>(s.total_length());
  query::AddStats(out, &total);  // sets avg_length the one way it is computed
  return total;
}

}  // namespace tweetsearch::cluster
