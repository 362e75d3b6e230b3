// The grid a profile measures, derived from the model's shape: which points, their sizes, the
// ridge points and the weight-cycling rule.
#include "profiler/profile_grid.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "executor/run_workload.h"
#include "executor/weights.h"
#include "kernels/weight_matrix.h"
#include "base/error.h"
#include "model/preset_store.h"
#include "tests/support/test_paths.h"

namespace moelab::profiler {
namespace {

// The effective cache the grids below are placed against (EffectiveCacheBytes' floor).
constexpr int64_t kCacheBytes = kMinEffectiveCacheBytes;

executor::ExecutorConfig DefaultTarget() {
  return executor::ExecutorConfigFromSpec(
      model::PresetStore(testing::PresetDir()).LoadModel("mixtral-8x7b"),
      model::DefaultTargetShape());
}

executor::ExecutorConfig DefaultDraft(int64_t vocab) {
  model::ShapeOverrides shape = model::DefaultDraftShape();
  shape.vocab = vocab;
  return executor::ExecutorConfigFromSpec(
      model::PresetStore(testing::PresetDir()).LoadModel("llama-3.2-1b"), shape);
}

bool Contains(const std::vector<int64_t>& values, int64_t v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

std::map<std::string, int> CountByFamily(const std::vector<GridPoint>& points) {
  std::map<std::string, int> counts;
  for (const GridPoint& p : points) ++counts[ToString(p.family) + " " + p.device];
  return counts;
}

TEST(GridSpec, BothGridsSampleBothSidesOfEveryKernelSeam) {
  const std::vector<int64_t> seams = kernels::MatmulTokenSeams();
  ASSERT_FALSE(seams.empty());
  EXPECT_TRUE(std::is_sorted(seams.begin(), seams.end()));
  for (const GridSpec& grid : {GridSpec::Quick(), GridSpec::Full()}) {
    for (const int64_t seam : seams) {
      for (const int64_t t : {seam, seam + 1}) {
        EXPECT_TRUE(Contains(grid.expert_tokens, t)) << t;
        EXPECT_TRUE(Contains(grid.matmul_tokens, t)) << t;
      }
    }
    EXPECT_TRUE(std::is_sorted(grid.expert_tokens.begin(), grid.expert_tokens.end()));
    EXPECT_TRUE(std::adjacent_find(grid.matmul_tokens.begin(), grid.matmul_tokens.end()) ==
                grid.matmul_tokens.end());
  }
}

TEST(GridSpec, FullHasEveryPowerOfTwoTheHalfOctaveBendsAndEveryCountTo24) {
  const GridSpec full = GridSpec::Full();
  for (int64_t t = 1; t <= 4096; t *= 2) EXPECT_TRUE(Contains(full.expert_tokens, t)) << t;
  for (int64_t t : {3, 5, 6, 7, 12, 24, 48, 96, 3072})
    EXPECT_TRUE(Contains(full.expert_tokens, t)) << t;
  EXPECT_TRUE(std::is_sorted(full.expert_tokens.begin(), full.expert_tokens.end()));
  for (int64_t t = 1; t <= 24; ++t) EXPECT_TRUE(Contains(full.expert_tokens, t)) << t;
  // 1..24, 32 .. 4096 (8 powers of two), 48 .. 3072 (7 half-octaves), 25 beside the tiling seam.
  EXPECT_EQ(full.expert_tokens.size(), 40u);
  EXPECT_EQ(full.expert_tokens.front(), 1);
  EXPECT_EQ(full.expert_tokens.back(), 4096);
  EXPECT_EQ(full.ridge_points, 9);
  EXPECT_EQ(full.repetitions, 5);
  EXPECT_EQ(full.decode_contexts,
            (std::vector<int64_t>{16, 32, 64, 128, 256, 512, 1024, 2048, 4096}));
  EXPECT_EQ(full.decode_batches, (std::vector<int64_t>{1, 2, 4, 8, 16, 32}));
  EXPECT_EQ(full.prefill_tokens.front(), 16);
  EXPECT_EQ(full.prefill_tokens.back(), 2048);
}

// fit latency interpolates from 5 distinct token counts (fit/latency_fit.cc); with the draft's
// three batches it chose between smooth forms by leave-one-out over three points and priced the
// draft's forward at context 128 as a constant, whatever the batch.
TEST(GridSpec, TheDraftForwardHasBatchesEnoughToInterpolate) {
  for (const GridSpec& spec : {GridSpec::Quick(), GridSpec::Full()}) {
    EXPECT_GE(spec.draft_batches.size(), 5u);
    for (int64_t batch : {1, 4, 16}) EXPECT_TRUE(Contains(spec.draft_batches, batch)) << batch;
  }
}

// The same for one-token decode attention and the verify pass's attention, per context: with
// batches 1, 4 and 32 the quick profile's context 16 went constant in 9 of 13 validations.
TEST(GridSpec, AttentionHasBatchesEnoughToInterpolate) {
  for (const GridSpec& spec : {GridSpec::Quick(), GridSpec::Full()}) {
    EXPECT_GE(spec.decode_batches.size(), 5u);
    EXPECT_GE(spec.verify_batches.size(), 5u);
    for (int64_t batch : {1, 4, 32}) EXPECT_TRUE(Contains(spec.decode_batches, batch)) << batch;
    for (int64_t batch : {1, 4, 16}) EXPECT_TRUE(Contains(spec.verify_batches, batch)) << batch;
  }
}

TEST(GridSpec, QuickIsASmallerCheaperSubsetWithTheBends) {
  const GridSpec quick = GridSpec::Quick();
  const GridSpec full = GridSpec::Full();
  EXPECT_LT(quick.expert_tokens.size(), full.expert_tokens.size());
  EXPECT_LT(quick.matmul_tokens.size(), full.matmul_tokens.size());
  EXPECT_LT(quick.decode_contexts.size() * quick.decode_batches.size(),
            full.decode_contexts.size() * full.decode_batches.size());
  for (int64_t t : {1, 3, 6, 12, 24, 48, 4096}) EXPECT_TRUE(Contains(quick.expert_tokens, t)) << t;
  for (int64_t t : quick.expert_tokens) EXPECT_TRUE(Contains(full.expert_tokens, t)) << t;
  EXPECT_EQ(quick.repetitions, 3);
  EXPECT_LT(quick.min_time_s, full.min_time_s);
  EXPECT_NO_THROW(quick.Validate());
  EXPECT_NO_THROW(full.Validate());
}

TEST(GridSpec, ValidateNamesTheField) {
  GridSpec s = GridSpec::Quick();
  s.repetitions = 0;
  EXPECT_THROW(s.Validate(), base::Error);
  s = GridSpec::Quick();
  s.expert_tokens.push_back(0);
  try {
    s.Validate();
    FAIL() << "expected an error";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("expert_tokens"), std::string::npos) << e.what();
  }
  s = GridSpec::Quick();
  s.ridge_points = 2;
  EXPECT_THROW(s.Validate(), base::Error);
  s = GridSpec::Quick();
  s.min_time_s = 0;
  EXPECT_THROW(s.Validate(), base::Error);
  s = GridSpec::Quick();
  s.expert_reader_store_bytes = -1;
  try {
    s.Validate();
    FAIL() << "expected an error";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("expert_reader_store_bytes"), std::string::npos)
        << e.what();
  }
}

TEST(ProfileGrid, QuickGridOfTheDefaultModelHasEveryCpuFamily) {
  const executor::ExecutorConfig target = DefaultTarget();
  const executor::ExecutorConfig draft = DefaultDraft(target.vocab_size);
  const std::vector<GridPoint> points =
      MakeProfileGrid(target, draft, GridSpec::Quick(), kCacheBytes, -1);
  const std::map<std::string, int> counts = CountByFamily(points);
  // Every count to 24, 32, 48, 64, 256, 1024 and 4096, and 25 beside the tiling seam.
  EXPECT_EQ(counts.at("expert_ffn cpu"), 31);
  EXPECT_EQ(counts.at("attention_decode cpu"), 30);  // 5 contexts x 6 batches
  EXPECT_EQ(counts.at("attention_prefill cpu"), 7);  // 16 .. 1024
  EXPECT_EQ(counts.at("attention_verify cpu"), 30);  // 3 queries x 2 contexts x 5 batches
  EXPECT_EQ(counts.at("router cpu"), 31);            // the expert FFN's token counts
  EXPECT_EQ(counts.at("lm_head cpu"), 31);
  EXPECT_EQ(counts.at("dense_ffn cpu"), 31);
  EXPECT_EQ(counts.at("draft_decode cpu"), 10);       // 2 contexts x 5 batches
  EXPECT_EQ(counts.at("draft_decode_warm cpu"), 10);  // the same, a pass after one of its own
  EXPECT_EQ(counts.at("memcpy_host cpu"), 3);  // 64 KiB, 1 MiB, the expert: 3 sizes for a fit
  EXPECT_EQ(counts.at("storage_read cpu"), 3);
  EXPECT_EQ(counts.at("expert_load cpu"), 3);
  EXPECT_EQ(counts.at("expert_reader cpu"), 2);  // the executor's reader alone, then beside compute
  EXPECT_EQ(counts.at("norms_residual cpu"), 31);  // the matmuls' token rows
  // 5 token counts x working sets of 1, 2, 3, 4, 6 and 25 (DRAM) of the 22 MB experts.
  EXPECT_EQ(counts.at("expert_ffn_working_set cpu"), 30);
  EXPECT_EQ(counts.at("beam_selection cpu"), 5);  // 1, 2, 4, 8 and 16 beams
  EXPECT_EQ(points.size(), 288u);                 // + 3 ridge points at run time = 291
  std::vector<GridPoint> reader;
  for (const GridPoint& p : points) {
    if (p.family == OperatorFamily::kExpertReader) reader.push_back(p);
  }
  ASSERT_EQ(reader.size(), 2u);
  EXPECT_FALSE(reader[0].beside_compute);
  EXPECT_TRUE(reader[1].beside_compute);
  for (const GridPoint& p : reader) {
    EXPECT_EQ(p.bytes, ExpertBytes(target));
    const nlohmann::json shape = ShapeOf(p, target, draft);
    EXPECT_EQ(shape["bytes"], p.bytes);
    EXPECT_EQ(shape["beside_compute"], p.beside_compute);
    EXPECT_EQ(shape["reads_in_flight"], 2);  // the executor's default (--offload-readers)
    EXPECT_EQ(shape["reader"], "threads");
  }
  EXPECT_EQ(reader[1].Label(),
            "expert_reader cpu bytes=" + std::to_string(ExpertBytes(target)) + " beside_compute");
  // A grid without a store size skips the family.
  GridSpec without = GridSpec::Quick();
  without.expert_reader_store_bytes = 0;
  EXPECT_EQ(CountByFamily(MakeProfileGrid(target, draft, without, kCacheBytes, -1))
                .count("expert_reader cpu"),
            0u);
  for (const GridPoint& p : points) {
    EXPECT_EQ(p.device, "cpu");
    EXPECT_GE(p.tokens, 1);
    if (IsTransfer(p.family)) {
      EXPECT_EQ(p.tokens, 1);
      EXPECT_EQ(p.bytes % 4096, 0) << p.bytes;
    }
  }
}

TEST(ProfileGrid, WorkingSetsAreWholeExpertsFromTheCacheToItsDramRegime) {
  const executor::ExecutorConfig target = DefaultTarget();
  const executor::ExecutorConfig draft = DefaultDraft(target.vocab_size);
  const int64_t expert = ExpertBytes(target);  // 22 MB
  GridSpec spec = GridSpec::Quick();
  // 256 MiB / 16, 8, 6, 4, 3, 2 round to 1, 2, 2, 3, 4 and 6 experts; DRAM: CyclingBlocks = 25.
  EXPECT_EQ(
      WorkingSetBytes(spec, expert, kCacheBytes),
      (std::vector<int64_t>{expert, 2 * expert, 3 * expert, 4 * expert, 6 * expert, 25 * expert}));
  EXPECT_EQ(25 * expert, CyclingBlocks(expert, kCacheBytes) * expert);
  // An expert larger than the cache: one expert, then the DRAM regime; duplicates merge.
  EXPECT_EQ(WorkingSetBytes(spec, int64_t{300} << 20, kCacheBytes),
            (std::vector<int64_t>{int64_t{300} << 20, int64_t{600} << 20}));
  spec.working_set_cache_divisors.clear();
  EXPECT_TRUE(WorkingSetBytes(spec, expert, kCacheBytes).empty());
  for (const GridPoint& p : MakeProfileGrid(target, draft, spec, kCacheBytes, -1))
    EXPECT_NE(p.family, OperatorFamily::kExpertFfnWorkingSet);

  // Each point's shape names its working set, so each working set is one curve over tokens.
  const GridPoint point{OperatorFamily::kExpertFfnWorkingSet, "cpu", 4, 0, 3 * expert};
  EXPECT_EQ(point.Label(),
            "expert_ffn_working_set cpu working_set=" + std::to_string(3 * expert) + " tokens=4");
  const nlohmann::json shape = ShapeOf(point, target, draft);
  EXPECT_EQ(shape["working_set_bytes"], 3 * expert);
  EXPECT_EQ(shape["hidden"], target.hidden_size);
  EXPECT_DOUBLE_EQ(WorkOf(point, target, draft).bytes, static_cast<double>(expert));

  spec = GridSpec::Quick();
  spec.working_set_tokens = {1, 2, 4, 16};  // too few for an interpolated curve
  EXPECT_THROW(spec.Validate(), base::Error);
  spec.working_set_tokens = {1, 2, 4, 16, 0};
  EXPECT_THROW(spec.Validate(), base::Error);
}

TEST(ProfileGrid, SizesComeFromTheModelShape) {
  const executor::ExecutorConfig target = DefaultTarget();
  const executor::ExecutorConfig draft = DefaultDraft(target.vocab_size);
  EXPECT_EQ(target.hidden_size, 1024);
  EXPECT_EQ(target.expert_intermediate_size, 3584);
  const int64_t expert_bytes = 3 * 1024 * 3584 * 2;
  EXPECT_EQ(ExpertBytes(target), expert_bytes);
  const std::vector<int64_t> sizes = TransferBytes(GridSpec::Full(), expert_bytes);
  EXPECT_EQ(sizes, (std::vector<int64_t>{4096, 65536, 1 << 20, expert_bytes / 16, expert_bytes / 4,
                                         expert_bytes}));

  // A matmul's shape names its kernel's token tiling where the kernel computes more rows than
  // tokens (kernels/weight_matrix.h: AVX512-BF16 bf16), so the fit prices the rows computed.
  const kernels::TokenTiling tiling = kernels::MatmulTokenTiling(kernels::WeightFormat::kBf16);
  const auto without_tiling = [&](nlohmann::json shape) {
    EXPECT_EQ(shape.contains("token_tiling"), !tiling.exact()) << shape.dump();
    if (!tiling.exact()) {
      EXPECT_EQ(shape["token_tiling"], (nlohmann::json{{"exact_up_to", tiling.exact_up_to},
                                                       {"multiple", tiling.multiple}}));
    }
    shape.erase("token_tiling");
    return shape;
  };
  const GridPoint expert{OperatorFamily::kExpertFfn, "cpu", 16, 0, 0};
  EXPECT_EQ(without_tiling(ShapeOf(expert, target, draft)),
            (nlohmann::json{{"hidden", 1024}, {"intermediate", 3584}}));
  EXPECT_DOUBLE_EQ(WorkOf(expert, target, draft).bytes, static_cast<double>(expert_bytes));
  EXPECT_DOUBLE_EQ(WorkOf(expert, target, draft).flops, 6.0 * 16 * 1024 * 3584);

  const GridPoint dense{OperatorFamily::kDenseFfn, "cpu", 4, 0, 0};
  EXPECT_EQ(without_tiling(ShapeOf(dense, target, draft)),
            (nlohmann::json{{"hidden", 512}, {"intermediate", 1536}}));
  const GridPoint router{OperatorFamily::kRouter, "cpu", 8, 0, 0};
  EXPECT_EQ(without_tiling(ShapeOf(router, target, draft)),
            (nlohmann::json{{"hidden", 1024}, {"experts", 8}}));
  EXPECT_DOUBLE_EQ(WorkOf(router, target, draft).flops, 2.0 * 8 * 1024 * 8);
  const GridPoint lm_head{OperatorFamily::kLmHead, "cpu", 2, 0, 0};
  EXPECT_EQ(ShapeOf(lm_head, target, draft)["vocab"], target.vocab_size);

  const GridPoint decode{OperatorFamily::kAttentionDecode, "cpu", 4, 1024, 0};
  const nlohmann::json shape = ShapeOf(decode, target, draft);
  EXPECT_EQ(shape["context"], 1024);
  EXPECT_EQ(shape["heads"], 16);
  EXPECT_EQ(shape["kv_heads"], 4);
  EXPECT_EQ(shape["head_dim"], 64);
  // Weights (qkv 1024 x 1536 and output 1024 x 1024, bf16) plus 4 x 1025 positions of fp32 K and V.
  const double weights = 2.0 * (1024.0 * 1536.0 + 1024.0 * 1024.0);
  EXPECT_DOUBLE_EQ(WorkOf(decode, target, draft).bytes, weights + 4.0 * 1025 * 256 * 8);
  EXPECT_EQ(decode.Label(), "attention_decode cpu context=1024 batch=4");
  EXPECT_EQ(expert.Label(), "expert_ffn cpu tokens=16");
}

TEST(ProfileGrid, VerifyPointsReadEachSequencesCacheOnce) {
  const executor::ExecutorConfig target = DefaultTarget();
  const executor::ExecutorConfig draft = DefaultDraft(target.vocab_size);
  const GridPoint verify{OperatorFamily::kAttentionVerify, "cpu", 4, 1024, 0, 3};
  const nlohmann::json shape = ShapeOf(verify, target, draft);
  EXPECT_EQ(shape["context"], 1024);
  EXPECT_EQ(shape["queries_per_sequence"], 3);
  EXPECT_EQ(shape["heads"], 16);
  EXPECT_EQ(verify.Label(), "attention_verify cpu context=1024 queries=3 batch=4");
  // Weights once, and each of the 4 sequences' K/V up to the last query (1024 + 3 positions) once:
  // not 3 x 4 decode reads.
  const double weights = 2.0 * (1024.0 * 1536.0 + 1024.0 * 1024.0);
  EXPECT_DOUBLE_EQ(WorkOf(verify, target, draft).bytes, weights + 4.0 * 1027 * 256 * 8);
  // 12 projected rows; scores over 1025 + 1026 + 1027 positions per head of each sequence.
  EXPECT_DOUBLE_EQ(WorkOf(verify, target, draft).flops,
                   12.0 * weights + 4.0 * 16 * 4 * 64 * (1025.0 + 1026.0 + 1027.0));
  // One query per sequence is exactly decode's work.
  const GridPoint one{OperatorFamily::kAttentionVerify, "cpu", 4, 1024, 0, 1};
  const GridPoint decode{OperatorFamily::kAttentionDecode, "cpu", 4, 1024, 0};
  EXPECT_DOUBLE_EQ(WorkOf(one, target, draft).bytes, WorkOf(decode, target, draft).bytes);
  EXPECT_DOUBLE_EQ(WorkOf(one, target, draft).flops, WorkOf(decode, target, draft).flops);

  GridSpec spec = GridSpec::Quick();
  spec.verify_queries = {1, 3};
  EXPECT_THROW(spec.Validate(), base::Error);  // one query per sequence is attention_decode
  spec.verify_queries = {3};
  spec.verify_batches = {0};
  EXPECT_THROW(spec.Validate(), base::Error);
  spec = GridSpec::Quick();
  spec.verify_queries.clear();
  EXPECT_EQ(CountByFamily(MakeProfileGrid(target, draft, spec, kCacheBytes, -1))
                .count("attention_verify cpu"),
            0u);
  EXPECT_EQ(GridSpec::Full().verify_queries, (std::vector<int64_t>{2, 3, 5, 9}));
}

TEST(ProfileGrid, ContextsBeyondTheModelAreDroppedAndDenseTargetsHaveNoExperts) {
  executor::ExecutorConfig target = DefaultTarget();
  target.max_positions = 1000;
  const executor::ExecutorConfig draft = DefaultDraft(target.vocab_size);
  std::map<std::string, int> counts =
      CountByFamily(MakeProfileGrid(target, draft, GridSpec::Quick(), kCacheBytes, -1));
  EXPECT_EQ(counts["attention_decode cpu"], 12);  // contexts 16 and 128 only
  EXPECT_EQ(counts["attention_prefill cpu"], 6);  // 16 .. 512
  EXPECT_EQ(counts["attention_verify cpu"], 30);  // contexts 128 and 512 + 5 queries fit in 1000
  target.max_positions = 516;
  counts = CountByFamily(MakeProfileGrid(target, draft, GridSpec::Quick(), kCacheBytes, -1));
  EXPECT_EQ(counts["attention_verify cpu"], 25);  // 512 + 5 positions do not fit

  const executor::ExecutorConfig dense = DefaultDraft(32000);
  counts = CountByFamily(MakeProfileGrid(dense, draft, GridSpec::Quick(), kCacheBytes, -1));
  EXPECT_EQ(counts.count("expert_ffn cpu"), 0u);
  EXPECT_EQ(counts.count("expert_ffn_working_set cpu"), 0u);
  EXPECT_EQ(counts.count("router cpu"), 0u);
  EXPECT_EQ(counts["lm_head cpu"], 31);
}

TEST(ProfileGrid, GpuPointsOnlyWithAGpuAndTheSameComputePointsAsTheCpu) {
  const executor::ExecutorConfig target = DefaultTarget();
  const executor::ExecutorConfig draft = DefaultDraft(target.vocab_size);
  const std::map<std::string, int> without =
      CountByFamily(MakeProfileGrid(target, draft, GridSpec::Quick(), kCacheBytes, -1));
  for (const auto& [name, count] : without) EXPECT_EQ(name.find("cuda"), std::string::npos) << name;
  const std::map<std::string, int> counts =
      CountByFamily(MakeProfileGrid(target, draft, GridSpec::Quick(), kCacheBytes, 0));
  // Every operator of a pass is measured on the GPU; attention and the draft at the CPU's points,
  // the GEMMs at distinct 64-row block counts.
  for (const char* family : {"attention_decode", "attention_prefill", "attention_verify",
                             "draft_decode", "norms_residual", "router", "lm_head"}) {
    EXPECT_EQ(counts.at(std::string(family) + " cuda:0"), counts.at(std::string(family) + " cpu"))
        << family;
  }
  for (const char* family : {"expert_ffn", "dense_ffn"})
    EXPECT_EQ(counts.at(std::string(family) + " cuda:0"), 9) << family;
  EXPECT_EQ(GpuGemmTokens(GridSpec::Quick().expert_tokens),
            (std::vector<int64_t>{1, 64, 128, 192, 256, 512, 1024, 2048, 4096}));
  // The largest count's block count is measured, and at least three distinct block counts.
  EXPECT_EQ(GpuGemmTokens({1, 8, 100}), (std::vector<int64_t>{1, 64, 128, 192}));
  EXPECT_EQ(GpuGemmTokens({1, 8}), (std::vector<int64_t>{1, 64, 128, 192}));
  EXPECT_EQ(GpuGemmTokens({1, 700}), (std::vector<int64_t>{1, 64, 128, 192, 256, 512, 704}));
  EXPECT_TRUE(GpuGemmTokens({}).empty());
  for (const char* name : {"memcpy_h2d_pinned cuda:0", "memcpy_h2d_pageable cuda:0",
                           "memcpy_d2h_pinned cuda:0", "memcpy_d2h_pageable cuda:0"}) {
    EXPECT_EQ(counts.at(name), 3) << name;
  }
  // validate --device gpu: the GPU's points only.
  const std::vector<GridPoint> gpu_only =
      MakeProfileGrid(target, draft, GridSpec::Quick(), kCacheBytes, 0,
                      /*cpu_operators=*/false);
  ASSERT_FALSE(gpu_only.empty());
  for (const GridPoint& p : gpu_only) EXPECT_EQ(p.device, "cuda:0") << p.Label();
  int gpu_points = 0;
  for (const auto& [name, count] : counts)
    gpu_points += name.find("cuda:0") != std::string::npos ? count : 0;
  EXPECT_EQ(static_cast<int>(gpu_only.size()), gpu_points);
}

TEST(ProfileGrid, GpuFfnsAreTiledInTheBackendsBlocksOf64Rows) {
  const executor::ExecutorConfig target = DefaultTarget();
  const executor::ExecutorConfig draft = DefaultDraft(target.vocab_size);
  for (OperatorFamily family : {OperatorFamily::kExpertFfn, OperatorFamily::kDenseFfn}) {
    const nlohmann::json shape = ShapeOf({family, "cuda:0", 3, 0, 0}, target, draft);
    ASSERT_TRUE(shape.contains("token_tiling")) << shape.dump();
    EXPECT_EQ(shape["token_tiling"]["exact_up_to"], 0);
    EXPECT_EQ(shape["token_tiling"]["multiple"], 64);
  }
  // The router's and the LM head's time follows the rows copied back to the host (an H200 run:
  // the LM head at 2 rows 0.09 ms, at 60 rows 1.39 ms); attention and the norms have no GEMM rows.
  for (OperatorFamily family :
       {OperatorFamily::kRouter, OperatorFamily::kLmHead, OperatorFamily::kNormsResidual,
        OperatorFamily::kAttentionPrefill}) {
    EXPECT_FALSE(ShapeOf({family, "cuda:0", 3, 0, 0}, target, draft).contains("token_tiling"))
        << ToString(family);
  }
}

TEST(RidgeTokens, PlacesDistinctPointsAroundTheRidge) {
  const std::vector<int64_t> taken = GridSpec::Quick().expert_tokens;
  const std::vector<int64_t> three = RidgeTokens(40.0, 3, taken);
  EXPECT_EQ(three, (std::vector<int64_t>{30, 40, 60}));
  // Below 25 every count is on the quick grid: the points move up to free counts.
  EXPECT_EQ(RidgeTokens(20.0, 3, taken), (std::vector<int64_t>{26, 27, 30}));
  const std::vector<int64_t> nine = RidgeTokens(100.0, 9, GridSpec::Full().expert_tokens);
  ASSERT_EQ(nine.size(), 9u);
  for (size_t i = 0; i < nine.size(); ++i) {
    EXPECT_FALSE(Contains(GridSpec::Full().expert_tokens, nine[i])) << nine[i];
    if (i > 0) {
      EXPECT_LT(nine[i - 1], nine[i]);
    }
    EXPECT_GE(nine[i], 50);
    EXPECT_LE(nine[i], 210);
  }
  // Collisions move up by one; at the top they wrap, so the count always holds.
  EXPECT_EQ(RidgeTokens(16.0, 3, {12, 16, 24}), (std::vector<int64_t>{13, 17, 25}));
  EXPECT_EQ(RidgeTokens(4096.0, 3, {4096}).size(), 3u);
  EXPECT_EQ(RidgeTokens(40.0, 3, taken), three);  // deterministic
  EXPECT_TRUE(RidgeTokens(20.0, 0, taken).empty());
  EXPECT_THROW(RidgeTokens(20.0, 4, taken), base::Error);
}

TEST(EstimateRidgeTokens, RecoversAPlantedRoofline) {
  // t(T) = max(t0, c T) with t0 = 1 ms and c = 50 us per token: the ridge is at 20 tokens.
  std::mt19937 random(7);
  std::uniform_real_distribution<double> noise(0.98, 1.02);
  std::vector<std::pair<int64_t, double>> samples;
  for (int64_t t : GridSpec::Quick().expert_tokens)
    samples.push_back({t, std::max(1e-3, 50e-6 * t) * noise(random)});
  EXPECT_NEAR(EstimateRidgeTokens(samples), 20.0, 2.0);
  EXPECT_THROW(EstimateRidgeTokens({{4, 1e-3}}), base::Error);
  EXPECT_THROW(EstimateRidgeTokens({{4, 1e-3}, {4, 2e-3}}), base::Error);
  // Never compute-bound in range: the ridge is clamped to the grid.
  EXPECT_LE(EstimateRidgeTokens({{1, 1.0}, {4096, 1e-3}}), 4096.0);
}

TEST(CyclingBlocks, CycleExceedsTwiceTheCache) {
  const int64_t l3 = int64_t{32} << 20;
  EXPECT_EQ(CyclingBlocks(22020096, l3), 4);
  EXPECT_EQ(CyclingBlocks(int64_t{100} << 20, l3), 1);
  for (int64_t block : {int64_t{2048}, int64_t{196608}, int64_t{4718592}, int64_t{65536000}}) {
    EXPECT_GT(CyclingBlocks(block, l3) * block, 2 * l3) << block;
  }
  EXPECT_THROW(CyclingBlocks(0, l3), base::Error);
}

TEST(EffectiveCacheBytes, AtLeastTheFloorElseTheReportedL3) {
  // A VM's reported 32 MiB L3 is raised to the floor (its host's cache can be larger); a larger
  // reported cache is kept.
  EXPECT_EQ(EffectiveCacheBytes(int64_t{32} << 20), kMinEffectiveCacheBytes);
  EXPECT_EQ(EffectiveCacheBytes(int64_t{1} << 30), int64_t{1} << 30);
  // The expert FFN bench then cycles one 22 MB expert over more than 512 MiB.
  EXPECT_GT(CyclingBlocks(22020096, EffectiveCacheBytes(int64_t{32} << 20)) * 22020096,
            int64_t{512} << 20);
}

}  // namespace
TEST(ProfileGrid, DraftDecodeIsTheDraftsWholeOneTokenPass) {
  const executor::ExecutorConfig target = DefaultTarget();
  const executor::ExecutorConfig draft = DefaultDraft(target.vocab_size);
  const GridPoint point{OperatorFamily::kDraftDecode, "cpu", 4, 512, 0};
  EXPECT_EQ(point.Label(), "draft_decode cpu context=512 batch=4");
  const nlohmann::json shape = ShapeOf(point, target, draft);
  EXPECT_EQ(shape["layers"], draft.num_layers);
  EXPECT_EQ(shape["hidden"], draft.hidden_size);
  EXPECT_EQ(shape["intermediate"], draft.dense_intermediate_size);
  EXPECT_EQ(shape["vocab"], target.vocab_size);
  EXPECT_EQ(shape["context"], 512);
  // Every weight once plus 4 sequences' K/V of 513 visible positions in every layer.
  const PointWork work = WorkOf(point, target, draft);
  const double kv = 4.0 * 513 * 2 * 4 * static_cast<double>(draft.kv_width()) *
                    static_cast<double>(draft.num_layers);
  EXPECT_DOUBLE_EQ(work.bytes, executor::WeightBytesFor(draft) + kv);
  // A MoE draft (or none) gets no draft_decode points; a context beyond the draft's positions
  // none either.
  GridSpec spec = GridSpec::Quick();
  spec.draft_contexts = {draft.max_positions};
  for (const GridPoint& p : MakeProfileGrid(target, draft, spec, kCacheBytes, -1))
    EXPECT_FALSE(IsDraftPass(p.family)) << p.Label();
  for (const GridPoint& p : MakeProfileGrid(target, target, GridSpec::Quick(), kCacheBytes, -1))
    EXPECT_FALSE(IsDraftPass(p.family)) << p.Label();
}

