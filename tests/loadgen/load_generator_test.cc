// moelab loadgen's measurements against a test server with known delays (test_server.h): first
// token 50 ms after a request arrives, then 10 ms per token. A loaded machine makes the server's
// sleeps longer, never shorter, so the lower bounds are tight. The CI machine has stalled this
// process for 0.1-0.25 s at a time, so each upper bound sits well above a stall and still fails on
// the wrong measure it names (TTFT from the run's start, a closed loop's spacing).
#include "loadgen/load_generator.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "tests/loadgen/test_server.h"

namespace moelab::loadgen {
namespace {

using testing::CompletionTestServer;
using testing::TestServerBehaviour;

std::vector<serving::RequestSpec> Requests(const std::string& arrivals, int64_t count,
                                           int64_t output_tokens) {
  serving::LoadSpec spec;
  spec.arrivals = serving::ParseArrivals(arrivals);
  spec.prompt_tokens = serving::ParseLengths("16", "--prompt-tokens");
  spec.output_tokens = serving::ParseLengths(std::to_string(output_tokens), "--output-tokens");
  spec.requests = count;
  spec.seed = 1;
  return serving::GenerateRequests(spec);
}

LoadgenOptions Options(const CompletionTestServer& server, int64_t concurrency = 64) {
  LoadgenOptions options;
  options.completion.url = ParseServerUrl(server.url());
  options.completion.timeout_s = 20;
  options.concurrency_max = concurrency;
  return options;
}

TEST(RunLoad, MeasuresTtftTpotAndCountsExactly) {
  // Requests 200 ms apart: TTFT counted from the run's start instead of each request's arrival
  // would have a median of 0.05 + 3.5 x 0.2 = 0.75 s; TTFT at [DONE] would make TPOT 0.
  CompletionTestServer server(TestServerBehaviour{});
  const auto requests = Requests("constant:5", 8, 10);
  const LoadgenResult result = RunLoad(Options(server), requests);
  const serving::ServingSummary s = serving::Summarize(result.outcomes, {});
  EXPECT_EQ(s.completed, 8);
  EXPECT_EQ(s.failed, 0);
  EXPECT_EQ(s.tpot_s.count, 8);
  EXPECT_EQ(s.itl_s.count, 8 * 9);
  EXPECT_NEAR(s.throughput_tokens_per_s * s.duration_s, 80, 1e-9);
  EXPECT_GE(s.ttft_s.p50, 0.050);
  EXPECT_LE(s.ttft_s.p50, 0.35);
  EXPECT_GE(s.tpot_s.p50, 0.0095);
  EXPECT_LE(s.tpot_s.p50, 0.030);
  EXPECT_GE(s.itl_s.p50, 0.0095);
  EXPECT_LE(s.itl_s.p50, 0.030);
  EXPECT_GE(s.e2e_s.p50, 0.140);
  for (const nlohmann::json& body : server.Bodies()) {
    EXPECT_EQ(body["prompt"].size(), 16u);
    EXPECT_EQ(body["max_tokens"], 10);
    EXPECT_EQ(body["stream"], true);
  }
}

TEST(RunLoad, SendsOnScheduleWhileResponsesAreSlow) {
  // 10 requests at 20/s, each answered over 50 + 19 x 10 = 240 ms: about five in flight. A closed
  // loop would space them by 240 ms (the last at 2.2 s); open loop, the last arrives at 0.45 s.
  CompletionTestServer server(TestServerBehaviour{});
  const LoadgenResult result = RunLoad(Options(server), Requests("constant:20", 10, 20));
  // A stall delays some sends and bunches them, so the test reads the spread and the typical
  // spacing, not each arrival: a closed loop spans 2.2 s with 240 ms gaps, a burst has no gaps.
  const std::vector<double> arrivals = server.ArrivalsS();
  ASSERT_EQ(arrivals.size(), 10u);
  EXPECT_LE(arrivals.back(), 1.0);
  std::vector<double> gaps_s;
  for (size_t i = 1; i < arrivals.size(); ++i) gaps_s.push_back(arrivals[i] - arrivals[i - 1]);
  std::nth_element(gaps_s.begin(), gaps_s.begin() + 4, gaps_s.end());
  EXPECT_GE(gaps_s[4], 0.025) << "the median gap between arrivals";
  EXPECT_LE(gaps_s[4], 0.1) << "the median gap between arrivals";
  EXPECT_EQ(result.late_sends, 0);
  EXPECT_EQ(serving::Summarize(result.outcomes, {}).completed, 10);
}

TEST(RunLoad, AFullPoolSendsLateAndSaysSo) {
  CompletionTestServer server(TestServerBehaviour{});
  const LoadgenResult result = RunLoad(Options(server, 1), Requests("constant:20", 4, 10));
  // One worker, 140 ms answers, a request due every 50 ms: each after the first waits.
  EXPECT_EQ(result.late_sends, 3);
  EXPECT_GE(result.max_send_lateness_s, 0.2);  // the 4th: due at 0.15 s, sent after 3 x 0.14 s
  const serving::ServingSummary s = serving::Summarize(result.outcomes, {});
  EXPECT_EQ(s.completed, 4);
  EXPECT_GE(s.ttft_s.p99, 0.25);  // the wait counts in TTFT
}

TEST(RunLoad, NamesHttpFailuresAndCountsUsageTokens) {
  TestServerBehaviour behaviour;
  behaviour.fail_every = 3;
  behaviour.send_usage = true;
  behaviour.tokens_per_chunk = 2;
  behaviour.first_token_delay_s = 0.01;
  behaviour.token_gap_s = 0.002;
  CompletionTestServer server(behaviour);
  const LoadgenResult result = RunLoad(Options(server), Requests("constant:100", 9, 6));
  const serving::ServingSummary s = serving::Summarize(result.outcomes, {});
  EXPECT_EQ(s.completed, 6);
  EXPECT_EQ(s.failed, 3);
  ASSERT_EQ(s.failures.size(), 1u);
  EXPECT_EQ(s.failures[0].first, "http 503: queue full");
  // Three chunks of two tokens each: the usage count (6), not the chunks, is the output.
  EXPECT_NEAR(s.throughput_tokens_per_s * s.duration_s, 36, 1e-9);
  EXPECT_EQ(s.itl_s.count, 6 * 2);
}

TEST(RunLoad, NamesRefusedConnectionsMalformedStreamsAndTimeouts) {
  int closed_port = 0;
  {
    CompletionTestServer gone(TestServerBehaviour{});
    closed_port = gone.port();
  }
  LoadgenOptions options;
  options.completion.url = ParseServerUrl("http://127.0.0.1:" + std::to_string(closed_port));
  options.completion.timeout_s = 5;
  auto failures =
      serving::Summarize(RunLoad(options, Requests("constant:100", 3, 4)).outcomes, {}).failures;
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0],
            std::make_pair(std::string("connection failed (refused or unreachable)"), int64_t{3}));

  TestServerBehaviour malformed;
  malformed.malformed = true;
  CompletionTestServer bad(malformed);
  failures = serving::Summarize(RunLoad(Options(bad), Requests("constant:100", 2, 4)).outcomes, {})
                 .failures;
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].first, "malformed stream: an event's data is not a JSON object");

  TestServerBehaviour stalled;
  stalled.stall_s = 3;
  CompletionTestServer slow(stalled);
  LoadgenOptions short_timeout = Options(slow);
  short_timeout.completion.timeout_s = 0.3;
  const LoadgenResult timed_out = RunLoad(short_timeout, Requests("constant:100", 2, 4));
  failures = serving::Summarize(timed_out.outcomes, {}).failures;
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0], std::make_pair(std::string("timeout after 0.3 s"), int64_t{2}));
  EXPECT_LT(timed_out.wall_s, 2.5);  // not the server's 3 s
}

}  // namespace
}  // namespace moelab::loadgen
