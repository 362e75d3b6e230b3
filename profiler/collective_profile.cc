#include "profiler/collective_profile.h"

#include <chrono>
#include <cstdint>
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

}  // namespace

nlohmann::json RunCollectiveProfile(const ProfileRequest& request, const CollectiveGridSpec& grid,
                                    const model::PresetStore& presets,
                                    parallel::Communicator& communicator, double wait_for_rank0_s) {
  std::vector<CollectivePoint> points;
  try {
    const executor::ExecutorConfig target = ProfiledTargetConfig(request, presets);
    if (!target.is_moe())
      throw base::Error("profile --collectives: " + request.model +
                        " has no routed experts, so no expert-parallel messages to size");
    points = MakeCollectiveGrid(target.hidden_size, target.top_k, communicator.size(), grid);
  } catch (const base::Error& e) {
    throw parallel::AgreedError(e.what());  // every rank read the same options and files
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
        std::to_string(communicator.size()) +
        " MPI ranks before the operators (each repetition the slowest rank's seconds per call); "
        "the operators timed on every rank at once, rank 0's kept; "
        "message sizes from the model's hidden size and top_k under uniform routing "
        "(profiler/README.md)");
  }
  WaitForRank0(communicator, wait_for_rank0_s);
  return profile;
}

}  // namespace moelab::profiler
