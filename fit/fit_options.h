#pragma once

#include <cstdint>
#include <string>

namespace moelab::fit {

// Options shared by every fit in fit/ (latency curves and the MoESD speedup model).
//
// `loss` picks the robust loss applied to each residual: "none" (plain least squares, the
// paper's choice), "huber" or "cauchy". `loss_scale` is the residual magnitude beyond which a
// robust loss starts to down-weight a point, in the residual's own units: a relative error for
// latency fits (residual = (model - measured) / measured) and speedup units for SD fits; it is
// ignored for "none". `starts` independent solves are run from points drawn deterministically from
// `seed` (start 0 is always the centre of the start ranges, see fit/least_squares.h); the lowest
// final cost wins. `max_iterations` bounds each solve.
struct FitOptions {
  int starts = 8;
  uint64_t seed = 1;
  std::string loss = "none";
  double loss_scale = 0.05;
  int max_iterations = 200;

  // Throws moelab::Error naming the field: starts in [1, 1000], loss one of the three names,
  // loss_scale finite and > 0, max_iterations in [1, 100000].
  void Validate() const;
};

}  // namespace moelab::fit
