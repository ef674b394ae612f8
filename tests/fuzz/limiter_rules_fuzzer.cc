// The quota rules file: any text through the YAML reader and the rule validation. Rules that
// validate go into a real in-process limiter, and requests of each endpoint and tier the rules
// name are checked against them (with a manual clock moving forward), so that whatever
// validation lets through is also safe to enforce.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/clock.h"
#include "limiter/limiter.h"
#include "limiter/rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tweetsearch;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<limiter::Rules> rules = limiter::ParseRules(text);
  if (!rules.ok()) return 0;
  ManualClock clock(1'700'000'000'000);
  std::unique_ptr<limiter::Limiter> limiter =
      limiter::Limiter::CreateWithRules(*std::move(rules), {}, clock);
  for (std::string_view tier : {"free", "pro", "demo", ""}) {
    for (std::string_view endpoint : {"search", "ingest", "admin"}) {
      for (int i = 0; i < 3; ++i) {
        limiter::CheckRequest request;
        request.key_prefix = tier.empty() ? "" : "ts_0123456";
        request.key_id = tier.empty() ? "" : "0123456789abcdef";
        request.tier = tier;
        request.endpoint = endpoint;
        request.client_ip = "127.0.0.1";
        request.units = static_cast<uint64_t>(i) * 1000 + 1;
        (void)limiter->Check(request);
        clock.AdvanceMillis(700);
      }
    }
  }
  return 0;
}
