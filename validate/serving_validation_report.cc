// moelab.validation_serving/1, the text summary and report.md of validate --cases serving.
#include <sstream>

#include "base/stats.h"
#include "report/format.h"
#include "validate/serving_validation.h"

namespace moelab::validate {
namespace {

nlohmann::json OptionalNumber(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json SaturationJson(const Saturation& s) {
  return {{"requests_per_s", s.requests_per_s}, {"tokens_per_s", s.tokens_per_s}};
}

std::string Percent(double fraction) { return report::FormatNumber(100 * fraction, 3) + " %"; }

}  // namespace

nlohmann::json ServingValidationToJson(const ServingValidationResult& result) {
  const ServingValidationRequest& request = result.request;
  nlohmann::json json;
  json["schema"] = "moelab.validation_serving/1";
  json["machine"] = result.machine;
  json["model"] = {{"name", request.model}, {"profiled", result.model_shape}};
  json["scheduler"] = request.scheduler.ToJson();
  json["load"] = {{"arrivals", "poisson"},
                  {"requests", request.requests},
                  {"prompt_tokens", serving::Describe(request.prompt_tokens)},
                  {"output_tokens", serving::Describe(request.output_tokens)},
                  {"seed", request.seed}};
  json["quick"] = request.quick;
  json["repeats"] = request.repeat;
  json["engine_iteration"] = {
      {"scale", result.engine_iteration_scale},
      {"decode_only_scale", result.decode_only_scale},
      {"with_prefill_scale", result.with_prefill_scale},
      {"lone_prefill_scale", result.lone_prefill_scale},
      {"residual_s", result.engine_iteration_residual_s},
      {"iterations", result.engine_iterations},
      {"decode_only_iterations", result.calibration.decode_only_iterations},
      {"requests", result.calibration_requests},
      {"burst_requests", result.calibration_burst_requests},
      {"rate_per_s", result.calibration_rate_per_s},
      {"method",
       "a calibration run through the server (other seeded requests, Poisson at 70 % of the "
       "unscaled predicted saturation): the served iterations' wall times and hand-offs to "
       "the next iteration, summed, over their plans' composed prices, summed, per kind and "
       "decode batch bucket (medians of the per-iteration ratios in calibration, reported)"},
      {"calibration", result.calibration.ToJson()}};
  nlohmann::json wake = result.engine_wake.ToJson();
  wake["requests"] = result.engine_wake_requests;
  wake["iterations"] = result.engine_wake_view.iterations;
  wake["method"] =
      "lone requests of " + std::to_string(kEngineWakePromptTokens) +
      " prompt tokens and 1 output token, each after an idle time of " +
      report::FormatNumber(kEngineWakeIdleS.front(), 3) + " to " +
      report::FormatNumber(kEngineWakeIdleS.back(), 3) +
      " s: each woken prefill's wall time over its composed price, over the median of those "
      "after under baseline_idle_below_s; the magnitude w the median over the others of "
      "(that - 1) / (1 - exp(-idle / time_constant_s)); every simulated iteration after "
      "idleness is multiplied by 1 + w (1 - exp(-idle / time_constant_s))";
  json["engine_iteration"]["wake"] = wake;
  nlohmann::json first = nlohmann::json::array();
  for (const auto& [decode_only, with_prefill, lone_prefill] : result.first_calibration_scales)
    first.push_back({{"decode_only_scale", decode_only},
                     {"with_prefill_scale", with_prefill},
                     {"lone_prefill_scale", lone_prefill}});
  json["engine_iteration"]["first_calibrations"] = first;
  json["client_latency_s"] = result.client_latency_s;
  nlohmann::json measured_saturation = nlohmann::json::array();
  std::vector<double> saturation_rps, saturation_tps;
  nlohmann::json overload_engine = nlohmann::json::array();
  for (const ServedEngineView& view : result.overload_engine)
    overload_engine.push_back(view.ToJson());
  for (const Saturation& s : result.measured_saturation_runs) {
    measured_saturation.push_back(SaturationJson(s));
    saturation_rps.push_back(s.requests_per_s);
    saturation_tps.push_back(s.tokens_per_s);
  }
  nlohmann::json rounds = nlohmann::json::array();
  nlohmann::json predicted_saturation_runs = nlohmann::json::array();
  for (const ServingValidationResult::RoundCalibration& round : result.round_calibrations) {
    rounds.push_back(
        {{"decode_only_scale", round.decode_only_scale},
         {"with_prefill_scale", round.with_prefill_scale},
         {"lone_prefill_scale", round.lone_prefill_scale},
         {"decode_scale_by_batch", round.decode_scale_by_batch},
         {"prefill_scale_by_tokens", round.prefill_scale_by_tokens},
         {"predicted_saturation", SaturationJson(round.predicted_saturation)},
         {"predicted_crossing_per_s", OptionalNumber(round.predicted_crossing_per_s)}});
    predicted_saturation_runs.push_back(SaturationJson(round.predicted_saturation));
  }
  json["engine_iteration"]["rounds"] = rounds;
  json["saturation"] = {{"predicted", SaturationJson(result.judged_predicted_saturation)},
                        {"predicted_runs", predicted_saturation_runs},
                        {"predicted_for_rates", SaturationJson(result.predicted_saturation)},
                        {"measured",
                         {{"requests_per_s", base::Median(saturation_rps)},
                          {"tokens_per_s", base::Median(saturation_tps)}}},
                        {"measured_runs", measured_saturation},
                        {"engine", overload_engine},
                        {"method", "every request at t = 0, predicted and measured"}};
  nlohmann::json rates = nlohmann::json::array();
  for (const ServingRate& rate : result.rates) {
    nlohmann::json runs = nlohmann::json::array();
    for (const ServingRun& run : rate.runs) {
      runs.push_back(
          {{"round", run.round + 1},
           {"late_sends", run.late_sends},
           {"measured", serving::ServingSummaryToJson(run.measured)},
           {"predicted", serving::ServingSummaryToJson(run.predicted)},
           {"predicted_at_run_speed", serving::ServingSummaryToJson(run.predicted_at_run_speed)},
           {"engine", run.engine.ToJson()}});
    }
    rates.push_back({{"fraction_of_predicted_saturation", rate.fraction},
                     {"rate_per_s", rate.rate_per_s},
                     {"runs", runs},
                     {"errors", rate.errors},
                     {"errors_at_run_speed", rate.errors_at_run_speed}});
  }
  json["rates"] = rates;
  json["below_saturation_median_abs_error"] = result.below_saturation_median_abs_error;
  json["below_saturation_median_abs_error_at_run_speed"] =
      result.below_saturation_median_abs_error_at_run_speed;
  nlohmann::json round_crossings = nlohmann::json::array();
  for (const ServingValidationResult::RoundCrossing& crossing : result.round_crossings) {
    round_crossings.push_back(
        {{"round", crossing.round + 1},
         {"predicted_crossing_per_s", OptionalNumber(crossing.predicted_per_s)},
         {"measured_crossing_per_s", OptionalNumber(crossing.measured_per_s)}});
  }
  json["slo"] = {{"ttft_p99_s", result.slo_ttft_p99_s},
                 {"predicted_crossing_per_s", OptionalNumber(result.predicted_crossing_per_s)},
                 {"measured_crossing_per_s", OptionalNumber(result.measured_crossing_per_s)},
                 {"measured_crossing_queueing_form_per_s",
                  OptionalNumber(result.measured_crossing_queueing_form_per_s)},
                 {"measured_p99_shift", ServingValidationResult::kMeasuredP99Shift},
                 {"measured_crossing_p99_lower_per_s",
                  OptionalNumber(result.measured_crossing_p99_lower_per_s)},
                 {"measured_crossing_p99_higher_per_s",
                  OptionalNumber(result.measured_crossing_p99_higher_per_s)},
                 {"rounds", round_crossings}};
  json["serving_overhead"] = {{"batch", result.overhead.batch},
                              {"prompt_tokens", kOverheadPromptTokens},
                              {"output_tokens", request.overhead_output_tokens},
                              {"pairs_per_round", result.overhead.pairs_per_round},
                              {"server_tokens_per_s", result.overhead.server_tokens_per_s},
                              {"run_tokens_per_s", result.overhead.run_tokens_per_s},
                              {"ratio", result.overhead.ratio()},
                              {"ratio_of_medians", result.overhead.ratio_of_medians()}};
  nlohmann::json targets = nlohmann::json::array();
  for (const ServingTarget& target : result.targets) targets.push_back(target.ToJson());
  json["targets"] = targets;
  json["notes"] = result.notes;
  json["load_average_1m"] = {{"start", result.load_average_1m_start},
                             {"end", result.load_average_1m_end}};
  json["profile_reused"] = result.profile_reused;
  json["wall_time_s"] = result.wall_time_s;
  return json;
}

std::string ServingValidationText(const ServingValidationResult& result) {
  std::ostringstream out;
  out << "validate --cases serving: " << result.request.requests << " requests a run, "
      << result.request.repeat << " rounds; engine iteration scales "
      << report::FormatNumber(result.decode_only_scale, 4) << " decode-only, "
      << report::FormatNumber(result.with_prefill_scale, 4) << " with prefill beside decodes, "
      << report::FormatNumber(result.lone_prefill_scale, 4) << " lone prefill (all "
      << report::FormatNumber(result.engine_iteration_scale, 4) << "), client latency "
      << report::FormatNumber(result.client_latency_s * 1e3, 3) << " ms\n";
  out << "  engine wake after idleness: x(1 + "
      << report::FormatNumber(result.engine_wake.magnitude, 3) << " (1 - exp(-idle / "
      << report::FormatNumber(EngineWake::kTimeConstantS, 3) << " s)))\n";
  for (const ServingRate& rate : result.rates) {
    out << "  rate " << report::FormatNumber(rate.rate_per_s, 4) << "/s (" << Percent(rate.fraction)
        << " of predicted saturation):";
    for (const std::string& metric : ServingMetricNames()) {
      const nlohmann::json& e = rate.errors.at(metric);
      out << " " << metric << " " << Percent(e["abs_error"].get<double>()) << " (spread "
          << Percent(e["measured_spread"].get<double>()) << ")";
    }
    out << "\n";
  }
  std::vector<double> measured;
  for (const Saturation& s : result.measured_saturation_runs) measured.push_back(s.requests_per_s);
  out << "  diagnostic: below-saturation median abs error had each run known its own engine "
         "speed (its served scales): "
      << Percent(result.below_saturation_median_abs_error_at_run_speed) << "\n";
  out << "  saturation: predicted "
      << report::FormatNumber(result.judged_predicted_saturation.requests_per_s, 4)
      << " requests/s, measured " << report::FormatNumber(base::Median(measured), 4) << "\n";
  out << "  p99 TTFT SLO " << report::FormatNumber(result.slo_ttft_p99_s, 4)
      << " s crossed at: predicted "
      << (result.predicted_crossing_per_s
              ? report::FormatNumber(*result.predicted_crossing_per_s, 4)
              : std::string("-"))
      << "/s, measured "
      << (result.measured_crossing_per_s ? report::FormatNumber(*result.measured_crossing_per_s, 4)
                                         : std::string("-"))
      << "/s\n";
  const auto rate_or_dash = [](const std::optional<double>& rate) {
    return rate ? report::FormatNumber(*rate, 4) : std::string("-");
  };
  out << "  diagnostic: crossing by round, measured / its own prediction:";
  for (const ServingValidationResult::RoundCrossing& crossing : result.round_crossings) {
    out << " " << crossing.round + 1 << ": " << rate_or_dash(crossing.measured_per_s) << " / "
        << rate_or_dash(crossing.predicted_per_s);
  }
  out << "; measured through a + b / (c - rate) over the three highest rates below saturation "
         "(no chord): "
      << rate_or_dash(result.measured_crossing_queueing_form_per_s) << "/s; had the measured p99 "
      << "TTFT been " << report::FormatNumber(100 * ServingValidationResult::kMeasuredP99Shift, 3)
      << " % lower / higher at every rate: "
      << rate_or_dash(result.measured_crossing_p99_lower_per_s) << " / "
      << rate_or_dash(result.measured_crossing_p99_higher_per_s) << "/s\n";
  out << "  serving overhead at batch " << result.overhead.batch
      << ": server / run decode, median of " << result.overhead.server_tokens_per_s.size()
      << " pairs (" << result.overhead.pairs_per_round << " a round) "
      << report::FormatNumber(result.overhead.ratio(), 4) << " (ratio of the medians "
      << report::FormatNumber(result.overhead.ratio_of_medians(), 4) << ")\n";
  for (const ServingTarget& target : result.targets) {
    out << "  target " << target.name << (target.at_least ? " >= " : " <= ")
        << report::FormatNumber(target.limit, 3) << ": "
        << (target.value ? report::FormatNumber(*target.value, 4) : target.why_missing) << " "
        << (target.pass() ? "PASS" : "FAIL") << "\n";
  }
  out << "  load average " << report::FormatNumber(result.load_average_1m_start, 3) << " -> "
      << report::FormatNumber(result.load_average_1m_end, 3) << "\n";
  return out.str();
}

std::string ServingValidationMarkdown(const ServingValidationResult& result) {
  std::ostringstream out;
  out << "# validate --cases serving\n\n```\n" << ServingValidationText(result) << "```\n\n";
  out << "| rate/s | metric | measured | predicted | abs error | spread "
         "|\n|---|---|---|---|---|---|\n";
  for (const ServingRate& rate : result.rates) {
    for (const std::string& metric : ServingMetricNames()) {
      const nlohmann::json& e = rate.errors.at(metric);
      out << "| " << report::FormatNumber(rate.rate_per_s, 4) << " | " << metric << " | "
          << report::FormatNumber(e["measured"].get<double>(), 4) << " | "
          << report::FormatNumber(e["predicted"].get<double>(), 4) << " | "
          << Percent(e["abs_error"].get<double>()) << " | "
          << Percent(e["measured_spread"].get<double>()) << " |\n";
    }
  }
  out << "\n## The engine's own record of the measured runs (medians over rounds)\n\n"
      << "Engine-side latencies from the engine's emit times (the client's less HTTP, the stream "
         "and the load generator); the served iterations' wall times and hand-offs over the "
         "unscaled composed prices of their plans, summed by kind; the engine's median time "
         "between iterations while work remained.\n\n"
      << "| rate/s | engine TTFT p50 | client TTFT p50 | engine TPOT p50 | client TPOT p50 | "
         "decode-only scale (iterations) | with-prefill scale | between iterations |\n"
      << "|---|---|---|---|---|---|---|---|\n";
  for (const ServingRate& rate : result.rates) {
    std::vector<double> ttft, client_ttft, tpot, client_tpot, decode, prefill, between, count;
    for (const ServingRun& run : rate.runs) {
      ttft.push_back(run.engine.engine_side.ttft_s.p50);
      client_ttft.push_back(run.measured.ttft_s.p50);
      tpot.push_back(run.engine.engine_side.tpot_s.p50);
      client_tpot.push_back(run.measured.tpot_s.p50);
      decode.push_back(run.engine.decode_only_scale);
      prefill.push_back(run.engine.with_prefill_scale);
      between.push_back(run.engine.between_iterations_s);
      count.push_back(static_cast<double>(run.engine.decode_only_iterations));
    }
    const auto ms = [](const std::vector<double>& v) {
      return report::FormatNumber(1e3 * base::Median(v), 4) + " ms";
    };
    out << "| " << report::FormatNumber(rate.rate_per_s, 4) << " | " << ms(ttft) << " | "
        << ms(client_ttft) << " | " << ms(tpot) << " | " << ms(client_tpot) << " | "
        << report::FormatNumber(base::Median(decode), 4) << " ("
        << report::FormatNumber(base::Median(count), 4) << ") | "
        << report::FormatNumber(base::Median(prefill), 4) << " | " << ms(between) << " |\n";
  }
  out << "\n## Notes\n\n";
  for (const std::string& note : result.notes) out << "- " << note << "\n";
  return out.str();
}

std::string ServedIterationsCsv(const ServingValidationResult& result) {
  std::string csv = ServedIterationsCsvHeader();
  for (const ServingRate& rate : result.rates) {
    for (const ServingRun& run : rate.runs)
      csv += ServedIterationsCsvRows(run.engine, report::FormatNumber(rate.rate_per_s, 4) + "@" +
                                                     std::to_string(run.round + 1));
  }
  csv += ServedIterationsCsvRows(result.calibration, "calibration");
  csv += ServedIterationsCsvRows(result.engine_wake_view, "wake");
  for (size_t round = 0; round < result.overload_engine.size(); ++round)
    csv += ServedIterationsCsvRows(result.overload_engine[round],
                                   "overload@" + std::to_string(round + 1));
  return csv;
}

}  // namespace moelab::validate
