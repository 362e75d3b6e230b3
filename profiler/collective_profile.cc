#include "profiler/collective_profile.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

#include "base/error.h"

namespace moelab::profiler {
namespace {

// The ranks that finish their operators first wait for rank 0 without spinning a core: they sleep
// between polls of a collective rank 0 joins when it is done (a blocking MPI wait would spin one).
void WaitForRank0(parallel::Communicator& communicator, double limit_s) {
  std::vector<int64_t> send(static_cast<size_t>(communicator.size()), 0);
  std::vector<int64_t> recv(send.size(), 0);
  const auto pending = communicator.StartAllToAll(send.data(), recv.data());
  if (communicator.rank() == 0) {
    pending->Wait();
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  while (!pending->Test()) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > limit_s)
      throw base::Error("profile --collectives: rank 0's operator profile did not finish within " +
                        std::to_string(static_cast<int64_t>(limit_s)) + " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// What a rank will measure, compared across the ranks before any collective.
std::string WhatIsMeasured(const ProfileRequest& request, const executor::ExecutorConfig& target,
                           const std::vector<CollectivePoint>& points,
                           const CollectiveGridSpec& grid) {
  std::string text = target.name + " " + std::to_string(target.num_layers) + "x" +
                     std::to_string(target.hidden_size) + "x" + std::to_string(target.num_experts) +
                     "x" + std::to_string(target.expert_intermediate_size) + " top-" +
                     std::to_string(target.top_k) + " bits " + std::to_string(request.expert_bits) +
                     "/" + std::to_string(request.attention_bits) +
                     (request.quick ? " quick" : "") + (request.operators ? "" : " no operators") +
                     ", " + std::to_string(points.size()) + " collectives of";
  for (const CollectivePoint& point : points) text += " " + std::to_string(point.bytes);
  text += " bytes x " + std::to_string(grid.repetitions);
  return text;
}

}  // namespace

nlohmann::json RunCollectiveProfile(const ProfileRequest& request, const CollectiveGridSpec& grid,
                                    const model::PresetStore& presets,
                                    parallel::Communicator& communicator, double wait_for_rank0_s) {
  std::vector<CollectivePoint> points;
  std::string error, measures;
  try {
    const executor::ExecutorConfig target = ProfiledTargetConfig(request, presets);
    if (!target.is_moe())
      throw base::Error("profile --collectives: " + request.model +
                        " has no routed experts, so no expert-parallel messages to size");
    points = MakeCollectiveGrid(target.hidden_size, target.top_k, communicator.size(), grid);
    measures = WhatIsMeasured(request, target, points, grid);
  } catch (const base::Error& e) {
    error = e.what();
  }
  // The ranks agree before the first collective: a refusal on one rank alone, or ranks started
  // with other options (other message sizes), ended in MPI's "message truncated" and an abort.
  const std::vector<std::string> errors = communicator.AllGatherBytes(error);
  for (int r = 0; r < communicator.size(); ++r) {
    if (errors[static_cast<size_t>(r)].empty()) continue;
    const bool everywhere = std::all_of(errors.begin(), errors.end(),
                                        [&](const std::string& e) { return e == errors[0]; });
    throw parallel::AgreedError(everywhere ? errors[0]
                                           : "rank " + std::to_string(r) + " of " +
                                                 std::to_string(communicator.size()) + ": " +
                                                 errors[static_cast<size_t>(r)]);
  }
  const std::vector<std::string> everyones = communicator.AllGatherBytes(measures);
  for (int r = 1; r < communicator.size(); ++r) {
    if (everyones[static_cast<size_t>(r)] != everyones[0]) {
      throw parallel::AgreedError("profile --collectives: rank " + std::to_string(r) +
                                  " was started with other options than rank 0 (rank 0 measures " +
                                  everyones[0] + "; rank " + std::to_string(r) + " " +
                                  everyones[static_cast<size_t>(r)] +
                                  "): start every rank with the same command");
    }
  }
  const nlohmann::json samples = MeasureCollectives(
      communicator, points, grid, communicator.rank() == 0 ? request.progress : nullptr);
  // Every rank times the operators at once and rank 0's are kept: expert parallelism computes on
  // every rank together, sharing the memory bandwidth (with rank 0 alone, validate --cases ep's
  // prefill at N = 1 measured 13 % above its prediction).
  ProfileRequest own = request;
  if (communicator.rank() != 0) own.progress = nullptr;
  nlohmann::json operators = RunProfile(own, presets);
  nlohmann::json profile = nullptr;
  if (communicator.rank() == 0) {
    profile = std::move(operators);
    for (const nlohmann::json& sample : samples) profile["samples"].push_back(sample);
    profile["grid"]["collectives"] = {{"ranks", communicator.size()},
                                      {"tokens_per_rank", grid.tokens_per_rank},
                                      {"repetitions", grid.repetitions},
                                      {"min_time_s", grid.min_time_s},
                                      {"points", points.size()}};
    profile["notes"].push_back(
        "collectives: all_to_all(v) and all_reduce timed on " +
        std::to_string(communicator.size()) + " MPI ranks" +
        (request.operators ? " before the operators (each repetition the slowest rank's seconds "
                             "per call); the operators timed on every rank at once, rank 0's kept; "
                           : " (each repetition the slowest rank's seconds per call); ") +
        "message sizes from the model's hidden size and top_k under uniform routing "
        "(profiler/README.md)");
  }
  WaitForRank0(communicator, wait_for_rank0_s);
  return profile;
}

}  // namespace moelab::profiler
