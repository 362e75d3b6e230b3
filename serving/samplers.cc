#include "serving/samplers.h"

#include <cmath>
#include <numbers>

namespace moelab::serving {

double UniformDraw(base::SplitMix64Stream& stream) {
  return static_cast<double>(stream.Next() >> 11) * 0x1p-53;
}

double ExponentialDraw(base::SplitMix64Stream& stream, double rate) {
  return -std::log1p(-UniformDraw(stream)) / rate;  // 1 - U is in (0, 1]: never log(0)
}

double NormalDraw(base::SplitMix64Stream& stream) {
  const double radius = std::sqrt(-2 * std::log1p(-UniformDraw(stream)));
  return radius * std::cos(2 * std::numbers::pi * UniformDraw(stream));
}

double GammaDraw(base::SplitMix64Stream& stream, double shape) {
  if (shape < 1) {
    const double boosted = GammaDraw(stream, shape + 1);
    return boosted * std::pow(1 - UniformDraw(stream), 1 / shape);
  }
  const double d = shape - 1.0 / 3, c = 1 / std::sqrt(9 * d);
  for (;;) {
    const double x = NormalDraw(stream);
    const double root = 1 + c * x;
    if (root <= 0) continue;
    const double v = root * root * root;
    const double u = 1 - UniformDraw(stream);  // in (0, 1]
    if (std::log(u) < 0.5 * x * x + d - d * v + d * std::log(v)) return d * v;
  }
}

}  // namespace moelab::serving