// An SD round's second and later draft passes, measured as the pass right after another: the same
// shape and work as the first, its own family; on a CPU only (a GPU's L2 keeps little of the
// draft, so there every pass is priced as the first).
TEST(ProfileGrid, DraftDecodeWarmIsTheSamePassOnTheCpuOnly) {
  const executor::ExecutorConfig target = DefaultTarget();
  const executor::ExecutorConfig draft = DefaultDraft(target.vocab_size);
  const GridPoint cold{OperatorFamily::kDraftDecode, "cpu", 4, 512, 0};
  const GridPoint warm{OperatorFamily::kDraftDecodeWarm, "cpu", 4, 512, 0};
  EXPECT_EQ(warm.Label(), "draft_decode_warm cpu context=512 batch=4");
  EXPECT_EQ(ShapeOf(warm, target, draft), ShapeOf(cold, target, draft));
  EXPECT_DOUBLE_EQ(WorkOf(warm, target, draft).bytes, WorkOf(cold, target, draft).bytes);
  const std::vector<GridPoint> cpu =
      MakeProfileGrid(target, draft, GridSpec::Quick(), kCacheBytes, -1);
  std::vector<std::pair<int64_t, int64_t>> cold_points, warm_points;
  for (const GridPoint& p : cpu) {
    if (p.family == OperatorFamily::kDraftDecode) cold_points.emplace_back(p.context, p.tokens);
    if (p.family == OperatorFamily::kDraftDecodeWarm) warm_points.emplace_back(p.context, p.tokens);
  }
  EXPECT_FALSE(warm_points.empty());
  EXPECT_EQ(warm_points, cold_points);
  // Each family one run of consecutive points: the profiler builds a bench per run, and the two
  // interleaved point by point had built 20 benches a round instead of 2 (each with a GiB flush
  // buffer to fill), which doubled validate --quick's profile.
  for (OperatorFamily family : {OperatorFamily::kDraftDecode, OperatorFamily::kDraftDecodeWarm}) {
    int runs = 0;
    for (size_t i = 0; i < cpu.size(); ++i)
      runs += cpu[i].family == family && (i == 0 || cpu[i - 1].family != family);
    EXPECT_EQ(runs, 1) << ToString(family);
  }
  const std::vector<GridPoint> gpu =
      MakeProfileGrid(target, draft, GridSpec::Quick(), kCacheBytes, 0, false);
  bool gpu_draft = false;
  for (const GridPoint& p : gpu) {
    EXPECT_NE(p.family, OperatorFamily::kDraftDecodeWarm) << p.Label();
    gpu_draft = gpu_draft || p.family == OperatorFamily::kDraftDecode;
  }
  EXPECT_TRUE(gpu_draft);
}

}  // namespace moelab::profiler
