#include "base/stats.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/error.h"

namespace moelab::base {

double LogGamma(double x) {
  int sign = 0;
  return ::lgamma_r(x, &sign);
}

double Median(std::vector<double> values) {
  if (values.empty()) throw Error("a median of no values");
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) throw Error("a quantile of no values");
  if (!(q >= 0 && q <= 1)) throw Error("a quantile must be in [0, 1]");
  std::sort(values.begin(), values.end());
  const double position = q * static_cast<double>(values.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(position));
  const size_t above = std::min(below + 1, values.size() - 1);
  return values[below] + (values[above] - values[below]) * (position - static_cast<double>(below));
}

double SignTestP(int64_t wins, int64_t pairs) {
  if (wins < 0 || wins > pairs)
    throw Error("sign test: " + std::to_string(wins) + " wins of " + std::to_string(pairs) +
                " pairs");
  if (pairs == 0) return 1.0;
  const int64_t uneven = std::max(wins, pairs - wins);
  double tail = 0;
  for (int64_t x = uneven; x <= pairs; ++x) {
    tail += std::exp(
        LogGamma(static_cast<double>(pairs) + 1) - LogGamma(static_cast<double>(x) + 1) -
        LogGamma(static_cast<double>(pairs - x) + 1) - static_cast<double>(pairs) * std::log(2.0));
  }
  return std::min(1.0, 2 * tail);
}

}  // namespace moelab::base
