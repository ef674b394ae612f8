#include "usage/usage_table.h"

#include <rocksdb/compaction_filter.h>
#include <rocksdb/db.h>
#include <rocksdb/merge_operator.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <limits>

#include "common/strings.h"
#include "proto/tweetsearch.pb.h"

namespace tweetsearch::usage {
namespace {

absl::Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::UnavailableError(StrCat("usage table: ", what, ": ", s.ToString()));
}

constexpr size_t kSuffixBytes = 1 + 1 + 8;  // '\0', resolution, bucket start

std::string BucketKey(std::string_view key_id, Resolution r, int64_t start_s) {
  std::string key(key_id);
  key.push_back('\0');
  key.push_back(static_cast<char>(r));
  const uint64_t v = static_cast<uint64_t>(start_s);
  for (int shift = 56; shift >= 0; shift -= 8) key.push_back(static_cast<char>(v >> shift));
  return key;
}

struct ParsedKey {
  std::string_view key_id;
  Resolution resolution;
  int64_t start_s;
};

bool ParseKey(std::string_view key, ParsedKey* out) {
  if (key.size() < kSuffixBytes) return false;
  const size_t id_size = key.size() - kSuffixBytes;
  if (key[id_size] != '\0' || static_cast<uint8_t>(key[id_size + 1]) > 3) return false;
  out->key_id = key.substr(0, id_size);
  out->resolution = static_cast<Resolution>(key[id_size + 1]);
  uint64_t v = 0;
  for (size_t i = id_size + 2; i < key.size(); ++i) v = (v << 8) | static_cast<uint8_t>(key[i]);
  out->start_s = static_cast<int64_t>(v);
  return true;
}

int64_t FloorTo(int64_t t, int64_t step) {
  return t >= 0 ? t / step * step : (t - step + 1) / step * step;
}

// The first bucket start of `r` still kept at `now_s`.
int64_t OldestKept(Resolution r, int64_t now_s) {
  const int64_t retention = RetentionSeconds(r);
  if (retention == 0) return std::numeric_limits<int64_t>::min();
  return FloorTo(now_s - retention, BucketSeconds(r)) + BucketSeconds(r);
}

std::string Encode(const Counters& c) {
  v1::UsageCounters p;
  ToProto(c, &p);
  return p.SerializeAsString();
}

bool Decode(const rocksdb::Slice& value, Counters* out) {
  v1::UsageCounters p;
  if (!p.ParseFromArray(value.data(), static_cast<int>(value.size()))) return false;
  *out = FromProto(p);
  return true;
}

// Sums counters: every value of the table is a sum of increments.
class AddCounters final : public rocksdb::AssociativeMergeOperator {
 public:
  bool Merge(const rocksdb::Slice& /*key*/, const rocksdb::Slice* existing,
             const rocksdb::Slice& value, std::string* new_value,
             rocksdb::Logger* /*logger*/) const override {
    Counters sum;
    if (existing != nullptr && !Decode(*existing, &sum)) return false;
    Counters add;
    if (!Decode(value, &add)) return false;
    sum.Add(add);
    *new_value = Encode(sum);
    return true;
  }
  const char* Name() const override { return "tweetsearch.UsageCountersAdd"; }
};

// Drops buckets past their resolution's retention, merge operands included.
class ExpireBuckets final : public rocksdb::CompactionFilter {
 public:
  explicit ExpireBuckets(const Clock& clock) : clock_(clock) {}
  bool Filter(int /*level*/, const rocksdb::Slice& key, const rocksdb::Slice& /*value*/,
              std::string* /*new_value*/, bool* /*value_changed*/) const override {
    return Expired(key);
  }
  bool FilterMergeOperand(int /*level*/, const rocksdb::Slice& key,
                          const rocksdb::Slice& /*operand*/) const override {
    return Expired(key);
  }
  const char* Name() const override { return "tweetsearch.UsageExpireBuckets"; }

