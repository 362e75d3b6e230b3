// Routing traces (routing/routing_trace), then their per-step expert counts and the text writer.
#include "fuzz/fuzz_support.h"
#include "routing/routing_trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  moelab::fuzz::ParseJsonThen(data, size, [](const nlohmann::json& json) {
    const moelab::routing::RoutingTrace trace =
        moelab::routing::RoutingTraceFromJson(json, "trace.json");
    for (size_t step = 0; step < trace.steps.size(); ++step) trace.ExpertCounts(step);
    moelab::routing::RoutingTraceToText(trace);
  });
  return 0;
}
