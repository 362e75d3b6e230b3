#include "fit/fit_options.h"

#include <cmath>

#include "base/error.h"

namespace moelab::fit {

void FitOptions::Validate() const {
  if (starts < 1 || starts > 1000) {
    throw base::Error("fit option 'starts' must be in [1, 1000], got " + std::to_string(starts));
  }
  if (loss != "none" && loss != "huber" && loss != "cauchy") {
    throw base::Error("fit option 'loss' must be \"none\", \"huber\" or \"cauchy\", got \"" + loss +
                      "\"");
  }
  if (!std::isfinite(loss_scale) || loss_scale <= 0) {
    throw base::Error("fit option 'loss_scale' must be a finite number > 0, got " +
                      std::to_string(loss_scale));
  }
  if (max_iterations < 1 || max_iterations > 100000) {
    throw base::Error("fit option 'max_iterations' must be in [1, 100000], got " +
                      std::to_string(max_iterations));
  }
}

}  // namespace moelab::fit
