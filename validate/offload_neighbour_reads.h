#pragma once

#include <cstddef>
#include <optional>
#include <vector>

namespace moelab::validate {

// What one run's reads moved and for how long a read was in flight (the storage tier's own
// measurement: OffloadStats::copy_busy_s).
struct RunReads {
  double bytes = 0;
  double busy_s = 0;
};

// The storage read bandwidth the cases run next to case `index` got: per round, the bytes over the
// busy time of every run of the `reach` cases before it and the `reach` after it in run order
// that are in its group (`group[case]`: the same workload), not its own (a case is never priced
// by its own reads), pooled; the median over the rounds that have any. `reads[case][round]` holds
// that round's runs. nullopt when no neighbour read.
std::optional<double> NeighbourReadBytesPerS(
    const std::vector<std::vector<std::vector<RunReads>>>& reads, const std::vector<int>& group,
    size_t index, int reach);

}  // namespace moelab::validate
