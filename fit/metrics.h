#pragma once

#include <optional>
#include <vector>

namespace moelab::fit {

// Goodness-of-fit metrics of predictions against measurements (same units as the measurements).
//   rmse = sqrt(mean((predicted - measured)^2))
//   mape = 100 * mean(|predicted - measured| / |measured|)            (percent)
//   r2   = 1 - sum((predicted - measured)^2) / sum((measured - mean)^2)
// r2 is empty when the measurements have no spread (the ratio is undefined), never NaN.
// Refuses (moelab::Error) empty or mismatched vectors, non-finite values, and a zero measurement
// (MAPE undefined); fit/ validates its data before it gets here.
struct FitMetrics {
  double rmse = 0;
  double mape = 0;
  std::optional<double> r2;
};

FitMetrics ComputeMetrics(const std::vector<double>& measured,
                          const std::vector<double>& predicted);

// Held-out folds for cross-validation of a fit of `n` points: leave-one-out (n folds of one
// point each) when n <= kLeaveOneOutMaxPoints, else 5 folds, point i in fold i % 5 (measurements
// are usually listed in sweep order, so striding spreads each fold over the sweep; deterministic,
// no shuffling). Each fold lists the indices held out.
inline constexpr int kLeaveOneOutMaxPoints = 60;
inline constexpr int kCrossValidationFolds = 5;
std::vector<std::vector<int>> CrossValidationFolds(int n);

}  // namespace moelab::fit
