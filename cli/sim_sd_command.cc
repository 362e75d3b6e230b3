// moelab sim sd: the speculative-decoding sweep over batch x gamma x alpha (or sigma).
#include <cmath>
#include <iostream>
#include <optional>

#include "cli/calibration_options.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/sd_cost_source.h"
#include "base/error.h"
#include "model/preset_store.h"
#include "fit/fit_json.h"
#include "fit/predict.h"
#include "model/sd_plan.h"
#include <memory>

namespace moelab::cli {
namespace {

int SimSd(const std::vector<std::string>& args) {
  po::options_description options("moelab sim sd");
  options.add_options()
      ("model", po::value<std::string>()->default_value("qwen2-57b-a14b"), "target model preset or path")
      ("draft", po::value<std::string>()->default_value("qwen2-0.5b"), "draft model preset or path")
      ("hardware", po::value<std::string>()->default_value("2xa100-80gb-sxm"), "hardware preset or path (analytic roofline cost source)")
      ("alpha", po::value<std::string>()->default_value("0.6,0.7,0.8,0.9"), "acceptance rates: list (0.6,0.8) or start:stop:step, each in [0, 1)")
      ("sigma", po::value<std::string>(), "accepted-length fractions instead of alpha, each in (0, 1]")
      ("batch", po::value<std::string>()->default_value("1-256:x2"), "batch sizes: 1,2,4 or 1-8 or 1-256:x2")
      ("gamma", po::value<std::string>()->default_value("1-8"), "draft lengths")
      ("context", po::value<int64_t>()->default_value(1024), "tokens already in each sequence's KV cache")
      ("verify", po::value<std::string>()->default_value("gamma+1"), "positions the target verifies per sequence: gamma+1 or gamma")
      ("sd-fit", po::value<std::string>(), "a fitted MoESD model (moelab fit sd): its speedup is reported beside each row")
      ("json", po::bool_switch(), "print JSON")
      ("out", po::value<std::string>()->default_value(""), "write the JSON to this file (atomically)");
  AddProfileCostOption(options);
  AddCalibrationOptions(options);
  po::variables_map values;
  if (!ParseOptions("usage: moelab sim sd --model M --draft D --hardware H|--profile FIT.json [--calibrate PROFILE.json] [--alpha LIST | --sigma LIST] [--batch LIST] [--gamma LIST] [--json]",
                    options, args, values)) {
    return 0;
  }
  SdPlanOptions base;
  base.batches = ParseIntList(values["batch"].as<std::string>(), "batch", 1);
  base.gammas = ParseIntList(values["gamma"].as<std::string>(), "gamma", 1);
  base.context_length = values["context"].as<int64_t>();
  base.verify = VerifyPositionsFromString(values["verify"].as<std::string>());
  const bool by_sigma = values.count("sigma") > 0;
  if (by_sigma && !values["alpha"].defaulted()) throw Error("give --alpha or --sigma, not both");
  const std::vector<double> levels =
      ParseNumberList(by_sigma ? values["sigma"].as<std::string>() : values["alpha"].as<std::string>(), by_sigma ? "sigma" : "alpha");
  for (double level : levels) {
    if (by_sigma ? !(level > 0 && level <= 1) : !(level >= 0 && level < 1)) {
      throw Error(std::string("--") + (by_sigma ? "sigma" : "alpha") + " value " + FormatNumber(level, 4) +
                  (by_sigma ? ": expected a number in (0, 1]" : ": expected a number in [0, 1)"));
    }
  }

  const PresetStore store = PresetStore::Default();
  const std::unique_ptr<SdCostSource> source = MakeSdCostSource(values, store, CostParameters{}, base.context_length);
  const MoeModelSpec& target = source->target;
  const MoeModelSpec& draft = source->draft;
  const std::optional<CostCalibration>& calibration = source->calibration;
  SdStepCosts& costs = *source->costs;
  std::optional<SdFit> sd_fit;
  if (values.count("sd-fit")) sd_fit = LoadSdFit(values["sd-fit"].as<std::string>());

  nlohmann::json rows = nlohmann::json::array(), best = nlohmann::json::array(), pays = nlohmann::json::array();
  Table table({by_sigma ? "sigma" : "alpha", "batch", "best gamma", "speedup", "target eff", "draft %", "verify %"});
  for (double level : levels) {
    SdPlanOptions options = base;
    if (by_sigma) {
      options.sigma = level;
    } else {
      options.alpha = level;
    }
    const SdPlan plan = PlanSpeculativeDecoding(costs, options);
    for (const SdPlanRow& r : plan.rows) {
      nlohmann::json row = {{"batch", r.batch}, {"gamma", r.gamma}, {"sigma", r.sigma}, {"speedup", r.speedup},
                            {"target_efficiency", r.target_efficiency}, {"target_step_s", r.target_step_s},
                            {"verify_s", r.verify_s}, {"draft_step_s", r.draft_step_s}, {"reject_s", r.reject_s},
                            {"draft_share", r.draft_share}, {"verify_share", r.verify_share}, {"fits_memory", r.fits_memory}};
      row["alpha"] = by_sigma ? nlohmann::json(nullptr) : nlohmann::json(level);
      if (sd_fit && target.moe) {
        row["moesd_speedup"] = PredictSpeedup(*sd_fit, SdPoint{r.batch, r.gamma, target.moe->top_k, target.moe->num_experts, r.sigma});
      }
      rows.push_back(row);
    }
    for (const SdBestGamma& b : plan.best_gamma) {
      nlohmann::json entry = {{"batch", b.batch}, {"gamma", b.gamma}, {"speedup", b.speedup}};
      entry[by_sigma ? "sigma" : "alpha"] = level;
      best.push_back(entry);
      for (const SdPlanRow& r : plan.rows) {
        if (r.batch == b.batch && r.gamma == b.gamma) {
          table.AddRow({FormatNumber(level, 2), std::to_string(b.batch), std::to_string(b.gamma), FormatNumber(b.speedup, 3),
                        FormatNumber(r.target_efficiency, 3), FormatNumber(100 * r.draft_share, 1), FormatNumber(100 * r.verify_share, 1)});
        }
      }
    }
    nlohmann::json range = {{by_sigma ? "sigma" : "alpha", level}};
    range["min_batch"] = plan.pays_batch_range ? nlohmann::json(plan.pays_batch_range->first) : nlohmann::json(nullptr);
    range["max_batch"] = plan.pays_batch_range ? nlohmann::json(plan.pays_batch_range->second) : nlohmann::json(nullptr);
    pays.push_back(range);
  }
  const std::string out = values["out"].as<std::string>();
  if (values["json"].as<bool>() || !out.empty()) {
    nlohmann::json json = {{"schema", "moelab.sim_sd/1"}, {"model", target.name}, {"draft", draft.name},
                           {"hardware", source->hardware_name}, {"context_length", base.context_length},
                           {"verify_positions", ToString(base.verify)}, {"cost_source", costs.source()},
                           {"device", costs.device()}, {"compute_dtype", costs.compute_dtype()},
                           {"rows", rows}, {"best_gamma", best}, {"pays_batch_range", pays}};
    if (sd_fit) json["sd_fit"] = values["sd-fit"].as<std::string>();
    if (calibration) json["cost_calibration"] = calibration->ToJson();
    json["provenance"] = Provenance();
    EmitJson(json, out);
    return 0;
  }
  std::cout << "SD sweep: target " << target.name << ", draft " << draft.name << " on "
            << source->display_name
            << " (cost source " << costs.source() << "), context " << base.context_length << "\n\n"
            << table.Render();
  for (const auto& range : pays) {
    std::cout << (by_sigma ? "sigma " : "alpha ") << FormatNumber(range[by_sigma ? "sigma" : "alpha"].get<double>(), 2) << ": ";
    if (range["min_batch"].is_null()) {
      std::cout << "SD never pays among the listed batches\n";
    } else {
      std::cout << "SD pays for batch " << range["min_batch"] << " to " << range["max_batch"] << "\n";
    }
  }
  if (calibration) std::cout << "Calibration: " << calibration->Summary() << "\n";
  return 0;
}

}  // namespace

void RegisterSimSdCommands(std::vector<Command>& commands) {
  commands.push_back({{"sim", "sd"}, "speculative-decoding sweep over batch x gamma x alpha", SimSd});
}

}  // namespace moelab::cli
