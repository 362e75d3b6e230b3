#include "validate/offload_cases.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <memory>
#include <utility>

#include "base/error.h"
#include "executor/generation.h"
#include "executor/offload/offload_runtime.h"
#include "executor/transformer.h"
#include "executor/weights.h"
#include "profiler/expert_store_probes.h"
#include "routing/routing_trace.h"
#include "policies/calibration.h"
#include "validate/impl/offload_judge.h"
#include "validate/impl/offload_notes.h"
#include "validate/impl/offload_run.h"
#include "validate/impl/offload_state.h"
#include "validate/offload_ranking.h"

namespace moelab::validate {
namespace {

// Decode: a short prompt and 8 decode steps; prefill: 256 prompt tokens, TTFT only.
constexpr int64_t kDecodePrompt = 16, kDecodeOutput = 9, kPrefillPrompt = 256;

struct Workload {
  CaseKind kind;
  int64_t batch, prompt, output_tokens;
};
constexpr Workload kWorkloads[] = {{CaseKind::kOffload, 1, kDecodePrompt, kDecodeOutput},
                                   {CaseKind::kOffload, 4, kDecodePrompt, kDecodeOutput},
                                   {CaseKind::kOffloadPrefill, 1, kPrefillPrompt, 1}};

}  // namespace

std::vector<ValidationCase> OffloadPlan(const executor::ExecutorConfig& target) {
  const int64_t total = (target.num_layers - target.first_dense_layers) * target.num_experts;
  // A quarter, half and three quarters of the routed experts; at least one layer's experts
  // (stream-all reads a whole layer into staging buffers, every policy needs top-k).
  std::vector<int64_t> budgets;
  for (int64_t quarters : {1, 2, 3}) {
    const int64_t slots = std::max(total * quarters / 4, target.num_experts);
    if (budgets.empty() || slots > budgets.back()) budgets.push_back(slots);
  }
  if (budgets.size() < 3) {
    throw base::Error("--cases offload: model '" + target.name + "' has " + std::to_string(total) +
                      " routed experts, too few for three expert budgets above one layer's " +
                      std::to_string(target.num_experts) + " (use more layers or experts)");
  }
  std::vector<ValidationCase> cases;
  for (const Workload& w : kWorkloads) {
    for (int64_t slots : budgets) {
      for (const std::string& policy : OffloadPolicies()) {
        ValidationCase c;
        c.kind = w.kind;
        c.batch = w.batch;
        c.prompt = w.prompt;
        c.output_tokens = w.output_tokens;
        c.policy = policy;
        c.expert_slots = slots;
        cases.push_back(c);
      }
    }
  }
  return cases;
}

namespace {

// The expert store under request.work_dir / "offload-store" (built, or reused when it holds these
// weights), the weights, and the one model every run shares.
void PrepareStoreAndModel(impl::OffloadState& st) {
  const ValidationRequest& request = st.request;
  const executor::ExecutorConfig& target = st.target;
  const std::filesystem::path dir = request.work_dir / "offload-store";
  const std::string source = "synthetic seed " + std::to_string(request.seed);
  st.say("offload: preparing the expert store in " + dir.string());
  bool built = false;
  st.store = executor::offload::PrepareExpertStore(
                 target, source, dir,
                 [&](executor::offload::ExpertStoreWriter& writer) {
                   const executor::ExpertSink add = [&](int64_t layer, int64_t expert,
                                                        const executor::FfnWeights& w) {
                     writer.Add(layer, expert, w);
                   };
                   st.weights = executor::MakeSyntheticWeights(target, request.seed, st.pool, &add);
                   built = true;
                 })
                 .store;
  if (!built) {
    const executor::ExpertSink skip;
    st.weights = executor::MakeSyntheticWeights(target, request.seed, st.pool, &skip);
  }
  if (!st.store->direct_io())
    st.notes.push_back("offload: " + st.store->warning() + " -- the storage tier was not cold");
  st.model = std::make_unique<executor::Transformer>(st.weights, st.pool);
}

// The executor's own gate routing for the workload of `c`, recorded by an on-demand run at the
// largest budget (the routing does not depend on the policy: offloaded outputs equal in-RAM
// ones), saved beside the profile, and the calibration both engines start from.
impl::Recorded RecordWorkload(const impl::OffloadState& st, const ValidationCase& c) {
  const ValidationRequest& request = st.request;
  const executor::ExecutorConfig& target = st.target;
  const std::string key = WorkloadLabel(c);
  st.say("offload: recording the executor's gate routing, " + key);
  impl::Recorded r;
  r.prompts = executor::SyntheticPrompts(c.batch, c.prompt, target.vocab_size, request.seed);
  r.trace.num_layers = target.num_layers;
  r.trace.num_experts = target.num_experts;
  r.trace.top_k = target.top_k;
  r.trace.source = "the executor's gate (validate --cases offload, " + key + ")";
  ValidationCase recording = c;
  recording.policy = "on-demand";
  recording.expert_slots = st.cases.back().expert_slots;
  impl::RunExecutor(st.MakeBench(), recording, r, &r.trace);
  std::string name = key;
  std::replace(name.begin(), name.end(), ' ', '-');
  std::replace(name.begin(), name.end(), '=', '-');
  r.file = (request.work_dir / ("offload-routing-" + name + ".json")).string();
  routing::SaveRoutingTrace(r.trace, r.file);
  r.calibration =
      policies::CalibrateRouting("trace:" + r.file, target.num_layers, target.num_experts,
                                 target.top_k, request.seed, policies::CalibrationOptions{});
  return r;
}

}  // namespace

OffloadValidation::OffloadValidation(const ValidationRequest& request,
                                     const executor::ExecutorConfig& target,
                                     std::function<void(const std::string&)> say)
    : state_(std::make_unique<impl::OffloadState>(request, target, std::move(say))) {
  impl::OffloadState& st = *state_;
  PrepareStoreAndModel(st);
  for (const ValidationCase& c : st.cases) {
    const std::string key = WorkloadLabel(c);
    if (!st.recorded.count(key)) st.recorded.emplace(key, RecordWorkload(st, c));
  }
}

OffloadValidation::~OffloadValidation() = default;

void OffloadValidation::RunRound() {
  impl::OffloadState& st = *state_;
  const impl::Bench bench = st.MakeBench();
  ++st.rounds;
  // Two probes (half a second each) per round, one before its cases and one after, not one per
  // case: the cloud disk's delivered bandwidth is not stationary (the runs' stream-all decodes got
  // 0.84-1.11 GB/s across three validations, the probes read 0.95-1.25), and a probe before every
  // case doubled the bytes read and the runs then got the least of all (0.84-0.95 against 1.25).
  // Probes on both sides bracket the round's cases; their median over the rounds prices reads.
  const int readers = executor::offload::OffloadOptions{}.reader_threads;
  st.bare_one.push_back(profiler::ProbeBarePreads(*st.store, 1));
  st.bare_two.push_back(profiler::ProbeBarePreads(*st.store, 2));
  st.probes.push_back(profiler::ProbeStorageReadBandwidth(*st.store, st.target, readers));
  st.ProbeReaderPairs(impl::kReaderPairsPerRound);
  for (size_t i = 0; i < st.baselines.size(); ++i) {
    const ValidationCase& c = st.baselines[i];
    st.say("offload round " + std::to_string(st.rounds) + ", baseline: " + c.Label());
    for (int t = 0; t < RunsPerRound(c.kind); ++t) {
      impl::OffloadRun run = impl::RunExecutor(bench, c, st.recorded.at(WorkloadLabel(c)), nullptr,
                                               st.request.timelines);
      if (!st.baseline_runs[i].empty()) st.baseline_runs[i].back().timeline.reset();
      if (run.stats.reads != 0)
        throw base::Error("validate offload: the all-in-RAM baseline " + c.Label() + " read " +
                          std::to_string(run.stats.reads) + " experts (a bug)");
      run.stats = {};
      st.baseline_runs[i].push_back(std::move(run));
    }
  }
  for (size_t i = 0; i < st.cases.size(); ++i) {
    st.say("offload round " + std::to_string(st.rounds) + ", case " + std::to_string(i + 1) + "/" +
           std::to_string(st.cases.size()) + ": " + st.cases[i].Label());
    for (int t = 0; t < RunsPerRound(st.cases[i].kind); ++t) {
      impl::OffloadRun run =
          impl::RunExecutor(bench, st.cases[i], st.recorded.at(WorkloadLabel(st.cases[i])), nullptr,
                            st.request.timelines);
      // Only the last run's timeline is written: the earlier ones are dropped as they are replaced.
      if (!st.runs[i].empty()) st.runs[i].back().timeline.reset();
      if (!st.signals[i])
        st.signals[i] = std::make_shared<const policies::GateSignals>(std::move(run.stats.signals));
      run.stats.signals = {};
      run.stats.decisions.clear();
      st.runs[i].push_back(std::move(run));
    }
    st.ProbeReaderPairs(impl::kReaderPairsPerCase);
  }
  st.probes.push_back(profiler::ProbeStorageReadBandwidth(*st.store, st.target, readers));
}

void OffloadValidation::Judge(const fit::Profile& profile, const fit::LatencyFit& fit,
                              ValidationResult& result) const {
  const impl::OffloadState& st = *state_;
  if (st.rounds == 0) throw base::Error("validate offload: no round was run (a bug)");
  for (const std::string& note : st.notes) result.notes.push_back(note);
  const impl::OffloadPricing pricing = impl::PricingOf(st, fit);
  for (std::string& note : impl::ProbeNotes(st, profile, pricing))
    result.notes.push_back(std::move(note));
  impl::JudgedCases judged = impl::JudgeCases(st, profile, pricing);
  for (std::string& note : impl::AlternativePricingNotes(judged.errors, profile))
    result.notes.push_back(std::move(note));
  for (size_t i = 0; i < st.baselines.size(); ++i) {
    result.notes.push_back(
        impl::BaselineNote(st.baselines[i], impl::JudgeBaseline(st, i, profile, pricing)));
  }
  OffloadRanking ranking = RankOffloadPolicies(judged.results);
  for (const std::string& note : OffloadRankingNotes(ranking)) result.notes.push_back(note);
  result.offload_ranking = std::move(ranking);
  result.cases.insert(result.cases.end(), judged.results.begin(), judged.results.end());
}

void RunOffloadValidation(const ValidationRequest& request, const executor::ExecutorConfig& target,
                          const fit::Profile& profile, const fit::LatencyFit& fit,
                          const std::function<void(const std::string&)>& say,
                          ValidationResult& result) {
  OffloadValidation validation(request, target, say);
  for (int round = 0; round < request.Repeats(); ++round) validation.RunRound();
  validation.Judge(profile, fit, result);
}

}  // namespace moelab::validate
