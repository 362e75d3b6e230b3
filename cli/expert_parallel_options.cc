#include "cli/expert_parallel_options.h"

#include <algorithm>
#include <iostream>

#include "base/error.h"
#include "base/message_text.h"
#include "executor/run_report.h"
#include "parallel/communicator.h"

namespace moelab::cli {

void AddExpertParallelOptions(po::options_description& options, ExpertParallelFlags& flags) {
  po::options_description block(
      "expert parallelism (mpirun -n R moelab run --expert-parallel R ...)");
  // clang-format off
  block.add_options()
      ("expert-parallel", Into(&flags.options.ranks), "spread the routed experts over R MPI ranks (run under mpirun -n R): tokens go to their experts' ranks and back by all-to-all(v); greedy output identical to the one-process run")
      ("attention", Into(&flags.options.attention), "with --expert-parallel: data-parallel (each rank attends its own sequences; default) or tensor-parallel (every rank attends every sequence over its 1/R of the heads; the partial output projections summed across ranks, the MoE tokens shared out and gathered back)")
      ("placement", Into(&flags.options.placement_file), "with --expert-parallel: a moelab.expert_placement/1 file listing each rank's experts (default: contiguous blocks)")
      ("ep-chunks", Into(&flags.options.chunks), "with --expert-parallel: split each MoE layer's tokens into N chunks whose all-to-alls overlap the previous chunk's expert GEMMs (EPS-MoE's pipeline), or auto: the optimal N from this job's measured all-to-all, expert and per-chunk times");
  // clang-format on
  options.add(block);
}

bool ExpertParallelRequested(const po::variables_map& values) {
  // Given on the command line, not its default (Into gives every option one).
  if (!values.count("expert-parallel") || values["expert-parallel"].defaulted()) {
    for (const char* flag : {"attention", "placement", "ep-chunks"}) {
      if (values.count(flag) && !values[flag].defaulted())
        throw base::Error(std::string("--") + flag + " applies with --expert-parallel R only");
    }
    return false;
  }
  // Checked by every rank together (RunExpertParallel), so a refusal is said once.
  return true;
}

void DefaultBatchForExpertParallel(const po::variables_map& values,
                                   const ExpertParallelFlags& flags,
                                   executor::RunRequest& request) {
  const executor::ExpertParallelOptions& options = flags.options;
  if (!values.count("batch") || !values["batch"].defaulted()) return;
  // A rank count out of range is refused by name later (ExpertParallelOptions::Validate, or the
  // world size mpirun started); the batch is left alone for it.
  constexpr int kMostRanksDefaulted = 4096;
  if (options.attention != "data-parallel" || options.ranks < 1 ||
      options.ranks > kMostRanksDefaulted)
    return;
  request.batch = std::max<int64_t>(request.batch, options.ranks);
}

int RunAcrossRanks(const executor::RunRequest& request, const ExpertParallelFlags& flags,
                   const OutputRequest& output) {
  const std::unique_ptr<parallel::Communicator> communicator =
      parallel::MakeWorldCommunicator("--expert-parallel " + std::to_string(flags.options.ranks));
  const int rank = communicator->rank();
  executor::RunResult result;
  try {
    result = executor::RunExpertParallel(request, flags.options, model::PresetStore::Default(),
                                         *communicator);
  } catch (const parallel::AgreedError& e) {
    // Said once, by rank 0, before any rank exits: mpirun ends the job at the first non-zero exit,
    // and a rank that returned at once could have rank 0 killed before its line was written (seen
    // under load: every rank exited 1 and no error was printed).
    if (rank == 0) std::cerr << "moelab: error: " << base::OneLineMessage(e.what()) << "\n";
    communicator->Barrier();
    return 1;
  } catch (const std::exception& e) {
    // This rank alone failed mid-run (a timed-out collective, a fault): the others may be waiting
    // in a collective it will never join, so the whole job ends here.
    std::cerr << "moelab: rank " << rank << ": error: " << base::OneLineMessage(e.what()) << "\n";
    communicator->Abort(1);
  }
  if (rank == 0) {
    nlohmann::json report = executor::RunResultToJson(result);
    report["provenance"] = Provenance();
    EmitResult(output, report, executor::RunReportText(result));
  }
  return 0;
}

}  // namespace moelab::cli
