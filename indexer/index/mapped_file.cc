#include "indexer/index/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/strings.h"

namespace tweetsearch::index {
namespace {

constexpr size_t kPage = 4096;

absl::Status ErrnoStatus(std::string_view what, const std::string& path) {
  const int e = errno;
  const std::string message = StrCat(what, " ", path, ": ", std::strerror(e));
  return e == ENOENT ? absl::NotFoundError(message) : absl::InternalError(message);
}

void Advise(const uint8_t* data, size_t size, size_t offset, size_t length, int advice) {
  if (offset >= size) return;
  const size_t begin = offset / kPage * kPage;
  const size_t end = std::min(size, offset + length);
  (void)::madvise(const_cast<uint8_t*>(data) + begin, end - begin, advice);
}

}  // namespace

absl::StatusOr<std::unique_ptr<FileBytes>> FileBytes::Map(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    absl::Status s = ErrnoStatus("cannot stat", path);
    ::close(fd);
    return s;
  }
  if (st.st_size == 0) {
    ::close(fd);
    return absl::DataLossError(StrCat(path, " is empty"));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* data = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  absl::Status error = data == MAP_FAILED ? ErrnoStatus("cannot map", path) : absl::OkStatus();
  ::close(fd);  // the mapping keeps the file
  if (!error.ok()) return error;
  return std::unique_ptr<FileBytes>(new FileBytes(static_cast<const uint8_t*>(data), size, true));
}

std::unique_ptr<FileBytes> FileBytes::FromBytes(std::string_view bytes) {
  return FromPieces(std::span<const std::string_view>(&bytes, 1));
}

std::unique_ptr<FileBytes> FileBytes::FromPieces(std::span<const std::string_view> pieces) {
  size_t size = 0;
  for (std::string_view p : pieces) size += p.size();
  const size_t rounded = (size + kPage - 1) / kPage * kPage;
  auto* data = static_cast<uint8_t*>(std::aligned_alloc(kPage, rounded == 0 ? kPage : rounded));
  size_t at = 0;
  for (std::string_view p : pieces) {
    if (!p.empty()) std::memcpy(data + at, p.data(), p.size());  // an empty view may be null
    at += p.size();
  }
  std::memset(data + size, 0, rounded - size);
  return std::unique_ptr<FileBytes>(new FileBytes(data, size, false));
}

FileBytes::~FileBytes() {
  if (mapped_) {
    ::munmap(const_cast<uint8_t*>(data_), size_);
  } else {
    std::free(const_cast<uint8_t*>(data_));
  }
}

void FileBytes::AdviseRandom(size_t offset, size_t length) const {
  if (mapped_) Advise(data_, size_, offset, length, MADV_RANDOM);
}

}  // namespace tweetsearch::index
