#include "validate/offload_neighbour_reads.h"

#include <algorithm>

#include "base/error.h"
#include "validate/validation_metrics.h"

namespace moelab::validate {

std::optional<double> NeighbourReadBytesPerS(
    const std::vector<std::vector<std::vector<RunReads>>>& reads, const std::vector<int>& group,
    size_t index, int reach) {
  if (index >= reads.size() || group.size() != reads.size())
    throw base::Error("neighbour reads: case out of range or groups mismatched (a bug)");
  size_t rounds = 0;
  for (const auto& by_round : reads) rounds = std::max(rounds, by_round.size());
  // The `reach` nearest cases of the group on each side, in run order.
  std::vector<size_t> neighbours;
  for (size_t j = index, found = 0; j-- > 0 && found < static_cast<size_t>(reach);) {
    if (group[j] == group[index]) neighbours.push_back(j), ++found;
  }
  for (size_t j = index + 1, found = 0; j < reads.size() && found < static_cast<size_t>(reach);
       ++j) {
    if (group[j] == group[index]) neighbours.push_back(j), ++found;
  }
  std::vector<double> per_round;
  for (size_t round = 0; round < rounds; ++round) {
    double bytes = 0, busy_s = 0;
    for (const size_t j : neighbours) {
      if (round >= reads[j].size()) continue;
      for (const RunReads& run : reads[j][round]) {
        if (!(run.busy_s > 0)) continue;
        bytes += run.bytes;
        busy_s += run.busy_s;
      }
    }
    if (busy_s > 0) per_round.push_back(bytes / busy_s);
  }
  if (per_round.empty()) return std::nullopt;
  return Median(per_round);
}

}  // namespace moelab::validate
