// moelab validate: the closed loop (profile, fit, predict, execute, compare) on this machine.
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <set>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/message_text.h"
#include "base/units.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/shape_options.h"
#include "cli/validate_serving.h"
#include "executor/run_workload.h"
#include "report/json_rows.h"
#include "parallel/communicator.h"
#include "validate/ep_validation.h"
#include "validate/run_validation.h"
#include "validate/validation_report.h"

namespace moelab::cli {

namespace {

// --cases ep: every rank runs the cases; rank 0 prints (and writes --out/validation-ep.json and the
// profile). Errors every rank raised alike are printed once, by rank 0; a rank failing alone ends
// the job so no rank waits for it.
int ValidateEp(const validate::ValidationRequest& request, const po::variables_map& values,
               const std::string& out, bool quiet) {
  validate::EpValidationRequest ep;
  ep.model = request.model;
  ep.shape = request.shape;
  ep.quick = request.quick;
  if (values.count("repeat") && !values["repeat"].defaulted()) ep.repeat = request.repeat;
  ep.profile = request.profile;
  ep.seed = request.seed;
  if (values.count("threads") && !values["threads"].defaulted()) ep.threads = request.threads;
  ep.attention = values["attention"].as<std::string>();
  ep.cache_bytes = request.cache_bytes;
  ep.profile_rounds = request.profile_rounds;
  if (!quiet) ep.progress = &std::cerr;
  ep.Validate();
  std::error_code error;
  if (!out.empty() && std::filesystem::exists(out, error) &&
      (!std::filesystem::is_directory(out, error) || !std::filesystem::is_empty(out, error))) {
    throw base::Error("--out " + base::EscapeForMessage(out) +
                      ": name a new or empty folder (validate --cases ep writes validation-ep.json "
                      "and profile.json there)");
  }
  const std::unique_ptr<parallel::Communicator> communicator =
      parallel::MakeWorldCommunicator("--cases ep");
  const int rank = communicator->rank();
  validate::EpValidationResult result;
  try {
    result = validate::RunEpValidation(ep, model::PresetStore::Default(), *communicator);
  } catch (const parallel::AgreedError& e) {
    // Said once, by rank 0, before any rank exits: mpirun ends the job at the first non-zero exit.
    if (rank == 0) std::cerr << "moelab: error: " << base::OneLineMessage(e.what()) << "\n";
    communicator->Barrier();
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "moelab: rank " << rank << ": error: " << base::OneLineMessage(e.what()) << "\n";
    communicator->Abort(1);
  }
  if (rank != 0) return 0;
  nlohmann::json json = validate::EpValidationToJson(result);
  json["provenance"] = Provenance();
  if (!out.empty()) {
    std::filesystem::create_directories(out);
    base::WriteFileAtomically(std::filesystem::path(out) / "validation-ep.json",
                              json.dump(2) + "\n");
    base::WriteFileAtomically(std::filesystem::path(out) / "profile.json",
                              result.profile.dump(2) + "\n");
  }
  if (values["json"].as<bool>()) {
    std::cout << json.dump(2) << "\n";
  } else if (values["csv"].as<bool>()) {
    std::cout << report::JsonArrayRows(json["cases"]).ToCsv();
  } else {
    std::cout << validate::EpValidationText(result);
  }
  return 0;
}

}  // namespace

int Validate(const std::vector<std::string>& args) {
  validate::ValidationRequest request;
  std::string out;
  bool quiet = false;
  bool ep_cases = false;  // --cases ep: across MPI ranks, on its own (validate/ep_validation.h)
  bool serving_cases = false;  // --cases serving: on its own (validate/serving_validation.h)
  validate::ServingValidationRequest serving;
  const auto case_kinds = [&ep_cases, &serving_cases](const std::string& text) {
    std::set<validate::CaseKind> kinds;
    for (const std::string& kind : SplitNameList(text, "cases")) {
      if (kind == "ep" || kind == "serving") {
        (kind == "ep" ? ep_cases : serving_cases) = true;
        continue;
      }
      kinds.insert(validate::CaseKindFromString(kind));
    }
    if (ep_cases && (!kinds.empty() || serving_cases))
      throw base::Error("--cases " + text + ": ep runs alone, under mpirun (give --cases ep)");
    if (serving_cases && !kinds.empty())
      throw base::Error("--cases " + text +
                        ": serving runs alone (give --cases serving, and the other kinds in "
                        "another run)");
    return kinds;
  };
  po::options_description options("moelab validate");
  // clang-format off
  options.add_options()
      ("model", Into(&request.model), "target model preset or path (shape overrides below apply)")
      ("draft", Into(&request.draft), "draft model preset or path (SD cases)")
      ("quick", po::bool_switch(&request.quick), "quick profile grid and case plan, 3 runs per case (about 9-12 minutes on 2 cores)")
      ("cases", po::value<std::string>()->notifier([&](const std::string& text) { request.kinds = case_kinds(text); }), "case kinds, comma-separated: decode, prefill, sd, beam, offload (default: all but offload); or serving alone: sim serve against serve + loadgen (validate/README.md); or ep alone, under mpirun -n R: sim ep against run --expert-parallel R")
      ("repeat", Into(&request.repeat), "runs per case, interleaved round by round (default: 3 with --quick, else 5)")
      ("profile", ParsedIntoOptional(&request.profile, [](const std::string& path) { return std::filesystem::path(path); }), "reuse this profile (moelab profile --out) instead of profiling")
      ("reused-profile", ParsedIntoOptional(&request.reused_profile, [](const std::string& path) { return std::filesystem::path(path); }), "also price every in-memory case from this profile, taken before the run (moelab profile --out, as a user has one): cost source 'reused-profile', its error beside the headline's (JSON reused_profile)")
      ("alpha", NumberInto(&request.alpha, "alpha"), "SD acceptance rate: each drafted token is the target's own next token with this probability (moelab run --acceptance alpha), [0, 1)")
      ("seed", Into(&request.seed), "seed of weights, prompts and acceptance")
      ("threads", Into(&request.threads), "threads (default: MOELAB_THREADS or all cores)")
      ("attention", po::value<std::string>()->default_value("data-parallel"), "with --cases ep: data-parallel or tensor-parallel attention, in the runs (run --attention) and the predictions (sim ep --attention)")
      ("cache-bytes", ParsedIntoOptional(&request.cache_bytes, [](const std::string& text) { return static_cast<int64_t>(base::ParseBytes(text, "--cache-bytes")); }), "the profile's last-level cache (moelab profile --cache-bytes); default: the reported L3, at least 256 MiB")
      ("profile-rounds", po::value<int>(&request.profile_rounds)->default_value(0, "5"), "rounds of the profile validate takes (default 5, or the full grid's own if more; --cases ep: the grid's own, 3 with --quick; --cases serving: the quick grid's 3); fewer: faster, each sample the median of fewer runs")
      ("device", Into(&request.device), "cpu or gpu: where the executor runs and the profile measures (gpu: GPU 0 through the CUDA backend)")
      ("expert-bits", Into(&request.expert_bits), "routed expert weights in the profile and every run: 16 (bf16), 8 (q8_0) or 4 (q4_0)")
      ("attention-bits", Into(&request.attention_bits), "attention q|k|v and o weights: 16, 8 or 4, as --expert-bits")
      ("out", po::value(&out), "folder for validation.json, report.md, plots, and the profile, fit and routing trace")
      ("timelines", po::bool_switch(&request.timelines), "with --cases offload: each case's last executor run and its simulation as Perfetto timelines with the same op names, in OUT/timelines/ (scripts/timeline-compare.py compares them)")
      ("json", po::bool_switch(), "print the moelab.validation/1 JSON")
      ("csv", po::bool_switch(), "print the cases as CSV rows")
      ("quiet", po::bool_switch(&quiet), "no progress lines on stderr");
  // clang-format on
  po::options_description shape(
      "target shape (defaults: Mixtral-8x7B scaled to this machine, as moelab run)");
  AddShapeOptions(shape, "", model::DefaultTargetShape());
  options.add(shape);
  AddValidateServingOptions(options, serving);
  po::variables_map values;
  if (!ParseOptions("usage: moelab validate [--model M] [shape overrides] [--expert-bits B] "
                    "[--attention-bits B] [--device cpu|gpu] "
                    "[--draft D] [--quick] [--cases "
                    "LIST] [--repeat N] [--profile P.json] [--reused-profile P.json] [--out DIR] "
                    "[--cache-bytes B] [--profile-rounds N] [--timelines] [--cases ep [--attention "
                    "data-parallel|tensor-parallel]] [--cases serving [--requests N] "
                    "[--prompt-tokens D] [--output-tokens D] "
                    "[scheduler options]] "
                    "[--json|--csv] [--quiet]",
                    options, args, values)) {
    return 0;
  }
  if (values["json"].as<bool>() && values["csv"].as<bool>())
    throw base::Error("give --json or --csv, not both");
  request.shape = ShapeFrom(values, "", model::DefaultTargetShape());
  if (!ep_cases && !values["attention"].defaulted())
    throw base::Error("--attention splits attention across MPI ranks: it goes with --cases ep");
  const bool profile_rounds_given =
      values.count("profile-rounds") && !values["profile-rounds"].defaulted();
  if (profile_rounds_given && request.profile_rounds < 1) {
    throw base::Error("--profile-rounds " + std::to_string(request.profile_rounds) +
                      ": expected 1 to 100 rounds of the profile grid");
  }
  if (serving_cases) return ValidateServing(request, values, serving, out, quiet);
  RefuseServingOptionsElsewhere(values);
  if (ep_cases) return ValidateEp(request, values, out, quiet);
  request.draft_shape = model::DefaultDraftShape();
  if (!quiet) request.progress = &std::cerr;
  const bool keep = !out.empty();
  request.work_dir = keep ? std::filesystem::path(out)
                          : std::filesystem::temp_directory_path() /
                                ("moelab-validate-" + std::to_string(getpid()));
  // --out is a new or empty folder: a refusal or a failure then removes all this run wrote there
  // (a refused --profile left its files behind), and nothing of the user's is mixed in or lost.
  std::error_code error;
  const bool out_existed = keep && std::filesystem::exists(request.work_dir, error);
  if (out_existed && !std::filesystem::is_directory(request.work_dir, error))
    throw base::Error("--out " + base::EscapeForMessage(out) + ": not a folder");
  if (out_existed && !std::filesystem::is_empty(request.work_dir, error)) {
    throw base::Error("--out " + base::EscapeForMessage(out) +
                      ": folder not empty (validate writes its report, profile, fit and traces "
                      "there: name a new or empty folder)");
  }
  // Under a regular file the folders cannot be created ("internal error: filesystem error").
  for (std::filesystem::path above = request.work_dir.parent_path(); keep && !above.empty();
       above = above.parent_path()) {
    if (!std::filesystem::exists(above, error)) continue;
    if (!std::filesystem::is_directory(above, error)) {
      throw base::Error("--out " + base::EscapeForMessage(out) + ": '" +
                        base::EscapeForMessage(above.string()) + "' is not a folder");
    }
    break;
  }
  if (values.count("repeat") && !values["repeat"].defaulted() && request.repeat < 1) {
    throw base::Error("--repeat " + std::to_string(request.repeat) +
                      ": must be at least 1 (leave it out for 3 with --quick, else 5)");
  }
  request.Validate();

  // Scratch (no --out) is removed always; --out's contents only when the run did not finish.
  struct RemoveAtExit {
    std::filesystem::path folder;
    bool keep_folder;  // --out existed (empty): its contents go, the folder stays
    bool done = false;
    ~RemoveAtExit() {
      std::error_code ignored;
      if (folder.empty() || done) return;
      if (!keep_folder) {
        std::filesystem::remove_all(folder, ignored);
        return;
      }
      for (const auto& entry : std::filesystem::directory_iterator(folder, ignored))
        std::filesystem::remove_all(entry.path(), ignored);
    }
  } scratch{request.work_dir, out_existed};

  const validate::ValidationResult result =
      validate::RunValidation(request, model::PresetStore::Default());
  if (keep) validate::WriteValidationFolder(result, request.work_dir);
  scratch.done = keep;
  if (values["json"].as<bool>()) {
    std::cout << validate::ValidationToJson(result).dump(2) << "\n";
  } else if (values["csv"].as<bool>()) {
    std::cout << report::JsonArrayRows(validate::ValidationToJson(result)["cases"]).ToCsv();
  } else {
    std::cout << validate::ValidationText(result);
  }
  return 0;
}

}  // namespace moelab::cli
