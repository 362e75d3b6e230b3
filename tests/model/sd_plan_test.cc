#include "model/sd_plan.h"

#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "base/error.h"
#include "model/moe_math.h"
#include "model/preset_store.h"
#include "tests/support/test_paths.h"

namespace moelab::model {
namespace {

// The analytic plan (what `moelab plan sd --hardware` computes; fit/cost_source_options.h chooses
// the source there).
SdPlan RooflinePlan(const MoeModelSpec& target, const MoeModelSpec& draft,
                    const HardwareSpec& hardware, const CostParameters& params,
                    const SdPlanOptions& options) {
  options.Validate();
  const std::unique_ptr<RooflineCostSource> source =
      RooflineCostSource::ForHardware(hardware, params);
  SdStepCosts costs(*source, target, draft, options.context_length, hardware.name);
  return PlanSpeculativeDecoding(costs, options);
}

SdPlan Plan(const std::string& target, const std::string& draft, const std::string& hardware,
            double alpha = 0.8, int64_t context_length = 1024) {
  const PresetStore store(testing::PresetDir());
  SdPlanOptions options;
  options.alpha = alpha;
  options.context_length = context_length;
  options.batches = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
  return RooflinePlan(store.LoadModel(target), store.LoadModel(draft), store.LoadHardware(hardware),
                      CostParameters{}, options);
}

std::vector<int64_t> ParseBatches() {
  std::vector<int64_t> batches;
  for (int64_t b = 1; b <= 512; b = b < 8 ? b + 1 : b * 5 / 4) batches.push_back(b);
  return batches;
}

size_t PeakIndex(const SdPlan& plan) {
  return static_cast<size_t>(
      std::max_element(plan.best_gamma.begin(), plan.best_gamma.end(),
                       [](const auto& a, const auto& b) { return a.speedup < b.speedup; }) -
      plan.best_gamma.begin());
}

TEST(SdPlan, MoeSpeedupRisesThenFallsWithBatch) {
  const SdPlan plan = Plan("qwen2-57b-a14b", "qwen2-0.5b", "2xa100-80gb-sxm");
  const size_t peak = PeakIndex(plan);
  EXPECT_GT(peak, 0u) << "MoE speedup should rise from batch 1";
  EXPECT_LT(peak, plan.best_gamma.size() - 1) << "and fall at large batch";
  EXPECT_GT(plan.best_gamma[peak].speedup, plan.best_gamma.front().speedup * 1.05);
  EXPECT_GT(plan.best_gamma[peak].speedup, plan.best_gamma.back().speedup * 1.05);
  ASSERT_TRUE(plan.pays_batch_range.has_value());
}

TEST(SdPlan, DenseSpeedupOnlyFallsWithBatch) {
  // Short prompts, as in MoESD's measurements: with long contexts and huge batches the KV-cache
  // reads, shared by the gamma + 1 verified positions, can lift a dense model's speedup again.
  const SdPlan plan = Plan("opt-30b", "opt-350m", "a100-80gb-sxm", 0.8, 128);
  for (size_t i = 1; i < plan.best_gamma.size(); ++i) {
    EXPECT_LE(plan.best_gamma[i].speedup, plan.best_gamma[i - 1].speedup + 1e-12)
        << "batch " << plan.best_gamma[i].batch;
  }
}

// MoESD: a sparser MoE (smaller K/E) needs a larger batch before all experts are active, so its
// speedup peaks at a larger batch. Same model, E = 64, K = 16, 8, 4, 2.
TEST(SdPlan, SparserMoePeaksAtLargerBatch) {
  const PresetStore store(testing::PresetDir());
  const MoeModelSpec base = store.LoadModel("qwen2-57b-a14b");
  const MoeModelSpec draft = store.LoadModel("qwen2-0.5b");
  const HardwareSpec hardware = store.LoadHardware("2xa100-80gb-sxm");
  SdPlanOptions options;
  options.alpha = 0.8;
  options.batches = ParseBatches();
  int64_t previous_peak = 0;
  for (int64_t k : {16, 8, 4, 2}) {
    MoeModelSpec sparse = base;
    sparse.moe->top_k = k;
    const SdPlan plan = RooflinePlan(sparse, draft, hardware, CostParameters{}, options);
    const int64_t peak = plan.best_gamma[PeakIndex(plan)].batch;
    EXPECT_GE(peak, previous_peak) << "K = " << k;
    previous_peak = peak;
  }
  EXPECT_GT(previous_peak, 16);
}

TEST(SdPlan, FixedSigmaAndCostSourceAgreeWithAlpha) {
  const PresetStore store(testing::PresetDir());
  const MoeModelSpec target = store.LoadModel("mixtral-8x7b");
  const MoeModelSpec draft = store.LoadModel("qwen2-0.5b");
  const HardwareSpec hardware = store.LoadHardware("2xh100-sxm");
  const auto source = RooflineCostSource::ForHardware(hardware, CostParameters{});
  SdStepCosts costs(*source, target, draft, 1024);
  SdPlanOptions by_alpha;
  by_alpha.alpha = 0.7;
  by_alpha.gammas = {3};
  SdPlanOptions by_sigma = by_alpha;
  by_sigma.sigma = AcceptedLengthFraction(0.7, 3);
  const SdPlan a = PlanSpeculativeDecoding(costs, by_alpha);
  const SdPlan b = PlanSpeculativeDecoding(costs, by_sigma);
  for (size_t i = 0; i < a.rows.size(); ++i) {
    // The same round but for the draft catch-up, which only a per-token alpha prices.
    EXPECT_EQ(b.rows[i].catch_up_s, 0.0);
    EXPECT_GT(a.rows[i].catch_up_s, 0.0);
    const double round = 3 * b.rows[i].draft_step_s + b.rows[i].verify_s + b.rows[i].reject_s;
    EXPECT_NEAR(a.rows[i].speedup, b.rows[i].speedup * round / (round + a.rows[i].catch_up_s),
                1e-12);
  }
  EXPECT_TRUE(std::isnan(b.rows[0].alpha));
  by_sigma.sigma = 1.5;
  EXPECT_THROW(by_sigma.Validate(), base::Error);
}

// The executor's draft catch-up: alpha^gamma of the rounds accept every draft and the next round's
// first draft pass feeds two tokens; without the bonus token (--verify gamma) there is none.
TEST(SdPlan, CatchUpIsAlphaToTheGammaOfTheTwoTokenDraftPass) {
  const PresetStore store(testing::PresetDir());
  const MoeModelSpec target = store.LoadModel("mixtral-8x7b");
  const MoeModelSpec draft = store.LoadModel("qwen2-0.5b");
  const auto source =
      RooflineCostSource::ForHardware(store.LoadHardware("2xh100-sxm"), CostParameters{});
  SdStepCosts costs(*source, target, draft, 1024);
  SdPlanOptions options;
  options.alpha = 0.8;
  options.batches = {1, 16};
  options.gammas = {1, 4};
  for (const SdPlanRow& row : PlanSpeculativeDecoding(costs, options).rows) {
    const double expected = std::pow(0.8, static_cast<double>(row.gamma)) *
                            (costs.DraftCatchUpStep(row.batch) - costs.DraftStep(row.batch));
    EXPECT_GT(expected, 0.0);
    EXPECT_NEAR(row.catch_up_s, expected, 1e-15) << row.batch << " " << row.gamma;
  }
  options.verify = VerifyPositions::kGamma;
  for (const SdPlanRow& row : PlanSpeculativeDecoding(costs, options).rows)
    EXPECT_EQ(row.catch_up_s, 0.0);
}

TEST(SdPlan, RowsAreConsistent) {
  const SdPlan plan = Plan("mixtral-8x7b", "qwen2-0.5b", "2xh100-sxm", 0.7);
  ASSERT_EQ(plan.rows.size(), 10u * 8u);
  for (const SdPlanRow& row : plan.rows) {
    // A roofline tells no warm draft pass from the first.
    EXPECT_EQ(row.draft_following_step_s, row.draft_step_s);
    const double round = row.draft_step_s + (row.gamma - 1) * row.draft_following_step_s +
                         row.catch_up_s + row.verify_s + row.reject_s;
    EXPECT_NEAR(row.speedup, row.sigma * (row.gamma + 1) * row.target_step_s / round, 1e-12);
    EXPECT_NEAR(row.target_efficiency, row.target_step_s / row.verify_s, 1e-12);
    EXPECT_LE(row.target_efficiency, 1.0);
    EXPECT_NEAR(row.draft_share + row.verify_share + row.reject_s / round, 1.0, 1e-12);
  }
  for (const SdBestGamma& best : plan.best_gamma) {
    for (const SdPlanRow& row : plan.rows) {
      if (row.batch == best.batch) {
        EXPECT_LE(row.speedup, best.speedup);
      }
    }
  }
}

TEST(SdPlan, LowAcceptanceNeverPays) {
  const SdPlan plan = Plan("mixtral-8x7b", "qwen2-0.5b", "2xh100-sxm", 0.0);
  EXPECT_FALSE(plan.pays_batch_range.has_value());
}

TEST(SdPlan, RefusesModelsThatDoNotFit) {
  try {
    Plan("qwen2-57b-a14b", "qwen2-0.5b", "a100-80gb-sxm");
    FAIL();
  } catch (const base::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("GB per device"), std::string::npos) << message;
    // How much more memory, not a composed name (a host's or a node's "2x" name is no preset).
    EXPECT_NE(message.find("2x the memory per device"), std::string::npos) << message;
  }
}

TEST(SdPlan, RefusesBadOptions) {
  SdPlanOptions options;
  options.alpha = 1.0;
  EXPECT_THROW(options.Validate(), base::Error);
  options.alpha = 0.5;
  options.gammas = {0};
  EXPECT_THROW(options.Validate(), base::Error);
  options.gammas = {1};
  options.batches = {-2};
  EXPECT_THROW(options.Validate(), base::Error);
  EXPECT_THROW(VerifyPositionsFromString("gamma+2"), base::Error);
}

}  // namespace
}  // namespace moelab::model
