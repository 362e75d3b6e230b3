#include <iostream>

#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/shape_options.h"
#include "base/error.h"
#include "profiler/profile_summary.h"
#include "profiler/profiler.h"

namespace moelab::cli {

int Profile(const std::vector<std::string>& args) {
  profiler::ProfileRequest request;
  std::string out;
  bool quiet = false;
  po::options_description options("moelab profile");
  // clang-format off
  options.add_options()
      ("model", Into(&request.model), "model preset or path (shape overrides below apply)")
      ("quick", po::bool_switch(&request.quick), "coarse grid, 3 rounds of >= 50 ms repetitions across it (about 2 minutes on 2 cores)")
      ("out", po::value(&out), "write the profile (moelab.profile/1) here, atomically (required)")
      ("threads", Into(&request.threads), "threads (default: MOELAB_THREADS or all cores)")
      ("expert-bits", Into(&request.expert_bits), "routed expert weights as moelab run stores them: 16 (bf16), 8 (q8_0) or 4 (q4_0)")
      ("attention-bits", Into(&request.attention_bits), "attention q|k|v and o weights: 16, 8 or 4, as --expert-bits")
      ("json", po::bool_switch(), "also print the profile JSON on stdout")
      ("csv", po::bool_switch(), "print the profile's samples as CSV rows (one per sample) instead of the summary")
      ("quiet", po::bool_switch(&quiet), "no progress lines on stderr");
  // clang-format on
  po::options_description shape(
      "shape (defaults: Mixtral-8x7B scaled to this machine, as moelab run)");
  AddShapeOptions(shape, "", model::DefaultTargetShape());
  options.add(shape);
  po::variables_map values;
  if (!ParseOptions("usage: moelab profile --model M [shape overrides] [--quick] "
                    "[--expert-bits 16|8|4] [--attention-bits 16|8|4] --out PROFILE.json "
                    "[--threads N] [--json|--csv] [--quiet]",
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

  nlohmann::json profile = profiler::RunProfile(request, model::PresetStore::Default());
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
