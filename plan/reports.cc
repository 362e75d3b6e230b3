#include "plan/reports.h"

#include <algorithm>

#include <cmath>
#include <sstream>

#include "report/format.h"
#include "report/json_rows.h"
#include "report/provenance.h"
#include "sim/cost_model.h"

namespace moelab::plan {
namespace {

// What the sweep's runs name their sources by (sim::CostSourceName); a device the hardware lacks
// has none (every run refuses such hardware), so the other's name stands alone.
std::string OffloadCostSource(const sim::SimConfig& config) {
  if (config.accelerator_costs && config.host_costs)
    return sim::CostSourceName(*config.accelerator_costs, *config.host_costs);
  if (config.accelerator_costs || config.host_costs)
    return (config.accelerator_costs ? config.accelerator_costs : config.host_costs)->name();
  return fit::CostSources::RooflineName(false);
}

using report::Cell;
using report::Column;
using report::Format;
using report::FormatNumber;
using report::FormatSeconds;
using report::RowSet;

std::string Json(nlohmann::json json) {
  json["provenance"] = report::Provenance();
  return json.dump(2) + "\n";
}

std::function<std::string(const Cell&)> Fixed(int places, double scale = 1) {
  return [places, scale](const Cell& cell) {
    return FormatNumber(std::get<double>(cell) * scale, places);
  };
}

std::string SecondsText(const Cell& cell) { return FormatSeconds(std::get<double>(cell)); }
std::string FitsText(const Cell& cell) { return std::get<bool>(cell) ? "yes" : "NO"; }

// Whether every listed row fits in memory (the summary then need not say "that fit").
bool AllFit(const model::SdPlan& plan) {
  return std::all_of(plan.rows.begin(), plan.rows.end(),
                     [](const model::SdPlanRow& row) { return row.fits_memory; });
}

// The columns of an SD plan row; `level` adds the sweep's alpha (null when sigma was fixed) and
// the MoESD fit's speedup when there is one.
RowSet SdRows(const SdSweepResult& result, const SdSweepLevel& level, bool sweep) {
  std::vector<Column> columns = {
      {"batch", "batch"},
      {"gamma", "gamma"},
      {"sigma", "sigma", Fixed(3)},
      {"speedup", "speedup", Fixed(3)},
      {"target_efficiency", "target eff", Fixed(3)},
      {"target_step_s", "T_T(B,1)", SecondsText},
      {"verify_s", "verify", SecondsText, false},
      {"draft_step_s", "draft step", SecondsText, false},
      {"draft_following_step_s", "draft next", SecondsText, false},
      {"reject_s", "reject", SecondsText, false},
      {"catch_up_s", "catch-up", SecondsText, false},
      {"draft_share", "draft %", Fixed(1, 100)},
      {"verify_share", "verify %", Fixed(1, 100)},
      {"fits_memory", "fits", FitsText},
  };
  if (sweep) {
    columns.push_back({"alpha", "alpha", Fixed(2), false});
    if (result.sd_fit) columns.push_back({"moesd_speedup", "MoESD", Fixed(3), false});
  }
  RowSet rows(columns);
  for (const model::SdPlanRow& r : level.plan.rows) {
    std::vector<Cell> cells = {r.batch,
                               r.gamma,
                               r.sigma,
                               r.speedup,
                               r.target_efficiency,
                               r.target_step_s,
                               r.verify_s,
                               r.draft_step_s,
                               r.draft_following_step_s,
                               r.reject_s,
                               r.catch_up_s,
                               r.draft_share,
                               r.verify_share,
                               r.fits_memory};
    if (sweep) {
      cells.push_back(result.by_sigma ? Cell{} : Cell{level.level});
      if (result.sd_fit) {
        const std::optional<double> moesd = result.MoesdSpeedup(r);
        cells.push_back(moesd ? Cell{*moesd} : Cell{});
      }
    }
    rows.Add(std::move(cells));
  }
  return rows;
}

void AddSourceFields(const SdSweepResult& result, nlohmann::json& json) {
  const nlohmann::json described = result.source->Describe();
  if (described.contains("cost_parameters")) json["cost_parameters"] = described["cost_parameters"];
  if (result.calibration) json["cost_calibration"] = result.calibration->ToJson();
}

std::string CalibrationLine(const SdSweepResult& result) {
  return result.calibration ? "Calibration: " + result.calibration->Summary() + "\n" : "";
}

}  // namespace

std::string RenderSdPlan(const SdSweepResult& result, Format format) {
  const SdSweepLevel& level = result.levels.front();
  const model::SdPlan& plan = level.plan;
  const RowSet rows = SdRows(result, level, false);
  if (format == Format::kCsv) return rows.ToCsv();
  RowSet best({{"batch", "batch"},
               {"gamma", "gamma"},
               {"speedup", "speedup", Fixed(3)},
               {"fits_memory", "fits", FitsText}});
  for (const model::SdBestGamma& b : plan.best_gamma)
    best.Add({b.batch, b.gamma, b.speedup, b.fits_memory});
  if (format == Format::kJson) {
    nlohmann::json json = {{"schema", "moelab.plan_sd/1"},
                           {"model", result.target.name},
                           {"draft", result.draft.name},
                           {"hardware", result.hardware},
                           {"alpha", level.level},
                           {"context_length", result.plan.context_length},
                           {"verify_positions", ToString(result.plan.verify)},
                           {"rows", rows.ToJson()},
                           {"best_gamma", best.ToJson()},
                           {"cost_source", plan.cost_source},
                           {"routing", plan.routing},
                           {"device", plan.device},
                           {"compute_dtype", plan.compute_dtype}};
    json["pays_batch_range"] = plan.pays_batch_range
                                   ? nlohmann::json{{"min_batch", plan.pays_batch_range->first},
                                                    {"max_batch", plan.pays_batch_range->second}}
                                   : nlohmann::json(nullptr);
    AddSourceFields(result, json);
    return Json(json);
  }
  std::ostringstream out;
  out << "Speculative decoding plan: target " << result.target.name << ", draft "
      << result.draft.name << ", on " << result.display_name << "\n"
      << "alpha " << FormatNumber(level.level, 2) << ", context " << result.plan.context_length
      << " tokens, verify " << ToString(result.plan.verify) << " positions, cost source "
      << plan.cost_source << " (" << plan.compute_dtype << " peak), routing " << plan.routing
      << "\n\n"
      << rows.ToTable() << "\nBest gamma per batch:\n"
      << best.ToTable();
  if (plan.pays_batch_range) {
    out << "\nSD pays (best speedup > 1) for batch " << plan.pays_batch_range->first << " to "
        << plan.pays_batch_range->second << " among those listed"
        << (AllFit(plan) ? "" : " that fit in memory") << ".\n";
  } else {
    out << "\nSD does not pay at any listed batch" << (AllFit(plan) ? "" : " that fits in memory")
        << ".\n";
  }
  if (result.calibration) out << "\n" << CalibrationLine(result);
  return out.str();
}

std::string RenderSdSweep(const SdSweepResult& result, Format format) {
  const char* level_key = result.by_sigma ? "sigma" : "alpha";
  nlohmann::json rows = nlohmann::json::array(), best = nlohmann::json::array(),
                 pays = nlohmann::json::array();
  std::string csv;
  RowSet table({{level_key, level_key, Fixed(2)},
                {"batch", "batch"},
                {"gamma", "best gamma"},
                {"speedup", "speedup", Fixed(3)},
                {"target_efficiency", "target eff", Fixed(3)},
                {"draft_share", "draft %", Fixed(1, 100)},
                {"verify_share", "verify %", Fixed(1, 100)},
                {"fits_memory", "fits", FitsText}});
  bool all_fit = true;
  for (const SdSweepLevel& level : result.levels) {
    all_fit = all_fit && AllFit(level.plan);
    const RowSet level_rows = SdRows(result, level, true);
    for (nlohmann::json& row : level_rows.ToJson()) {
      if (!row.contains("moesd_speedup") || !row["moesd_speedup"].is_null())
        rows.push_back(row);
      else {
        row.erase("moesd_speedup");
        rows.push_back(row);
      }
    }
    const std::string level_csv = level_rows.ToCsv();
    csv += csv.empty() ? level_csv : level_csv.substr(level_csv.find('\n') + 1);
    for (const model::SdBestGamma& b : level.plan.best_gamma) {
      best.push_back({{"batch", b.batch},
                      {"gamma", b.gamma},
                      {"speedup", b.speedup},
                      {"fits_memory", b.fits_memory},
                      {level_key, level.level}});
      for (const model::SdPlanRow& r : level.plan.rows) {
        if (r.batch == b.batch && r.gamma == b.gamma) {
          table.Add({level.level, b.batch, b.gamma, b.speedup, r.target_efficiency, r.draft_share,
                     r.verify_share, b.fits_memory});
        }
      }
    }
    nlohmann::json range = {{level_key, level.level}};
    range["min_batch"] = level.plan.pays_batch_range
                             ? nlohmann::json(level.plan.pays_batch_range->first)
                             : nlohmann::json(nullptr);
    range["max_batch"] = level.plan.pays_batch_range
                             ? nlohmann::json(level.plan.pays_batch_range->second)
                             : nlohmann::json(nullptr);
    pays.push_back(range);
  }
  if (format == Format::kCsv) return csv;
  const model::CostSource& source = *result.source;
  if (format == Format::kJson) {
    nlohmann::json json = {{"schema", "moelab.sim_sd/1"},
                           {"model", result.target.name},
                           {"draft", result.draft.name},
                           {"hardware", result.hardware},
                           {"context_length", result.plan.context_length},
                           {"verify_positions", ToString(result.plan.verify)},
                           {"cost_source", source.name()},
                           {"routing", model::DescribeActivation(result.target_routing.get())},
                           {"device", source.device()},
                           {"compute_dtype", source.compute_dtype()},
                           {"rows", rows},
                           {"best_gamma", best},
                           {"pays_batch_range", pays}};
    if (result.sd_fit) json["sd_fit"] = result.sd_fit_path;
    if (result.calibration) json["cost_calibration"] = result.calibration->ToJson();
    return Json(json);
  }
  std::ostringstream out;
  out << "SD sweep: target " << result.target.name << ", draft " << result.draft.name << " on "
      << result.display_name << " (cost source " << source.name() << ", routing "
      << model::DescribeActivation(result.target_routing.get()) << "), context "
      << result.plan.context_length << "\n\n"
      << table.ToTable();
  for (const auto& range : pays) {
    out << level_key << " " << FormatNumber(range[level_key].get<double>(), 2) << ": ";
    if (range["min_batch"].is_null()) {
      out << "SD never pays among the listed batches" << (all_fit ? "" : " that fit in memory")
          << "\n";
    } else {
      out << "SD pays for batch " << range["min_batch"] << " to " << range["max_batch"]
          << (all_fit ? "" : " among those that fit in memory") << "\n";
    }
  }
  out << CalibrationLine(result);
  return out.str();
}

std::string Render(const HardwareSearchResult& result, Format format) {
  const auto optional_seconds = [](const std::optional<double>& s) {
    return s ? Cell{*s} : Cell{};
  };
  RowSet rows({{"hardware", "hardware"},
               {"devices", "devices", nullptr, false},
               {"memory_bytes", "memory",
                [](const Cell& c) { return report::FormatBytes(std::get<double>(c)); }},
               {"fits_memory", "fits"},
               {"tpot_s", "TPOT", SecondsText},
               {"ttft_s", "TTFT", SecondsText},
               {"meets", "meets",
                [](const Cell& c) { return std::string(std::get<bool>(c) ? "yes" : ""); }},
               {"cost_source", "cost source"}});
  for (const HardwareCandidate& c : result.candidates) {
    rows.Add({c.hardware, c.devices, c.memory_bytes, c.fits, optional_seconds(c.tpot_s),
              optional_seconds(c.ttft_s), c.meets, c.cost_source});
  }
  if (format == Format::kCsv) return rows.ToCsv();
  const HardwareSearchRequest& r = result.request;
  if (format == Format::kJson) {
    nlohmann::json json = {
        {"schema", "moelab.plan_hardware/1"},
        {"model", result.model.name},
        {"batch", r.batch},
        {"prompt", r.prompt},
        {"context", r.context},
        {"cost_source", result.cost_source},
        {"routing", result.routing},
        {"tpot_max_s", r.tpot_max_s ? nlohmann::json(*r.tpot_max_s) : nlohmann::json(nullptr)},
        {"ttft_max_s", r.ttft_max_s ? nlohmann::json(*r.ttft_max_s) : nlohmann::json(nullptr)},
        {"rows", rows.ToJson()},
        {"smallest", result.smallest ? nlohmann::json(*result.smallest) : nlohmann::json(nullptr)}};
    for (const fit::CostCalibration& calibration : result.calibrations)
      json["cost_calibrations"].push_back(calibration.ToJson());
    return Json(json);
  }
  std::ostringstream out;
  out << "Hardware for " << result.model.name << ", batch " << r.batch << ", prompt " << r.prompt
      << ", context " << r.context << " (roofline, all weights resident, routing " << result.routing
      << ")\n\n"
      << rows.ToTable() << "\n"
      << (result.smallest ? "Smallest that meets the targets: " + *result.smallest
                          : std::string("No listed hardware meets the targets."))
      << "\n";
  for (const fit::CostCalibration& calibration : result.calibrations)
    out << "Calibration: " << calibration.Summary() << "\n";
  return out.str();
}

std::string Render(const OffloadSweepResult& result, Format format) {
  RowSet rows({{"memory_bytes", "memory"},
               {"policy", "policy"},
               {"tpot_s", "TPOT"},
               {"ttft_s", "TTFT"},
               {"hit_rate", "hit rate"},
               {"fits", "fits"},
               {"error", "error"}});
  for (const OffloadSweepCell& cell : result.cells) {
    if (cell.result) {
      const sim::SimResult& r = *cell.result;
      rows.Add({cell.memory_bytes, cell.policy, r.tpot_s ? Cell{*r.tpot_s} : Cell{}, r.ttft_s,
                r.hit_rate(), r.fits_accelerator, Cell{}});
    } else {
      rows.Add({cell.memory_bytes, cell.policy, Cell{}, Cell{}, Cell{}, Cell{}, cell.error});
    }
  }
  if (format == Format::kCsv) return rows.ToCsv();
  const sim::SimConfig& base = result.base;
  if (format == Format::kJson) {
    // Rows as before: a failed cell carries only its error.
    nlohmann::json json_rows = rows.ToJson();
    for (nlohmann::json& row : json_rows) {
      if (row["error"].is_null()) {
        row.erase("error");
      } else {
        for (const char* key : {"tpot_s", "ttft_s", "hit_rate", "fits"}) row.erase(key);
      }
    }
    nlohmann::json json = {{"schema", "moelab.plan_offload/1"},
                           {"model", base.model.name},
                           {"hardware", base.hardware.name},
                           {"workload", sim::ToString(base.workload.kind)},
                           {"routing", base.routing.text},
                           {"cost_source", OffloadCostSource(base)},
                           {"rows", json_rows}};
    for (const fit::CostCalibration& calibration : result.calibrations)
      json["cost_calibrations"].push_back(calibration.ToJson());
    return Json(json);
  }
  // The text view: one row per memory size, one column per policy.
  std::vector<std::string> header = {"memory"};
  for (const std::string& name : result.policies) header.push_back(name);
  report::Table table(header);
  size_t index = 0;
  for (double bytes : result.memory_bytes) {
    // As given in --memory (0.5 GB printed "0 GB"; 12 stays "12 GB").
    std::vector<std::string> cells = {report::ShortestText(bytes / 1e9) + " GB"};
    for (size_t p = 0; p < result.policies.size(); ++p, ++index) {
      const OffloadSweepCell& cell = result.cells[index];
      if (!cell.result) {
        cells.push_back("-");
      } else if (!cell.result->fits_accelerator) {
        cells.push_back("no fit");
      } else {
        cells.push_back(
            FormatSeconds(cell.result->tpot_s ? *cell.result->tpot_s : cell.result->ttft_s));
      }
    }
    table.AddRow(cells);
  }
  std::ostringstream out;
  out << "Offload policies for " << base.model.name << " on " << base.hardware.display_name << " ("
      << sim::ToString(base.workload.kind) << ", routing " << base.routing.text
      << "): TPOT by accelerator memory (TTFT for prefill; '-' = the policy cannot run at that "
         "size), cost source "
      << OffloadCostSource(base) << "\n\n"
      << table.Render();
  for (const fit::CostCalibration& calibration : result.calibrations)
    out << "Calibration: " << calibration.Summary() << "\n";
  return out.str();
}

namespace {

nlohmann::json CostParametersJson(const model::CostParameters& cost) {
  return {{"compute_dtype", cost.compute_dtype},
          {"compute_efficiency", cost.compute_efficiency},
          {"memory_efficiency", cost.memory_efficiency},
          {"kernel_launch_s", cost.kernel_launch_s}};
}

std::string SimSummaryText(const sim::SimResult& r) {
  std::ostringstream text;
  text << "moelab sim offload: " << r.model << " on " << r.accelerator_name << " + " << r.cpu_name
       << ", policy " << r.policy << ", workload " << sim::ToString(r.workload.kind) << " (prompt "
       << r.workload.prompt_tokens
       // A prefill computes the prompt and its first token only: --tokens plays no part.
       << (r.workload.kind == sim::WorkloadKind::kPrefill
               ? std::string()
               : ", " + std::to_string(r.workload.output_tokens) + " output tokens")
       << ", batch " << r.workload.batch << ")\n"
       << "routing: " << r.routing << "\ncost source: " << r.cost_source << " (" << r.compute_dtype
       << " peak)\n\n";
  report::Table table({"metric", "value"});
  table.AddRow({"TTFT", FormatSeconds(r.ttft_s)});
  table.AddRow({"TPOT", r.tpot_s ? FormatSeconds(*r.tpot_s) : "-"});
  table.AddRow({"tokens/s", r.tokens_per_s ? FormatNumber(*r.tokens_per_s, 2) : "-"});
  table.AddRow({"expert hit rate", FormatNumber(100 * r.hit_rate(), 1) + " %"});
  table.AddRow(
      {"expert weights host->accelerator", report::FormatBytes(r.bytes_h2d_expert_weights)});
  table.AddRow({"storage reads", report::FormatBytes(r.bytes_storage_read)});
  table.AddRow({"expert slots / staging buffers",
                std::to_string(r.expert_slots) + " / " + std::to_string(r.staging_buffers)});
  for (int i = 0; i < sim::kResourceCount; ++i) {
    table.AddRow(
        {"busy " + sim::ResourceName(static_cast<sim::Resource>(i)), FormatSeconds(r.busy_s[i])});
  }
  text << table.Render();
  if (!r.fits_accelerator)
    text << "(resident is the ideal: the experts do not actually fit in accelerator memory)\n";
  if (r.calibration_in_sample) {
    text << "(calibrated in sample: the policy learned from the trace it replays, so its hit "
            "rate is optimistic)\n";
  }
  return text.str();
}

}  // namespace

std::string Render(const OffloadRunResult& run, Format format) {
  if (format == Format::kTable) {
    std::string text = SimSummaryText(run.result);
    for (const fit::CostCalibration& calibration : run.calibrations)
      text += "calibration: " + calibration.Summary() + "\n";
    return text;
  }
  const sim::SimConfig& config = run.config;
  nlohmann::json json = run.result.ToJson();
  json["expert_bits"] = config.model.bits.experts;
  json["attention_bits"] = config.model.bits.attention;
  json["cost_parameters"] = CostParametersJson(run.cost_parameters);
  if (run.host_cost_parameters)
    json["host_cost_parameters"] = CostParametersJson(*run.host_cost_parameters);
  for (const fit::CostCalibration& calibration : run.calibrations)
    json["cost_calibrations"].push_back(calibration.ToJson());
  json["provenance"] = report::Provenance();
  return format == Format::kCsv ? report::JsonRow(json).ToCsv() : json.dump(2) + "\n";
}

}  // namespace moelab::plan
