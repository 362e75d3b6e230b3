// The fitted-collectives cost: planted latency and bandwidth recovered from noisy synthetic
// collective samples to a stated precision, a protocol switch interpolated, and the rank count and
// missing curves refused by name.
#include "fit/collective_cost_source.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/json_reader.h"
#include "fit/cost_source_options.h"
#include "fit/fit_json.h"
#include "fit/latency_fit.h"
#include "model/preset_store.h"
#include "tests/support/test_paths.h"

namespace moelab::fit {
namespace {

// Collective samples of `op` on 2 ranks at 4 KiB .. 64 MiB (13 sizes, factors of 2^(4/3)), each
// the planted time times (1 + noise), noise uniform in +-`noise` from a seeded generator.
void AddSamples(Profile& profile, const std::string& op,
                const std::function<double(double)>& seconds_at, double noise, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::uniform_real_distribution<double> jitter(-noise, noise);
  for (int i = 0; i <= 12; ++i) {
    const double bytes = std::round(4096.0 * std::pow(2.0, 4.0 * i / 3.0));
    ProfileSample sample;
    sample.op = op;
    sample.device = "mpi";
    sample.shape = {{"ranks", 2}, {"bytes", static_cast<int64_t>(bytes)}};
    sample.tokens = 1;
    sample.median_s = seconds_at(bytes) * (1 + jitter(random));
    sample.bytes = bytes;
    sample.flops = 0;
    sample.index = static_cast<int>(profile.samples.size());
    profile.samples.push_back(sample);
  }
}

const OperatorCurve& CurveOf(const LatencyFit& fit, const std::string& op) {
  for (const OperatorCurve& curve : fit.operators) {
    if (curve.op == op) return curve;
  }
  throw base::Error("no curve " + op);
}

constexpr double kLatencyS = 25e-6;
constexpr double kBandwidth = 4e9;  // bytes per second

double Planted(double bytes) { return kLatencyS + bytes / kBandwidth; }

TEST(FittedCollectiveCost, RecoversPlantedLatencyAndBandwidth) {
  Profile profile;
  profile.origin = "planted.json";
  AddSamples(profile, "all_to_all", Planted, 0.02, 7);
  AddSamples(
      profile, "all_reduce", [](double b) { return 2 * Planted(b); }, 0.02, 8);
  const LatencyFit fit = FitLatency(profile, FitOptions{});
  ASSERT_TRUE(HasCollectiveCurves(fit));
  const OperatorCurve& curve = CurveOf(fit, "all_to_all");
  EXPECT_EQ(curve.variable, "bytes");
  // A straight line in bytes is the truth: the fit must prefer it over the interpolation.
  EXPECT_EQ(curve.best, LatencyForm::kLinear);
  const LatencyFormFit& linear = curve.Best();
  // +-2 % noise on 13 points: the intercept is set by the small sizes, the slope by the large.
  EXPECT_NEAR(linear.params[0], kLatencyS, 0.05 * kLatencyS);
  EXPECT_NEAR(1.0 / linear.params[1], kBandwidth, 0.02 * kBandwidth);

  const FittedCollectiveCost cost(fit.operators, fit.profile);
  EXPECT_EQ(cost.name(), "fitted-collectives");
  EXPECT_EQ(cost.ranks(), 2);
  const model::CollectiveGroup pair{2, 2};
  EXPECT_NEAR(cost.AllToAllSeconds(1e6, pair), Planted(1e6), 0.03 * Planted(1e6));
  EXPECT_NEAR(cost.AllReduceSeconds(1e6, pair), 2 * Planted(1e6), 0.06 * Planted(1e6));
  // A ring all-reduce is a reduce-scatter then an all-gather.
  EXPECT_DOUBLE_EQ(cost.ReduceScatterSeconds(1e6, pair) + cost.AllGatherSeconds(1e6, pair),
                   cost.AllReduceSeconds(1e6, pair));
  EXPECT_EQ(cost.AllToAllSeconds(1e6, {1, 1}), 0.0);  // one device communicates nothing
  const nlohmann::json described = cost.Describe();
  EXPECT_EQ(described["collective_cost"], "fitted-collectives");
  EXPECT_NEAR(described["curves"][0]["linear_bandwidth_bytes_per_s"].get<double>(), kBandwidth,
              0.02 * kBandwidth);
}

TEST(FittedCollectiveCost, AProtocolSwitchIsInterpolated) {
  // Eager below 64 KiB, rendezvous above: a jump no straight line follows.
  const auto switched = [](double bytes) {
    return bytes < 65536 ? 5e-6 + bytes / 10e9 : 60e-6 + bytes / 4e9;
  };
  Profile profile;
  profile.origin = "switch.json";
  AddSamples(profile, "all_to_all", switched, 0.01, 3);
  AddSamples(profile, "all_reduce", switched, 0.01, 4);
  const LatencyFit fit = FitLatency(profile, FitOptions{});
  EXPECT_EQ(CurveOf(fit, "all_to_all").best, LatencyForm::kInterpolated);
  const FittedCollectiveCost cost(fit.operators, fit.profile);
  // Between two measured sizes on the same side of the switch the interpolation is close.
  const double bytes = 3e5;
  EXPECT_NEAR(cost.AllToAllSeconds(bytes, {2, 2}), switched(bytes), 0.05 * switched(bytes));
}

TEST(FittedCollectiveCost, RefusesAnotherRankCountAndMissingCurves) {
  Profile profile;
  profile.origin = "two-ranks.json";
  AddSamples(profile, "all_to_all", Planted, 0.0, 1);
  const LatencyFit only_all_to_all = FitLatency(profile, FitOptions{});
  EXPECT_FALSE(HasCollectiveCurves(only_all_to_all));
  try {
    FittedCollectiveCost cost(only_all_to_all.operators, "two-ranks.json");
    FAIL() << "a fit without all_reduce was accepted";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no all_reduce curve"), std::string::npos) << e.what();
  }
  AddSamples(profile, "all_reduce", Planted, 0.0, 2);
  const FittedCollectiveCost cost(FitLatency(profile, FitOptions{}).operators, "two-ranks.json");
  try {
    cost.AllToAllSeconds(1e6, {4, 4});
    FAIL() << "a group of 4 was priced from 2 ranks";
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("measured on 2 ranks, not the 4"), std::string::npos)
        << e.what();
  }
}

TEST(FittedCollectiveCost, CollectiveSamplesOfKeepsOnlyCollectives) {
  Profile profile;
  AddSamples(profile, "all_to_all", Planted, 0.0, 1);
  ProfileSample expert;
  expert.op = "expert_ffn";
  expert.device = "cpu";
  expert.shape = {{"hidden", 64}};
  expert.tokens = 4;
  expert.median_s = 1e-3;
  profile.samples.push_back(expert);
  EXPECT_EQ(CollectiveSamplesOf(profile).samples.size(), 13u);
}

// A profile of operators (tests/data) with planted collective samples: --calibrate and --profile
// (its fit) both give the measured collectives; without them, none.
TEST(FittedCollectiveCost, CostSourcesHandThemOutFromAProfileOrItsFit) {
  nlohmann::json profile =
      base::JsonReader::ParseFile(testing::TestDataDir() / "profiles/quick-cpu.json");
  const auto dir = testing::MakeTempDir("collective-cost-sources");
  CostSourceOptions plain;
  plain.calibrate_profile = (dir / "operators.json").string();
  base::WriteFileAtomically(*plain.calibrate_profile, profile.dump());
  plain.hardware = "8xh800";
  EXPECT_EQ(CostSources(plain, model::PresetStore::Default()).MeasuredCollectives(), nullptr);

  Profile planted;
  AddSamples(planted, "all_to_all", Planted, 0.01, 5);
  AddSamples(planted, "all_reduce", Planted, 0.01, 6);
  for (const ProfileSample& s : planted.samples) {
    profile["samples"].push_back({{"operator", s.op},
                                  {"device", s.device},
                                  {"shape", s.shape},
                                  {"tokens", 1},
                                  {"repetitions", 1},
                                  {"median_s", s.median_s},
                                  {"mean_s", s.median_s},
                                  {"min_s", s.median_s},
                                  {"max_s", s.median_s},
                                  {"stddev_s", 0.0},
                                  {"bytes", s.bytes},
                                  {"flops", 0}});
  }
  CostSourceOptions calibrate = plain;
  calibrate.calibrate_profile = (dir / "with-collectives.json").string();
  base::WriteFileAtomically(*calibrate.calibrate_profile, profile.dump());
  const auto from_profile =
      CostSources(calibrate, model::PresetStore::Default()).MeasuredCollectives();
  ASSERT_NE(from_profile, nullptr);
  EXPECT_EQ(from_profile->name(), "fitted-collectives");
  EXPECT_NEAR(from_profile->AllToAllSeconds(1e6, {2, 2}), Planted(1e6), 0.03 * Planted(1e6));

  CostSourceOptions fitted;
  fitted.hardware_given = false;
  fitted.fitted_profile = (dir / "fit.json").string();
  const LatencyFit fit = FitLatency(LoadProfile(*calibrate.calibrate_profile), FitOptions{});
  base::WriteFileAtomically(*fitted.fitted_profile, LatencyFitToJson(fit).dump());
  const auto from_fit = CostSources(fitted, model::PresetStore::Default()).MeasuredCollectives();
  ASSERT_NE(from_fit, nullptr);
  EXPECT_DOUBLE_EQ(from_fit->AllReduceSeconds(1e5, {2, 2}),
                   from_profile->AllReduceSeconds(1e5, {2, 2}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace moelab::fit
