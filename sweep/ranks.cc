#include "sweep/ranks.h"

#include <cstdlib>
#include <utility>

namespace moelab::sweep {

std::vector<PointOutcome> RunOnRanks(const SweepSpec& spec, const PointRunner& run,
                                     parallel::Communicator& communicator,
                                     const Progress& progress) {
  const std::vector<uint64_t> hashes =
      communicator.AllGather(std::strtoull(spec.hash.c_str(), nullptr, 16));
  for (size_t rank = 1; rank < hashes.size(); ++rank) {
    if (hashes[rank] != hashes[0]) {
      throw parallel::AgreedError(spec.origin + ": rank " + std::to_string(rank) +
                                  " read a different spec than rank 0 (spec_hash differs)");
    }
  }
  const std::vector<int64_t> mine =
      InterleavedPoints(spec.PointCount(), communicator.rank(), communicator.size());
  const std::vector<std::string> gathered =
      communicator.AllGatherBytes(EncodeOutcomes(RunPoints(spec, mine, run, progress)));
  std::vector<std::vector<PointOutcome>> parts;
  for (const std::string& bytes : gathered) parts.push_back(DecodeOutcomes(bytes, spec.origin));
  try {
    return CollectInGridOrder(spec, std::move(parts));
  } catch (const base::Error& e) {
    throw parallel::AgreedError(e.what());  // every rank gathered the same outcomes
  }
}

}  // namespace moelab::sweep
