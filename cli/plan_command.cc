#include <algorithm>
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
#include "model/forward_cost.h"
#include "model/sd_plan.h"

namespace moelab::cli {
namespace {

constexpr const char* kDefaultTarget = "qwen2-57b-a14b";
constexpr const char* kDefaultDraft = "qwen2-0.5b";
constexpr const char* kDefaultHardware = "2xa100-80gb-sxm";

void AddCostOptions(po::options_description& options) {
  const CostParameters defaults;
  options.add_options()
      ("dtype", po::value<std::string>()->default_value(defaults.compute_dtype), "compute data type whose peak FLOP/s applies")
      ("compute-efficiency", po::value<std::string>()->default_value(FormatNumber(defaults.compute_efficiency, 2)), "fraction of peak FLOP/s GEMMs reach, (0, 1]")
      ("memory-efficiency", po::value<std::string>()->default_value(FormatNumber(defaults.memory_efficiency, 2)), "fraction of peak bandwidth weight streaming reaches, (0, 1]")
      ("kernel-launch-s", po::value<std::string>()->default_value("4e-6"), "fixed seconds per operator launch");
}

CostParameters CostFrom(const po::variables_map& values) {
  CostParameters params;
  params.compute_dtype = values["dtype"].as<std::string>();
  params.compute_efficiency = ParseNumber(values["compute-efficiency"].as<std::string>(), "compute-efficiency");
  params.memory_efficiency = ParseNumber(values["memory-efficiency"].as<std::string>(), "memory-efficiency");
  params.kernel_launch_s = ParseNumber(values["kernel-launch-s"].as<std::string>(), "kernel-launch-s");
  params.Validate();
  return params;
}

nlohmann::json PlanToJson(const SdPlan& plan) {
  nlohmann::json rows = nlohmann::json::array();
  for (const SdPlanRow& r : plan.rows) {
    rows.push_back({{"batch", r.batch}, {"gamma", r.gamma}, {"sigma", r.sigma}, {"speedup", r.speedup},
                    {"target_efficiency", r.target_efficiency}, {"target_step_s", r.target_step_s},
                    {"verify_s", r.verify_s}, {"draft_step_s", r.draft_step_s}, {"reject_s", r.reject_s},
                    {"draft_share", r.draft_share}, {"verify_share", r.verify_share},
                    {"fits_memory", r.fits_memory}});
  }
  nlohmann::json best = nlohmann::json::array();
  for (const SdBestGamma& b : plan.best_gamma) {
    best.push_back({{"batch", b.batch}, {"gamma", b.gamma}, {"speedup", b.speedup}});
  }
  nlohmann::json json;
  json["rows"] = rows;
  json["best_gamma"] = best;
  json["pays_batch_range"] = plan.pays_batch_range
                                 ? nlohmann::json{{"min_batch", plan.pays_batch_range->first},
                                                  {"max_batch", plan.pays_batch_range->second}}
                                 : nlohmann::json(nullptr);
  json["cost_source"] = plan.cost_source;
  json["device"] = plan.device;
  json["compute_dtype"] = plan.compute_dtype;
  return json;
}

void PrintPlan(const SdPlan& plan, const std::string& model, const std::string& draft,
               const std::string& hardware, const SdPlanOptions& options) {
  std::cout << "Speculative decoding plan: target " << model << ", draft " << draft << ", on "
            << hardware << "\n"
            << "alpha " << FormatNumber(options.alpha, 2) << ", context " << options.context_length
            << " tokens, verify " << ToString(options.verify) << " positions, cost source "
            << plan.cost_source << " (" << plan.compute_dtype << " peak)\n\n";
  Table table({"batch", "gamma", "sigma", "speedup", "target eff", "T_T(B,1)", "draft %", "verify %", "fits"});
  for (const SdPlanRow& r : plan.rows) {
    table.AddRow({std::to_string(r.batch), std::to_string(r.gamma), FormatNumber(r.sigma, 3),
                  FormatNumber(r.speedup, 3), FormatNumber(r.target_efficiency, 3), FormatSeconds(r.target_step_s),
                  FormatNumber(100 * r.draft_share, 1), FormatNumber(100 * r.verify_share, 1),
                  r.fits_memory ? "yes" : "NO"});
  }
  std::cout << table.Render() << "\nBest gamma per batch:\n";
  Table best({"batch", "gamma", "speedup"});
  for (const SdBestGamma& b : plan.best_gamma) {
    best.AddRow({std::to_string(b.batch), std::to_string(b.gamma), FormatNumber(b.speedup, 3)});
  }
  std::cout << best.Render();
  if (plan.pays_batch_range) {
    std::cout << "\nSD pays (best speedup > 1) for batch " << plan.pays_batch_range->first << " to "
              << plan.pays_batch_range->second << " among those listed.\n";
  } else {
    std::cout << "\nSD does not pay at any listed batch.\n";
  }
}

int PlanSd(const std::vector<std::string>& args) {
  po::options_description options("moelab plan sd");
  options.add_options()
      ("model", po::value<std::string>()->default_value(kDefaultTarget), "target model preset or path")
      ("draft", po::value<std::string>()->default_value(kDefaultDraft), "draft model preset or path")
      ("hardware", po::value<std::string>()->default_value(kDefaultHardware), "hardware preset or path (e.g. 2xa100-80gb-sxm)")
      ("alpha", po::value<std::string>()->default_value("0.8"), "per-token acceptance rate, [0, 1)")
      ("batch", po::value<std::string>()->default_value("1-256:x2"), "batch sizes: 1,2,4 or 1-8 or 1-256:x2")
      ("gamma", po::value<std::string>()->default_value("1-8"), "draft lengths")
      ("context", po::value<int64_t>()->default_value(1024), "tokens already in each sequence's KV cache")
      ("verify", po::value<std::string>()->default_value("gamma+1"), "positions the target verifies per sequence: gamma+1 or gamma")
      ("json", po::bool_switch(), "print JSON")
      ("out", po::value<std::string>()->default_value(""), "write the JSON to this file (atomically)");
  AddCostOptions(options);
  AddProfileCostOption(options);
  AddCalibrationOptions(options);
  po::variables_map values;
  if (!ParseOptions("usage: moelab plan sd --model M --draft D --hardware H [--calibrate PROFILE.json] | --profile FIT.json [--alpha A] [--batch LIST] [--gamma LIST] [--json]",
                    options, args, values)) {
    return 0;
  }
  SdPlanOptions plan_options;
  plan_options.alpha = ParseNumber(values["alpha"].as<std::string>(), "alpha");
  if (!(plan_options.alpha >= 0 && plan_options.alpha < 1)) {
    throw Error("--alpha " + values["alpha"].as<std::string>() + ": expected a number in [0, 1)");
  }
  plan_options.batches = ParseIntList(values["batch"].as<std::string>(), "batch", 1);
  plan_options.gammas = ParseIntList(values["gamma"].as<std::string>(), "gamma", 1);
  plan_options.context_length = values["context"].as<int64_t>();
  plan_options.verify = VerifyPositionsFromString(values["verify"].as<std::string>());
  plan_options.Validate();

  const PresetStore store = PresetStore::Default();
  const std::unique_ptr<SdCostSource> source =
      MakeSdCostSource(values, store, CostFrom(values), plan_options.context_length);
  const MoeModelSpec& target = source->target;
  const MoeModelSpec& draft = source->draft;
  const CostParameters& params = source->params;
  const std::optional<CostCalibration>& calibration = source->calibration;
  const SdPlan plan = PlanSpeculativeDecoding(*source->costs, plan_options);

  const std::string out = values["out"].as<std::string>();
  if (values["json"].as<bool>() || !out.empty()) {
    nlohmann::json json = PlanToJson(plan);
    json["schema"] = "moelab.plan_sd/1";
    json["model"] = target.name;
    json["draft"] = draft.name;
    json["hardware"] = source->hardware_name;
    json["alpha"] = plan_options.alpha;
    json["context_length"] = plan_options.context_length;
    json["verify_positions"] = ToString(plan_options.verify);
    if (!values.count("profile")) {
      json["cost_parameters"] = {{"compute_dtype", params.compute_dtype},
                                 {"compute_efficiency", params.compute_efficiency},
                                 {"memory_efficiency", params.memory_efficiency},
                                 {"kernel_launch_s", params.kernel_launch_s}};
    }
    if (calibration) json["cost_calibration"] = calibration->ToJson();
    json["provenance"] = Provenance();
    EmitJson(json, out);
  } else {
    PrintPlan(plan, target.name, draft.name, source->display_name, plan_options);
    if (calibration) std::cout << "\nCalibration: " << calibration->Summary() << "\n";
  }
  return 0;
}

// The smallest listed hardware (least total accelerator memory, then fewest devices) whose
// analytic TPOT and TTFT meet the targets, with everything resident in accelerator memory. With
// --calibrate, the profile's own machine (CPU samples: its measured limits, or a host
// --profiled-hardware) is a candidate too, priced with the efficiencies fitted to its samples, and
// GPU samples calibrate every accelerator candidate (their roofline: --profiled-hardware).
int PlanHardware(const std::vector<std::string>& args) {
  po::options_description options("moelab plan hardware");
  options.add_options()
      ("model", po::value<std::string>()->default_value("mixtral-8x7b"), "model preset or path")
      ("batch", po::value<int64_t>()->default_value(1), "sequences decoded together")
      ("prompt", po::value<int64_t>()->default_value(512), "prompt tokens per sequence (TTFT)")
      ("context", po::value<int64_t>()->default_value(1024), "KV cache tokens per sequence during decode (TPOT)")
      ("tpot-max", po::value<std::string>(), "TPOT target, seconds")
      ("ttft-max", po::value<std::string>(), "TTFT target, seconds")
      ("devices", po::value<std::string>()->default_value("1,2,4,8"), "accelerator counts to consider for every accelerator preset")
      ("json", po::bool_switch(), "print JSON")
      ("out", po::value<std::string>()->default_value(""), "write the JSON to this file (atomically)");
  AddCostOptions(options);
  AddCalibrationOptions(options);
  po::variables_map values;
  if (!ParseOptions("usage: moelab plan hardware --model M [--tpot-max S] [--ttft-max S] [--batch B] [--calibrate PROFILE.json] [--json]", options, args, values)) {
    return 0;
  }
  if (!values.count("tpot-max") && !values.count("ttft-max")) throw Error("give --tpot-max and/or --ttft-max");
  const double tpot_max = values.count("tpot-max") ? ParseNumber(values["tpot-max"].as<std::string>(), "tpot-max") : INFINITY;
  const double ttft_max = values.count("ttft-max") ? ParseNumber(values["ttft-max"].as<std::string>(), "ttft-max") : INFINITY;
  if (!(tpot_max > 0) || !(ttft_max > 0)) throw Error("--tpot-max and --ttft-max must be > 0 seconds");
  const int64_t batch = values["batch"].as<int64_t>();
  const int64_t prompt = values["prompt"].as<int64_t>();
  const int64_t context = values["context"].as<int64_t>();
  if (batch < 1 || prompt < 1 || context < 0) throw Error("--batch and --prompt must be >= 1, --context >= 0");
  const std::vector<int64_t> counts = ParseIntList(values["devices"].as<std::string>(), "devices", 1);
  RefuseExplicitEfficiencies(values);
  const CostParameters assumed = CostFrom(values);
  CostParameters accelerator_params = assumed;
  const PresetStore store = PresetStore::Default();
  const MoeModelSpec model = store.LoadModel(values["model"].as<std::string>());

  struct Candidate {
    std::string name;
    int64_t devices;
    double memory_bytes;
    bool fits;
    double tpot_s, ttft_s;
    bool meets;
    std::string cost_source;
  };
  std::vector<Candidate> candidates;
  auto evaluate = [&](const std::string& name, const HardwareSpec& hardware, int64_t count, double memory_bytes,
                      const CostParameters& params, const std::string& source) {
    const double kv_tokens = static_cast<double>(batch) * static_cast<double>(std::max(context, prompt) + 1);
    const MemoryFootprint memory = EstimateMemory(model, hardware, kv_tokens, params);
    Candidate c{name, count, memory_bytes, memory.fits(), NAN, NAN, false, source};
    if (c.fits) {
      c.tpot_s = EstimateForwardCost(model, hardware, {batch, 1, context, true}, params).time_s;
      c.ttft_s = EstimateForwardCost(model, hardware, {batch, prompt, 0, false}, params).time_s;
      c.meets = c.tpot_s <= tpot_max && c.ttft_s <= ttft_max;
    }
    candidates.push_back(c);
  };

  std::vector<CostCalibration> calibrations;
  std::string accelerator_source = CostSourceName(false);
  if (WantsCalibration(values)) {
    const Profile& profile = CalibrationProfile(values);
    const std::optional<HardwareSpec> profiled =
        values.count("profiled-hardware") ? std::optional(store.LoadHardware(values["profiled-hardware"].as<std::string>()))
                                          : std::nullopt;
    bool used = false;
    if (CalibrationProfileHas(values, "gpu")) {
      if (!profiled || !profiled->has_accelerator()) {
        throw Error(profile.origin + " has GPU samples: name the accelerator they were measured on with --profiled-hardware");
      }
      const CostCalibration gpu = CalibrateFromOptions(values, store, "gpu", *profiled, assumed);
      accelerator_params = gpu.params;
      accelerator_source = CostSourceName(true);
      calibrations.push_back(gpu);
      used = true;
    }
    if (CalibrationProfileHas(values, "cpu") && (profile.limits || (profiled && !profiled->has_accelerator()))) {
      const HardwareSpec machine = profiled && !profiled->has_accelerator() ? *profiled : HardwareFromProfile(profile);
      const CostCalibration cpu = CalibrateFromOptions(values, store, "cpu", machine, assumed);
      evaluate(machine.name, machine, 0, machine.host->dram_bytes, cpu.params, CostSourceName(true));
      calibrations.push_back(cpu);
      used = true;
    }
    if (!used) {
      throw Error(profile.origin + ": nothing to calibrate: no GPU samples, and its CPU samples have no measured "
                  "limits (machine.limits) or host --profiled-hardware to judge them against");
    }
  }
  for (const PresetEntry& entry : store.ListHardware()) {
    if (entry.kind != "accelerator") continue;
    for (int64_t count : counts) {
      const std::string name = count == 1 ? entry.name : std::to_string(count) + "x" + entry.name;
      const HardwareSpec hardware = store.LoadHardware(name);
      evaluate(name, hardware, count, hardware.accelerator->memory_bytes * static_cast<double>(count), accelerator_params,
               accelerator_source);
    }
  }
  std::stable_sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return a.memory_bytes != b.memory_bytes ? a.memory_bytes < b.memory_bytes : a.devices < b.devices;
  });
  const Candidate* smallest = nullptr;
  for (const Candidate& c : candidates) {
    if (c.meets) {
      smallest = &c;
      break;
    }
  }
  const std::string out = values["out"].as<std::string>();
  if (values["json"].as<bool>() || !out.empty()) {
    nlohmann::json rows = nlohmann::json::array();
    for (const Candidate& c : candidates) {
      rows.push_back({{"hardware", c.name}, {"devices", c.devices}, {"memory_bytes", c.memory_bytes}, {"fits_memory", c.fits},
                      {"tpot_s", c.fits ? nlohmann::json(c.tpot_s) : nlohmann::json(nullptr)},
                      {"ttft_s", c.fits ? nlohmann::json(c.ttft_s) : nlohmann::json(nullptr)}, {"meets", c.meets},
                      {"cost_source", c.cost_source}});
    }
    nlohmann::json json = {{"schema", "moelab.plan_hardware/1"}, {"model", model.name}, {"batch", batch},
                           {"prompt", prompt}, {"context", context}, {"cost_source", accelerator_source},

                           {"tpot_max_s", std::isfinite(tpot_max) ? nlohmann::json(tpot_max) : nlohmann::json(nullptr)},
                           {"ttft_max_s", std::isfinite(ttft_max) ? nlohmann::json(ttft_max) : nlohmann::json(nullptr)},
                           {"rows", rows}, {"smallest", smallest ? nlohmann::json(smallest->name) : nlohmann::json(nullptr)}};
    for (const CostCalibration& calibration : calibrations) json["cost_calibrations"].push_back(calibration.ToJson());
    json["provenance"] = Provenance();
    EmitJson(json, out);
    return 0;
  }
  Table table({"hardware", "memory", "fits", "TPOT", "TTFT", "meets", "cost source"});
  for (const Candidate& c : candidates) {
    table.AddRow({c.name, FormatBytes(c.memory_bytes), c.fits ? "yes" : "no", c.fits ? FormatSeconds(c.tpot_s) : "-",
                  c.fits ? FormatSeconds(c.ttft_s) : "-", c.meets ? "yes" : "", c.cost_source});
  }
  std::cout << "Hardware for " << model.name << ", batch " << batch << ", prompt " << prompt << ", context " << context
            << " (roofline, all weights resident)\n\n" << table.Render() << "\n"
            << (smallest ? "Smallest that meets the targets: " + smallest->name : std::string("No listed hardware meets the targets."))
            << "\n";
  for (const CostCalibration& calibration : calibrations) std::cout << "Calibration: " << calibration.Summary() << "\n";
  return 0;
}

}  // namespace

void RegisterPlanCommands(std::vector<Command>& commands) {
  commands.push_back({{"plan", "sd"}, "speculative-decoding speedup per batch and gamma (analytic)", PlanSd});
  commands.push_back({{"plan", "hardware"}, "the smallest listed hardware that meets a TPOT/TTFT target", PlanHardware});
}

}  // namespace moelab::cli
