#include "policies/gate_standins.h"

#include <algorithm>

#include "base/hash.h"

namespace moelab::policies {

void GateProbabilities(const std::vector<int64_t>& counts, int64_t tokens, int64_t top_k,
                       const std::vector<double>& popularity_row, double residual_mass,
                       std::vector<float>& out) {
  const size_t experts = counts.size();
  out.resize(experts);
  const double routed = static_cast<double>(tokens * top_k);
  double popularity_total = 0;
  for (double count : popularity_row) popularity_total += count;
  for (size_t e = 0; e < experts; ++e) {
    const double share = routed > 0 ? static_cast<double>(counts[e]) / routed : 0;
    const double prior = popularity_total > 0 ? popularity_row[e] / popularity_total
                                              : 1.0 / static_cast<double>(experts);
    out[e] = static_cast<float>((1 - residual_mass) * share + residual_mass * prior);
  }
}

void CountDemand(const std::vector<std::vector<int32_t>>& routed, int64_t experts,
                 std::vector<int64_t>& counts, std::vector<ExpertDemand>& demand) {
  constexpr size_t kFewRoutings = 16;
  counts.assign(static_cast<size_t>(experts), 0);
  size_t routings = 0;
  for (const std::vector<int32_t>& token : routed) {
    for (int32_t expert : token) ++counts[static_cast<size_t>(expert)];
    routings += token.size();
  }
  // Appended in place (the capacity stays from the last layer): growing `demand` to E and cutting
  // it back to the routed experts, to write every expert without a branch, constructed E entries
  // again every layer, more than the branch costs.
  demand.clear();
  demand.reserve(static_cast<size_t>(experts));
  if (routings <= kFewRoutings && routings * 4 <= static_cast<size_t>(experts)) {
    // Few routings (a decode step of one sequence): the routed experts sorted, each once, rather
    // than a walk over all E counts whose "routed?" branch the CPU cannot guess (it was a seventh
    // of a batch-1 simulation's time on Mixtral, 2 of 8 experts a layer). Insertion sort, so at
    // most kFewRoutings entries: its compares grow with their square.
    for (const std::vector<int32_t>& token : routed) {
      for (int32_t expert : token) {
        if (counts[static_cast<size_t>(expert)] < 0) continue;  // already placed
        size_t at = demand.size();
        demand.push_back({expert, counts[static_cast<size_t>(expert)]});
        for (; at > 0 && demand[at - 1].expert > expert; --at)
          std::swap(demand[at - 1], demand[at]);
        counts[static_cast<size_t>(expert)] = -counts[static_cast<size_t>(expert)];  // placed
      }
    }
    for (const ExpertDemand& d : demand) counts[static_cast<size_t>(d.expert)] = d.tokens;
    return;
  }
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t count = counts[static_cast<size_t>(e)];
    if (count > 0) demand.push_back({static_cast<int32_t>(e), count});
  }
}

void SpeculativeNextLayerScores(const std::vector<float>& transition,
                                std::span<const ExpertDemand> demand, int64_t experts,
                                std::vector<float>& out) {
  out.assign(static_cast<size_t>(experts), 0.0f);
  for (const ExpertDemand& d : demand) {
    const float* row = &transition[static_cast<size_t>(d.expert * experts)];
    const float weight = static_cast<float>(d.tokens);
    for (int64_t next = 0; next < experts; ++next)
      out[static_cast<size_t>(next)] += weight * row[next];
  }
}

void ApplySpeculativeRecall(double recall, uint64_t seed, int64_t pass, int64_t layer,
                            std::span<const ExpertDemand> next_demand, std::vector<float>& out) {
  constexpr uint64_t kRecallSalt = 0x7265636173706563ULL;  // "recaspec"
  const float top = out.empty() ? 0.0f : *std::max_element(out.begin(), out.end());
  for (const ExpertDemand& d : next_demand) {
    const uint64_t draw = base::Mix64(
        base::SplitMix64(seed ^ kRecallSalt) ^
        base::SplitMix64(static_cast<uint64_t>(pass) * 1000003u + static_cast<uint64_t>(layer)) ^
        static_cast<uint64_t>(d.expert) * base::kSplitMix64Golden);
    const double uniform = static_cast<double>(draw >> 11) * 0x1.0p-53;
    if (uniform < recall)
      out[static_cast<size_t>(d.expert)] = top + 1.0f + static_cast<float>(d.tokens);
  }
}

}  // namespace moelab::policies
