// Boost's assertion handler (the build defines BOOST_ENABLE_ASSERT_DEBUG_HANDLER, so builds
// without NDEBUG — the sanitizer and fuzz builds — route every BOOST_ASSERT here; release
// builds compile them out as before).
//
// It behaves as assert() does, with one exception: Boost.Beast before 1.86 asserts that the
// final chunk of a chunked body arrives at least five bytes at a time ("n >= 5" in
// basic_parser::parse_chunk_header). The assertion is wrong: a client may send the last
// "0\r\n\r\n" in any pieces, for example "0\r\n" and then "\r", and the code after it answers
// "need more" correctly (Beast fixed the assertion in pull request 2861). Aborting there would
// let any client stop a debug or sanitizer build of the server with a valid request.
#include <boost/version.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace boost {
namespace {

bool IsBeastFinalChunkAssertion(const char* expr, const char* file) {
#if BOOST_VERSION < 108600
  static constexpr char kFile[] = "beast/http/impl/basic_parser.ipp";
  const size_t length = std::strlen(file);
  const size_t suffix = sizeof(kFile) - 1;
  return std::strcmp(expr, "n >= 5") == 0 && length >= suffix &&
         std::strcmp(file + length - suffix, kFile) == 0;
#else
  (void)expr;
  (void)file;
  return false;
#endif
}

[[noreturn]] void Fail(const char* expr, const char* msg, const char* function, const char* file,
                       long line) {
  std::fprintf(stderr, "%s:%ld: %s: Boost assertion failed: %s%s%s\n", file, line, function, expr,
               msg == nullptr ? "" : ": ", msg == nullptr ? "" : msg);
  std::abort();
}

}  // namespace

void assertion_failed(const char* expr, const char* function, const char* file, long line) {
  if (IsBeastFinalChunkAssertion(expr, file)) return;
  Fail(expr, nullptr, function, file, line);
}

void assertion_failed_msg(const char* expr, const char* msg, const char* function, const char* file,
                          long line) {
  Fail(expr, msg, function, file, line);
}

}  // namespace boost
