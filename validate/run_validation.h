#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "executor/executor_config.h"
#include "model/executor_shape.h"
#include "model/preset_store.h"
#include "validate/offload_ranking.h"
#include "validate/validation_case.h"
#include "validate/validation_metrics.h"

namespace moelab::validate {

// `moelab validate`: the closed loop on the machine at hand. Record the executor's own gate
// routing, profile (or reuse a profile) with every held-out case run `repeat` times between the
// profile's rounds, interleaved round by round (A B C A B C ...) with the machine's limits probed
// before each round, fit the latency curves and the calibrated roofline, and judge each cost
// source's prediction (with the routing of a decode run recorded on its own, the headline's; of
// runs like the cases'; and uniform) against the runs.
struct ValidationRequest {
  std::string model = "mixtral-8x7b";
  model::ShapeOverrides shape;  // applied to the model (the executor's default shape when unset)
  std::string draft = "llama-3.2-1b";
  model::ShapeOverrides draft_shape;  // draft vocab defaults to the target's
  bool quick = false;
  std::set<CaseKind> kinds;                      // empty: every kind
  int repeat = 0;                                // runs per case; 0: 3 with --quick, else 5
  std::optional<std::filesystem::path> profile;  // reuse this profile (moelab.profile/1)
  // --reused-profile: a profile taken before this run (moelab profile --out, as a user has one),
  // fitted and pricing every in-memory case beside the headline's profile as the cost source
  // kReusedProfileSource: what predicting from an earlier profile costs on this machine.
  std::optional<std::filesystem::path> reused_profile;
  std::filesystem::path work_dir;  // profile, fit and routing trace are written here
  double alpha = 0.8;              // SD acceptance rate (fixed-alpha acceptance)
  // The target's weight formats (moelab run's --expert-bits / --attention-bits: 16, 8, 4), in the
  // profile and in every executor run; a reused --profile must have measured the same.
  int expert_bits = 16;
  int attention_bits = 16;
  uint64_t seed = 1;
  int threads = 0;                     // 0: all cores
  std::optional<int64_t> cache_bytes;  // the profile's (profiler::ProfileRequest::cache_bytes)
  // --profile-rounds: the rounds of the profile taken here; 0: kDefaultProfileRounds (or the full
  // grid's own, if more). Fewer rounds profile faster and leave each sample's median to fewer runs.
  int profile_rounds = 0;
  // Where the executor runs and the profile measures: "cpu", or "gpu" (GPU 0 through the
  // executor's CUDA backend, profiled through the same backend, the CPU's operators left out).
  std::string device = "cpu";
  // --timelines: every offload case's last executor run and its simulation as Chrome trace-event
  // timelines with the same op names, under work_dir / "timelines" (--cases offload only).
  bool timelines = false;
  std::ostream* progress = nullptr;

  int Repeats() const { return repeat > 0 ? repeat : (quick ? 3 : 5); }
  static constexpr int kDefaultProfileRounds = 5;
  void Validate() const;  // Error naming the option
};

struct ValidationResult {
  ValidationRequest request;
  nlohmann::json machine;                    // the profile's machine section
  std::vector<nlohmann::json> round_limits;  // machine limits probed before each round
  // Untimed runs, over all rounds, of a case whose model did not run just before it (each
  // round's first, the first of the held-out shape): its caches warmed as every later case's are.
  int64_t warm_up_runs = 0;
  std::string profile_path, fit_path, routing_trace_path;
  bool profile_reused = false;
  // --reused-profile: its path and its fit's (work_dir / reused-fit.json); empty without it.
  std::string reused_profile_path, reused_fit_path;
  std::string routing;  // the recorded routing (SD and decode runs) of the "measured" predictions
  // The headline's: a decode run's routing recorded on its own ("decode-trace").
  std::string decode_trace_path, decode_routing;
  std::vector<std::string> cost_sources;
  std::vector<std::string> notes;
  std::vector<CaseResult> cases;
  std::vector<ErrorSummary> summaries;
  // The case rounds ran between the profile's rounds (false when --profile reused one).
  bool profile_interleaved = false;
  std::vector<BestGammaRow> best_gamma;
  // --cases offload: the simulator's ranking of the policies against the executor's.
  std::optional<OffloadRanking> offload_ranking;
  double wall_time_s = 0;

  // The summary the headline numbers are (fitted-profile with the decode-trace routing, overall).
  const ErrorSummary& Headline() const;
  // --reused-profile's summary beside it (overall, the headline's routing); null without it.
  const ErrorSummary* ReusedProfileSummary() const;
};

ValidationResult RunValidation(const ValidationRequest& request, const model::PresetStore& presets);

// How many of `case_rounds` case rounds have run by the end of profile round `profile_round` (1..
// `profile_rounds`): case round k (0-based) runs after profile round ceil((k + 1/2) R / N), so
// the case rounds are spread over the profile and centred in it (3 over 5: after rounds 1, 3 and
// 5; 1 over 5: after round 3), and all have run by the last.
int CaseRoundsBy(int profile_round, int profile_rounds, int case_rounds);

}  // namespace moelab::validate
