// Invariants over randomized seeded workloads: a shadow of every request checks what each plan
// may do (KV budget, token and chunk budgets, max running, FCFS admissions, contexts) and that
// every request ends with exactly its tokens, preempted or not.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "base/hash.h"
#include "scheduler/scheduler.h"

namespace moelab::scheduler {
namespace {

struct Shadow {
  ScheduledRequest request;
  int64_t prefilled = 0, prefill_target = 0, generated = 0;
  bool admitted_once = false, finished = false;
};

int64_t Between(base::SplitMix64Stream& random, int64_t low, int64_t high) {
  return low + static_cast<int64_t>(random.Below(static_cast<uint64_t>(high - low + 1)));
}

SchedulerConfig RandomConfig(base::SplitMix64Stream& random, PreemptionMode mode) {
  SchedulerConfig config;
  config.kv_block_tokens = Between(random, 1, 16);
  config.kv_blocks = Between(random, 8, 64);
  config.max_running_sequences = Between(random, 1, 16);
  config.decode_tokens_per_step = Between(random, 1, 3);
  config.max_batched_tokens =
      config.max_running_sequences * config.decode_tokens_per_step + Between(random, 0, 64);
  config.prefill_chunk_tokens = Between(random, 0, config.max_batched_tokens);
  config.preemption = mode;
  if (mode == PreemptionMode::kSwap) config.host_kv_blocks = Between(random, 1, 64);
  return config;
}

struct Totals {
  int64_t preemptions = 0, swaps = 0, requests = 0;
};

void CheckPlan(const SchedulerConfig& config, const IterationPlan& plan,
               std::map<int64_t, Shadow>& shadows, int64_t& last_first_admission) {
  ASSERT_LE(plan.batched_tokens(), config.max_batched_tokens);
  ASSERT_LE(static_cast<int64_t>(plan.batch.size()), config.max_running_sequences);
  ASSERT_LE(plan.kv_blocks_used, config.kv_blocks);
  for (const int64_t id : plan.preempted) {
    Shadow& shadow = shadows.at(id);
    const bool swapped = std::count(plan.swapped_out.begin(), plan.swapped_out.end(), id) > 0;
    if (!swapped) {  // recompute: the prompt and every generated token prefilled again
      shadow.prefilled = 0;
      shadow.prefill_target = shadow.request.prompt_tokens + shadow.generated;
    }
  }
  for (const int64_t id : plan.admitted) {
    Shadow& shadow = shadows.at(id);
    if (!shadow.admitted_once) {
      ASSERT_GT(id, last_first_admission) << "FCFS broken at iteration " << plan.iteration;
      last_first_admission = id;
      shadow.admitted_once = true;
    }
  }
  const int64_t chunk_cap =
      config.prefill_chunk_tokens > 0 ? config.prefill_chunk_tokens : config.max_batched_tokens;
  int64_t blocks_needed = 0;
  bool seen_prefill = false;
  std::set<int64_t> ids;
  for (const BatchEntry& entry : plan.batch) {
    ASSERT_TRUE(ids.insert(entry.request_id).second) << "a request twice in one iteration";
    const Shadow& shadow = shadows.at(entry.request_id);
    ASSERT_GE(entry.tokens, 1);
    if (entry.prefill) {
      seen_prefill = true;
      ASSERT_LE(entry.tokens, chunk_cap);
      ASSERT_EQ(entry.context_tokens, shadow.prefilled);
      ASSERT_EQ(entry.emits_token, shadow.prefilled + entry.tokens == shadow.prefill_target);
      // The admission reserved the whole prefill and the first output token.
      blocks_needed +=
          (shadow.prefill_target + 1 + config.kv_block_tokens - 1) / config.kv_block_tokens;
    } else {
      ASSERT_FALSE(seen_prefill) << "decodes go before prefill chunks";
      ASSERT_EQ(entry.context_tokens, shadow.request.prompt_tokens + shadow.generated - 1);
      ASSERT_LE(entry.tokens, config.decode_tokens_per_step);
      blocks_needed += (entry.context_tokens + entry.tokens + config.kv_block_tokens - 1) /
                       config.kv_block_tokens;
    }
  }
  ASSERT_LE(blocks_needed, plan.kv_blocks_used) << "iteration " << plan.iteration;
}

void RunWorkload(uint64_t seed, PreemptionMode mode, Totals& totals) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  base::SplitMix64Stream random(base::SplitMix64(seed));
  const SchedulerConfig config = RandomConfig(random, mode);
  Scheduler scheduler(config);
  const int64_t kv_tokens = config.kv_blocks * config.kv_block_tokens;
  std::map<int64_t, Shadow> shadows;
  const int64_t request_count = Between(random, 1, 60);
  std::vector<int64_t> arrival_iteration;
  for (int64_t id = 0, iteration = 0; id < request_count; ++id) {
    iteration += Between(random, 0, 3);
    arrival_iteration.push_back(iteration);
  }
  int64_t next = 0, last_first_admission = -1, accepted = 0;
  for (int64_t iteration = 0; iteration < 100000; ++iteration) {
    while (next < request_count && arrival_iteration[next] <= iteration) {
      const int64_t prompt = Between(random, 1, std::max<int64_t>(1, kv_tokens / 2));
      const int64_t output = Between(random, 1, std::max<int64_t>(1, kv_tokens / 2));
      const ScheduledRequest request{next, 0.0, prompt, output, 0};
      const AdmitResult result = scheduler.Submit(request);
      const bool fits = (prompt + output + config.kv_block_tokens - 1) / config.kv_block_tokens <=
                        config.kv_blocks;
      ASSERT_EQ(result.refusal == Refusal::kNone, fits) << result.message;
      if (fits) {
        shadows[next] = {request, 0, prompt, 0, false, false};
        ++accepted;
      }
      ++next;
    }
    if (next == request_count && scheduler.Idle()) break;
    const IterationPlan plan = scheduler.Plan();
    CheckPlan(config, plan, shadows, last_first_admission);
    if (::testing::Test::HasFatalFailure()) return;
    totals.preemptions += static_cast<int64_t>(plan.preempted.size());
    totals.swaps += static_cast<int64_t>(plan.swapped_out.size());
    const std::vector<int64_t> finished = scheduler.Complete(plan);
    for (const BatchEntry& entry : plan.batch) {
      Shadow& shadow = shadows.at(entry.request_id);
      if (entry.prefill) {
        shadow.prefilled += entry.tokens;
        shadow.generated += entry.emits_token ? 1 : 0;
      } else {
        shadow.generated += entry.tokens;
      }
      if (shadow.generated == shadow.request.max_output_tokens) {
        ASSERT_TRUE(std::count(finished.begin(), finished.end(), entry.request_id));
        shadow.finished = true;
      } else {
        ASSERT_LT(shadow.generated, shadow.request.max_output_tokens);
        ASSERT_EQ(scheduler.GeneratedTokens(entry.request_id), shadow.generated);
      }
    }
  }
  ASSERT_TRUE(scheduler.Idle()) << "requests left after 100000 iterations";
  for (const auto& [id, shadow] : shadows) ASSERT_TRUE(shadow.finished) << "request " << id;
  EXPECT_EQ(scheduler.State().finished, accepted);
  EXPECT_EQ(scheduler.State().kv_blocks_used, 0);
  totals.requests += accepted;
}

TEST(SchedulerInvariants, RecomputeOverRandomWorkloads) {
  Totals totals;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    RunWorkload(seed, PreemptionMode::kRecompute, totals);
    if (HasFatalFailure()) return;
  }
  // The workloads are sized to run out of KV: the preemption path is exercised, not just present.
  EXPECT_GT(totals.preemptions, 100);
  EXPECT_GT(totals.requests, 3000);
}

TEST(SchedulerInvariants, SwapOverRandomWorkloads) {
  Totals totals;
  for (uint64_t seed = 1001; seed <= 1300; ++seed) {
    RunWorkload(seed, PreemptionMode::kSwap, totals);
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(totals.swaps, 50);
  EXPECT_GT(totals.preemptions, totals.swaps);  // a full host tier falls back to recompute
}

}  // namespace
}  // namespace moelab::scheduler
