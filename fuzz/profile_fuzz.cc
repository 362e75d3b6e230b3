// moelab.profile/1 files (fit/latency_profile), then a latency fit of what they hold.
#include "fit/fit_options.h"
#include "fit/latency_fit.h"
#include "fit/latency_profile.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  moelab::fuzz::ParseJsonThen(data, size, [](const nlohmann::json& json) {
    const moelab::fit::Profile profile = moelab::fit::ProfileFromJson(json, "profile.json");
    // Fitting is the expensive part; keep executions fast on large inputs.
    if (profile.samples.size() <= 64) moelab::fit::FitLatency(profile, moelab::fit::FitOptions{});
  });
  return 0;
}
