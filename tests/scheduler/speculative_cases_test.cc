// Speculative decoding in the scheduler, hand-worked: a decode of gamma + 1 positions reserves
// their blocks, and Complete keeps exactly the blocks of the positions the accepted tokens leave
// in the KV cache; the seeded acceptance draws.
#include <gtest/gtest.h>

#include "scheduler/scheduler.h"
#include "scheduler/speculative_acceptance.h"
#include "tests/support/error_of.h"

namespace moelab::scheduler {
namespace {

TEST(SpeculativeScheduling, VerifyReservesGammaPlusOnePositionsAndKeepsTheAccepted) {
  SchedulerConfig config;
  config.kv_block_tokens = 4;
  config.kv_blocks = 20;
  config.max_running_sequences = 2;
  config.max_batched_tokens = 16;
  config.decode_tokens_per_step = 4;  // gamma 3
  Scheduler scheduler(config);
  ASSERT_EQ(scheduler.Submit({1, 0.0, 6, 20, 0}).refusal, Refusal::kNone);
  IterationPlan plan = scheduler.Plan();
  // The prefill of 6 and the first output token: ceil(7 / 4) = 2 blocks.
  EXPECT_EQ(plan.kv_blocks_used, 2);
  scheduler.Complete(plan);
  EXPECT_EQ(scheduler.GeneratedTokens(1), 1);

  // Context 6 (prompt 6 + 1 generated - 1); verifying 4 positions needs ceil(10 / 4) = 3 blocks.
  plan = scheduler.Plan();
  ASSERT_EQ(plan.batch.size(), 1u);
  EXPECT_EQ(plan.batch[0], (BatchEntry{1, false, 4, 6, true}));
  EXPECT_EQ(plan.kv_blocks_used, 3);
  // One draft accepted: 2 tokens emitted; the cache keeps 6 + 2 = 8 positions: 2 blocks.
  scheduler.Complete(plan, {}, {{1, 2}});
  EXPECT_EQ(scheduler.GeneratedTokens(1), 3);
  EXPECT_EQ(scheduler.State().kv_blocks_used, 2);

  // Context 8; 4 positions need ceil(12 / 4) = 3 blocks; all 3 drafts accepted + the bonus token:
  // 12 positions kept, 3 blocks.
  plan = scheduler.Plan();
  EXPECT_EQ(plan.batch[0], (BatchEntry{1, false, 4, 8, true}));
  EXPECT_EQ(plan.kv_blocks_used, 3);
  scheduler.Complete(plan, {}, {{1, 4}});
  EXPECT_EQ(scheduler.GeneratedTokens(1), 7);
  EXPECT_EQ(scheduler.State().kv_blocks_used, 3);

  // Nothing accepted: the correction only; context 12 + 1 = 13 positions: 4 of the 4 reserved.
  plan = scheduler.Plan();
  EXPECT_EQ(plan.batch[0], (BatchEntry{1, false, 4, 12, true}));
  EXPECT_EQ(plan.kv_blocks_used, 4);
  scheduler.Complete(plan, {}, {{1, 1}});
  EXPECT_EQ(scheduler.State().kv_blocks_used, 4);

  // More tokens than verified is an engine bug.
  plan = scheduler.Plan();
  EXPECT_NE(testing::ErrorOf([&] {
              scheduler.Complete(plan, {}, {{1, 5}});
            }).find("emitted 5"),
            std::string::npos);
}

TEST(SpeculativeScheduling, NearMaxTokensTheDecodeVerifiesOnlyWhatIsLeft) {
  SchedulerConfig config;
  config.kv_block_tokens = 4;
  config.kv_blocks = 20;
  config.max_running_sequences = 2;
  config.max_batched_tokens = 16;
  config.decode_tokens_per_step = 4;
  Scheduler scheduler(config);
  scheduler.Submit({1, 0.0, 5, 3, 0});
  scheduler.Complete(scheduler.Plan());  // prefill: 1 token
  IterationPlan plan = scheduler.Plan();
  EXPECT_EQ(plan.batch[0].tokens, 2);  // 2 of max_tokens 3 left
  EXPECT_EQ(scheduler.Complete(plan, {}, {{1, 2}}), (std::vector<int64_t>{1}));
  EXPECT_EQ(scheduler.State().kv_blocks_used, 0);
}

TEST(SpeculativeAcceptanceDraws, SeededPerPositionAndAtTheRate) {
  const SpeculativeAcceptance acceptance{0.6, 7};
  // The same (request, position) always gives the same coin, whatever was asked before.
  const double coin = acceptance.Coin(3, 10);
  EXPECT_EQ(acceptance.Coin(4, 10), acceptance.Coin(4, 10));
  EXPECT_EQ(acceptance.Coin(3, 10), coin);
  EXPECT_NE(SpeculativeAcceptance({0.6, 8}).Coin(3, 10), coin);
  // Accepted = the leading run of coins below alpha.
  for (int64_t generated = 0; generated < 50; ++generated) {
    int64_t expected = 0;
    while (expected < 4 && acceptance.Coin(9, generated + expected) < 0.6) ++expected;
    EXPECT_EQ(acceptance.Accepted(9, generated, 4), expected);
  }
  // Over many positions each coin accepts at rate alpha (binomial sd 0.0049 at 10,000).
  int64_t accepted = 0;
  for (int64_t p = 0; p < 10000; ++p) accepted += acceptance.Coin(p % 97, p) < 0.6 ? 1 : 0;
  EXPECT_NEAR(static_cast<double>(accepted) / 10000, 0.6, 0.02);
  EXPECT_NE(testing::ErrorOf([] {
              SpeculativeAcceptance{1.0, 1}.Validate();
            }).find("--alpha"),
            std::string::npos);
}

}  // namespace
}  // namespace moelab::scheduler
