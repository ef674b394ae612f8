#include "common/memory.h"

#include <malloc.h>

namespace tweetsearch {

void ReturnLargeBuffersToTheSystem() {
  // A hint: without glibc's malloc (a sanitizer's allocator), this does nothing.
  (void)::mallopt(M_MMAP_THRESHOLD, 1 << 20);
}

}  // namespace tweetsearch
