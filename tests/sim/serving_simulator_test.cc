// The serving simulator on hand-worked queues: fixed iteration times and deterministic arrivals,
// whose waiting times are known in closed form (D/D/1 below and above saturation), replicas and
// routers, determinism, and the same decisions as ReplayByIteration.
#include <gtest/gtest.h>

#include "sim/serving_simulator.h"
#include "tests/support/error_of.h"

namespace moelab::sim {
namespace {

std::vector<serving::RequestSpec> Constant(int64_t count, double gap_s, int64_t prompt,
                                           int64_t output) {
  std::vector<serving::RequestSpec> requests;
  for (int64_t i = 0; i < count; ++i) requests.push_back({i, i * gap_s, prompt, output});
  return requests;
}

ServingSimOptions Options(int64_t max_running) {
  ServingSimOptions options;
  options.scheduler.kv_blocks = 1024;
  options.scheduler.max_running_sequences = max_running;
  options.scheduler.max_batched_tokens = 4096;
  return options;
}

TEST(ServingSimulator, DD1BelowSaturationNeverQueues) {
  // Service 0.3 s per request (one iteration: the prefill emits the only token), arrivals every
  // 0.5 s: each request finds the server idle, TTFT = E2E = 0.3 s.
  FixedIterationPricer pricer(0.3);
  const ServingSimResult result = SimulateServing(Constant(50, 0.5, 100, 1), Options(1), pricer);
  ASSERT_EQ(result.outcomes.size(), 50u);
  for (const serving::RequestOutcome& outcome : result.outcomes) {
    EXPECT_NEAR(outcome.first_token_s - outcome.arrival_s, 0.3, 1e-12) << outcome.id;
    EXPECT_NEAR(outcome.finish_s - outcome.arrival_s, 0.3, 1e-12);
  }
  EXPECT_EQ(result.iterations, 50);
  EXPECT_NEAR(result.busy_s, 50 * 0.3, 1e-9);
}

TEST(ServingSimulator, DD1AboveSaturationWaitsGrowLinearly) {
  // Service c = 0.5 s, arrivals every a = 0.3 s, one request at a time: request k starts when k
  // earlier ones are served, at k c, so its TTFT is (k + 1) c - k a.
  FixedIterationPricer pricer(0.5);
  const ServingSimResult result = SimulateServing(Constant(40, 0.3, 100, 1), Options(1), pricer);
  for (int64_t k = 0; k < 40; ++k) {
    const serving::RequestOutcome& outcome = result.outcomes[k];
    EXPECT_NEAR(outcome.first_token_s - outcome.arrival_s, (k + 1) * 0.5 - k * 0.3, 1e-9) << k;
  }
  EXPECT_NEAR(result.outcomes.back().finish_s, 40 * 0.5, 1e-9);
}

TEST(ServingSimulator, DecodesEmitOneTokenPerIteration) {
  FixedIterationPricer pricer(0.01);
  const ServingSimResult result = SimulateServing(Constant(1, 0, 64, 20), Options(4), pricer);
  const serving::RequestOutcome& outcome = result.outcomes[0];
  EXPECT_EQ(outcome.output_tokens, 20);
  EXPECT_NEAR(outcome.first_token_s, 0.01, 1e-12);
  EXPECT_NEAR(outcome.finish_s, 0.20, 1e-12);
  ASSERT_EQ(outcome.token_times_s.size(), 20u);
  EXPECT_NEAR(outcome.token_times_s[5] - outcome.token_times_s[4], 0.01, 1e-12);
}

TEST(ServingSimulator, ContinuousBatchingSharesIterations) {
  // Two requests arriving together run in the same iterations: 1 prefill iteration (both
  // prompts fit 4096 tokens) then 9 decode iterations each emitting one token for both.
  FixedIterationPricer pricer(0.02);
  const ServingSimResult result = SimulateServing(Constant(2, 0, 64, 10), Options(4), pricer);
  EXPECT_EQ(result.iterations, 10);
  EXPECT_DOUBLE_EQ(result.mean_batch_sequences, 2.0);
  for (const serving::RequestOutcome& outcome : result.outcomes) {
    EXPECT_NEAR(outcome.finish_s, 0.2, 1e-12);
  }
}

TEST(ServingSimulator, RoundRobinHalvesEachReplicasLoad) {
  // Service 0.5 s, arrivals every 0.3 s: one replica saturates; two each see an arrival every
  // 0.6 s and never queue.
  FixedIterationPricer pricer(0.5);
  ServingSimOptions options = Options(1);
  options.replicas = 2;
  const ServingSimResult result = SimulateServing(Constant(40, 0.3, 100, 1), options, pricer);
  EXPECT_EQ(result.requests_per_replica, (std::vector<int64_t>{20, 20}));
  for (const serving::RequestOutcome& outcome : result.outcomes) {
    EXPECT_NEAR(outcome.first_token_s - outcome.arrival_s, 0.5, 1e-9) << outcome.id;
  }
  options.router = Router::kLeastOutstanding;
  const ServingSimResult least = SimulateServing(Constant(40, 0.3, 100, 1), options, pricer);
  EXPECT_EQ(least.requests_per_replica, (std::vector<int64_t>{20, 20}));
}

TEST(ServingSimulator, RefusedRequestsFailWithTheReason) {
  FixedIterationPricer pricer(0.1);
  ServingSimOptions options = Options(1);
  options.scheduler.max_waiting_requests = 2;
  options.scheduler.max_sequence_tokens = 150;
  std::vector<serving::RequestSpec> requests = Constant(6, 0, 100, 1);
  requests[5].output_tokens = 100;  // 200 tokens > 150
  const ServingSimResult result = SimulateServing(requests, options, pricer);
  EXPECT_EQ(result.refused, 4);  // 2 queued, 3 beyond the queue, 1 too long
  EXPECT_EQ(result.outcomes[2].error, "queue full (--max-waiting)");
  EXPECT_NE(result.outcomes[5].error.find("--max-sequence-tokens"), std::string::npos);
}

TEST(ServingSimulator, IsDeterministic) {
  std::vector<serving::RequestSpec> requests;
  for (int64_t i = 0; i < 200; ++i)
    requests.push_back({i, i * 0.013, 50 + (i * 37) % 400, 1 + (i * 11) % 60});
  ServingSimOptions options = Options(8);
  options.scheduler.kv_blocks = 64;  // tight: preemptions happen
  options.scheduler.prefill_chunk_tokens = 128;
  FixedIterationPricer first(0.004, 1e-5), second(0.004, 1e-5);
  const ServingSimResult a = SimulateServing(requests, options, first);
  const ServingSimResult b = SimulateServing(requests, options, second);
  EXPECT_GT(a.preemptions, 0);
  ASSERT_EQ(a.outcomes.size(), b.outcomes.size());
  for (size_t i = 0; i < a.outcomes.size(); ++i) {
    EXPECT_EQ(a.outcomes[i].token_times_s, b.outcomes[i].token_times_s);
    EXPECT_EQ(a.outcomes[i].output_tokens, requests[i].output_tokens);
  }
}

TEST(ServingSimulator, TakesTheSameDecisionsAsReplayByIteration) {
  std::vector<serving::RequestSpec> requests;
  for (int64_t i = 0; i < 120; ++i)
    requests.push_back({i, i * 0.011, 30 + (i * 53) % 300, 1 + (i * 7) % 40});
  ServingSimOptions options = Options(6);
  options.scheduler.kv_blocks = 48;
  options.scheduler.kv_block_tokens = 8;
  options.scheduler.prefill_chunk_tokens = 64;
  options.keep_plans = true;
  options.keep_iterations = true;
  FixedIterationPricer pricer(0.003, 2e-5);
  const ServingSimResult result = SimulateServing(requests, options, pricer);
  // Each request reached the scheduler before the first plan that started at or after it.
  std::vector<IterationArrival> arrivals;
  for (size_t i = 0; i < requests.size(); ++i) {
    int64_t before = 0;
    for (const IterationRecord& record : result.iteration_records) {
      if (record.start_s < requests[i].arrival_s) ++before;
    }
    arrivals.push_back({before,
                        {static_cast<int64_t>(i), requests[i].arrival_s, requests[i].prompt_tokens,
                         requests[i].output_tokens, 0}});
  }
  const std::vector<scheduler::IterationPlan> replayed =
      ReplayByIteration(options.scheduler, arrivals);
  ASSERT_EQ(result.plans.size(), 1u);
  EXPECT_GT(result.preemptions, 0);
  EXPECT_EQ(replayed, result.plans[0]);
}

TEST(ServingSimulator, ErrorsNameTheOption) {
  FixedIterationPricer pricer(0.1);
  ServingSimOptions options = Options(1);
  options.replicas = 0;
  EXPECT_NE(testing::ErrorOf([&] { SimulateServing({}, options, pricer); }).find("--replicas 0"),
            std::string::npos);
  options = Options(1);
  std::vector<serving::RequestSpec> requests = Constant(2, 1, 10, 1);
  std::swap(requests[0], requests[1]);
  EXPECT_NE(
      testing::ErrorOf([&] { SimulateServing(requests, options, pricer); }).find("time order"),
      std::string::npos);
  EXPECT_NE(testing::ErrorOf([] { ParseRouter("random"); }).find("--router random"),
            std::string::npos);
  FixedIterationPricer zero(0);
  EXPECT_NE(testing::ErrorOf([&] {
              SimulateServing(Constant(1, 0, 10, 1), Options(1), zero);
            }).find("expected a finite time > 0"),
            std::string::npos);
}

}  // namespace
}  // namespace moelab::sim
