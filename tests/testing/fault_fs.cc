// A fault injector for tests, loaded into a real tweetsearchd with LD_PRELOAD. It wraps fsync
// and fdatasync; when $TS_FAULT_DIR holds
//   fail   a sync of a file whose path contains the file's text fails with EIO;
//   hang   such a sync creates $TS_FAULT_DIR/hung and waits while `hang` exists (so that a
//          test can SIGKILL the process in the middle of, say, an index save);
//   nospace  a write() to such a file fails with ENOSPC, as on a full disk.
// An empty pattern matches every path. Without $TS_FAULT_DIR every call goes straight through.
// Built without sanitizers: it must not bring a sanitizer runtime of its own into the process.
#include <dlfcn.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

int (*real_fsync)(int);
int (*real_fdatasync)(int);
ssize_t (*real_write)(int, const void*, size_t);

// Reads $TS_FAULT_DIR/<name> into `out`; 0 if it does not exist.
int ReadControl(const char* name, char* out, size_t size) {
  const char* dir = getenv("TS_FAULT_DIR");
  if (dir == nullptr) return 0;
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  FILE* f = fopen(path, "r");
  if (f == nullptr) return 0;
  size_t n = fread(out, 1, size - 1, f);
  fclose(f);
  while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' ')) --n;
  out[n] = '\0';
  return 1;
}

// Whether the file behind `fd` matches the pattern in control file `name`.
int Matches(int fd, const char* name) {
  char pattern[1024];
  if (!ReadControl(name, pattern, sizeof(pattern))) return 0;
  char link[64], target[4096];
  snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, target, sizeof(target) - 1);
  if (n < 0) return 0;
  target[n] = '\0';
  return strstr(target, pattern) != nullptr;
}

int Inject(int fd) {
  if (getenv("TS_FAULT_DIR") == nullptr) return 0;
  if (Matches(fd, "hang")) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/hung", getenv("TS_FAULT_DIR"));
    const int marker = open(path, O_CREAT | O_WRONLY, 0644);
    if (marker >= 0) {
      (void)!write(marker, "hung\n", 5);
      close(marker);
    }
    char ignored[8];
    const struct timespec pause = {0, 10 * 1000 * 1000};
    while (ReadControl("hang", ignored, sizeof(ignored))) nanosleep(&pause, nullptr);
  }
  if (Matches(fd, "fail")) {
    errno = EIO;
    return -1;
  }
  return 0;
}

}  // namespace

extern "C" ssize_t write(int fd, const void* data, size_t size) {
  const char* dir = getenv("TS_FAULT_DIR");
  if (dir != nullptr) {
    char path[4096];
    snprintf(path, sizeof(path), "%s/nospace", dir);
    if (access(path, F_OK) == 0 && Matches(fd, "nospace")) {
      errno = ENOSPC;
      return -1;
    }
  }
  if (real_write == nullptr) {
    real_write = reinterpret_cast<ssize_t (*)(int, const void*, size_t)>(dlsym(RTLD_NEXT, "write"));
  }
  return real_write(fd, data, size);
}

extern "C" int fsync(int fd) {
  if (Inject(fd) != 0) return -1;
  if (real_fsync == nullptr) real_fsync = reinterpret_cast<int (*)(int)>(dlsym(RTLD_NEXT, "fsync"));
  return real_fsync(fd);
}

extern "C" int fdatasync(int fd) {
  if (Inject(fd) != 0) return -1;
  if (real_fdatasync == nullptr)
    real_fdatasync = reinterpret_cast<int (*)(int)>(dlsym(RTLD_NEXT, "fdatasync"));
  return real_fdatasync(fd);
}
