// moelab.profile/1 files (fit/latency_profile), the storage tier `hw from-profile` reads from them
// (its storage_read, expert_load and expert_reader samples), then a latency fit of what they hold.
#include "fit/fit_options.h"
#include "fit/latency_fit.h"
#include "fit/latency_profile.h"
#include "fit/storage_tier_hardware.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  moelab::fuzz::ParseJsonThen(data, size, [](const nlohmann::json& json) {
    const moelab::fit::Profile profile = moelab::fit::ProfileFromJson(json, "profile.json");
    try {
      moelab::fit::StorageTierHardwareFromProfile(profile, 1e9, 0, 2);
    } catch (const moelab::base::Error&) {
      // A profile without what a storage tier needs: refused, and the fit below still runs.
    }
    // Fitting is the expensive part; keep executions fast on large inputs.
    if (profile.samples.size() <= 64) moelab::fit::FitLatency(profile, moelab::fit::FitOptions{});
  });
  return 0;
}
