// The serving engine (executor/serving_replay.h, which runs real forward passes) and the serving
// simulator (sim/serving_simulator.h, which runs none) take the same scheduler decisions on the
// same arrivals: which requests run in each iteration, their chunk sizes and contexts, admissions
// and preemptions -- as offload_same_decisions checks for the offload policies.
#include <gtest/gtest.h>

#include "executor/generation.h"
#include "executor/serving_replay.h"
#include "executor/transformer.h"
#include "executor/weights.h"
#include "kernels/thread_pool.h"
#include "scheduler/decision_log.h"
#include "sim/serving_simulator.h"
#include "tests/executor/tiny_models.h"

namespace moelab::executor {
namespace {

scheduler::SchedulerConfig TightScheduler(int64_t kv_blocks) {
  scheduler::SchedulerConfig config;
  config.kv_block_tokens = 4;
  config.kv_blocks = kv_blocks;
  config.max_running_sequences = 4;
  config.max_batched_tokens = 9;
  config.prefill_chunk_tokens = 5;
  config.max_sequence_tokens = 64;
  return config;
}

// Eight requests of 6-13 prompt tokens and 9-12 output tokens reaching the engine over its first
// iterations, while it is busy (the simulator's replay makes no plan while the scheduler idles).
std::vector<ReplayArrival> Arrivals(int64_t vocab) {
  const int64_t before_iteration[] = {0, 0, 1, 3, 4, 6, 9, 10};
  std::vector<ReplayArrival> arrivals;
  for (int64_t i = 0; i < 8; ++i) {
    ReplayArrival a;
    a.request.id = 200 + i;
    a.request.prompt = SyntheticPrompts(1, 6 + (i * 5) % 8, vocab, 70 + i)[0];
    a.request.max_tokens = 12 - i % 4;
    a.request.arrival_s = static_cast<double>(i);
    a.submit_before_iteration = before_iteration[i];
    arrivals.push_back(a);
  }
  return arrivals;
}

std::vector<sim::IterationArrival> SimulatorArrivals(const std::vector<ReplayArrival>& arrivals) {
  std::vector<sim::IterationArrival> out;
  for (const ReplayArrival& a : arrivals) {
    sim::IterationArrival s;
    s.before_iteration = a.submit_before_iteration;
    s.request.id = a.request.id;
    s.request.arrival_s = a.request.arrival_s;
    s.request.prompt_tokens = static_cast<int64_t>(a.request.prompt.size());
    s.request.max_output_tokens = a.request.max_tokens;
    s.request.priority = a.request.priority;
    out.push_back(s);
  }
  return out;
}

std::vector<scheduler::IterationPlan> NonEmpty(const std::vector<scheduler::IterationPlan>& plans) {
  std::vector<scheduler::IterationPlan> out;
  for (const scheduler::IterationPlan& plan : plans) {
    if (!plan.batch.empty() || !plan.preempted.empty()) out.push_back(plan);
  }
  return out;
}

int64_t Preemptions(const std::vector<scheduler::IterationPlan>& plans) {
  int64_t count = 0;
  for (const scheduler::IterationPlan& plan : plans) count += plan.preempted.size();
  return count;
}

class SameDecisions : public ::testing::TestWithParam<int64_t> {};

TEST_P(SameDecisions, EngineAndSimulatorPlanEveryIterationAlike) {
  const ExecutorConfig config = testing::TinyMixtral(41);
  kernels::ThreadPool pool(2);
  const ModelWeights weights = MakeSyntheticWeights(config, 17, pool);
  Transformer model(weights, pool);
  const scheduler::SchedulerConfig scheduler_config = TightScheduler(GetParam());
  const auto arrivals = Arrivals(config.vocab_size);

  const ReplayResult engine = ReplayByIteration(model, scheduler_config, arrivals);
  const std::vector<scheduler::IterationPlan> simulator =
      sim::ReplayByIteration(scheduler_config, SimulatorArrivals(arrivals));

  ASSERT_TRUE(engine.refusals.empty());
  const auto engine_plans = NonEmpty(engine.plans);
  const auto simulator_plans = NonEmpty(simulator);
  EXPECT_EQ(engine_plans, simulator_plans)
      << scheduler::FirstDifference(engine_plans, simulator_plans);
  for (const ReplayArrival& a : arrivals) {
    EXPECT_EQ(static_cast<int64_t>(engine.tokens.at(a.request.id).size()), a.request.max_tokens);
  }
  // The tight budget is there to exercise preemption: both sides must have taken some.
  if (GetParam() <= 12) {
    EXPECT_GT(Preemptions(engine_plans), 0);
  }
}

// 200 blocks: no preemption, admissions and chunking only; 12 blocks: recompute preemptions.
INSTANTIATE_TEST_SUITE_P(KvBudgets, SameDecisions, ::testing::Values(200, 12));

}  // namespace
}  // namespace moelab::executor
