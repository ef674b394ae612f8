// A real one-process service for fuzz targets: an Engine on a temporary data directory with a
// few hundred synthetic tweets, the key registry (kFuzzKey has every scope), the front door and
// the HTTP API handler. Made once per fuzzing process, removed at exit.
#ifndef TWEETSEARCH_TESTS_FUZZ_FUZZ_SERVICE_H_
#define TWEETSEARCH_TESTS_FUZZ_FUZZ_SERVICE_H_

#include <memory>
#include <string>
#include <string_view>

#include "aggregator/api_keys.h"
#include "aggregator/engine.h"
#include "aggregator/front_door.h"
#include "aggregator/http/api_handler.h"
#include "aggregator/metrics.h"

namespace tweetsearch::fuzz {

// The key the seed corpora use (search, ingest and admin).
inline constexpr std::string_view kFuzzKey = "fuzz-key-0123456789";
// The page-token secret of the service.
inline constexpr std::string_view kFuzzSecret = "fuzz-page-token-secret-0123456789";

struct FuzzService {
  std::string dir;
  std::unique_ptr<aggregator::Engine> engine;
  std::unique_ptr<aggregator::KeyRegistry> keys;
  std::unique_ptr<aggregator::FrontDoor> door;
  std::unique_ptr<aggregator::Metrics> metrics;
  std::unique_ptr<aggregator::ApiHandler> handler;
};

// The process's service, made on first use.
FuzzService& Service();

}  // namespace tweetsearch::fuzz

#endif  // TWEETSEARCH_TESTS_FUZZ_FUZZ_SERVICE_H_
