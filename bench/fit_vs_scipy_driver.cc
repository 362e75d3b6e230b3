// The Ceres side of bench/fit_vs_scipy.py: times single-start MoESD fits on a measurements file
// with exactly the problem `moelab fit sd` solves (fit/sd_fit.h MakeSdLeastSquaresModel: same
// residuals, bounds, start 0 and scaling) and prints JSON the script compares with scipy.
//
//   moelab_fit_bench --measurements M.csv --model M --draft D --hardware H
//                    [--denominator algorithm1|equation4] [--repeat N] [--bounds-only]
//
// Output (stdout): {"ridge_point_tokens", "scales", "names", "lower", "upper" (null = none),
// "initial_params", "scale", "runs": [{"label", "tolerances", "median_s", "min_s",
// "final_cost", "params", "iterations", "converged", "termination"}], "full_fit": {...}}.
// Times are wall-clock (steady_clock) around the whole single solve, problem construction
// included, as scipy's timing includes its own setup; the median of --repeat runs is reported.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fit/fit_json.h"
#include "report/provenance.h"
#include "fit/least_squares.h"
#include "fit/sd_fit.h"
#include "base/error.h"
#include "base/stats.h"
#include "model/preset_store.h"

namespace {

using Clock = std::chrono::steady_clock;

std::map<std::string, std::string> ParseArgs(int argc, char** argv) {
  std::map<std::string, std::string> args = {{"denominator", "algorithm1"}, {"repeat", "50"}};
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (key.rfind("--", 0) != 0) throw moelab::base::Error("unexpected argument: " + key);
    const std::string name(key, 2);
    if (name == "bounds-only") {
      args.insert_or_assign(name, std::string(1, '1'));
    } else if (i + 1 < argc) {
      args.insert_or_assign(name, std::string(argv[++i]));
    } else {
      throw moelab::base::Error("option '" + key + "' needs a value");
    }
  }
  for (const char* required : {"measurements", "model", "draft", "hardware"}) {
    if (!args.count(required)) throw moelab::base::Error(std::string("missing --") + required);
  }
  return args;
}

nlohmann::json Finite(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

int Main(int argc, char** argv) {
  const auto args = ParseArgs(argc, argv);
  const moelab::model::PresetStore store = moelab::model::PresetStore::Default();
  const auto measurements = moelab::fit::LoadSdMeasurements(args.at("measurements"));
  moelab::fit::ValidateSdMeasurementSet(measurements, args.at("measurements"));
  const moelab::fit::SdFitScales scales = moelab::fit::ComputeSdFitScales(
      store.LoadModel(args.at("model")), store.LoadModel(args.at("draft")),
      store.LoadHardware(args.at("hardware")), measurements, std::nullopt);
  const moelab::model::SdDenominator denominator =
      moelab::model::SdDenominatorFromString(args.at("denominator"));
  const moelab::fit::LeastSquaresModel model = moelab::fit::MakeSdLeastSquaresModel(
      measurements, scales, denominator, args.at("measurements"));
  const moelab::fit::FitOptions options;
  moelab::fit::StartSampler sampler(options.seed);
  std::vector<double> centre = model.make_start(0, sampler);
  for (size_t i = 0; i < centre.size(); ++i) {
    centre[i] = std::clamp(centre[i], model.parameters[i].lower, model.parameters[i].upper);
  }
  const std::vector<double> scale = moelab::fit::SolverScale(model, centre);

  nlohmann::json out;
  out["ridge_point_tokens"] = scales.ridge_point_tokens;
  out["denominator"] = moelab::model::ToString(denominator);
  out["scales"] = {{"t_dense_s", scales.t_dense_s},
                   {"t_expert_s", scales.t_expert_s},
                   {"t_draft_s", scales.t_draft_s},
                   {"t_reject_max_s", scales.t_reject_max_s},
                   {"max_batch", scales.max_batch}};
  out["names"] = nlohmann::json::array();
  out["lower"] = nlohmann::json::array();
  out["upper"] = nlohmann::json::array();
  for (const moelab::fit::ParameterSpec& p : model.parameters) {
    out["names"].push_back(p.name);
    out["lower"].push_back(Finite(p.lower));
    out["upper"].push_back(Finite(p.upper));
  }
  out["initial_params"] = centre;
  out["scale"] = scale;
  if (args.count("bounds-only")) {
    out["provenance"] = moelab::report::Provenance();
    std::cout << out.dump(2) << "\n";
    return 0;
  }

  const int repeat = std::max(1, std::stoi(args.at("repeat")));
  struct Tolerances {
    std::string label;
    double function, parameter, gradient;
  };
  const ceres::Solver::Options library = moelab::fit::MakeSolverOptions(options);
  const std::vector<Tolerances> variants = {
      {"ceres-library-tolerances", library.function_tolerance, library.parameter_tolerance,
       library.gradient_tolerance},
      {"ceres-scipy-tolerances", 1e-8, 1e-8, 1e-8}};
  out["runs"] = nlohmann::json::array();
  for (const Tolerances& t : variants) {
    ceres::Solver::Options solver = library;
    solver.function_tolerance = t.function;
    solver.parameter_tolerance = t.parameter;
    solver.gradient_tolerance = t.gradient;
    std::vector<double> seconds;
    moelab::fit::LeastSquaresFit fit;
    for (int r = 0; r < repeat; ++r) {
      const auto begin = Clock::now();
      fit = moelab::fit::SolveFromStart(model, options, centre, scale, {}, &solver);
      seconds.push_back(std::chrono::duration<double>(Clock::now() - begin).count());
    }
    out["runs"].push_back(
        {{"label", t.label},
         {"tolerances",
          {{"function", t.function}, {"parameter", t.parameter}, {"gradient", t.gradient}}},
         {"median_s", moelab::base::Median(seconds)},
         {"min_s", *std::min_element(seconds.begin(), seconds.end())},
         {"final_cost", fit.final_cost},
         {"params", fit.params},
         {"iterations", fit.iterations},
         {"converged", fit.converged},
         {"termination", fit.termination_message}});
  }
  // For context: the whole `moelab fit sd` computation (8 starts, covariance, cross-validation).
  std::vector<double> seconds;
  moelab::fit::SdFit full;
  for (int r = 0; r < std::max(1, repeat / 10); ++r) {
    const auto begin = Clock::now();
    full = moelab::fit::FitSd(measurements, scales, denominator, options, args.at("measurements"));
    seconds.push_back(std::chrono::duration<double>(Clock::now() - begin).count());
  }
  out["full_fit"] = {{"median_s", moelab::base::Median(seconds)},
                     {"final_cost", full.final_cost},
                     {"starts", options.starts},
                     {"starts_converged", full.starts_converged}};
  out["provenance"] = moelab::report::Provenance();
  std::cout << out.dump(2) << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  moelab::report::SetCommandLine(argc, argv);
  try {
    return Main(argc, argv);
  } catch (const moelab::base::Error& e) {
    std::cerr << "moelab_fit_bench: error: " << e.what() << "\n";
    return 1;
  }
}
