// Process-wide memory settings for the service and its benchmarks.
#ifndef TWEETSEARCH_COMMON_MEMORY_H_
#define TWEETSEARCH_COMMON_MEMORY_H_

namespace tweetsearch {

// Makes glibc's malloc serve allocations of 1 MiB and more from their own mappings, returned to
// the system as soon as they are freed. Seals and merges build buffers of tens to hundreds of
// MB on background threads; with glibc's default (a threshold that rises to the largest block
// freed, up to 32 MiB), they stay in that thread's arena after use and the process's peak RSS
// grows with them (measured: indexing 1M tweets peaks at a median 227 MiB without this, 215
// MiB with it; docs/benchmarks.md). Call once at startup, before threads start.
void ReturnLargeBuffersToTheSystem();

}  // namespace tweetsearch

#endif  // TWEETSEARCH_COMMON_MEMORY_H_
