#include <iostream>
#include <memory>
#include <optional>

#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/shape_options.h"
#include "base/error.h"
#include "base/message_text.h"
#include "base/units.h"
#include "parallel/communicator.h"
#include "profiler/collective_profile.h"
#include "profiler/profile_summary.h"
#include "profiler/profiler.h"

namespace moelab::cli {

namespace {

// --collectives: the profile measured across the MPI ranks; rank 0 gets it, the others only their
// exit status. Errors every rank raised alike are printed once, by rank 0 (every rank exits 1); a
// rank that failed alone (a timed-out collective) says so and ends the job, so no rank waits.
struct RankOutcome {
  int status = 0;
  std::optional<nlohmann::json> profile;  // rank 0's
};

RankOutcome ProfileOnRanks(const profiler::ProfileRequest& request) {
  const std::unique_ptr<parallel::Communicator> communicator =
      parallel::MakeWorldCommunicator("--collectives");
  const int rank = communicator->rank();
  nlohmann::json profile;
  try {
    profile = profiler::RunCollectiveProfile(request,
                                             request.quick ? profiler::CollectiveGridSpec::Quick()
                                                           : profiler::CollectiveGridSpec::Full(),
                                             model::PresetStore::Default(), *communicator);
  } catch (const parallel::AgreedError& e) {
    // Said once, by rank 0, before any rank exits: mpirun ends the job at the first non-zero exit.
    if (rank == 0) std::cerr << "moelab: error: " << base::OneLineMessage(e.what()) << "\n";
    communicator->Barrier();
    return {1, std::nullopt};
  } catch (const std::exception& e) {
    std::cerr << "moelab: rank " << rank << ": error: " << base::OneLineMessage(e.what()) << "\n";
    communicator->Abort(1);
  }
  if (rank != 0) return {0, std::nullopt};
  return {0, std::move(profile)};
}

}  // namespace

int Profile(const std::vector<std::string>& args) {
  profiler::ProfileRequest request;
  std::string out;
  bool quiet = false;
  bool collectives = false;
  bool no_operators = false;
  po::options_description options("moelab profile");
  // clang-format off
  options.add_options()
      ("model", Into(&request.model), "model preset or path (shape overrides below apply)")
      ("quick", po::bool_switch(&request.quick), "coarse grid, 3 rounds of >= 50 ms repetitions across it (about 4 minutes on 2 cores)")
      ("out", po::value(&out), "write the profile (moelab.profile/1) here, atomically (required)")
      ("threads", Into(&request.threads), "threads (default: MOELAB_THREADS or all cores)")
      ("cache-bytes", ParsedIntoOptional(&request.cache_bytes, [](const std::string& text) { return static_cast<int64_t>(base::ParseBytes(text, "--cache-bytes")); }), "the last-level cache weights are cycled past and flushed against (bytes, or 32MiB); default: the reported L3, at least 256 MiB. A VM may report its host's whole L3 (508 MiB on a 2-vCPU EPYC): every family then touches 1 GiB+")
      ("expert-bits", Into(&request.expert_bits), "routed expert weights as moelab run stores them: 16 (bf16), 8 (q8_0) or 4 (q4_0)")
      ("attention-bits", Into(&request.attention_bits), "attention q|k|v and o weights: 16, 8 or 4, as --expert-bits")
      ("json", po::bool_switch(), "also print the profile JSON on stdout")
      ("csv", po::bool_switch(), "print the profile's samples as CSV rows (one per sample) instead of the summary")
      ("collectives", po::bool_switch(&collectives), "under mpirun -n R (R >= 2): also time all-to-all(v) and all-reduce at the model's message sizes on the R ranks (rank 0 profiles the operators and writes the file)")
      ("no-operators", po::bool_switch(&no_operators), "with --collectives: measure no operator (a profile of the collectives alone)")
      ("quiet", po::bool_switch(&quiet), "no progress lines on stderr");
  // clang-format on
  po::options_description shape(
      "shape (defaults: Mixtral-8x7B scaled to this machine, as moelab run)");
  AddShapeOptions(shape, "", model::DefaultTargetShape());
  options.add(shape);
  po::variables_map values;
  if (!ParseOptions(
          "usage: moelab profile --model M [shape overrides] [--quick] "
          "[--expert-bits 16|8|4] [--attention-bits 16|8|4] --out PROFILE.json "
          "[--threads N] [--cache-bytes B] [--json|--csv] [--quiet]; mpirun -n R moelab profile "
          "--collectives [--no-operators] ...",
          options, args, values)) {
    return 0;
  }
  if (out.empty()) throw base::Error("--out is required: the profile JSON file to write");
  profiler::RequireOutputFolder(out);
  if (values["json"].as<bool>() && values["csv"].as<bool>())
    throw base::Error("give --json or --csv, not both");
  request.shape = ShapeFrom(values, "", model::DefaultTargetShape());
  if (!quiet) request.progress = &std::cerr;
  request.Validate();

  if (no_operators && !collectives)
    throw base::Error("--no-operators needs --collectives (a profile must measure something)");
  request.operators = !no_operators;
  nlohmann::json profile;
  if (collectives) {
    RankOutcome outcome = ProfileOnRanks(request);
    if (!outcome.profile) return outcome.status;  // not rank 0: rank 0 writes and prints
    profile = std::move(*outcome.profile);
  } else {
    profile = profiler::RunProfile(request, model::PresetStore::Default());
  }
  profile["provenance"] = Provenance();
  profiler::WriteProfile(profile, out);
  if (values["json"].as<bool>()) {
    EmitJson(profile, "");
  } else if (values["csv"].as<bool>()) {
    std::cout << report::JsonArrayRows(profile["samples"]).ToCsv();
  } else {
    std::cout << profiler::ProfileSummaryText(profile, out);
  }
  return 0;
}

}  // namespace moelab::cli
