#include "validate/impl/offload_run.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "base/error.h"
#include "routing/routing_source.h"
#include "validate/validation_metrics.h"

namespace moelab::validate::impl {
namespace {

// A routing source replayed from a run's first pass: the shared model numbers its passes across
// runs, and forced routing asks for the step of that number.
class FromFirstPass : public routing::RoutingSource {
 public:
  FromFirstPass(std::unique_ptr<routing::RoutingSource> source, int64_t first_pass)
      : source_(std::move(source)), first_pass_(first_pass) {}
  std::string Describe() const override { return source_->Describe(); }
  void Route(int64_t step, int64_t layer, int64_t tokens,
             std::vector<std::vector<int32_t>>& out) override {
    source_->Route(step - first_pass_, layer, tokens, out);
  }

 private:
  std::unique_ptr<routing::RoutingSource> source_;
  int64_t first_pass_;
};

}  // namespace

OffloadRun RunExecutor(const Bench& bench, const ValidationCase& c, const Recorded& recorded,
                       routing::RoutingTrace* record, bool timeline) {
  executor::Transformer& model = *bench.model;
  std::shared_ptr<executor::ExecutionTimeline> recorded_timeline;
  if (timeline) recorded_timeline = std::make_shared<executor::ExecutionTimeline>(model.passes());
  executor::offload::OffloadOptions options;
  options.timeline = recorded_timeline.get();
  options.policy = c.policy;
  options.expert_memory_bytes = c.expert_slots * bench.store->key().payload_bytes();
  options.popularity = recorded.calibration.popularity;
  options.history = recorded.calibration.history;
  options.seed = bench.seed;
  options.record_decisions =
      true;  // every run alike; the first run's gate signals feed the simulator
  executor::offload::OffloadRuntime runtime(bench.config, *bench.store, options);
  model.set_expert_provider(&runtime);
  model.set_timeline(recorded_timeline.get());
  // The model outlives this run's runtime: its provider is cleared when the run ends, error or not
  // (the next run's Forward takes whichever provider is set then).
  struct Detach {
    executor::Transformer& model;
    ~Detach() {
      model.set_expert_provider(nullptr);
      model.set_timeline(nullptr);
    }
  } detach{model};
  std::unique_ptr<routing::RoutingSource> routing;
  executor::DecodeOptions decode;
  decode.output_tokens = c.output_tokens;
  decode.seed = bench.seed;
  if (record) {
    decode.record = record;
  } else {
    routing = std::make_unique<FromFirstPass>(
        routing::MakeTraceRouting(recorded.trace, bench.config.num_layers, bench.config.num_experts,
                                  bench.config.top_k, recorded.file),
        model.passes());
    decode.routing = routing.get();
  }
  const executor::DecodeResult result = executor::RunDecode(model, recorded.prompts, decode);
  OffloadRun run;
  run.value = c.kind == CaseKind::kOffloadPrefill
                  ? result.prefill_s
                  : result.decode_s / static_cast<double>(c.output_tokens - 1);
  run.total_s = result.prefill_s + result.decode_s;
  for (const executor::StepTime& step : result.steps) {
    if (step.kind == "decode") run.decode_steps_s.push_back(step.seconds);
  }
  run.stats = runtime.Stats();
  run.timeline = std::move(recorded_timeline);
  return run;
}

Measured MeasuredOf(const ValidationCase& c, const std::vector<OffloadRun>& runs) {
  std::vector<double> values;
  std::vector<std::vector<double>> decode_steps;
  for (const OffloadRun& run : runs) {
    values.push_back(run.value);
    decode_steps.push_back(run.decode_steps_s);
  }
  if (values.empty()) throw base::Error("validate offload: " + c.Label() + " has no run (a bug)");
  Measured m;
  m.value = Median(values);
  const std::optional<double> steps_sum = SumOfStepMedians(decode_steps);
  if (c.kind == CaseKind::kOffload && values.size() >= 3 && steps_sum)
    m.value = *steps_sum / static_cast<double>(c.output_tokens - 1);
  m.min = *std::min_element(values.begin(), values.end());
  m.max = *std::max_element(values.begin(), values.end());
  m.runs = static_cast<int>(values.size());
  return m;
}

}  // namespace moelab::validate::impl
