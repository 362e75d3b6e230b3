#include "model/rank_imbalance.h"

#include <cmath>

#include "base/error.h"

namespace moelab::model {

double ExpectedMaxOfStandardNormals(int64_t n) {
  if (n <= 1) return 0.0;
  // The integral of x n phi(x) Phi(x)^(n-1); beyond 9 deviations nothing is left at any n here.
  constexpr double kStep = 1e-3, kLimit = 9.0;
  const double inv_sqrt_2pi = 1.0 / std::sqrt(2.0 * std::acos(-1.0));
  double sum = 0;
  for (int64_t i = 0;; ++i) {
    const double x = -kLimit + static_cast<double>(i) * kStep;
    if (x > kLimit) break;
    const double cdf = 0.5 * std::erfc(-x / std::sqrt(2.0));
    sum += x * static_cast<double>(n) * inv_sqrt_2pi * std::exp(-0.5 * x * x) *
           std::pow(cdf, static_cast<double>(n - 1));
  }
  return sum * kStep;
}

double BusiestRankExcessRows(double tokens, int64_t experts, int64_t top_k, int64_t group,
                             int64_t ranks) {
  if (tokens < 0 || top_k < 1 || top_k > experts || group < 1 || ranks < 1 ||
      group * ranks > experts) {
    throw base::Error("rank imbalance: " + std::to_string(ranks) + " ranks of " +
                      std::to_string(group) + " experts, top " + std::to_string(top_k) + " of " +
                      std::to_string(experts) + ", " + std::to_string(tokens) +
                      " tokens: expected ranks x group <= experts and 1 <= top_k <= experts");
  }
  if (ranks == 1 || group == experts || top_k == experts) return 0.0;
  const double e = static_cast<double>(experts), k = static_cast<double>(top_k);
  const double p = static_cast<double>(group) / e;
  const double variance = tokens * k * p * (1 - p) * (e - k) / (e - 1);
  const double correlation = -p / (1 - p);
  return std::sqrt(variance * (1 - correlation)) * ExpectedMaxOfStandardNormals(ranks);
}

}  // namespace moelab::model
