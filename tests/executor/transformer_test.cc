#include "executor/transformer.h"

#include <sys/resource.h>

#include <cmath>

#include <gtest/gtest.h>

#include "base/error.h"
#include "tests/executor/reference_model.h"
#include "tests/executor/tiny_models.h"

namespace moelab::executor {
namespace {

std::vector<float> ForwardAll(Transformer& model, KvCache& cache,
                              const std::vector<int32_t>& tokens,
                              LogitRows rows = LogitRows::kAll) {
  std::vector<SequenceInput> batch = {{&cache, tokens}};
  std::vector<float> logits;
  model.Forward(batch, {rows, nullptr, nullptr, "test"}, logits);
  return logits;
}

class EveryTinyModel : public ::testing::TestWithParam<ExecutorConfig> {};

TEST_P(EveryTinyModel, ForwardMatchesPlainReference) {
  kernels::ThreadPool pool(2);
  const ModelWeights weights = MakeSyntheticWeights(GetParam(), 11, pool);
  Transformer model(weights, pool);
  const std::vector<int32_t> tokens = {3, 17, 0, 29, 8, 8, 36, 1, 22, 5, 14};
  KvCache cache(weights.config, 64);
  const std::vector<float> logits = ForwardAll(model, cache, tokens);
  const auto reference = testing::ReferenceLogits(weights, tokens);
  const int64_t vocab = weights.config.vocab_size;
  double worst = 0, scale = 0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    for (int64_t v = 0; v < vocab; ++v) {
      worst = std::max(worst, std::fabs(logits[t * vocab + v] - reference[t][v]));
      scale = std::max(scale, std::fabs(reference[t][v]));
    }
  }
  // Only accumulation order and bf16 rounding of slightly different inputs separate the two.
  EXPECT_LT(worst, 5e-3 * scale) << "max |logit difference| " << worst << " at logit scale "
                                 << scale;
  EXPECT_GT(scale, 0.1);
}

TEST_P(EveryTinyModel, IncrementalDecodeEqualsFullRecomputation) {
  kernels::ThreadPool pool(2);
  const ModelWeights weights = MakeSyntheticWeights(GetParam(), 5, pool);
  Transformer model(weights, pool);
  const std::vector<int32_t> tokens = {1, 2, 3, 30, 4, 5, 6, 7, 9, 10};
  KvCache full_cache(weights.config, 32);
  const std::vector<float> full = ForwardAll(model, full_cache, tokens);
  KvCache cache(weights.config, 32);
  std::vector<float> incremental = ForwardAll(model, cache, {tokens.begin(), tokens.begin() + 4});
  for (size_t t = 4; t < tokens.size(); ++t) {
    const std::vector<float> step = ForwardAll(model, cache, {tokens[t]});
    incremental.insert(incremental.end(), step.begin(), step.end());
  }
  ASSERT_EQ(full.size(), incremental.size());
  for (size_t i = 0; i < full.size(); ++i)
    ASSERT_EQ(full[i], incremental[i]) << "logit " << i;  // bit for bit
}

TEST_P(EveryTinyModel, SequencesDoNotAffectEachOther) {
  kernels::ThreadPool pool(3);
  const ModelWeights weights = MakeSyntheticWeights(GetParam(), 8, pool);
  Transformer model(weights, pool);
  const std::vector<int32_t> a = {4, 5, 6}, b = {7, 8, 9, 10, 11};
  KvCache alone_cache(weights.config, 16), a_cache(weights.config, 16), b_cache(weights.config, 16);
  const std::vector<float> alone = ForwardAll(model, alone_cache, b);
  std::vector<SequenceInput> batch = {{&a_cache, a}, {&b_cache, b}};
  std::vector<float> together;
  model.Forward(batch, {LogitRows::kAll, nullptr, nullptr, "test"}, together);
  const int64_t vocab = weights.config.vocab_size;
  for (size_t i = 0; i < alone.size(); ++i) ASSERT_EQ(alone[i], together[3 * vocab + i]);
}

TEST_P(EveryTinyModel, TruncatedCacheRecomputesTheSame) {
  kernels::ThreadPool pool(2);
  const ModelWeights weights = MakeSyntheticWeights(GetParam(), 9, pool);
  Transformer model(weights, pool);
  KvCache cache(weights.config, 32);
  ForwardAll(model, cache, {1, 2, 3});
  const std::vector<float> first = ForwardAll(model, cache, {4, 5});
  cache.Truncate(3);
  ForwardAll(model, cache, {9, 9, 9});  // a rejected continuation
  cache.Truncate(3);
  EXPECT_EQ(first, ForwardAll(model, cache, {4, 5}));
  EXPECT_THROW(cache.Truncate(10), base::Error);
}

TEST_P(EveryTinyModel, ReservedPassesGiveTheSameBits) {
  kernels::ThreadPool pool(2);
  const ModelWeights weights = MakeSyntheticWeights(GetParam(), 12, pool);
  const std::vector<int32_t> tokens = {3, 17, 0, 29, 8, 8, 36, 1, 22, 5, 14, 2, 9};
  Transformer plain(weights, pool), reserved(weights, pool);
  reserved.ReservePass(static_cast<int64_t>(tokens.size()));
  KvCache plain_cache(weights.config, 32), reserved_cache(weights.config, 32);
  EXPECT_EQ(ForwardAll(plain, plain_cache, tokens), ForwardAll(reserved, reserved_cache, tokens));
  EXPECT_EQ(ForwardAll(plain, plain_cache, {4}), ForwardAll(reserved, reserved_cache, {4}));
  EXPECT_THROW(reserved.ReservePass(0), base::Error);
}

INSTANTIATE_TEST_SUITE_P(
    Tiny, EveryTinyModel,
    ::testing::Values(testing::TinyMixtral(), testing::TinyQwenMoe(), testing::TinyQwen3Moe(),
                      testing::TinyLlama(),
                      testing::Quantized(testing::TinyMixtral(), kernels::WeightFormat::kQ4_0,
                                         kernels::WeightFormat::kQ8_0),
                      testing::Quantized(testing::TinyQwenMoe(), kernels::WeightFormat::kQ8_0,
                                         kernels::WeightFormat::kQ4_0)),
    testing::TinyModelName());

int64_t MinorPageFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Page faults of one 512-token prefill (the pool's threads included), scratch reserved or not.
int64_t PrefillPageFaults(const ModelWeights& weights, kernels::ThreadPool& pool, bool reserve) {
  Transformer model(weights, pool);
  std::vector<int32_t> tokens(512);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i % 37);
  if (reserve) model.ReservePass(static_cast<int64_t>(tokens.size()));
  KvCache cache(weights.config, 512);
  std::vector<float> logits;
  logits.reserve(static_cast<size_t>(weights.config.vocab_size));
  std::vector<SequenceInput> batch = {{&cache, tokens}};
  const int64_t before = MinorPageFaults();
  model.Forward(batch, {LogitRows::kLastPerSequence, nullptr, nullptr, "prefill"}, logits);
  return MinorPageFaults() - before;
}

// ReservePass makes a pass's scratch resident beforehand: a prefill's activations (about 9 MB
// here) otherwise fault in page by page inside the pass's time.
TEST(Transformer, ReservedPassTakesNoFirstTouchPageFaults) {
  kernels::ThreadPool pool(2);
  ExecutorConfig config = testing::TinyMixtral();
  config.hidden_size = 256;
  config.head_dim = 64;
  config.expert_intermediate_size = 512;
  config.max_positions = 512;
  const ModelWeights weights = MakeSyntheticWeights(config, 4, pool);
  const int64_t reserved = PrefillPageFaults(weights, pool, true);
  const int64_t unreserved = PrefillPageFaults(weights, pool, false);
  EXPECT_GT(unreserved, 500) << "the unreserved prefill should fault its scratch in";
  EXPECT_LT(reserved * 4, unreserved)
      << reserved << " page faults with the scratch reserved, " << unreserved << " without";
}

TEST(Transformer, RecordsAndReplaysRouting) {
  kernels::ThreadPool pool(2);
  const ModelWeights weights = MakeSyntheticWeights(testing::TinyMixtral(), 3, pool);
  Transformer model(weights, pool);
  routing::RoutingTrace recorded;
  recorded.num_layers = 2;
  recorded.num_experts = 6;
  recorded.top_k = 2;
  KvCache cache(weights.config, 32);
  std::vector<SequenceInput> batch = {{&cache, {1, 2, 3, 4}}};
  std::vector<float> logits;
  model.Forward(batch, {LogitRows::kAll, nullptr, &recorded, "prefill"}, logits);
  ASSERT_EQ(recorded.steps.size(), 1u);
  EXPECT_EQ(recorded.steps[0].tokens, 4);
  EXPECT_NO_THROW(recorded.Validate("recorded"));

  // A fresh model forced to the recorded routing makes the same decisions and the same logits.
  Transformer replay(weights, pool);
  auto source = routing::MakeTraceRouting(recorded, 2, 6, 2);
  routing::RoutingTrace again = recorded;
  again.steps.clear();
  KvCache cache2(weights.config, 32);
  std::vector<SequenceInput> batch2 = {{&cache2, {1, 2, 3, 4}}};
  std::vector<float> logits2;
  replay.Forward(batch2, {LogitRows::kAll, source.get(), &again, "prefill"}, logits2);
  EXPECT_EQ(again.steps[0].experts, recorded.steps[0].experts);
  EXPECT_EQ(logits, logits2);

  // Uniform routing changes the decisions.
  auto uniform = routing::MakeUniformRouting(2, 6, 2, 77);
  KvCache cache3(weights.config, 32);
  std::vector<SequenceInput> batch3 = {{&cache3, {1, 2, 3, 4}}};
  routing::RoutingTrace forced = recorded;
  forced.steps.clear();
  Transformer forced_model(weights, pool);
  forced_model.Forward(batch3, {LogitRows::kAll, uniform.get(), &forced, "prefill"}, logits2);
  EXPECT_NE(forced.steps[0].experts, recorded.steps[0].experts);
}

TEST(Transformer, RefusesTokensOutsideTheVocabulary) {
  kernels::ThreadPool pool(1);
  const ModelWeights weights = MakeSyntheticWeights(testing::TinyLlama(), 3, pool);
  Transformer model(weights, pool);
  KvCache cache(weights.config, 8);
  EXPECT_THROW(ForwardAll(model, cache, {37}), base::Error);
  EXPECT_THROW(ForwardAll(model, cache, {1, 2, 3, 4, 5, 6, 7, 8, 9}),
               base::Error);  // over capacity
}

}  // namespace
}  // namespace moelab::executor
