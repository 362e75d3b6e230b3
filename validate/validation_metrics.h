#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/stats.h"
#include "validate/operator_breakdown.h"
#include "validate/validation_case.h"

namespace moelab::validate {

// The arithmetic of a validation, on fixed inputs (tested against a golden file).

// The q-quantile of `values` (q in [0, 1]) by linear interpolation between order statistics
// (Hyndman-Fan type 7, numpy's default; base/stats.h). Error for an empty list or q outside [0, 1].
using base::Quantile;
// A validation's median: the interpolated 0.5 quantile, a + (b - a) / 2 for an even count, which
// every validation report was computed with (base::Median's 0.5 * (a + b) can differ in the last
// bit).
inline double Median(std::vector<double> values) { return Quantile(std::move(values), 0.5); }

// The sum over steps of each step's median over repeated runs (steps_per_run[r][i]: step i of run
// r). A burst of load on a shared machine slows a few steps of one run; the median of each step
// leaves it out where the median of the runs' totals keeps whichever total it hit least. nullopt
// when the runs did not take the same number of steps (then only totals compare).
std::optional<double> SumOfStepMedians(const std::vector<std::vector<double>>& steps_per_run);
// Each step's median over the runs, in step order; nullopt as SumOfStepMedians.
std::optional<std::vector<double>> StepMedians(
    const std::vector<std::vector<double>>& steps_per_run);
// Each run's steps taken at the machine speed of the reference work it ran right before (an SD
// run's plain decode of the same requests): run r's steps divided by the median over reference
// steps i of reference_per_run[r][i] / pooled_reference_medians[i]. A slow stretch of a shared VM
// lasts minutes, longer than a case, so it slows a run's reference and the run alike; the pooled
// reference (every gamma's at a batch) cancels only bursts. nullopt when the shapes differ or a
// pooled median is not positive.
std::optional<std::vector<std::vector<double>>> AtReferenceSpeed(
    const std::vector<std::vector<double>>& steps_per_run,
    const std::vector<std::vector<double>>& reference_per_run,
    const std::vector<double>& pooled_reference_medians);

// The two-sided exact sign test of paired runs: a[i] and b[i] ran side by side (the same round,
// the same place in it), so a drift of a shared machine's speed between rounds moves both. The
// probability, were neither faster, of a split at least as lopsided as the observed one among the
// pairs that differ (ties dropped); 1 with no such pair. Only the first min(|a|, |b|) pairs count.
double PairedSignTestP(const std::vector<double>& a, const std::vector<double>& b);

// |predicted - measured| / measured. Error unless measured > 0 and both are finite.
double AbsError(double predicted, double measured);

// One prediction judged against the executor.
struct CaseResult {
  ValidationCase spec;
  std::string cost_source;  // "fitted-profile" | "calibrated-roofline" | kReusedProfileSource
  std::string routing;      // what the prediction assumed: "uniform" or "trace:..."
  // Its group: kDecodeTraceRouting, kMeasuredRouting or kUniformRouting (below); empty: from
  // `routing` ("uniform", else "measured").
  std::string routing_assumed;
  double predicted = 0;
  double measured = 0;  // median over repeats
  double measured_min = 0;
  double measured_max = 0;
  // Each run's value in the order they ran, round by round (offload cases; empty for the rest).
  std::vector<double> measured_runs;
  int repeats = 0;
  double abs_error = 0;
  // SD only: the run's accepted-length fraction (the prediction uses it) and target efficiency.
  double sigma = 0;
  double predicted_target_efficiency = 0;
  double measured_target_efficiency = 0;
  // SD only: full-batch step times, predicted and measured (medians): plain decode, one draft
  // forward, one verify pass.
  double predicted_plain_step_s = 0, measured_plain_step_s = 0;
  double predicted_draft_step_s = 0, measured_draft_step_s = 0;
  double predicted_verify_step_s = 0, measured_verify_step_s = 0;
  // decode and prefill: operator times in the executor's categories (the prediction's, the
  // measured medians over repeats); empty for other kinds.
  OperatorSeconds predicted_operators_s, measured_operators_s;
  // Offload only, over the whole run (prefill and decode passes): expert reads from storage and
  // where the time went, as the simulator predicted and the runtime measured (the first run's
  // read count: the runs decide alike; times: medians over the runs).
  struct OffloadDetail {
    int64_t predicted_reads = 0, measured_reads = 0;
    double predicted_total_s = 0, measured_total_s = 0;
    double predicted_compute_busy_s = 0;  // the compute resource's busy time (reads' copies too)
    double predicted_storage_busy_s = 0;  // the storage reader's busy time
    double predicted_link_busy_s = 0;     // checksum and copy into the cache buffer
    double measured_stall_s = 0;          // compute waiting for reads
    // The bandwidth the reads of the cases run beside it (same workload, same rounds) got, and
    // the prediction at that bandwidth instead of the probes' (when those runs measured it).
    std::optional<double> neighbour_read_bytes_per_s;
    std::optional<double> predicted_with_neighbours;
    // The prediction with reads priced from the profile alone (fit/storage_tier_hardware.h: its
    // expert_reader samples, the profile path a user takes), no probe of this validation's.
    double predicted_from_profile = 0;
    // A decode's steps after the prefill: the simulator's, and each step's median over the runs
    // (empty for a prefill, or runs of different step counts).
    std::vector<double> predicted_decode_steps_s, measured_decode_steps_s;
  };
  std::optional<OffloadDetail> offload;
};

// What a prediction assumed about routing (CaseResult::routing_assumed, the summaries' groups).
// The headline: a decode run's gate routing recorded on its own, what a user has before trying
// SD (verify passes priced from windows of consecutive decode tokens).
inline constexpr const char* kDecodeTraceRouting = "decode-trace";
// The executor's routing recorded from the same kind of runs (an SD run's verify passes, a
// decode; an offload case's own run): a diagnostic.
inline constexpr const char* kMeasuredRouting = "measured";
inline constexpr const char* kUniformRouting = "uniform";  // the uniform N(t) formula

// The cost source of `validate --reused-profile`'s predictions (CaseResult::cost_source): the
// fitted latency curves of a profile taken before the run, beside the headline profile's
// "fitted-profile".
inline constexpr const char* kReusedProfileSource = "reused-profile";

struct ErrorSummary {
  std::string kind;  // a case kind, or "overall"
  std::string cost_source;
  std::string routing_assumed;  // kDecodeTraceRouting, kMeasuredRouting or kUniformRouting
  int64_t cases = 0;
  double median_abs_error = 0;
  double p90_abs_error = 0;
  double max_abs_error = 0;
  // The measurement's own noise beside the error: the median over the cases of the runs' spread
  // ((max - min) / measured), and how many predictions fall inside their case's min..max. An
  // error below the spread cannot be told from the machine's run-to-run noise.
  double median_measured_spread = 0;
  int64_t predictions_within_spread = 0;
};

// Per (cost source, routing assumed) and per kind plus "overall", in order of first appearance.
std::vector<ErrorSummary> Summarize(const std::vector<CaseResult>& results);

// Speculative decoding's best gamma per batch: what the prediction would choose against what the
// executor measured best; regret = 1 - measured speedup at the predicted best / measured best.
struct BestGammaRow {
  int64_t batch = 0;
  bool held_out_shape = false;
  std::string cost_source;
  std::string routing_assumed;
  int64_t predicted_gamma = 0;
  int64_t measured_gamma = 0;
  double predicted_speedup = 0;  // at predicted_gamma
  double measured_speedup = 0;   // at measured_gamma
  double regret = 0;
};

std::vector<BestGammaRow> BestGamma(const std::vector<CaseResult>& results);

// The group of a prediction: its routing_assumed, or (unset) "measured" for one made with the
// executor's recorded routing, else "uniform".
std::string RoutingAssumed(const CaseResult& result);

}  // namespace moelab::validate
