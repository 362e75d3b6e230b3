#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/executor_shape.h"
#include "model/preset_store.h"
#include "scheduler/scheduler_config.h"
#include "serving/load_spec.h"
#include "serving/serving_metrics.h"
#include "validate/serving_judge.h"

namespace moelab::validate {

// `moelab validate --cases serving` (validate/README.md, "--cases serving"): `moelab sim serve`
// with the fitted profile of this machine against `moelab serve` under `moelab loadgen`, in one
// process.
// 1. Profile the executor's operators (or reuse `profile`), fit them: the fitted-profile source.
// 2. The engine's iteration scale: a short offline serving run of its own (other seeded
//    requests, all at once, the engine's ServingCore without HTTP), each iteration's wall time
//    over sim serve's composed price of its plan; the median scales every simulated iteration
//    (never taken from the judged runs).
// 3. Predicted saturation: sim serve with every request arriving at t = 0.
// 4. Rounds: per round the three rates (30 %, 70 %, 110 % of the predicted saturation requests/s,
//    Poisson, the same seeded requests every round) in a rotated order, then an overload run
//    (every request at t = 0: the measured saturation) and the serving-overhead pair (the server's
//    decode at batch B against RunDecode's on the same model); each run against one in-process
//    CompletionServer on a free loopback port, loadgen::RunLoad as the client.
// 5. Judge (serving_judge.h): errors per rate and metric against the median over rounds, the
//    below-saturation median, saturation, and the rate at which p99 TTFT crosses an SLO.
struct ServingValidationRequest {
  std::string model = "mixtral-8x7b";
  model::ShapeOverrides shape = model::DefaultTargetShape();
  int expert_bits = 16, attention_bits = 16;
  bool quick = false;
  int repeat = 3;
  std::optional<std::filesystem::path> profile;
  scheduler::SchedulerConfig scheduler;
  serving::LengthDistribution prompt_tokens, output_tokens;
  // Requests per run; 0: what the predicted saturation serves in 12 s (4 s with quick), at least
  // kMinServingRequests.
  int64_t requests = 0;
  int64_t overhead_batch = 8;            // the serving-overhead comparison's batch
  int64_t overhead_output_tokens = 128;  // its tokens per request (prompt 8)
  uint64_t seed = 1;
  int threads = 0;
  std::optional<int64_t> cache_bytes;  // the profile's (profiler::ProfileRequest::cache_bytes)
  std::ostream* progress = nullptr;

  void Validate() const;  // errors name the option
};

// Below this many requests a rate's percentiles rest on a handful of samples.
inline constexpr int64_t kMinServingRequests = 16;
// The arrival rates judged, as fractions of the predicted saturation requests/s.
inline const std::vector<double> kServingRateFractions = {0.3, 0.7, 1.1};

struct ServingRun {  // one (rate, round)
  int round = 0;
  serving::ServingSummary measured, predicted;
  int64_t late_sends = 0;
};

struct ServingRate {
  double fraction = 0, rate_per_s = 0;
  std::vector<ServingRun> runs;
  // Per metric (ServingMetricNames): median measured over rounds, predicted, error, spread.
  nlohmann::json errors;
};

struct ServingOverhead {
  int64_t batch = 0;
  std::vector<double> server_tokens_per_s, run_tokens_per_s;  // per round
  double ratio() const;                                       // median server / median run
};

struct ServingValidationResult {
  ServingValidationRequest request;  // with requests resolved
  nlohmann::json machine, model_shape, profile, fit;
  bool profile_reused = false;
  double engine_iteration_scale = 1;       // median measured / composed over the engine's run
  double engine_iteration_residual_s = 0;  // median measured - composed (reported)
  int64_t engine_iterations = 0;
  double client_latency_s = 0;  // engine -> client, added to every simulated token
  Saturation predicted_saturation;
  std::vector<Saturation> measured_saturation_runs;
  std::vector<ServingRate> rates;
  double below_saturation_median_abs_error = 0;
  double slo_ttft_p99_s = 0;
  std::optional<double> predicted_crossing_per_s, measured_crossing_per_s;
  ServingOverhead overhead;
  std::vector<ServingTarget> targets;
  std::vector<std::string> notes;
  double load_average_1m_start = 0, load_average_1m_end = 0;
  double wall_time_s = 0;
};

ServingValidationResult RunServingValidation(const ServingValidationRequest& request,
                                             const model::PresetStore& presets);

// "moelab.validation_serving/1" (the caller adds provenance), the text summary, report.md.
nlohmann::json ServingValidationToJson(const ServingValidationResult& result);
std::string ServingValidationText(const ServingValidationResult& result);
std::string ServingValidationMarkdown(const ServingValidationResult& result);

}  // namespace moelab::validate
