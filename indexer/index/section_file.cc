#include "indexer/index/section_file.h"

#include <xxhash.h>

#include <algorithm>
#include <cstring>

#include "common/strings.h"

namespace tweetsearch::index {
namespace {

constexpr std::string_view kEndMagic = "TSSEGEND";
constexpr size_t kTrailerBytes = 8 + kEndMagic.size();
constexpr size_t kEntryBytes = 32;
constexpr size_t kMinPadding = 8;

size_t HeaderBytes(uint32_t sections) { return 16 + sections * kEntryBytes + 8; }

size_t AlignUp(size_t n) {
  return (n + kSectionAlignment - 1) / kSectionAlignment * kSectionAlignment;
}

template <typename T>
void Put(std::string* out, size_t at, T value) {
  std::memcpy(out->data() + at, &value, sizeof(T));
}

template <typename T>
T Get(std::string_view in, size_t at) {
  T value;
  std::memcpy(&value, in.data() + at, sizeof(T));
  return value;
}

}  // namespace

SectionFileWriter::SectionFileWriter(std::string_view magic, uint32_t sections)
    : magic_(magic), count_(sections) {}

void SectionFileWriter::Add(std::string_view bytes) { sections_.push_back(bytes); }

std::vector<std::string_view> SectionFileWriter::Pieces() {
  // Zeros enough for any padding: up to a page plus the minimum.
  static constexpr char kZeros[kSectionAlignment + kMinPadding] = {};
  const size_t header_bytes = AlignUp(HeaderBytes(count_));
  header_.assign(header_bytes, '\0');
  std::memcpy(header_.data(), magic_.data(), 8);
  Put<uint32_t>(&header_, 8, count_);
  std::vector<std::string_view> pieces = {header_};
  size_t total = header_bytes;
  for (uint32_t i = 0; i < count_; ++i) {
    const size_t entry = 16 + i * kEntryBytes;
    const std::string_view s = sections_[i];
    Put<uint32_t>(&header_, entry, i + 1);
    Put<uint64_t>(&header_, entry + 8, total);
    Put<uint64_t>(&header_, entry + 16, s.size());
    Put<uint64_t>(&header_, entry + 24, XXH64(s.data(), s.size(), 0));
    const size_t end = AlignUp(total + s.size() + kMinPadding);
    if (!s.empty()) pieces.push_back(s);
    pieces.emplace_back(kZeros, end - total - s.size());
    total = end;
  }
  const size_t header = HeaderBytes(count_) - 8;
  Put<uint64_t>(&header_, header, XXH64(header_.data(), header, 0));
  // The whole-file checksum, over the pieces in order.
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  for (std::string_view p : pieces) XXH64_update(state, p.data(), p.size());
  const uint64_t whole = XXH64_digest(state);
  XXH64_freeState(state);
  trailer_.assign(reinterpret_cast<const char*>(&whole), 8);
  trailer_.append(kEndMagic);
  pieces.push_back(trailer_);
  return pieces;
}

absl::StatusOr<SectionFile> ReadSectionFile(std::string_view file, std::string_view magic,
                                            uint32_t sections,
                                            std::span<const uint32_t> unchecked) {
  auto bad = [](std::string_view why) { return absl::DataLossError(AsAbsl(why)); };
  const size_t header = HeaderBytes(sections) - 8;
  if (file.size() < AlignUp(header + 8) + kTrailerBytes || file.substr(0, 8) != magic) {
    return bad("bad header (not a segment file of this version, or truncated)");
  }
  if (Get<uint32_t>(file, 8) != sections ||
      Get<uint64_t>(file, header) != XXH64(file.data(), header, 0)) {
    return bad("damaged header");
  }
  if (file.substr(file.size() - kEndMagic.size()) != kEndMagic) return bad("truncated");
  const size_t body_end = file.size() - kTrailerBytes;
  SectionFile out;
  out.sections.resize(sections + 1);
  out.checksums.resize(sections + 1);
  size_t previous_end = AlignUp(header + 8);
  for (uint32_t i = 0; i < sections; ++i) {
    const size_t entry = 16 + i * kEntryBytes;
    const uint64_t offset = Get<uint64_t>(file, entry + 8);
    const uint64_t length = Get<uint64_t>(file, entry + 16);
    if (Get<uint32_t>(file, entry) != i + 1 || offset % kSectionAlignment != 0 ||
        offset < previous_end || offset + kMinPadding > body_end ||
        length > body_end - offset - kMinPadding) {
      return bad(StrCat("section ", i + 1, " out of bounds"));
    }
    previous_end = offset + length + kMinPadding;
    out.sections[i + 1] = file.substr(offset, length);
    out.checksums[i + 1] = Get<uint64_t>(file, entry + 24);
    if (std::find(unchecked.begin(), unchecked.end(), i + 1) != unchecked.end()) continue;
    if (XXH64(file.data() + offset, length, 0) != out.checksums[i + 1]) {
      return bad(StrCat("checksum mismatch in section ", i + 1));
    }
  }
  return out;
}

absl::Status VerifyWholeFile(std::string_view file) {
  if (file.size() < kTrailerBytes) return absl::DataLossError("truncated");
  const size_t body = file.size() - kTrailerBytes;
  if (Get<uint64_t>(file, body) != XXH64(file.data(), body, 0)) {
    return absl::DataLossError("whole-file checksum mismatch");
  }
  return absl::OkStatus();
}

}  // namespace tweetsearch::index
