// TS_CHECK: for broken invariants and programming errors, which are bugs, not Status values.
// Prints the condition and its place, then aborts (the core dump is the report).
#ifndef TWEETSEARCH_COMMON_CHECK_H_
#define TWEETSEARCH_COMMON_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define TS_CHECK(condition, message)                                                        \
  do {                                                                                      \
    if (!(condition)) {                                                                     \
      std::fprintf(stderr, "%s:%d: check failed: %s: %s\n", __FILE__, __LINE__, #condition, \
                   message);                                                                \
      std::abort();                                                                         \
    }                                                                                       \
  } while (false)

#endif  // TWEETSEARCH_COMMON_CHECK_H_
