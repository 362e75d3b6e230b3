#include "fit/metrics.h"

#include <cmath>
#include <string>

#include "base/error.h"

namespace moelab::fit {

FitMetrics ComputeMetrics(const std::vector<double>& measured,
                          const std::vector<double>& predicted) {
  if (measured.empty() || measured.size() != predicted.size()) {
    throw base::Error("fit metrics need as many predictions as measurements (got " +
                      std::to_string(predicted.size()) + " and " + std::to_string(measured.size()) +
                      ") and at least one");
  }
  const double n = static_cast<double>(measured.size());
  double mean = 0;
  for (size_t i = 0; i < measured.size(); ++i) {
    if (!std::isfinite(measured[i]) || !std::isfinite(predicted[i])) {
      throw base::Error("fit metrics: point " + std::to_string(i) + " is not finite");
    }
    if (measured[i] == 0) {
      throw base::Error("fit metrics: measurement " + std::to_string(i) +
                        " is zero (MAPE undefined)");
    }
    mean += measured[i];
  }
  mean /= n;
  double squared_error = 0;
  double relative_error = 0;
  double spread = 0;
  for (size_t i = 0; i < measured.size(); ++i) {
    const double error = predicted[i] - measured[i];
    squared_error += error * error;
    relative_error += std::fabs(error) / std::fabs(measured[i]);
    spread += (measured[i] - mean) * (measured[i] - mean);
  }
  FitMetrics metrics;
  metrics.rmse = std::sqrt(squared_error / n);
  metrics.mape = 100.0 * relative_error / n;
  if (spread > 0) metrics.r2 = 1.0 - squared_error / spread;
  return metrics;
}

std::vector<std::vector<int>> CrossValidationFolds(int n) {
  if (n < 2)
    throw base::Error("cross-validation needs at least 2 points, got " + std::to_string(n));
  const int folds = n <= kLeaveOneOutMaxPoints ? n : kCrossValidationFolds;
  std::vector<std::vector<int>> result(static_cast<size_t>(folds));
  for (int i = 0; i < n; ++i) result[static_cast<size_t>(i % folds)].push_back(i);
  return result;
}

}  // namespace moelab::fit
