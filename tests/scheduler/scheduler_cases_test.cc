// Hand-worked small cases: every plan written out from the rules in scheduler.h.
#include <gtest/gtest.h>

#include "scheduler/scheduler.h"
#include "tests/support/error_of.h"

namespace moelab::scheduler {
namespace {

using testing::ErrorOf;

BatchEntry Prefill(int64_t id, int64_t tokens, int64_t context, bool emits) {
  return {id, true, tokens, context, emits};
}
BatchEntry Decode(int64_t id, int64_t context) { return {id, false, 1, context, true}; }

ScheduledRequest Request(int64_t id, int64_t prompt, int64_t output, int64_t priority = 0) {
  return {id, 0.0, prompt, output, priority};
}

SchedulerConfig Config(int64_t block_tokens, int64_t blocks, int64_t running, int64_t batched) {
  SchedulerConfig config;
  config.kv_block_tokens = block_tokens;
  config.kv_blocks = blocks;
  config.max_running_sequences = running;
  config.max_batched_tokens = batched;
  return config;
}

TEST(SchedulerCases, AdmitsWhatTheTokenBudgetAllowsAndChunksTheRest) {
  Scheduler scheduler(Config(4, 10, 4, 8));
  ASSERT_EQ(scheduler.Submit(Request(1, 6, 2)).refusal, Refusal::kNone);
  ASSERT_EQ(scheduler.Submit(Request(2, 5, 1)).refusal, Refusal::kNone);

  IterationPlan plan = scheduler.Plan();
  // 1 takes ceil(7/4) = 2 blocks and 6 of 8 tokens; 2 takes 2 blocks and the 2 tokens left.
  EXPECT_EQ(plan.batch, (std::vector<BatchEntry>{Prefill(1, 6, 0, true), Prefill(2, 2, 0, false)}));
  EXPECT_EQ(plan.admitted, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(plan.kv_blocks_used, 4);
  EXPECT_EQ(plan.batched_tokens(), 8);
  EXPECT_TRUE(scheduler.Complete(plan).empty());
  EXPECT_EQ(scheduler.GeneratedTokens(1), 1);
  EXPECT_EQ(scheduler.GeneratedTokens(2), 0);

  plan = scheduler.Plan();
  EXPECT_EQ(plan.batch, (std::vector<BatchEntry>{Decode(1, 6), Prefill(2, 3, 2, true)}));
  EXPECT_TRUE(plan.admitted.empty());
  EXPECT_EQ(scheduler.Complete(plan), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(scheduler.Idle());
  EXPECT_EQ(scheduler.State().kv_blocks_used, 0);
  EXPECT_EQ(scheduler.State().finished, 2);
}

TEST(SchedulerCases, PreemptsTheNewestAndRecomputesItsPromptAndTokens) {
  Scheduler scheduler(Config(2, 4, 4, 16));
  scheduler.Submit(Request(1, 3, 4));
  scheduler.Submit(Request(2, 3, 4));
  IterationPlan plan = scheduler.Plan();
  EXPECT_EQ(plan.batch, (std::vector<BatchEntry>{Prefill(1, 3, 0, true), Prefill(2, 3, 0, true)}));
  EXPECT_EQ(plan.kv_blocks_used, 4);
  scheduler.Complete(plan);

  plan = scheduler.Plan();  // contexts 3: both fit the 2 blocks (4 tokens) they hold
  EXPECT_EQ(plan.batch, (std::vector<BatchEntry>{Decode(1, 3), Decode(2, 3)}));
  scheduler.Complete(plan);

  plan = scheduler.Plan();  // 1 at context 4 needs a third block: 2, the newest, gives its two
  EXPECT_EQ(plan.batch, (std::vector<BatchEntry>{Decode(1, 4)}));
  EXPECT_EQ(plan.preempted, (std::vector<int64_t>{2}));
  EXPECT_EQ(plan.kv_blocks_used, 3);
  EXPECT_EQ(plan.waiting, 1);
  scheduler.Complete(plan);
  EXPECT_EQ(scheduler.GeneratedTokens(2), 2);  // kept across the preemption

  plan = scheduler.Plan();  // 2 needs ceil((3 + 2 + 1) / 2) = 3 blocks; 1 is free
  EXPECT_EQ(plan.batch, (std::vector<BatchEntry>{Decode(1, 5)}));
  EXPECT_TRUE(plan.admitted.empty());
  EXPECT_EQ(scheduler.Complete(plan), (std::vector<int64_t>{1}));

  plan = scheduler.Plan();  // the re-prefill covers the prompt and both generated tokens
  EXPECT_EQ(plan.batch, (std::vector<BatchEntry>{Prefill(2, 5, 0, true)}));
  EXPECT_EQ(plan.admitted, (std::vector<int64_t>{2}));
  scheduler.Complete(plan);
  EXPECT_EQ(scheduler.GeneratedTokens(2), 3);
  plan = scheduler.Plan();
  EXPECT_EQ(plan.batch, (std::vector<BatchEntry>{Decode(2, 5)}));
  EXPECT_EQ(scheduler.Complete(plan), (std::vector<int64_t>{2}));
  EXPECT_EQ(scheduler.State().preemptions, 1);
  EXPECT_TRUE(scheduler.Idle());
}

TEST(SchedulerCases, ChunksPrefillsToTheChunkCapAndLeavesDecodesTheirTokens) {
  SchedulerConfig config = Config(16, 100, 2, 4);
  config.prefill_chunk_tokens = 3;
  Scheduler scheduler(config);
  scheduler.Submit(Request(1, 7, 2));
  scheduler.Submit(Request(2, 2, 1));
  IterationPlan plan = scheduler.Plan();
  EXPECT_EQ(plan.batch,
            (std::vector<BatchEntry>{Prefill(1, 3, 0, false), Prefill(2, 1, 0, false)}));
  scheduler.Complete(plan);
  plan = scheduler.Plan();
  EXPECT_EQ(plan.batch, (std::vector<BatchEntry>{Prefill(1, 3, 3, false), Prefill(2, 1, 1, true)}));
  EXPECT_EQ(scheduler.Complete(plan), (std::vector<int64_t>{2}));
  plan = scheduler.Plan();
  EXPECT_EQ(plan.batch, (std::vector<BatchEntry>{Prefill(1, 1, 6, true)}));
  scheduler.Complete(plan);
  plan = scheduler.Plan();
  EXPECT_EQ(plan.batch, (std::vector<BatchEntry>{Decode(1, 7)}));
  EXPECT_EQ(scheduler.Complete(plan), (std::vector<int64_t>{1}));
}

TEST(SchedulerCases, MaxRunningHoldsTheQueueAndFcfsNeverOvertakes) {
  Scheduler scheduler(Config(4, 5, 4, 64));
  scheduler.Submit(Request(1, 4, 1));
  scheduler.Submit(Request(2, 16, 1));  // needs all 5 blocks
  scheduler.Submit(Request(3, 1, 1));   // would fit beside 1, but waits behind 2
  IterationPlan plan = scheduler.Plan();
  EXPECT_EQ(plan.admitted, (std::vector<int64_t>{1}));
  EXPECT_EQ(plan.waiting, 2);
  scheduler.Complete(plan);
  plan = scheduler.Plan();
  EXPECT_EQ(plan.admitted, (std::vector<int64_t>{2}));
  scheduler.Complete(plan);
  plan = scheduler.Plan();
  EXPECT_EQ(plan.admitted, (std::vector<int64_t>{3}));
}

TEST(SchedulerCases, PriorityOrderAdmitsHigherFirstAndFcfsAmongEquals) {
  SchedulerConfig config = Config(4, 100, 2, 64);
  config.order = QueueOrder::kPriority;
  Scheduler scheduler(config);
  scheduler.Submit(Request(1, 4, 1, 0));
  scheduler.Submit(Request(2, 4, 1, 5));
  scheduler.Submit(Request(3, 4, 1, 5));
  IterationPlan plan = scheduler.Plan();
  EXPECT_EQ(plan.admitted, (std::vector<int64_t>{2, 3}));
}

TEST(SchedulerCases, SwapKeepsTheBlocksOnTheHostAndResumesTheDecode) {
  SchedulerConfig config = Config(2, 4, 4, 16);
  config.preemption = PreemptionMode::kSwap;
  config.host_kv_blocks = 8;
  Scheduler scheduler(config);
  scheduler.Submit(Request(1, 3, 4));
  scheduler.Submit(Request(2, 3, 4));
  scheduler.Complete(scheduler.Plan());
  scheduler.Complete(scheduler.Plan());
  IterationPlan plan = scheduler.Plan();
  EXPECT_EQ(plan.preempted, (std::vector<int64_t>{2}));
  EXPECT_EQ(plan.swapped_out, (std::vector<int64_t>{2}));
  EXPECT_EQ(scheduler.State().swapped, 1);
  scheduler.Complete(plan);
  plan = scheduler.Plan();
  EXPECT_EQ(plan.batch, (std::vector<BatchEntry>{Decode(1, 5)}));
  EXPECT_EQ(scheduler.Complete(plan), (std::vector<int64_t>{1}));
  plan = scheduler.Plan();  // back with its two blocks and its context: no re-prefill
  EXPECT_EQ(plan.swapped_in, (std::vector<int64_t>{2}));
  EXPECT_EQ(plan.batch, (std::vector<BatchEntry>{Decode(2, 4)}));
  EXPECT_EQ(plan.kv_blocks_used, 3);
  scheduler.Complete(plan);
  plan = scheduler.Plan();
  EXPECT_EQ(plan.batch, (std::vector<BatchEntry>{Decode(2, 5)}));
  EXPECT_EQ(scheduler.Complete(plan), (std::vector<int64_t>{2}));
}

TEST(SchedulerCases, FinishedEarlyAndSpeculativeEmissionsAndCancel) {
  SchedulerConfig config = Config(4, 100, 4, 64);
  config.decode_tokens_per_step = 3;
  Scheduler scheduler(config);
  scheduler.Submit(Request(1, 4, 10));
  scheduler.Submit(Request(2, 4, 10));
  scheduler.Submit(Request(3, 4, 10));
  scheduler.Complete(scheduler.Plan());
  IterationPlan plan = scheduler.Plan();
  ASSERT_EQ(plan.batch.size(), 3u);
  EXPECT_EQ(plan.batch[0].tokens, 3);
  EXPECT_TRUE(scheduler.Cancel(3));
  EXPECT_FALSE(scheduler.Cancel(3));
  EXPECT_EQ(scheduler.Complete(plan, {2}, {{1, 2}}), (std::vector<int64_t>{2}));
  EXPECT_EQ(scheduler.GeneratedTokens(1), 3);  // 1 from the prefill, 2 accepted
  EXPECT_EQ(scheduler.GeneratedTokens(2), std::nullopt);
  EXPECT_EQ(scheduler.State().running, 1);
  plan = scheduler.Plan();
  EXPECT_EQ(plan.batch, (std::vector<BatchEntry>{{1, false, 3, 6, true}}));
  EXPECT_NE(ErrorOf([&] {
              scheduler.Complete(plan, {}, {{1, 4}});
            }).find("emitted 4"),
            std::string::npos);
}

TEST(SchedulerCases, RefusesWhatCanNeverFitWithTheLimit) {
  SchedulerConfig config = Config(16, 8, 4, 64);
  config.max_sequence_tokens = 100;
  config.max_waiting_requests = 1;
  Scheduler scheduler(config);
  AdmitResult result = scheduler.Submit(Request(1, 90, 20));
  EXPECT_EQ(result.refusal, Refusal::kTooLong);
  EXPECT_NE(result.message.find("110 > 100 tokens (--max-sequence-tokens)"), std::string::npos)
      << result.message;
  config.max_sequence_tokens = 0;
  Scheduler by_blocks(config);
  result = by_blocks.Submit(Request(1, 120, 20));
  EXPECT_EQ(result.refusal, Refusal::kTooLong);
  EXPECT_NE(result.message.find("need 9 KV blocks of 16 tokens > the budget of 8 blocks"),
            std::string::npos)
      << result.message;
  EXPECT_EQ(by_blocks.Submit(Request(2, 10, 10)).refusal, Refusal::kNone);
  result = by_blocks.Submit(Request(3, 10, 10));
  EXPECT_EQ(result.refusal, Refusal::kQueueFull);
  EXPECT_NE(result.message.find("--max-waiting 1"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { by_blocks.Submit(Request(2, 1, 1)); }).find("unique"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { by_blocks.Submit(Request(4, 0, 1)); }).find("prompt_tokens 0"),
            std::string::npos);
}

TEST(SchedulerCases, ConfigErrorsNameTheOption) {
  auto error_of = [](SchedulerConfig config) { return ErrorOf([&] { config.Validate(); }); };
  SchedulerConfig config = Config(16, 0, 4, 64);
  EXPECT_NE(error_of(config).find("--kv-blocks: not set"), std::string::npos);
  config = Config(0, 8, 4, 64);
  EXPECT_NE(error_of(config).find("--kv-block-tokens 0"), std::string::npos);
  config = Config(16, 8, 128, 64);
  EXPECT_NE(error_of(config).find("--max-batched-tokens 64: must be at least --max-running"),
            std::string::npos);
  config = Config(16, 8, 4, 64);
  config.prefill_chunk_tokens = 65;
  EXPECT_NE(error_of(config).find("--prefill-chunk 65"), std::string::npos);
  config.prefill_chunk_tokens = 0;
  config.preemption = PreemptionMode::kSwap;
  EXPECT_NE(error_of(config).find("--host-kv-blocks 0"), std::string::npos);
  EXPECT_NE(ErrorOf([] { ParseQueueOrder("lifo"); }).find("--queue-order lifo"), std::string::npos);
  EXPECT_NE(ErrorOf([] { ParsePreemptionMode("drop"); }).find("--preemption drop"),
            std::string::npos);
  EXPECT_EQ(Config(16, 8, 4, 64).ToJson()["kv_tokens"], 128);
}

TEST(SchedulerCases, PlanAndCompleteMustAlternate) {
  Scheduler scheduler(Config(16, 8, 4, 64));
  scheduler.Submit(Request(1, 4, 2));
  IterationPlan plan = scheduler.Plan();
  EXPECT_NE(ErrorOf([&] { scheduler.Plan(); }).find("before Complete()"), std::string::npos);
  IterationPlan stale = plan;
  stale.iteration = 7;
  EXPECT_NE(ErrorOf([&] { scheduler.Complete(stale); }).find("not the plan outstanding"),
            std::string::npos);
  scheduler.Complete(plan);
  EXPECT_TRUE(scheduler.Complete(IterationPlan{}).empty());  // an empty plan has nothing to record
}

}  // namespace
}  // namespace moelab::scheduler
