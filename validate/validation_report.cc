#include "validate/validation_report.h"

#include <cstdlib>
#include <map>
#include <ostream>
#include <set>
#include <sstream>

#include "base/atomic_file.h"
#include "base/error.h"
#include "report/format.h"
#include "report/provenance.h"

namespace moelab::validate {
namespace {

// What the executor ran on: the CPU's name, or the GPU's (the profile's machine.gpu) with --device
// gpu.
std::string DeviceName(const ValidationResult& result) {
  const nlohmann::json& m = result.machine;
  if (result.request.device == "gpu") {
    return m.contains("gpu") && m["gpu"].is_object() && m["gpu"].contains("name")
               ? m["gpu"]["name"].get<std::string>() + " (GPU 0)"
               : std::string("GPU 0");
  }
  return m.contains("cpu") && m["cpu"].is_string() ? m["cpu"].get<std::string>()
                                                   : std::string("this machine");
}

using report::FormatNumber;

nlohmann::json CaseJson(const CaseResult& r) {
  const ValidationCase& c = r.spec;
  const bool decodes = c.kind != CaseKind::kPrefill && c.kind != CaseKind::kOffloadPrefill;
  nlohmann::json json = {
      {"kind", ToString(c.kind)},
      {"label", c.Label()},
      {"quantity", QuantityOf(c.kind)},
      {"shape", c.held_out_shape ? "held-out" : "default"},
      {"batch", c.batch},
      {"gamma", c.kind == CaseKind::kSd ? nlohmann::json(c.gamma) : nlohmann::json(nullptr)},
      {"beam_width",
       c.kind == CaseKind::kBeam ? nlohmann::json(c.beam_width) : nlohmann::json(nullptr)},
      {"prompt", c.prompt},
      // cached positions when the first decode step runs (prefill: before the prompt)
      {"context", decodes ? c.context + c.prompt : c.context},
      {"mean_decode_context",
       decodes ? nlohmann::json(c.MeanDecodeContext()) : nlohmann::json(nullptr)},
      {"output_tokens", c.output_tokens},
      {"cost_source", r.cost_source},
      {"routing", r.routing},
      {"routing_assumed", RoutingAssumed(r)},
      {"predicted", r.predicted},
      {"measured", r.measured},
      {"measured_min", r.measured_min},
      {"measured_max", r.measured_max},
      {"repeats", r.repeats},
      {"abs_error", r.abs_error}};
  if (c.kind == CaseKind::kOffload || c.kind == CaseKind::kOffloadPrefill) {
    json["policy"] = c.policy;
    json["expert_slots"] = c.expert_slots;
    json["measured_runs"] = r.measured_runs;  // in the order they ran, round by round
  }
  if (r.offload) {
    const CaseResult::OffloadDetail& o = *r.offload;
    json["offload_run"] = {
        {"reads", {{"predicted", o.predicted_reads}, {"measured", o.measured_reads}}},
        {"total_s", {{"predicted", o.predicted_total_s}, {"measured", o.measured_total_s}}},
        {"predicted_compute_busy_s", o.predicted_compute_busy_s},
        {"predicted_storage_busy_s", o.predicted_storage_busy_s},
        {"predicted_link_busy_s", o.predicted_link_busy_s},
        {"measured_stall_s", o.measured_stall_s},
        {"neighbour_read_bytes_per_s", o.neighbour_read_bytes_per_s
                                           ? nlohmann::json(*o.neighbour_read_bytes_per_s)
                                           : nlohmann::json(nullptr)},
        {"predicted_with_neighbours", o.predicted_with_neighbours
                                          ? nlohmann::json(*o.predicted_with_neighbours)
                                          : nlohmann::json(nullptr)},
        {"predicted_from_profile", o.predicted_from_profile}};
    if (!o.measured_decode_steps_s.empty()) {
      json["offload_run"]["decode_steps_s"] = {{"predicted", o.predicted_decode_steps_s},
                                               {"measured", o.measured_decode_steps_s}};
    }
  }
  if (!r.measured_operators_s.empty()) {
    nlohmann::json operators = nlohmann::json::object();
    for (const auto& [category, measured_s] : r.measured_operators_s) {
      operators[category] = {{"predicted", r.predicted_operators_s.at(category)},
                             {"measured", measured_s}};
    }
    json["operators_s"] = operators;
  }
  if (c.kind == CaseKind::kSd) {
    json["sigma"] = r.sigma;
    json["predicted_target_efficiency"] = r.predicted_target_efficiency;
    json["measured_target_efficiency"] = r.measured_target_efficiency;
    json["step_s"] = {
        {"plain", {{"predicted", r.predicted_plain_step_s}, {"measured", r.measured_plain_step_s}}},
        {"draft", {{"predicted", r.predicted_draft_step_s}, {"measured", r.measured_draft_step_s}}},
        {"verify",
         {{"predicted", r.predicted_verify_step_s}, {"measured", r.measured_verify_step_s}}}};
  }
  return json;
}

nlohmann::json SummaryJson(const ErrorSummary& s) {
  return {{"kind", s.kind},
          {"cost_source", s.cost_source},
          {"routing", s.routing_assumed},
          {"cases", s.cases},
          {"median_abs_error", s.median_abs_error},
          {"p90_abs_error", s.p90_abs_error},
          {"max_abs_error", s.max_abs_error},
          {"median_measured_spread", s.median_measured_spread},
          {"predictions_within_spread", s.predictions_within_spread}};
}

// "12 of 37": predictions inside their case's measured min..max.
std::string WithinSpread(const ErrorSummary& s) {
  return std::to_string(s.predictions_within_spread) + " of " + std::to_string(s.cases);
}

std::string Percent(double fraction) { return FormatNumber(100.0 * fraction, 1) + " %"; }

std::string CommandLine(const ValidationResult& /*result*/) {
  const nlohmann::json provenance = report::Provenance();
  return provenance.contains("command") && provenance["command"].is_string() &&
                 !provenance["command"].get<std::string>().empty()
             ? provenance["command"].get<std::string>()
             : std::string("moelab validate");
}

}  // namespace

nlohmann::json ValidationToJson(const ValidationResult& result) {
  nlohmann::json json;
  json["schema"] = kValidationSchema;
  const ErrorSummary& headline = result.Headline();
  json["headline"] = {{"cost_source", headline.cost_source}, {"routing", headline.routing_assumed}};
  json["median_abs_error"] = headline.median_abs_error;
  json["p90_abs_error"] = headline.p90_abs_error;
  json["max_abs_error"] = headline.max_abs_error;
  json["by_kind"] = nlohmann::json::object();
  for (const ErrorSummary& s : result.summaries) {
    if (s.cost_source == headline.cost_source && s.routing_assumed == headline.routing_assumed &&
        s.kind != "overall") {
      json["by_kind"][s.kind] = SummaryJson(s);
    }
  }
  json["summaries"] = nlohmann::json::array();
  for (const ErrorSummary& s : result.summaries) json["summaries"].push_back(SummaryJson(s));
  json["profile_interleaved"] = result.profile_interleaved;
  json["cases"] = nlohmann::json::array();
  for (const CaseResult& r : result.cases) json["cases"].push_back(CaseJson(r));
  json["best_gamma"] = nlohmann::json::array();
  for (const BestGammaRow& b : result.best_gamma) {
    json["best_gamma"].push_back({{"batch", b.batch},
                                  {"shape", b.held_out_shape ? "held-out" : "default"},
                                  {"cost_source", b.cost_source},
                                  {"routing", b.routing_assumed},
                                  {"predicted_gamma", b.predicted_gamma},
                                  {"measured_gamma", b.measured_gamma},
                                  {"predicted_speedup", b.predicted_speedup},
                                  {"measured_speedup", b.measured_speedup},
                                  {"regret", b.regret}});
  }
  if (result.offload_ranking) json["offload_ranking"] = OffloadRankingJson(*result.offload_ranking);
  json["cost_sources"] = result.cost_sources;
  json["routing"] = result.routing;
  json["repeats"] = result.request.Repeats();
  json["quick"] = result.request.quick;
  json["alpha"] = result.request.alpha;
  json["seed"] = result.request.seed;
  json["profile"] = {{"path", result.profile_path}, {"reused", result.profile_reused}};
  if (const ErrorSummary* reused = result.ReusedProfileSummary()) {
    json["reused_profile"] = {{"path", result.reused_profile_path},
                              {"fit", result.reused_fit_path},
                              {"cost_source", reused->cost_source},
                              {"routing", reused->routing_assumed},
                              {"cases", reused->cases},
                              {"median_abs_error", reused->median_abs_error},
                              {"p90_abs_error", reused->p90_abs_error},
                              {"max_abs_error", reused->max_abs_error}};
  }
  json["fit"] = result.fit_path;
  json["routing_trace"] = result.routing_trace_path;
  json["decode_trace"] = result.decode_trace_path;
  json["decode_routing"] = result.decode_routing;
  json["machine"] = result.machine;
  json["device"] = result.request.device;
  json["limits_per_round"] = result.round_limits;
  json["warm_up_runs"] = result.warm_up_runs;
  json["notes"] = result.notes;
  json["wall_time_s"] = result.wall_time_s;
  json["provenance"] = report::Provenance();
  return json;
}

namespace {

// Cases, not rows: a case has a row per cost source and routing assumed (offload cases one).
size_t DistinctCases(const ValidationResult& result) {
  std::set<std::string> labels;
  for (const CaseResult& r : result.cases) labels.insert(r.spec.Label());
  return labels.size();
}

}  // namespace

// When the profile was taken against when the cases ran.
std::string TimingLine(const ValidationResult& result) {
  if (result.profile_interleaved) {
    return "Profile and runs: the case rounds ran between the profile's rounds, so the profile's "
           "medians and the cases' are taken over the same stretch of a shared machine's time.";
  }
  return "Profile and runs: the profile was reused (" + result.profile_path +
         "): taken at another time than the runs, at whatever speed the machine had then.";
}

namespace {

// --reused-profile's error beside the headline's, or "" without it.
std::string ReusedProfileLine(const ValidationResult& result) {
  const ErrorSummary* reused = result.ReusedProfileSummary();
  if (!reused) return "";
  return "Reused profile (" + result.reused_profile_path + ", taken before the runs; cost source " +
         reused->cost_source + ", routing " + reused->routing_assumed + "): median " +
         Percent(reused->median_abs_error) + ", p90 " + Percent(reused->p90_abs_error) + ", max " +
         Percent(reused->max_abs_error) + ", beside the headline's " +
         Percent(result.Headline().median_abs_error) + " median.";
}

}  // namespace

std::string ValidationText(const ValidationResult& result) {
  std::ostringstream out;
  const ErrorSummary& headline = result.Headline();
  out << "Validation on " << DeviceName(result) << ": " << DistinctCases(result)
      << " held-out cases x " << result.request.Repeats() << " interleaved runs, routing "
      << (result.decode_routing.empty()
              ? result.routing
              : result.decode_routing + " (decode-trace); " + result.routing + " (measured)")
      << "\n";
  out << "Headline (" << headline.cost_source << ", routing " << headline.routing_assumed
      << "): median " << Percent(headline.median_abs_error) << ", p90 "
      << Percent(headline.p90_abs_error) << ", max " << Percent(headline.max_abs_error) << "\n"
      << TimingLine(result) << "\n";
  const std::string reused = ReusedProfileLine(result);
  if (!reused.empty()) out << reused << "\n";
  out << "\n";
  report::Table table({"kind", "cost source", "routing", "cases", "median", "p90", "max",
                       "run spread", "in spread"});
  for (const ErrorSummary& s : result.summaries) {
    table.AddRow({s.kind, s.cost_source, s.routing_assumed, std::to_string(s.cases),
                  Percent(s.median_abs_error), Percent(s.p90_abs_error), Percent(s.max_abs_error),
                  Percent(s.median_measured_spread), WithinSpread(s)});
  }
  out << table.Render();
  if (!result.best_gamma.empty()) {
    out << "\nBest gamma per batch (" << headline.cost_source << ", routing "
        << headline.routing_assumed << "):\n";
    report::Table best({"batch", "shape", "predicted", "measured", "regret"});
    for (const BestGammaRow& b : result.best_gamma) {
      if (b.cost_source != headline.cost_source || b.routing_assumed != headline.routing_assumed)
        continue;
      best.AddRow({std::to_string(b.batch), b.held_out_shape ? "held-out" : "default",
                   std::to_string(b.predicted_gamma), std::to_string(b.measured_gamma),
                   Percent(b.regret)});
    }
    out << best.Render();
  }
  for (const std::string& note : result.notes) out << "Note: " << note << "\n";
  out << "Wall time " << FormatNumber(result.wall_time_s, 0) << " s\n";
  return out.str();
}

namespace {

// report.md's opening: the device and machine, how cases were measured and predicted, the
// headline, and the summaries' table.
void WriteMarkdownSummary(std::ostream& out, const ValidationResult& result,
                          const ErrorSummary& headline) {
  out << "# moelab validate: predictions against the executor\n\n";
  out << "Device: " << DeviceName(result)
      << ". Machine: " << result.machine.value("cpu", std::string("?")) << ", ISA "
      << result.machine.value("isa", std::string("?")) << ", " << result.machine.value("threads", 0)
      << " threads. "
      << "Command: `" << CommandLine(result) << "`. Wall time "
      << FormatNumber(result.wall_time_s, 0) << " s.\n\n";
  out << "Each case ran " << result.request.Repeats()
      << " times, interleaved round by round (the machine's limits probed before each round"
      << (result.warm_up_runs > 0
              ? std::string(", and in each round the first case of each model run once untimed "
                            "before its timed runs, so that its caches hold that model as every "
                            "later case's do")
              : std::string())
      << "); "
         "measured = each timed step's median over the runs, summed (seeded runs take the same "
         "steps; an SD speedup is the plain decode's sum over the SD run's, that plain decode run "
         "before every SD case of the batch and pooled over them, each SD run's steps first "
         "taken at the speed its own plain decode found the machine in), which leaves out a "
         "burst of load that hit a few steps of one run (prefills, one step each: the median of "
         "the "
         "runs, three a round); "
         "the spread = the runs' own values, min..max. Predictions: each cost source with the "
         "executor's gate routing recorded in a decode run of its own ("
      << (result.decode_routing.empty() ? std::string("none") : result.decode_routing)
      << ", decode-trace: the headline), recorded in runs like the cases' (" << result.routing
      << ", measured) and with uniform routing. SD predictions replay the run's rounds (its "
         "realized "
         "acceptance, and the batch shrinking as sequences finish) and are judged on time.\n\n";
  out << "**Headline (" << headline.cost_source << ", routing " << headline.routing_assumed
      << "): median abs error " << Percent(headline.median_abs_error) << ", p90 "
      << Percent(headline.p90_abs_error) << ", max " << Percent(headline.max_abs_error) << ".**\n\n"
      << TimingLine(result) << "\n\n";
  const std::string reused = ReusedProfileLine(result);
  if (!reused.empty()) out << reused << "\n\n";
  out << "Run spread: the median over the cases of (max - min) / measured of the runs; in "
         "spread: predictions inside their case's min..max. An error below the run spread "
         "cannot be told from this machine's run-to-run noise.\n\n";
  constexpr const char* kSummaryHeader =
      "| kind | cost source | routing | cases | median | p90 | max | run spread | in spread "
      "|\n|---|---|---|---|---|---|---|---|---|\n";
  out << kSummaryHeader;
  for (const ErrorSummary& s : result.summaries) {
    out << "| " << s.kind << " | " << s.cost_source << " | " << s.routing_assumed << " | "
        << s.cases << " | " << Percent(s.median_abs_error) << " | " << Percent(s.p90_abs_error)
        << " | " << Percent(s.max_abs_error) << " | " << Percent(s.median_measured_spread) << " | "
        << WithinSpread(s) << " |\n";
  }
}

// Per batch, the best gamma predicted against measured (nothing without SD cases).
void WriteBestGammaTable(std::ostream& out, const ValidationResult& result) {
  if (!result.best_gamma.empty()) {
    out << "\n## Best gamma per batch\n\n| batch | shape | cost source | routing | predicted | "
           "measured | regret |\n"
           "|---|---|---|---|---|---|---|\n";
    for (const BestGammaRow& b : result.best_gamma) {
      out << "| " << b.batch << " | " << (b.held_out_shape ? "held-out" : "default") << " | "
          << b.cost_source << " | " << b.routing_assumed << " | " << b.predicted_gamma << " | "
          << b.measured_gamma << " | " << Percent(b.regret) << " |\n";
    }
  }
}

// Every case of the headline's source and routing.
void WriteCaseTable(std::ostream& out, const ValidationResult& result,
                    const ErrorSummary& headline) {
  out << "\n## Cases (" << headline.cost_source << ", routing " << headline.routing_assumed
      << ")\n\n"
      << "| case | quantity | predicted | measured (min..max) | error |\n|---|---|---|---|---|\n";
  for (const CaseResult& r : result.cases) {
    if (r.cost_source != headline.cost_source || RoutingAssumed(r) != headline.routing_assumed)
      continue;
    const int places = r.spec.kind == CaseKind::kSd ? 3 : 5;
    out << "| " << r.spec.Label() << " | " << QuantityOf(r.spec.kind) << " | "
        << FormatNumber(r.predicted, places) << " | " << FormatNumber(r.measured, places) << " ("
        << FormatNumber(r.measured_min, places) << ".." << FormatNumber(r.measured_max, places)
        << ") | " << Percent(r.abs_error) << " |\n";
  }
}

// The SD cases' full-batch step times, so a miss names its term.
void WriteSdStepTable(std::ostream& out, const ValidationResult& result,
                      const ErrorSummary& headline) {
  bool sd_header = false;
  for (const CaseResult& r : result.cases) {
    if (r.spec.kind != CaseKind::kSd || r.cost_source != headline.cost_source ||
        RoutingAssumed(r) != headline.routing_assumed) {
      continue;
    }
    if (!sd_header) {
      out << "\n## SD step times at full batch, predicted / measured (ms)\n\n"
          << "| case | plain decode step | draft forward | verify pass |\n|---|---|---|---|\n";
      sd_header = true;
    }
    const auto pair = [](double predicted_s, double measured_s) {
      return FormatNumber(1e3 * predicted_s, 2) + " / " + FormatNumber(1e3 * measured_s, 2);
    };
    out << "| " << r.spec.Label() << " | "
        << pair(r.predicted_plain_step_s, r.measured_plain_step_s) << " | "
        << pair(r.predicted_draft_step_s, r.measured_draft_step_s) << " | "
        << pair(r.predicted_verify_step_s, r.measured_verify_step_s) << " |\n";
  }
}

// The executor's operator timers against the prediction's operators.
void WriteOperatorTable(std::ostream& out, const ValidationResult& result,
                        const ErrorSummary& headline) {
  bool operator_header = false;
  for (const CaseResult& r : result.cases) {
    if (r.measured_operators_s.empty() || r.cost_source != headline.cost_source ||
        RoutingAssumed(r) != headline.routing_assumed) {
      continue;
    }
    if (!operator_header) {
      out << "\n## Operator times, predicted / measured (ms)\n\nThe executor's own operator "
             "timers (one prefill; one decode step as the mean over the run's steps; for an SD "
             "case one full-batch verify pass, the mean over the run's; medians over repeats) "
             "against the prediction's operators in the same categories.\n\n"
          << "| case |";
      for (const auto& [category, unused] : r.measured_operators_s) out << " " << category << " |";
      out << "\n|---|";
      for (size_t i = 0; i < r.measured_operators_s.size(); ++i) out << "---|";
      out << "\n";
      operator_header = true;
    }
    out << "| " << r.spec.Label() << " |";
    for (const auto& [category, measured_s] : r.measured_operators_s) {
      out << " " << FormatNumber(1e3 * r.predicted_operators_s.at(category), 2) << " / "
          << FormatNumber(1e3 * measured_s, 2) << " |";
    }
    out << "\n";
  }
}

}  // namespace

std::string ValidationMarkdown(const ValidationResult& result) {
  std::ostringstream out;
  const ErrorSummary& headline = result.Headline();
  WriteMarkdownSummary(out, result, headline);
  WriteBestGammaTable(out, result);
  WriteCaseTable(out, result, headline);
  WriteSdStepTable(out, result, headline);
  WriteOperatorTable(out, result, headline);
  for (const std::string& note : result.notes) out << "\nNote: " << note << "\n";
  return out.str();
}

namespace {

// Predicted vs measured points of one group of kinds, one data block per kind (gnuplot index).
std::string ScatterData(const ValidationResult& result, const std::set<CaseKind>& kinds,
                        std::vector<std::string>& titles) {
  const ErrorSummary& headline = result.Headline();
  std::ostringstream data;
  for (CaseKind kind : kinds) {
    std::ostringstream block;
    int rows = 0;
    for (const CaseResult& r : result.cases) {
      if (r.spec.kind != kind || r.cost_source != headline.cost_source ||
          RoutingAssumed(r) != headline.routing_assumed) {
        continue;
      }
      block << r.measured << " " << r.predicted << " " << r.measured_min << " " << r.measured_max
            << "\n";
      ++rows;
    }
    if (rows == 0) continue;
    data << "# " << ToString(kind) << ": measured predicted measured_min measured_max\n"
         << block.str() << "\n\n";
    titles.push_back(ToString(kind));
  }
  return data.str();
}

std::string ScatterScript(const std::string& name, const std::string& unit,
                          const std::vector<std::string>& titles, bool logscale) {
  std::ostringstream gp;
  for (const char* terminal : {"pngcairo size 900,700", "svg size 900,700"}) {
    const bool png = std::string(terminal).rfind("png", 0) == 0;
    gp << "set terminal " << terminal << "\nset output '" << name << (png ? ".png" : ".svg")
       << "'\n";
    gp << "set title 'moelab validate: predicted vs measured (" << unit << ")'\n"
       << "set xlabel 'measured (" << unit << ")'\nset ylabel 'predicted (" << unit << ")'\n"
       << "set key left top\nset grid\n"
       << (logscale ? "set logscale xy\n" : "unset logscale\n");
    gp << "plot x title 'y = x' lw 1 lc rgb '#888888'";
    for (size_t i = 0; i < titles.size(); ++i) {
      gp << ", '" << name << ".dat' index " << i << " using 1:2:3:4 with xerrorbars title '"
         << titles[i] << "' pt 7";
    }
    gp << "\n";
  }
  return gp.str();
}

bool GnuplotAvailable() { return std::system("command -v gnuplot >/dev/null 2>&1") == 0; }

}  // namespace

bool WriteValidationFolder(const ValidationResult& result, const std::filesystem::path& folder) {
  std::filesystem::create_directories(folder);
  base::WriteFileAtomically(folder / "validation.json", ValidationToJson(result).dump(2) + "\n");
  std::vector<std::string> time_titles, speedup_titles;
  const std::string time_data =
      ScatterData(result, {CaseKind::kDecode, CaseKind::kPrefill, CaseKind::kBeam}, time_titles);
  const std::string speedup_data = ScatterData(result, {CaseKind::kSd}, speedup_titles);
  std::vector<std::string> scripts;
  if (!time_titles.empty()) {
    base::WriteFileAtomically(folder / "predicted-vs-measured-time.dat", time_data);
    base::WriteFileAtomically(
        folder / "predicted-vs-measured-time.gp",
        ScatterScript("predicted-vs-measured-time", "seconds", time_titles, true));
    scripts.push_back("predicted-vs-measured-time.gp");
  }
  if (!speedup_titles.empty()) {
    base::WriteFileAtomically(folder / "predicted-vs-measured-speedup.dat", speedup_data);
    base::WriteFileAtomically(
        folder / "predicted-vs-measured-speedup.gp",
        ScatterScript("predicted-vs-measured-speedup", "SD speedup", speedup_titles, false));
    scripts.push_back("predicted-vs-measured-speedup.gp");
    // SD speedup vs batch per gamma: the predicted line, the measured median with its spread.
    const ErrorSummary& headline = result.Headline();
    std::map<int64_t, std::ostringstream> by_gamma;
    for (const CaseResult& r : result.cases) {
      if (r.spec.kind != CaseKind::kSd || r.spec.held_out_shape ||
          r.cost_source != headline.cost_source || RoutingAssumed(r) != headline.routing_assumed) {
        continue;
      }
      by_gamma[r.spec.gamma] << r.spec.batch << " " << r.predicted << " " << r.measured << " "
                             << r.measured_min << " " << r.measured_max << "\n";
    }
    std::ostringstream data, gp;
    for (const auto& [gamma, rows] : by_gamma)
      data << "# gamma " << gamma << ": batch predicted measured min max\n" << rows.str() << "\n\n";
    base::WriteFileAtomically(folder / "sd-speedup-vs-batch.dat", data.str());
    for (const char* terminal : {"pngcairo size 900,700", "svg size 900,700"}) {
      const bool png = std::string(terminal).rfind("png", 0) == 0;
      gp << "set terminal " << terminal << "\nset output 'sd-speedup-vs-batch"
         << (png ? ".png" : ".svg") << "'\n"
         << "set title 'SD speedup vs batch (alpha " << FormatNumber(result.request.alpha, 2)
         << "): predicted lines, measured points (min..max)'\nset xlabel 'batch'\nset ylabel "
            "'speedup'\n"
         << "set logscale x 2\nset grid\nset key right top\nplot ";
      size_t index = 0;
      for (const auto& [gamma, rows] : by_gamma) {
        gp << (index ? ", " : "") << "'sd-speedup-vs-batch.dat' index " << index
           << " using 1:2 with lines lc " << index + 1 << " title 'gamma " << gamma
           << " predicted', '' index " << index << " using 1:3:4:5 with yerrorbars lc " << index + 1
           << " pt 7 title 'gamma " << gamma << " measured'";
        ++index;
      }
      gp << "\n";
    }
    base::WriteFileAtomically(folder / "sd-speedup-vs-batch.gp", gp.str());
    scripts.push_back("sd-speedup-vs-batch.gp");
  }
  bool rendered = false;
  std::string markdown = ValidationMarkdown(result);
  if (GnuplotAvailable()) {
    rendered = true;
    for (const std::string& script : scripts) {
      const std::string command =
          "cd '" + folder.string() + "' && gnuplot '" + script + "' 2>/dev/null";
      if (std::system(command.c_str()) != 0) {
        rendered = false;
        markdown +=
            "\nNote: gnuplot failed on " + script + "; the data and script are in this folder.\n";
      }
    }
  } else {
    markdown +=
        "\nNote: gnuplot is not installed: the plots are data + gnuplot scripts here (`gnuplot "
        "NAME.gp`).\n";
  }
  if (rendered) {
    markdown += "\n## Plots\n\n";
    for (const std::string& script : scripts) {
      const std::string name = script.substr(0, script.size() - 3);
      markdown += "![" + name + "](" + name + ".svg)\n\n";
    }
  }
  base::WriteFileAtomically(folder / "report.md", markdown);
  return rendered;
}

}  // namespace moelab::validate
