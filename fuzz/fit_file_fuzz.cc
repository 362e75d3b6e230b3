// Fit files (fit/fit_json): sd fits and latency fits, whichever kind the document says.
#include "fit/fit_json.h"
#include "fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  moelab::fuzz::ParseJsonThen(data, size, [](const nlohmann::json& json) {
    if (moelab::fit::FitKind(json, "fit.json") == "sd") {
      moelab::fit::SdFitFromJson(json, "fit.json");
    } else {
      moelab::fit::LatencyFitFromJson(json, "fit.json");
    }
  });
  return 0;
}