 private:
  bool Expired(const rocksdb::Slice& key) const {
    ParsedKey parsed;
    if (!ParseKey(key.ToStringView(), &parsed)) return false;
    const int64_t now_s = clock_.NowUnixMillis() / 1000;
    return parsed.start_s < OldestKept(parsed.resolution, now_s);
  }
  const Clock& clock_;
};

}  // namespace

std::shared_ptr<rocksdb::MergeOperator> NewCountersMergeOperator() {
  return std::make_shared<AddCounters>();
}

std::unique_ptr<rocksdb::CompactionFilter> NewExpiryFilter(const Clock& clock) {
  return std::make_unique<ExpireBuckets>(clock);
}

absl::Status AddToBatch(const std::vector<Increment>& increments, rocksdb::ColumnFamilyHandle* cf,
                        rocksdb::WriteBatch& batch) {
  for (const Increment& inc : increments) {
    const std::string value = Encode(inc.counters);
    for (Resolution r : kResolutions) {
      const std::string key =
          BucketKey(inc.key_id, r, FloorTo(inc.minute_start_s, BucketSeconds(r)));
      if (auto s = batch.Merge(cf, key, value); !s.ok()) return FromRocks(s, "batch");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Point>> QueryTable(rocksdb::DB& db, rocksdb::ColumnFamilyHandle* cf,
                                              std::string_view key_id, Resolution r, int64_t from_s,
                                              int64_t to_s, size_t max_points, int64_t now_s) {
  if (from_s > to_s) return absl::InvalidArgumentError("from is after to");
  const int64_t step = BucketSeconds(r);
  const int64_t first = FloorTo(from_s, step);
  const int64_t end = FloorTo(to_s, step) + (FloorTo(to_s, step) == to_s ? 0 : step);
  const uint64_t count = static_cast<uint64_t>((end - first) / step);
  if (count > max_points) {
    return absl::InvalidArgumentError(
        StrCat("the range holds ", count, " buckets of ", ResolutionName(r), "; at most ",
               max_points, " are returned: narrow the range or choose a coarser resolution"));
  }
  std::vector<Point> points(count);
  for (uint64_t i = 0; i < count; ++i) points[i].start_s = first + static_cast<int64_t>(i) * step;
  if (count == 0) return points;

  const std::string lower = BucketKey(key_id, r, std::max(first, OldestKept(r, now_s)));
  const std::string upper = BucketKey(key_id, r, end);
  rocksdb::ReadOptions read;
  const rocksdb::Slice upper_slice(upper);
  read.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db.NewIterator(read, cf));
  for (it->Seek(lower); it->Valid(); it->Next()) {
    ParsedKey parsed;
    if (!ParseKey(it->key().ToStringView(), &parsed) || parsed.key_id != key_id ||
        parsed.resolution != r || parsed.start_s < first || parsed.start_s >= end) {
      continue;
    }
    Counters c;
    if (!Decode(it->value(), &c)) {
      return absl::DataLossError(StrCat("usage table: unreadable bucket of ", key_id));
    }
    points[static_cast<size_t>((parsed.start_s - first) / step)].counters = std::move(c);
  }
  if (!it->status().ok()) return FromRocks(it->status(), "scan");
  return points;
}

absl::StatusOr<std::vector<std::string>> KeysOfTable(rocksdb::DB& db,
                                                     rocksdb::ColumnFamilyHandle* cf) {
  std::vector<std::string> keys;
  std::unique_ptr<rocksdb::Iterator> it(db.NewIterator(rocksdb::ReadOptions(), cf));
  for (it->SeekToFirst(); it->Valid();) {
    ParsedKey parsed;
    if (!ParseKey(it->key().ToStringView(), &parsed)) {
      it->Next();
      continue;
    }
    keys.emplace_back(parsed.key_id);
    std::string next = keys.back();
    next.push_back('\x01');  // past every bucket of this key id
    it->Seek(next);
  }
  if (!it->status().ok()) return FromRocks(it->status(), "scan");
  return keys;
}

absl::StatusOr<uint64_t> CountBuckets(rocksdb::DB& db, rocksdb::ColumnFamilyHandle* cf,
                                      Resolution r) {
  uint64_t n = 0;
  std::unique_ptr<rocksdb::Iterator> it(db.NewIterator(rocksdb::ReadOptions(), cf));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    ParsedKey parsed;
    if (ParseKey(it->key().ToStringView(), &parsed) && parsed.resolution == r) ++n;
  }
  if (!it->status().ok()) return FromRocks(it->status(), "scan");
  return n;
}

absl::Status CompactTable(rocksdb::DB& db, rocksdb::ColumnFamilyHandle* cf) {
  rocksdb::CompactRangeOptions options;
  options.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  return FromRocks(db.CompactRange(options, cf, nullptr, nullptr), "compact");
}

void ToProto(const Counters& c, v1::UsageCounters* p) {
  p->set_served(c.served);
  p->set_limited(c.limited);
  p->set_rejected(c.rejected);
  p->set_failed(c.failed);
  p->set_searches(c.searches);
  p->set_search_latency_us_sum(c.search_latency_us_sum);
  p->clear_search_latency();
  for (uint64_t n : c.search_latency) p->add_search_latency(n);
  for (const auto& [name, n] : c.limited_by) (*p->mutable_limited_by())[name] = n;
}

Counters FromProto(const v1::UsageCounters& p) {
  Counters c;
  c.served = p.served();
  c.limited = p.limited();
  c.rejected = p.rejected();
  c.failed = p.failed();
  c.searches = p.searches();
  c.search_latency_us_sum = p.search_latency_us_sum();
  for (int i = 0; i < p.search_latency_size() && i < kLatencyBuckets; ++i) {
    c.search_latency[i] = p.search_latency(i);
  }
  for (const auto& [name, n] : p.limited_by()) c.limited_by[name] = n;
  return c;
}

void ToProto(const Increment& inc, v1::UsageIncrement* out) {
  out->set_key_id(inc.key_id);
  out->set_minute_start_s(inc.minute_start_s);
  ToProto(inc.counters, out->mutable_counters());
}

Increment FromProto(const v1::UsageIncrement& inc) {
  return Increment{inc.key_id(), inc.minute_start_s(), FromProto(inc.counters())};
}

int64_t BucketSeconds(Resolution r) {
  switch (r) {
    case Resolution::kMinute:
      return 60;
    case Resolution::kFiveMinutes:
      return 300;
    case Resolution::kHour:
      return 3600;
    case Resolution::kDay:
      return 86400;
  }
  return 60;
}

int64_t RetentionSeconds(Resolution r) {
  switch (r) {
    case Resolution::kMinute:
      return 24 * 3600;
    case Resolution::kFiveMinutes:
      return 7 * 24 * 3600;
    case Resolution::kHour:
      return 30 * 24 * 3600;
    case Resolution::kDay:
      return 0;
  }
  return 0;
}

std::string_view ResolutionName(Resolution r) {
  switch (r) {
    case Resolution::kMinute:
      return "1m";
    case Resolution::kFiveMinutes:
      return "5m";
    case Resolution::kHour:
      return "1h";
    case Resolution::kDay:
      return "1d";
  }
  return "1m";
}

absl::StatusOr<Resolution> ParseResolution(std::string_view text) {
  if (text == "1m" || text == "minute") return Resolution::kMinute;
  if (text == "5m" || text == "5min") return Resolution::kFiveMinutes;
  if (text == "1h" || text == "hour") return Resolution::kHour;
  if (text == "1d" || text == "day") return Resolution::kDay;
  return absl::InvalidArgumentError(
      StrCat("unknown resolution '", text.substr(0, 20), "': use 1m, 5m, 1h or 1d"));
}

}  // namespace tweetsearch::usage
