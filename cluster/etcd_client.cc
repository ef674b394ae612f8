#include "cluster/etcd_client.h"

#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "common/strings.h"
#include "net/http_client.h"

namespace tweetsearch::cluster {
namespace {

using nlohmann::json;

std::string B64(std::string_view s) { return absl::Base64Escape(AsAbsl(s)); }

std::string UnB64(const json& v) {
  std::string out;
  if (v.is_string()) absl::Base64Unescape(v.get<std::string>(), &out);
  return out;
}

// The gateway writes 64-bit integers as strings.
int64_t Int(const json& j, const char* name) {
  auto it = j.find(name);
  if (it == j.end()) return 0;
  if (it->is_number()) return it->get<int64_t>();
  int64_t v = 0;
  if (it->is_string()) (void)absl::SimpleAtoi(it->get<std::string>(), &v);
  return v;
}

KeyValue ToKeyValue(const json& kv) {
  KeyValue out;
  out.key = UnB64(kv.value("key", json()));
  out.value = UnB64(kv.value("value", json()));
  out.create_revision = Int(kv, "create_revision");
  out.mod_revision = Int(kv, "mod_revision");
  out.lease = Int(kv, "lease");
  return out;
}

// The end of the range of keys starting with `prefix` (etcd's "range_end"
// convention).
std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(end.back() + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

absl::StatusOr<json> Parse(const std::string& text) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return absl::InternalError("etcd: answer is not JSON");
  return j;
}

}  // namespace

EtcdClient::EtcdClient(std::vector<std::string> endpoints, std::chrono::milliseconds timeout)
    : endpoints_(std::move(endpoints)), timeout_(timeout) {}

EtcdClient::~EtcdClient() = default;

absl::StatusOr<std::string> EtcdClient::Call(std::string_view path, const std::string& body) {
  absl::MutexLock lock(&mu_);
  if (endpoints_.empty()) return absl::FailedPreconditionError("etcd: no endpoints");
  absl::Status last = absl::UnavailableError("etcd: unreachable");
  for (size_t attempt = 0; attempt < endpoints_.size(); ++attempt) {
    if (http_ == nullptr) {
      const std::string& e = endpoints_[current_];
      const size_t colon = e.rfind(':');
      http_ = std::make_unique<net::HttpClient>(e.substr(0, colon), e.substr(colon + 1), timeout_);
    }
    absl::StatusOr<net::HttpReply> reply = http_->Send("POST", path, body);
    if (reply.ok() && reply->status == 200) return std::move(reply->body);
    if (reply.ok()) {
      // etcd's gateway answers errors as {"error": ..., "code": N, "message":
      // ...}.
      json j = json::parse(reply->body, nullptr, false);
      std::string message = j.is_object() ? j.value("message", reply->body) : reply->body;
      const int code = j.is_object() ? j.value("code", 2) : 2;
      if (code == 5 || message.find("not found") != std::string::npos) {
        return absl::NotFoundError(StrCat("etcd: ", message));
      }
      if (reply->status < 500) return absl::InvalidArgumentError(StrCat("etcd: ", message));
      last = absl::UnavailableError(StrCat("etcd: ", message));
    } else {
      last = reply.status();
    }
    http_.reset();
    current_ = (current_ + 1) % endpoints_.size();
  }
  return last;
}

absl::StatusOr<int64_t> EtcdClient::GrantLease(int64_t ttl_s) {
  absl::StatusOr<std::string> text = Call("/v3/lease/grant", json{{"TTL", ttl_s}}.dump());
  if (!text.ok()) return text.status();
  absl::StatusOr<json> j = Parse(*text);
  if (!j.ok()) return j.status();
  const int64_t id = Int(*j, "ID");
  if (id == 0) return absl::InternalError(StrCat("etcd: no lease granted: ", *text));
  return id;
}

absl::Status EtcdClient::KeepAlive(int64_t lease) {
  absl::StatusOr<std::string> text =
      Call("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}}.dump());
  if (!text.ok()) return text.status();
  absl::StatusOr<json> j = Parse(*text);
  if (!j.ok()) return j.status();
  // {"result": {"ID": .., "TTL": ..}}; an expired lease comes back without a
  // TTL.
  const json& result = j->contains("result") ? (*j)["result"] : *j;
  if (Int(result, "TTL") <= 0)
    return absl::NotFoundError(StrCat("etcd: lease ", lease, " expired"));
  return absl::OkStatus();
}

absl::Status EtcdClient::Revoke(int64_t lease) {
  absl::StatusOr<std::string> text =
      Call("/v3/lease/revoke", json{{"ID", std::to_string(lease)}}.dump());
  return text.status();
}

absl::Status EtcdClient::Put(std::string_view key, std::string_view value, int64_t lease) {
  json body = {{"key", B64(key)}, {"value", B64(value)}};
  if (lease != 0) body["lease"] = std::to_string(lease);
  return Call("/v3/kv/put", body.dump()).status();
}

absl::StatusOr<std::optional<KeyValue>> EtcdClient::Get(std::string_view key) {
  absl::StatusOr<std::string> text = Call("/v3/kv/range", json{{"key", B64(key)}}.dump());
  if (!text.ok()) return text.status();
  absl::StatusOr<json> j = Parse(*text);
  if (!j.ok()) return j.status();
  if (!j->contains("kvs") || (*j)["kvs"].empty()) return std::optional<KeyValue>();
  return std::optional<KeyValue>(ToKeyValue((*j)["kvs"][0]));
}

absl::StatusOr<std::vector<KeyValue>> EtcdClient::GetPrefix(std::string_view prefix) {
  absl::StatusOr<RangeResult> range = GetPrefixSince(prefix, 0);
  if (!range.ok()) return range.status();
  return std::move(range->kvs);
}

absl::StatusOr<RangeResult> EtcdClient::GetPrefixSince(std::string_view prefix,
                                                       int64_t min_mod_revision) {
  json body = {{"key", B64(prefix)}, {"range_end", B64(PrefixEnd(prefix))}};
  if (min_mod_revision > 0) body["min_mod_revision"] = std::to_string(min_mod_revision);
  absl::StatusOr<std::string> text = Call("/v3/kv/range", body.dump());
  if (!text.ok()) return text.status();
  absl::StatusOr<json> j = Parse(*text);
  if (!j.ok()) return j.status();
  RangeResult out;
  out.revision = Int(j->value("header", json::object()), "revision");
  if (out.revision == 0) return absl::InternalError(StrCat("etcd: a range without a revision"));
  if (j->contains("kvs")) {
    for (const json& kv : (*j)["kvs"]) out.kvs.push_back(ToKeyValue(kv));
  }
  return out;
}

absl::Status EtcdClient::Delete(std::string_view key) {
  return Call("/v3/kv/deleterange", json{{"key", B64(key)}}.dump()).status();
}

absl::StatusOr<bool> EtcdClient::CreateIfAbsent(std::string_view key, std::string_view value,
                                                int64_t lease, KeyValue* current) {
  json put = {{"key", B64(key)}, {"value", B64(value)}};
  if (lease != 0) put["lease"] = std::to_string(lease);
  json body = {{"compare",
                json::array({{{"key", B64(key)}, {"target", "CREATE"}, {"create_revision", "0"}}})},
               {"success", json::array({{{"requestPut", put}}})},
               {"failure", json::array({{{"requestRange", {{"key", B64(key)}}}}})}};
  absl::StatusOr<std::string> text = Call("/v3/kv/txn", body.dump());
  if (!text.ok()) return text.status();
  absl::StatusOr<json> j = Parse(*text);
  if (!j.ok()) return j.status();
  if (j->value("succeeded", false)) return true;
  if (current != nullptr) {
    *current = KeyValue();
    const json& responses = j->value("responses", json::array());
    if (!responses.empty()) {
      const json& range = responses[0].value("response_range", json::object());
      if (range.contains("kvs") && !range["kvs"].empty()) *current = ToKeyValue(range["kvs"][0]);
    }
  }
  return false;
}

absl::StatusOr<bool> EtcdClient::CompareAndPut(std::string_view key, int64_t mod_revision,
                                               std::string_view value, int64_t lease) {
  json put = {{"key", B64(key)}, {"value", B64(value)}};
  if (lease != 0) put["lease"] = std::to_string(lease);
  json body = {{"compare", json::array({{{"key", B64(key)},
                                         {"target", "MOD"},
                                         {"mod_revision", std::to_string(mod_revision)}}})},
               {"success", json::array({{{"requestPut", put}}})}};
  absl::StatusOr<std::string> text = Call("/v3/kv/txn", body.dump());
  if (!text.ok()) return text.status();
  absl::StatusOr<json> j = Parse(*text);
  if (!j.ok()) return j.status();
  return j->value("succeeded", false);
}

absl::StatusOr<bool> EtcdClient::PutIfPrefixUnchanged(std::string_view prefix, int64_t revision,
                                                      std::string_view key,
                                                      std::string_view value) {
  // Every key of the range must have a mod_revision below revision + 1 (an empty range passes).
  json compare = {{"key", B64(prefix)},
                  {"range_end", B64(PrefixEnd(prefix))},
                  {"target", "MOD"},
                  {"result", "LESS"},
                  {"mod_revision", std::to_string(revision + 1)}};
  json body = {
      {"compare", json::array({compare})},
      {"success", json::array({{{"requestPut", {{"key", B64(key)}, {"value", B64(value)}}}}})}};
  absl::StatusOr<std::string> text = Call("/v3/kv/txn", body.dump());
  if (!text.ok()) return text.status();
  absl::StatusOr<json> j = Parse(*text);
  if (!j.ok()) return j.status();
  return j->value("succeeded", false);
}

}  // namespace tweetsearch::cluster
