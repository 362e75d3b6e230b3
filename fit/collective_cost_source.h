#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fit/latency_fit.h"
#include "fit/latency_profile.h"
#include "model/collective_cost.h"

namespace moelab::fit {

// The "fitted-collectives" collective cost: all-to-all(v) and all-reduce priced by the curves
// `moelab fit latency` fitted to the collectives a profile measured (`mpirun -n R moelab profile
// --collectives`: operators all_to_all and all_reduce on device "mpi", x = bytes per rank), instead
// of a node preset's links. Each curve is its best form over bytes (linear: latency + bytes /
// bandwidth; or interpolated through the medians where that cross-validates better).
//   AllToAllSeconds(bytes, group)     the all_to_all curve at `bytes` (bytes a rank sends)
//   AllReduceSeconds(bytes, group)    the all_reduce curve at `bytes`
//   ReduceScatter / AllGather         half the all-reduce each: a ring all-reduce is a
//                                     reduce-scatter then an all-gather of the same bytes (not
//                                     measured on their own)
// A group of one device communicates nothing (0 s). A group of another size than the ranks
// measured is refused, naming both: a collective's cost depends on its rank count, and the profile
// measured one.
class FittedCollectiveCost : public model::CollectiveCost {
 public:
  // Errors (naming `origin`): no all_to_all or all_reduce curve on device "mpi", curves of
  // differing rank counts.
  FittedCollectiveCost(const std::vector<OperatorCurve>& curves, std::string origin);

  std::string name() const override { return "fitted-collectives"; }
  double AllToAllSeconds(double bytes_per_device,
                         const model::CollectiveGroup& group) const override;
  double AllReduceSeconds(double bytes, const model::CollectiveGroup& group) const override;
  double ReduceScatterSeconds(double bytes, const model::CollectiveGroup& group) const override;
  double AllGatherSeconds(double bytes, const model::CollectiveGroup& group) const override;
  // {"collective_cost": "fitted-collectives", "origin", "ranks", "curves": [{operator, form,
  // bytes_min, bytes_max, latency_s and
  //  bandwidth_bytes_per_s (linear), loo_rmse_s, why}]}
  nlohmann::json Describe() const override;

  int64_t ranks() const { return ranks_; }

 private:
  const OperatorCurve& Curve(const std::string& op, const model::CollectiveGroup& group,
                             double bytes) const;

  std::vector<OperatorCurve> curves_;  // all_to_all, all_reduce
  std::string origin_;
  int64_t ranks_ = 0;
};

// Whether `fit` has the collective curves FittedCollectiveCost needs.
bool HasCollectiveCurves(const LatencyFit& fit);
// A profile's collective samples alone (none: an empty sample list), for fitting them apart from
// its operators (--calibrate's profile).
Profile CollectiveSamplesOf(const Profile& profile);

}  // namespace moelab::fit
