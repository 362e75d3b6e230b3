// Offloading composed with serving: `moelab serve --offload` builds the target as `moelab run
// --offload` does (routed experts in the expert store, a RAM cache driven by the policy), and the
// serving engine's tokens are bit-identical to serving with every expert in RAM, through chunked
// prefills, mixed batches and preemptions.
#include <gtest/gtest.h>

#include "executor/serving_model.h"
#include "executor/serving_replay.h"
#include "tests/executor/offload_fixtures.h"
#include "tests/executor/tiny_models.h"

namespace moelab::executor {
namespace {

scheduler::SchedulerConfig Scheduler(int64_t kv_blocks) {
  scheduler::SchedulerConfig config;
  config.kv_block_tokens = 4;
  config.kv_blocks = kv_blocks;
  config.max_running_sequences = 3;
  config.max_batched_tokens = 12;
  config.prefill_chunk_tokens = 6;
  config.max_sequence_tokens = 40;
  return config;
}

TEST(ServingOffload, TokensEqualServingWithEveryExpertInRam) {
  offload::TempDir dir;
  const model::PresetStore presets = model::PresetStore::Default();
  RunRequest plain = testing::SmallRunRequest();
  plain.threads = 2;
  RunRequest offloaded = plain;
  offload::OffloadOptions options;
  options.policy = "on-demand";
  options.expert_memory_bytes = 8 << 20;  // about 8 of the 32 experts of 0.8 MB
  options.offload_dir = dir.path.string();
  offloaded.offload = options;
  for (const int64_t kv_blocks : {100, 9}) {
    const scheduler::SchedulerConfig config = Scheduler(kv_blocks);
    auto in_ram = BuildServingModel(plain, config, presets);
    auto from_store = BuildServingModel(offloaded, config, presets);
    ASSERT_NE(from_store->offload_runtime, nullptr);
    const int64_t vocab = in_ram->model->config().vocab_size;
    std::vector<ReplayArrival> arrivals;
    for (int64_t i = 0; i < 5; ++i) {
      ReplayArrival a;
      a.request.id = i;
      a.request.prompt = SyntheticPrompts(1, 7 + i * 3, vocab, 50 + i)[0];
      a.request.max_tokens = 8 - i % 2;
      a.submit_before_iteration = i;
      arrivals.push_back(a);
    }
    const ReplayResult expected = ReplayByIteration(*in_ram->model, config, arrivals);
    const ReplayResult got = ReplayByIteration(*from_store->model, config, arrivals);
    EXPECT_EQ(got.plans, expected.plans) << kv_blocks;
    EXPECT_EQ(got.tokens, expected.tokens) << kv_blocks;
    if (kv_blocks == 9) {
      int64_t preemptions = 0;
      for (const auto& plan : got.plans) preemptions += plan.preempted.size();
      EXPECT_GT(preemptions, 0);
    }
  }
}

}  // namespace
}  // namespace moelab::executor
