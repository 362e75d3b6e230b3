// The one Chrome trace writer: its bytes are pinned, since sim offload's --trace-out and run's
// --timeline-out files (and what compares them) depend on them.
#include "report/chrome_trace.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace moelab::report {
namespace {

TEST(ChromeTrace, WritesMetadataAndCompleteEventsOnePerLine) {
  ChromeTrace trace;
  trace.ProcessName(1, "accelerator: GPU \"x\"");
  trace.ThreadName(1, 2, "host_to_device");
  trace.Complete("expert L3 E7", "expert", 0.0015, 2.5e-7, 1, 2, 4);
  trace.Complete("pass 0", "pass", 1.0, 0.0000004, 2, 1, -1);
  EXPECT_EQ(trace.Finish(),
            "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n"
            "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":"
            "\"accelerator: GPU \\\"x\\\"\"}},\n"
            "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":2,\"args\":{\"name\":"
            "\"host_to_device\"}},\n"
            "{\"name\":\"expert L3 E7\",\"cat\":\"expert\",\"ph\":\"X\",\"ts\":1500.000,"
            "\"dur\":0.250,\"pid\":1,\"tid\":2,\"args\":{\"pass\":4}},\n"
            "{\"name\":\"pass 0\",\"cat\":\"pass\",\"ph\":\"X\",\"ts\":1000000.000,"
            "\"dur\":0.400,\"pid\":2,\"tid\":1,\"args\":{\"pass\":-1}}\n"
            "]}\n");
}

TEST(ChromeTrace, EscapesNamesAsJsonAndStartsOverAfterFinish) {
  ChromeTrace trace;
  trace.Complete("a\\b\n", "c\"d", 0, 0, 1, 1, 0);
  const nlohmann::json parsed = nlohmann::json::parse(trace.Finish());
  EXPECT_EQ(parsed["traceEvents"][0]["name"], "a\\b\n");
  EXPECT_EQ(parsed["traceEvents"][0]["cat"], "c\"d");
  EXPECT_EQ(trace.Finish(), "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n\n]}\n");
}

}  // namespace
}  // namespace moelab::report
