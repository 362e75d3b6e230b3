// Speculative decoding inside the serving engine (executor/serving_core.h): with greedy acceptance
// every request gets exactly the tokens plain greedy decoding gives (drafts all accepted, all
// rejected, and through preemptions); with a fixed rate the emitted counts follow the seeded coins,
// and the serving simulator, given the same coins, plans every iteration alike.
#include <gtest/gtest.h>

#include "executor/serving_replay.h"
#include "executor/transformer.h"
#include "executor/weights.h"
#include "kernels/thread_pool.h"
#include "scheduler/decision_log.h"
#include "sim/serving_simulator.h"
#include "tests/executor/tiny_models.h"
#include "tests/support/error_of.h"

namespace moelab::executor {
namespace {

constexpr int64_t kVocab = 41;

struct Models {
  Models()
      : pool(2),
        target_weights(MakeSyntheticWeights(testing::TinyMixtral(kVocab), 17, pool)),
        draft_weights(MakeSyntheticWeights(testing::TinyLlama(kVocab), 18, pool)),
        target(target_weights, pool),
        self_draft(target_weights, pool),
        other_draft(draft_weights, pool) {}
  kernels::ThreadPool pool;
  ModelWeights target_weights, draft_weights;
  Transformer target, self_draft, other_draft;
};

scheduler::SchedulerConfig SdScheduler(int64_t kv_blocks, int64_t gamma) {
  scheduler::SchedulerConfig config;
  config.kv_block_tokens = 4;
  config.kv_blocks = kv_blocks;
  config.max_running_sequences = 3;
  config.max_batched_tokens = 3 * (gamma + 1) + 4;  // every decode, and chunks beside them
  config.prefill_chunk_tokens = 5;
  config.max_sequence_tokens = 64;
  config.decode_tokens_per_step = gamma + 1;
  return config;
}

std::vector<ReplayArrival> Arrivals(int64_t count) {
  const int64_t before_iteration[] = {0, 0, 1, 3, 4, 6, 9, 10};
  std::vector<ReplayArrival> arrivals;
  for (int64_t i = 0; i < count; ++i) {
    ReplayArrival a;
    a.request.id = 300 + i;
    a.request.prompt = SyntheticPrompts(1, 6 + (i * 5) % 8, kVocab, 90 + i)[0];
    a.request.max_tokens = 14 - i % 4;
    a.request.arrival_s = static_cast<double>(i);
    a.submit_before_iteration = before_iteration[i % 8];
    arrivals.push_back(a);
  }
  return arrivals;
}

TokenIds Greedy(ForwardModel& model, const TokenIds& prompt, int64_t tokens) {
  DecodeOptions options;
  options.output_tokens = tokens;
  return RunDecode(model, {prompt}, options).outputs.at(0);
}

int64_t Preemptions(const std::vector<scheduler::IterationPlan>& plans) {
  int64_t count = 0;
  for (const scheduler::IterationPlan& plan : plans) count += plan.preempted.size();
  return count;
}

TEST(ServingSpeculation, GreedyAcceptanceGivesPlainGreedyTokens) {
  Models m;
  const auto arrivals = Arrivals(6);
  // The target as its own draft accepts every draft (the bonus-token path); a different draft
  // accepts almost none (the correction path); 14 blocks force preemptions with SD.
  for (Transformer* draft : {&m.self_draft, &m.other_draft}) {
    for (const int64_t kv_blocks : {200, 14}) {
      const ReplayResult replay = ReplayByIteration(m.target, SdScheduler(kv_blocks, 3), arrivals,
                                                    100000, ServingSpeculation{draft, 3, {}});
      ASSERT_TRUE(replay.refusals.empty());
      for (const ReplayArrival& a : arrivals) {
        EXPECT_EQ(replay.tokens.at(a.request.id),
                  Greedy(m.target, a.request.prompt, a.request.max_tokens))
            << draft->config().name << ", " << kv_blocks << " blocks, request " << a.request.id;
      }
      int64_t decode_iterations = 0;
      for (const scheduler::IterationPlan& plan : replay.plans) {
        EXPECT_LE(plan.kv_blocks_used, kv_blocks);
        for (const scheduler::BatchEntry& e : plan.batch) decode_iterations += e.prefill ? 0 : 1;
      }
      if (draft == &m.self_draft && kv_blocks == 200) {
        // Every draft accepted: up to 4 tokens a decode, so far fewer decodes than tokens.
        EXPECT_LT(decode_iterations, 6 * 10 / 2) << kv_blocks;
      }
      if (kv_blocks == 14) {
        EXPECT_GT(Preemptions(replay.plans), 0) << draft->config().name;
      }
    }
  }
}

std::vector<sim::IterationArrival> SimulatorArrivals(const std::vector<ReplayArrival>& arrivals) {
  std::vector<sim::IterationArrival> out;
  for (const ReplayArrival& a : arrivals) {
    sim::IterationArrival s;
    s.before_iteration = a.submit_before_iteration;
    s.request = {a.request.id, a.request.arrival_s, static_cast<int64_t>(a.request.prompt.size()),
                 a.request.max_tokens, a.request.priority};
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

// The decisions depend on acceptance (how far each sequence advances, so its blocks and when it
// finishes): given the same coins, engine and simulator plan every iteration alike.
TEST(ServingSpeculation, FixedRateEngineAndSimulatorPlanAlike) {
  Models m;
  const auto arrivals = Arrivals(8);
  const scheduler::SpeculativeAcceptance coins{0.7, 5};
  for (const int64_t kv_blocks : {200, 14}) {
    const scheduler::SchedulerConfig config = SdScheduler(kv_blocks, 3);
    const ReplayResult engine = ReplayByIteration(m.target, config, arrivals, 100000,
                                                  ServingSpeculation{&m.other_draft, 3, coins});
    const auto simulator = sim::ReplayByIteration(config, SimulatorArrivals(arrivals), coins);
    const auto engine_plans = NonEmpty(engine.plans), simulator_plans = NonEmpty(simulator);
    EXPECT_EQ(engine_plans, simulator_plans)
        << scheduler::FirstDifference(engine_plans, simulator_plans);
    for (const ReplayArrival& a : arrivals) {
      EXPECT_EQ(static_cast<int64_t>(engine.tokens.at(a.request.id).size()), a.request.max_tokens);
    }
    // Without the coins the simulator would advance every decode by 4: the plans would differ.
    const auto all_accepted = NonEmpty(sim::ReplayByIteration(config, SimulatorArrivals(arrivals)));
    EXPECT_NE(engine_plans, all_accepted);
  }
}

TEST(ServingSpeculation, RefusesAMismatchedStep) {
  Models m;
  scheduler::SchedulerConfig config = SdScheduler(100, 3);
  EXPECT_NE(testing::ErrorOf([&] { ServingCore core(m.target, config); }).find("speculative"),
            std::string::npos);
  EXPECT_NE(testing::ErrorOf([&] {
              ServingCore core(m.target, config, ServingSpeculation{&m.other_draft, 2, {}});
            }).find("gamma + 1"),
            std::string::npos);
  EXPECT_NE(testing::ErrorOf([&] {
              ServingCore core(
                  m.target, config,
                  ServingSpeculation{&m.other_draft, 3, scheduler::SpeculativeAcceptance{1.5, 1}});
            }).find("--alpha"),
            std::string::npos);
}

}  // namespace
}  // namespace moelab::executor
