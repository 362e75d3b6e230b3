// SD measurement files (fit/sd_measurements): CSV or JSON, read from a file as `fit sd` does, then
// the MoESD fit `fit sd` runs on them (sets of up to 32 points, fewer starts: fitting is the
// expensive part), against the README's main target, draft and hardware. Beyond the one rule
// (return or throw moelab::Error), a fit that returns must hold only finite numbers: `fit sd`
// prints and writes them, and no inf or NaN is ever a result (docs/limits.md). Extreme values
// (speedups near a double's top, batches near int64's, E and K at their bounds) reach it here.
#include <cmath>
#include <optional>

#include "fit/sd_bounds.h"
#include "fit/sd_fit.h"
#include "fit/sd_measurements.h"
#include "fuzz/fuzz_support.h"
#include "model/preset_store.h"

namespace {

struct FitTarget {
  moelab::model::MoeModelSpec target, draft;
  moelab::model::HardwareSpec hardware;
};

const FitTarget& MainJob() {
  static const FitTarget specs = [] {
    const moelab::model::PresetStore store(MOELAB_PRESET_DIR);
    return FitTarget{store.LoadModel("qwen2-57b-a14b"), store.LoadModel("qwen2-0.5b"),
                     store.LoadHardware("2xa100-80gb-sxm")};
  }();
  return specs;
}

bool AllFinite(const moelab::fit::SdFit& fit) {
  for (const double value : fit.params.values)
    if (!std::isfinite(value)) return false;
  for (const std::optional<double>& error : fit.std_errors)
    if (error && !std::isfinite(*error)) return false;
  return std::isfinite(fit.rmse) && std::isfinite(fit.mape) &&
         (!fit.r2 || std::isfinite(*fit.r2)) && (!fit.loo_rmse || std::isfinite(*fit.loo_rmse));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto file = moelab::fuzz::WriteInput(data, size, "measurements.csv");
  moelab::fuzz::Refuses([&] {
    const auto measurements = moelab::fit::LoadSdMeasurements(file);
    moelab::fit::ValidateSdMeasurementSet(measurements, file.string());
    if (measurements.size() > 32) return;
    const FitTarget& specs = MainJob();
    const moelab::fit::SdFitScales scales = moelab::fit::ComputeSdFitScales(
        specs.target, specs.draft, specs.hardware, measurements, std::nullopt);
    moelab::fit::FitOptions options;
    options.starts = 2;
    options.max_iterations = 50;
    const moelab::fit::SdFit fit = moelab::fit::FitSd(
        measurements, scales, moelab::model::SdDenominator::kAlgorithm1, options, file.string());
    if (!AllFinite(fit)) __builtin_trap();  // a finding: fit sd would print inf or NaN
  });
  return 0;
}
