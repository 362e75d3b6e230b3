// validate --cases ep's report: moelab.validation_ep/1 and its text.
#include <cstdio>

#include "report/format.h"
#include "validate/ep_validation.h"

namespace moelab::validate {
namespace {

nlohmann::json TermsJson(const EpStepTerms& t) {
  return {{"attention_s", t.attention_s},
          {"expert_compute_s", t.expert_compute_s},
          {"exposed_comm_s", t.exposed_comm_s},
          {"block_other_s", t.block_other_s},
          {"rest_s", t.rest_s}};
}

std::string Pair(double predicted_s, double measured_s) {
  return report::FormatSeconds(predicted_s) + " / " + report::FormatSeconds(measured_s);
}

}  // namespace

nlohmann::json EpValidationToJson(const EpValidationResult& result) {
  nlohmann::json cases = nlohmann::json::array();
  for (const EpValidationCase& c : result.cases) {
    const double layers = static_cast<double>(c.layers);
    cases.push_back({{"workload", c.workload},
                     {"batch", c.batch},
                     {"prompt", c.prompt},
                     {"output_tokens", c.output_tokens},
                     {"chunks", c.chunks},
                     {"layers", c.layers},
                     {"predicted_step_s", c.predicted_step_s},
                     {"measured_step_s", c.measured_step_s},
                     {"predicted_step_per_layer_s", c.predicted_step_s / layers},
                     {"measured_step_per_layer_s", c.measured_step_s / layers},
                     {"predicted_exposed_comm_per_layer_s", c.predicted_exposed_comm_s},
                     {"runs_step_s", c.runs_step_s},
                     {"predicted_terms_per_layer", TermsJson(c.predicted_terms)},
                     {"measured_terms_per_layer", TermsJson(c.measured_terms)},
                     {"error", c.error()}});
  }
  nlohmann::json best = nlohmann::json::array();
  for (const EpBestChunks& b : result.best_chunks) {
    best.push_back({{"workload", b.workload},
                    {"predicted_chunks", b.predicted},
                    {"measured_chunks", b.measured},
                    {"right", b.right()},
                    {"regret", b.regret},
                    {"paired_runs", b.pairs},
                    {"measured_best_faster_runs", b.best_faster},
                    {"sign_test_p", b.sign_test_p}});
  }
  return {{"schema", "moelab.validation_ep/1"},
          {"ranks", result.ranks},
          {"model", result.model},
          {"attention", result.attention},
          {"target", "median abs error <= 10 %, the best N right (issue 37)"},
          {"median_abs_error", result.median_abs_error},
          {"max_abs_error", result.max_abs_error},
          {"best_chunks", best},
          {"cases", cases},
          {"collective_cost", result.collective_cost},
          {"fit", result.fit},
          {"profile_interleaved", result.profile_interleaved},
          {"load_average_1m_start", result.load_average_1m_start},
          {"load_average_1m_end", result.load_average_1m_end},
          {"notes", result.notes}};
}

std::string EpValidationText(const EpValidationResult& result) {
  std::string text = "validate --cases ep: " + result.model + " on " +
                     std::to_string(result.ranks) + " MPI ranks, " + result.attention +
                     " attention, sim ep (fitted profile and collectives) against run "
                     "--expert-parallel\n";
  text += result.profile_interleaved
              ? "profile taken here, every rank at once, the case rounds between its rounds\n"
              : "profile reused (taken at another time than the runs)\n";
  report::Table table({"case", "N", "predicted / layer", "measured / layer", "error"});
  for (const EpValidationCase& c : result.cases) {
    const double layers = static_cast<double>(c.layers);
    table.AddRow(
        {c.workload + " B=" + std::to_string(c.batch) + " prompt=" + std::to_string(c.prompt),
         std::to_string(c.chunks), report::FormatSeconds(c.predicted_step_s / layers),
         report::FormatSeconds(c.measured_step_s / layers),
         report::FormatNumber(100 * c.error(), 1) + " %"});
  }
  text += table.Render();
  text +=
      "per layer, predicted / measured: attention with the router (slowest rank), expert "
      "compute (a rank of mean load / the busiest rank's total), exposed communication with the "
      "wait for the layer's busiest rank (least-waiting rank), the MoE block's other "
      "work (packing, starting exchanges, combining; priced: their copies), the rest of the "
      "step\n";
  report::Table terms(
      {"case", "N", "attention", "expert compute", "exposed comm", "block other", "rest"});
  for (const EpValidationCase& c : result.cases) {
    const EpStepTerms& p = c.predicted_terms;
    const EpStepTerms& m = c.measured_terms;
    terms.AddRow({c.workload + " B=" + std::to_string(c.batch), std::to_string(c.chunks),
                  Pair(p.attention_s, m.attention_s), Pair(p.expert_compute_s, m.expert_compute_s),
                  Pair(p.exposed_comm_s, m.exposed_comm_s), Pair(p.block_other_s, m.block_other_s),
                  Pair(p.rest_s, m.rest_s)});
  }
  text += terms.Render();
  char line[256];
  std::snprintf(line, sizeof(line), "median |error| %.1f %%, max %.1f %% (target: <= 10 %%)\n",
                100 * result.median_abs_error, 100 * result.max_abs_error);
  text += line;
  for (const EpBestChunks& b : result.best_chunks) {
    text += "best N, " + b.workload + ": predicted " + std::to_string(b.predicted) + ", measured " +
            std::to_string(b.measured) + (b.right() ? " (right)" : " (wrong)");
    if (!b.right()) {
      std::snprintf(line, sizeof(line),
                    ": the predicted N measured %.1f %% slower, faster in %lld of %lld paired "
                    "runs (sign test p = %.2f%s)",
                    100 * b.regret, static_cast<long long>(b.pairs - b.best_faster),
                    static_cast<long long>(b.pairs), b.sign_test_p,
                    b.sign_test_p > 0.05 ? ": not resolved by this machine's noise" : "");
      text += line;
    }
    text += "\n";
  }
  for (const std::string& note : result.notes) text += "note: " + note + "\n";
  return text;
}

}  // namespace moelab::validate
