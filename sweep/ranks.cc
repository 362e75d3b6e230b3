#include "sweep/ranks.h"

#include <cstdlib>
#include <utility>

namespace moelab::sweep {

std::vector<PointOutcome> RunOnRanks(const SweepSpec& spec, const PointRunner& run,
                                     parallel::Communicator& communicator, const Progress& progress,
                                     RowFormats formats, int threads) {
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
  std::vector<PointOutcome> own = RunPoints(spec, mine, run, progress, formats, threads);
  // Rank 0 keeps its own share as it is and gathers only the others' bytes: encoding and decoding
  // its own would copy its half of the rows twice more in the serial part.
  const bool root = communicator.rank() == 0;
  const std::vector<std::string> gathered =
      communicator.GatherBytes(root ? std::string() : EncodeOutcomes(own), 0);
  std::vector<PointOutcome> outcomes;
  std::string error;
  if (root) {
    try {
      std::vector<std::vector<PointOutcome>> parts;
      parts.push_back(std::move(own));
      for (size_t rank = 1; rank < gathered.size(); ++rank)
        parts.push_back(DecodeOutcomes(gathered[rank], spec.origin));
      outcomes = CollectInGridOrder(spec, std::move(parts));
    } catch (const base::Error& e) {
      error = e.what();
    }
  }
  // Rank 0 alone saw the outcomes: every rank learns whether they failed.
  double failed = error.empty() ? 0 : 1;
  communicator.AllReduceMax(&failed, 1);
  if (failed > 0) {
    throw parallel::AgreedError(
        communicator.rank() == 0 ? error : spec.origin + ": a point failed (rank 0 reports which)");
  }
  return outcomes;
}

}  // namespace moelab::sweep
