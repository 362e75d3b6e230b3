// The CUDA backend against the double-precision reference and against the CPU engine, and the
// invariants the workloads rely on (incremental == recompute, batch independence, greedy SD ==
// greedy decode) on the GPU. Tests that need a GPU skip with one line where there is none.
#include "executor/gpu/gpu_transformer.h"

#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "base/error.h"
#include "executor/generation.h"
#include "executor/run_workload.h"
#include "executor/transformer.h"
#include "kernels/elementwise.h"
#include "tests/executor/gpu_skip.h"
#include "tests/executor/reference_model.h"
#include "tests/executor/tiny_models.h"

namespace moelab::executor {
namespace {

std::vector<float> ForwardAll(ForwardModel& model, KvCache& cache,
                              const std::vector<int32_t>& tokens) {
  std::vector<SequenceInput> batch = {{&cache, tokens}};
  std::vector<float> logits;
  model.Forward(batch, {LogitRows::kAll, nullptr, nullptr, "test"}, logits);
  return logits;
}

// max |a - b| over max |b|.
double RelativeMaxError(const std::vector<float>& a, const std::vector<double>& b) {
  double worst = 0;
  double scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    worst = std::max(worst, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  return worst / scale;
}

class EveryTinyModelOnGpu : public ::testing::TestWithParam<ExecutorConfig> {};

TEST_P(EveryTinyModelOnGpu, ForwardMatchesPlainReferenceAsTheCpuDoes) {
  SKIP_WITHOUT_GPU();
  kernels::ThreadPool pool(2);
  const ModelWeights weights = MakeSyntheticWeights(GetParam(), 11, pool);
  const auto gpu = MakeGpuTransformer(weights, 0);
  Transformer cpu(weights, pool);
  const std::vector<int32_t> tokens = {3, 17, 0, 29, 8, 8, 36, 1, 22, 5, 14};
  KvCache gpu_cache = gpu->NewCache(64);
  KvCache cpu_cache = cpu.NewCache(64);
  const std::vector<float> gpu_logits = ForwardAll(*gpu, gpu_cache, tokens);
  const std::vector<float> cpu_logits = ForwardAll(cpu, cpu_cache, tokens);
  std::vector<double> reference;
  for (const auto& row : testing::ReferenceLogits(weights, tokens))
    reference.insert(reference.end(), row.begin(), row.end());
  ASSERT_EQ(gpu_logits.size(), reference.size());
  // The same bound the CPU engine meets (transformer_test.cc): only accumulation order and bf16
  // rounding of slightly different inputs separate them.
  EXPECT_LT(RelativeMaxError(gpu_logits, reference), 5e-3);
  const std::vector<double> cpu_as_double(cpu_logits.begin(), cpu_logits.end());
  EXPECT_LT(RelativeMaxError(gpu_logits, cpu_as_double), 1e-2);
  EXPECT_EQ(gpu_cache.length(), static_cast<int64_t>(tokens.size()));
}

TEST_P(EveryTinyModelOnGpu, IncrementalDecodeEqualsFullRecomputationBitForBit) {
  SKIP_WITHOUT_GPU();
  kernels::ThreadPool pool(2);
  const ModelWeights weights = MakeSyntheticWeights(GetParam(), 5, pool);
  const auto model = MakeGpuTransformer(weights, 0);
  const std::vector<int32_t> tokens = {1, 2, 3, 30, 4, 5, 6, 7, 9, 10};
  KvCache full_cache = model->NewCache(32);
  const std::vector<float> full = ForwardAll(*model, full_cache, tokens);
  KvCache cache = model->NewCache(32);
  std::vector<float> incremental = ForwardAll(*model, cache, {tokens.begin(), tokens.begin() + 4});
  for (size_t t = 4; t < tokens.size(); ++t) {
    const std::vector<float> step = ForwardAll(*model, cache, {tokens[t]});
    incremental.insert(incremental.end(), step.begin(), step.end());
  }
  ASSERT_EQ(full.size(), incremental.size());
  for (size_t i = 0; i < full.size(); ++i) ASSERT_EQ(full[i], incremental[i]) << "logit " << i;
}

TEST_P(EveryTinyModelOnGpu, SequencesDoNotAffectEachOther) {
  SKIP_WITHOUT_GPU();
  kernels::ThreadPool pool(2);
  const ModelWeights weights = MakeSyntheticWeights(GetParam(), 8, pool);
  const auto model = MakeGpuTransformer(weights, 0);
  const std::vector<int32_t> a = {4, 5, 6}, b = {7, 8, 9, 10, 11};
  KvCache alone_cache = model->NewCache(16), a_cache = model->NewCache(16),
          b_cache = model->NewCache(16);
  const std::vector<float> alone = ForwardAll(*model, alone_cache, b);
  std::vector<SequenceInput> batch = {{&a_cache, a}, {&b_cache, b}};
  std::vector<float> together;
  model->Forward(batch, {LogitRows::kAll, nullptr, nullptr, "test"}, together);
  const int64_t vocab = weights.config.vocab_size;
  for (size_t i = 0; i < alone.size(); ++i) ASSERT_EQ(alone[i], together[3 * vocab + i]);
}

TEST_P(EveryTinyModelOnGpu, SyntheticContextMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  kernels::ThreadPool pool(2);
  const ModelWeights weights = MakeSyntheticWeights(GetParam(), 3, pool);
  const auto gpu = MakeGpuTransformer(weights, 0);
  Transformer cpu(weights, pool);
  KvCache gpu_cache = gpu->NewCache(40), cpu_cache = cpu.NewCache(40);
  gpu_cache.FillSynthetic(30, 77);
  cpu_cache.FillSynthetic(30, 77);
  const std::vector<int32_t> tokens = {2, 9, 4};
  const std::vector<float> g = ForwardAll(*gpu, gpu_cache, tokens);
  const std::vector<float> c = ForwardAll(cpu, cpu_cache, tokens);
  EXPECT_LT(RelativeMaxError(g, std::vector<double>(c.begin(), c.end())), 1e-2);
}

INSTANTIATE_TEST_SUITE_P(
    Tiny, EveryTinyModelOnGpu,
    ::testing::Values(testing::TinyMixtral(), testing::TinyQwenMoe(), testing::TinyQwen3Moe(),
                      testing::TinyLlama(),
                      testing::Quantized(testing::TinyMixtral(), kernels::WeightFormat::kQ4_0,
                                         kernels::WeightFormat::kBf16),
                      testing::Quantized(testing::TinyQwenMoe(), kernels::WeightFormat::kQ8_0,
                                         kernels::WeightFormat::kBf16)),
    testing::TinyModelName());

// More tokens than one GEMM block (kGpuGemmRows) and experts with more than a block of rows.
TEST(GpuTransformer, LongPromptSpansSeveralGemmBlocks) {
  SKIP_WITHOUT_GPU();
  kernels::ThreadPool pool(2);
  ExecutorConfig config = testing::TinyMixtral();
  config.max_positions = 256;
  const ModelWeights weights = MakeSyntheticWeights(config, 13, pool);
  const auto gpu = MakeGpuTransformer(weights, 0);
  std::vector<int32_t> tokens;
  for (int32_t i = 0; i < 150; ++i) tokens.push_back((i * 7 + 3) % 37);
  KvCache cache = gpu->NewCache(160);
  const std::vector<float> logits = ForwardAll(*gpu, cache, tokens);
  std::vector<double> reference;
  for (const auto& row : testing::ReferenceLogits(weights, tokens))
    reference.insert(reference.end(), row.begin(), row.end());
  EXPECT_LT(RelativeMaxError(logits, reference), 5e-3);
}

TEST(GpuTransformer, GreedySpeculativeDecodingEmitsTheTargetsGreedyTokens) {
  SKIP_WITHOUT_GPU();
  kernels::ThreadPool pool(2);
  const ModelWeights target_weights = MakeSyntheticWeights(testing::TinyMixtral(), 21, pool);
  const ModelWeights draft_weights = MakeSyntheticWeights(testing::TinyLlama(), 22, pool);
  const auto target = MakeGpuTransformer(target_weights, 0);
  const auto draft = MakeGpuTransformer(draft_weights, 0);
  for (int64_t batch : {1, 3}) {
    const auto prompts = SyntheticPrompts(batch, 5, 37, 4);
    DecodeOptions plain;
    plain.output_tokens = 24;
    const DecodeResult reference = RunDecode(*target, prompts, plain);
    for (int64_t gamma : {1, 2, 3, 5}) {
      SpeculativeOptions options;
      options.gamma = gamma;
      options.output_tokens = 24;
      const SpeculativeResult sd = RunSpeculative(*target, *draft, prompts, options);
      EXPECT_EQ(sd.outputs, reference.outputs) << "batch " << batch << " gamma " << gamma;
    }
  }
}

// Beam search copies caches on the device (KvCache::CopyFrom); width 1 is greedy decoding.
TEST(GpuTransformer, BeamOfWidthOneIsGreedyDecoding) {
  SKIP_WITHOUT_GPU();
  kernels::ThreadPool pool(2);
  const ModelWeights weights = MakeSyntheticWeights(testing::TinyQwenMoe(), 31, pool);
  const auto model = MakeGpuTransformer(weights, 0);
  const auto prompts = SyntheticPrompts(1, 6, 37, 2);
  DecodeOptions plain;
  plain.output_tokens = 12;
  const DecodeResult greedy = RunDecode(*model, prompts, plain);
  const BeamResult beam = RunBeamSearch(*model, prompts[0], 1, 12);
  ASSERT_EQ(beam.beams.size(), 1u);
  EXPECT_EQ(beam.beams[0].tokens, greedy.outputs[0]);
  const BeamResult wide = RunBeamSearch(*model, prompts[0], 4, 12);
  EXPECT_EQ(wide.beams.size(), 4u);
  EXPECT_GE(wide.beams[0].log_probability, beam.beams[0].log_probability - 1e-6);
}

TEST(GpuTransformer, QuantizedAttentionIsRefusedByName) {
  SKIP_WITHOUT_GPU();
  kernels::ThreadPool pool(2);
  const ModelWeights weights =
      MakeSyntheticWeights(testing::Quantized(testing::TinyMixtral(), kernels::WeightFormat::kBf16,
                                              kernels::WeightFormat::kQ8_0),
                           1, pool);
  try {
    MakeGpuTransformer(weights, 0);
    FAIL() << "q8_0 attention was accepted";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--attention-bits"), std::string::npos) << e.what();
  }
}

// `moelab run --device gpu --json` reports every field the CPU run does, plus device and the GPU.
TEST(GpuTransformer, RunReportHasTheCpuFieldsPlusDevice) {
  SKIP_WITHOUT_GPU();
  RunRequest request = testing::SmallRunRequest();
  const nlohmann::json cpu = RunResultToJson(RunWorkload(request, model::PresetStore::Default()));
  request.device = "gpu";
  const nlohmann::json gpu = RunResultToJson(RunWorkload(request, model::PresetStore::Default()));
  for (const auto& [key, value] : cpu.items()) EXPECT_TRUE(gpu.contains(key)) << key;
  EXPECT_EQ(gpu["device"], "gpu");
  EXPECT_EQ(cpu["device"], "cpu");
  EXPECT_FALSE(gpu["machine"]["gpu"]["name"].get<std::string>().empty());
  EXPECT_GT(gpu["tokens_per_s"].get<double>(), 0);
}

// Host -> GPU offloading: a tiny Mixtral of 4 layers x 8 experts, experts in pinned host memory.
struct OffloadedRun {
  std::vector<float> logits;  // every pass's, concatenated
  offload::OffloadStats stats;
};

ExecutorConfig OffloadModel() {
  ExecutorConfig c = testing::TinyMixtral();
  c.num_layers = 4;
  c.num_experts = 8;
  return c;
}

// A prefill of 6 tokens, then 8 decode steps, for two sequences.
std::vector<float> DecodeLogits(ForwardModel& model) {
  std::vector<float> all, logits;
  KvCache a = model.NewCache(32), b = model.NewCache(32);
  std::vector<SequenceInput> batch = {{&a, {1, 5, 9, 2, 30, 7}}, {&b, {4, 4, 12, 0, 3, 21}}};
  for (int step = 0; step < 9; ++step) {
    model.Forward(batch, {LogitRows::kLastPerSequence, nullptr, nullptr, "test"}, logits);
    all.insert(all.end(), logits.begin(), logits.end());
    for (size_t s = 0; s < batch.size(); ++s)
      batch[s].tokens = {static_cast<int32_t>(kernels::ArgMax(logits.data() + s * 37, 37))};
  }
  return all;
}

OffloadedRun RunOffloaded(const ModelWeights& weights, kernels::ThreadPool& pool,
                          offload::OffloadOptions options) {
  offload::OffloadRuntime* runtime = nullptr;
  const auto model = MakeOffloadedGpuTransformer(weights, 0, options, pool, &runtime);
  OffloadedRun run;
  run.logits = DecodeLogits(*model);
  run.stats = runtime->Stats();
  return run;
}

offload::OffloadOptions OffloadOptionsFor(const std::string& policy, int64_t experts_of_memory) {
  offload::OffloadOptions options;
  options.policy = policy;
  // The GPU tier's expert: gate_up [80][48] and down [48][40] bf16, no padding at these widths.
  options.expert_memory_bytes = experts_of_memory * (2 * 40 * 48 + 48 * 40) * 2;
  options.seed = 3;
  return options;
}

// Experts copied to the device run the same GEMMs on the same bytes: every logit is the in-memory
// GPU model's, bit for bit, whatever the policy keeps or evicts.
TEST(GpuOffload, CopiedExpertsGiveTheInMemoryLogitsBitForBit) {
  SKIP_WITHOUT_GPU();
  kernels::ThreadPool pool(2);
  const ModelWeights weights = MakeSyntheticWeights(OffloadModel(), 17, pool);
  const std::vector<float> in_memory = DecodeLogits(*MakeGpuTransformer(weights, 0));
  struct Case {
    std::string policy;
    int64_t experts;
    std::optional<int64_t> cache_per_layer, prefetch;
  };
  for (const Case& c :
       {Case{"on-demand", 5, std::nullopt, std::nullopt}, Case{"lru-prefetch", 13, 2, 1},
        Case{"stream-all", 9, std::nullopt, std::nullopt},
        Case{"fmoe", 10, std::nullopt, std::nullopt}}) {
    offload::OffloadOptions options = OffloadOptionsFor(c.policy, c.experts);
    options.policy_options.cache_per_layer = c.cache_per_layer;
    options.policy_options.prefetch = c.prefetch;
    const OffloadedRun run = RunOffloaded(weights, pool, options);
    ASSERT_EQ(run.logits.size(), in_memory.size());
    for (size_t i = 0; i < in_memory.size(); ++i)
      ASSERT_EQ(run.logits[i], in_memory[i]) << c.policy << " logit " << i;
    EXPECT_GT(run.stats.reads, 0) << c.policy;  // the cache is smaller than the model's experts
    EXPECT_EQ(run.stats.storage_runs, 0) << c.policy;
    EXPECT_GE(run.stats.stall_s, 0) << c.policy;
  }
}

// Fiddler with a latency model that makes the CPU win runs every expert not placed on the device
// with the CPU kernels (results within the CPU/GPU rounding); one that makes copies win copies
// them (bit for bit). The measured model is reported.
TEST(GpuOffload, FiddlerRunsExpertsOnTheCpuWhenItsLatencyModelSaysSo) {
  SKIP_WITHOUT_GPU();
  kernels::ThreadPool pool(2);
  const ModelWeights weights = MakeSyntheticWeights(OffloadModel(), 17, pool);
  const std::vector<float> in_memory = DecodeLogits(*MakeGpuTransformer(weights, 0));
  offload::OffloadOptions cpu_wins = OffloadOptionsFor("fiddler", 5);
  cpu_wins.fiddler_latency = model::FiddlerLatencyModel{0, 1e-9, 1e-3, 1e-3};
  const OffloadedRun on_cpu = RunOffloaded(weights, pool, cpu_wins);
  EXPECT_GT(on_cpu.stats.storage_runs, 0);
  EXPECT_EQ(on_cpu.stats.demand_fetches + on_cpu.stats.transient_fetches, 0);
  EXPECT_LT(
      RelativeMaxError(on_cpu.logits, std::vector<double>(in_memory.begin(), in_memory.end())),
      1e-2);
  offload::OffloadOptions copies_win = OffloadOptionsFor("fiddler", 5);
  copies_win.fiddler_latency = model::FiddlerLatencyModel{1, 1, 1e-6, 1e-6};
  const OffloadedRun copied = RunOffloaded(weights, pool, copies_win);
  EXPECT_EQ(copied.stats.storage_runs, 0);
  EXPECT_GT(copied.stats.transient_fetches, 0);
  EXPECT_EQ(copied.logits, in_memory);
  const OffloadedRun measured = RunOffloaded(weights, pool, OffloadOptionsFor("fiddler", 5));
  ASSERT_TRUE(measured.stats.fiddler_latency.has_value());
  EXPECT_GT(measured.stats.fiddler_latency->transfer_s, 0);
  EXPECT_GT(measured.stats.fiddler_latency->gpu_s, 0);
  EXPECT_LT(
      RelativeMaxError(measured.logits, std::vector<double>(in_memory.begin(), in_memory.end())),
      1e-2);
}

TEST(GpuOffload, RunReportHasTheOffloadObject) {
  SKIP_WITHOUT_GPU();
  RunRequest request = testing::SmallRunRequest();
  request.device = "gpu";
  offload::OffloadOptions options;
  options.policy = "lru-prefetch";
  options.expert_memory_bytes = 10 * 3 * 256 * 512 * 2;  // 10 of the 16 experts
  request.offload = options;
  const nlohmann::json report =
      RunResultToJson(RunWorkload(request, model::PresetStore::Default()));
  EXPECT_EQ(report["device"], "gpu");
  EXPECT_EQ(report["offload"]["policy"], "lru-prefetch");
  EXPECT_TRUE(report["offload"].contains("hit_rate"));
  EXPECT_GT(report["offload"]["reads"].get<int64_t>(), 0);
}

// Runs everywhere: what --device gpu refuses before touching a GPU.
TEST(GpuRequest, RefusesWhatTheGpuBackendCannotRun) {
  RunRequest request;
  request.device = "tpu";
  EXPECT_THROW(request.Validate(), base::Error);
  request.device = "gpu";
  request.attention_bits = 8;
  try {
    request.Validate();
    FAIL() << "--attention-bits 8 was accepted on the GPU";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--attention-bits"), std::string::npos);
  }
  request.attention_bits = 16;
  request.expert_bits = 4;
  EXPECT_NO_THROW(request.Validate());  // quantized routed experts run on the GPU
  request.offload = offload::OffloadOptions{};
  request.offload->policy = "on-demand";
  request.offload->expert_memory_bytes = int64_t{1} << 30;
  try {
    request.Validate();
    FAIL() << "--expert-bits 4 was accepted with --offload on the GPU";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--expert-bits must be 16"), std::string::npos)
        << e.what();
  }
  request.expert_bits = 16;
  request.offload.reset();
  EXPECT_NO_THROW(request.Validate());
}

TEST(GpuRequest, WithoutAGpuTheErrorSaysWhy) {
  if (GpuUnavailableReason(0).empty()) GTEST_SKIP() << "this machine has a GPU";
  kernels::ThreadPool pool(1);
  const ModelWeights weights = MakeSyntheticWeights(testing::TinyLlama(), 1, pool);
  try {
    MakeGpuTransformer(weights, 0);
    FAIL() << "no error without a GPU";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--device gpu: "), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moelab::executor
