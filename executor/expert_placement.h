#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace moelab::executor {

// Which rank holds each routed expert under expert parallelism (the same placement in every MoE
// layer). Every expert lives on exactly one rank; a rank may hold none.
struct ExpertPlacement {
  int ranks = 1;
  std::vector<int32_t> rank_of_expert;  // [num_experts]

  int64_t num_experts() const { return static_cast<int64_t>(rank_of_expert.size()); }
  std::vector<int32_t> ExpertsOf(int rank) const;  // ascending
  // A canonical text of the placement, for the hash the ranks compare at start.
  std::string Key() const;
};

// Contiguous blocks: rank r holds experts [r E / R, (r + 1) E / R). Refuses (naming
// --expert-parallel) a rank count that does not divide the experts.
ExpertPlacement ContiguousPlacement(int64_t num_experts, int ranks);

// A placement file (--placement), `moelab.expert_placement/1`:
//   {"schema": "moelab.expert_placement/1", "ranks": [[0, 1, 2, 3], [4, 5, 6, 7]]}
// one list of expert ids per rank. Refused, naming the file and field: a list count other than
// `ranks`, an id outside [0, num_experts), an expert listed twice, an expert missing.
ExpertPlacement LoadPlacement(const std::filesystem::path& file, int64_t num_experts, int ranks);

}  // namespace moelab::executor
