#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moelab::model {

// Fiddler's latency model and per-expert decision (formulas.md section 2).

// cpu_lat(s) = cpu_base_s + cpu_per_token_s * s; gpu_lat = gpu_s (flat in s);
// trans_lat = transfer_s (one expert's weights host -> device). Seconds.
struct FiddlerLatencyModel {
  double cpu_base_s = 0;
  double cpu_per_token_s = 0;
  double gpu_s = 0;
  double transfer_s = 0;

  double CpuLatency(int64_t tokens) const {
    return cpu_base_s + cpu_per_token_s * static_cast<double>(tokens);
  }
  double GpuLatency(int64_t /*tokens*/) const { return gpu_s; }
  // Refuses negative times (a fit gone wrong should not silently steer decisions).
  void Validate() const;
};

enum class ExpertExecution { kSkip, kGpuResident, kCopyWeightsThenGpu, kCpu };
std::string ToString(ExpertExecution execution);

// Algorithm 1 for one expert with `tokens` routed tokens.
ExpertExecution FiddlerDecide(const FiddlerLatencyModel& model, int64_t tokens, bool on_gpu);

// Latency of the decision Algorithm 1 makes (0 for kSkip).
double FiddlerExpertLatency(const FiddlerLatencyModel& model, int64_t tokens, bool on_gpu);

// Smallest token count at which copying the weights to the GPU beats running on the CPU
// (cpu_lat(s) > gpu_lat + trans_lat); returns -1 when the CPU always wins (cpu_per_token_s = 0).
int64_t FiddlerCrossoverTokens(const FiddlerLatencyModel& model);

// Expert popularity: counts[layer][expert] (tokens routed), all >= 0.
using PopularityTable = std::vector<std::vector<double>>;

struct ExpertId {
  int64_t layer = 0;
  int64_t expert = 0;
  bool operator==(const ExpertId&) const = default;
};

// The `capacity` most popular experts (ties broken by layer then expert index, so placements are
// deterministic). capacity may exceed the number of experts (all are placed).
std::vector<ExpertId> PlaceByPopularity(const PopularityTable& popularity, int64_t capacity);
// The `capacity` least popular experts (the worst placement, for bounds).
std::vector<ExpertId> PlaceLeastPopular(const PopularityTable& popularity, int64_t capacity);

// Expected fraction of expert activations served from the GPU with this placement:
// sum of placed counts / sum of all counts.
double ExpectedHitRate(const PopularityTable& popularity, const std::vector<ExpertId>& placement);

// Expected hit rate of a uniformly random placement of `capacity` experts: capacity / total.
double RandomPlacementHitRate(const PopularityTable& popularity, int64_t capacity);

// Loads a popularity table: the Fiddler JSON ({"expert_popularity": [[...], ...]}) or CSV with a
// header "layer,e0,e1,..." (one row per layer, in order). Errors name the file and line/field.
PopularityTable LoadPopularityTable(const std::string& path);

}  // namespace moelab::model
