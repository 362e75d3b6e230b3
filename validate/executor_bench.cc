#include "validate/executor_bench.h"

#include <algorithm>

#include "base/error.h"
#include "executor/generation.h"
#include "executor/gpu/gpu_transformer.h"
#include "executor/transformer.h"

namespace moelab::validate {
namespace {

double Mean(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += v;
  return values.empty() ? 0 : sum / static_cast<double>(values.size());
}

executor::ExecutorConfig WithLayers(executor::ExecutorConfig config, int64_t layers) {
  config.num_layers = layers;
  config.name += " (" + std::to_string(layers) + " layers)";
  config.Validate();
  return config;
}

}  // namespace

ExecutorBench::ExecutorBench(const executor::ExecutorConfig& target, int64_t held_out_layers,
                             const executor::ExecutorConfig& draft, uint64_t seed, int threads,
                             double alpha, const std::string& device)
    : pool_(threads > 0 ? threads : kernels::DefaultThreadCount()),
      seed_(seed),
      alpha_(alpha),
      target_weights_(executor::MakeSyntheticWeights(target, seed, pool_)),
      draft_weights_(executor::MakeSyntheticWeights(draft, seed + 1, pool_)) {
  if (device != "cpu" && device != "gpu")
    throw base::Error("validate: --device '" + device + "': expected cpu or gpu");
  const auto make =
      [&](const executor::ModelWeights& weights) -> std::unique_ptr<executor::ForwardModel> {
    if (device == "gpu") return executor::MakeGpuTransformer(weights, 0);
    return std::make_unique<executor::Transformer>(weights, pool_);
  };
  if (held_out_layers > 0) {
    held_out_weights_ = std::make_unique<executor::ModelWeights>(
        executor::MakeSyntheticWeights(WithLayers(target, held_out_layers), seed + 2, pool_));
    held_out_ = make(*held_out_weights_);
  }
  target_ = make(target_weights_);
  draft_ = make(draft_weights_);
}

const executor::ExecutorConfig& ExecutorBench::target_config(bool held_out) const {
  if (held_out && !held_out_weights_) throw base::Error("no held-out shape was loaded");
  return held_out ? held_out_weights_->config : target_weights_.config;
}

executor::ForwardModel& ExecutorBench::Target(bool held_out) {
  if (held_out && !held_out_) throw base::Error("no held-out shape was loaded");
  return held_out ? *held_out_ : *target_;
}

CaseRun ExecutorBench::Run(const ValidationCase& spec) {
  executor::ForwardModel& target = Target(spec.held_out_shape);
  const int64_t vocab = target.config().vocab_size;
  CaseRun run;
  switch (spec.kind) {
    case CaseKind::kPrefill:
    case CaseKind::kDecode: {
      executor::DecodeOptions options;
      options.output_tokens = spec.kind == CaseKind::kPrefill ? 0 : spec.output_tokens;
      options.synthetic_context = spec.context;
      options.seed = seed_;
      const executor::DecodeResult result = executor::RunDecode(
          target, executor::SyntheticPrompts(spec.batch, spec.prompt, vocab, seed_), options);
      const double decode_steps = static_cast<double>(spec.output_tokens - 1);
      for (const executor::StepTime& s : result.steps) {
        if (s.kind == (spec.kind == CaseKind::kPrefill ? "prefill" : "decode"))
          run.steps_s.push_back(s.seconds);
      }
      run.value =
          spec.kind == CaseKind::kPrefill ? result.prefill_s : result.decode_s / decode_steps;
      run.operators = spec.kind == CaseKind::kPrefill
                          ? OperatorSecondsOf(result.prefill_operators)
                          : Scaled(OperatorSecondsOf(result.decode_operators), 1.0 / decode_steps);
      return run;
    }
    case CaseKind::kBeam: {
      const executor::BeamResult result = executor::RunBeamSearch(
          target, executor::SyntheticPrompts(1, spec.prompt, vocab, seed_)[0], spec.beam_width,
          spec.output_tokens);
      run.value = result.decode_s / static_cast<double>(spec.output_tokens - 1);
      for (const executor::StepTime& s : result.steps) {
        if (s.kind == "beam") run.steps_s.push_back(s.seconds);
      }
      return run;
    }
    case CaseKind::kSd: {
      const std::vector<executor::TokenIds> prompts =
          executor::SyntheticPrompts(spec.batch, spec.prompt, vocab, seed_);
      // The plain decode of the same requests right before: the speedup's reference.
      executor::DecodeOptions plain;
      plain.output_tokens = spec.output_tokens;
      plain.synthetic_context = spec.context;
      plain.seed = seed_;
      const executor::DecodeResult baseline = executor::RunDecode(target, prompts, plain);
      executor::SpeculativeOptions options;
      options.gamma = spec.gamma;
      options.continuation = &Continuation(spec, prompts);
      options.acceptance = executor::Acceptance::kTargetAlpha;
      options.alpha = alpha_;
      options.output_tokens = spec.output_tokens;
      options.synthetic_context = spec.context;
      options.seed = seed_;
      const executor::SpeculativeResult sd =
          executor::RunSpeculative(target, *draft_, prompts, options);
      std::vector<double> decode_steps;
      for (const executor::StepTime& s : baseline.steps) {
        if (s.kind == "decode") decode_steps.push_back(s.seconds);
      }
      run.baseline_steps_s = decode_steps;
      for (const executor::StepTime& s : sd.steps) {
        if (s.kind == "draft" || s.kind == "verify") run.steps_s.push_back(s.seconds);
      }
      std::vector<double> full_batch_draft_steps;
      for (const executor::StepTime& s : sd.steps) {
        if (s.kind != "draft") continue;
        const int64_t sequences = s.tokens / spec.gamma;
        run.sequences_per_round.push_back(sequences);
        run.catch_up_per_round.push_back(s.positions - s.tokens);
        if (sequences == spec.batch)
          full_batch_draft_steps.push_back(s.seconds / static_cast<double>(spec.gamma));
      }
      run.value = baseline.decode_s / sd.decode_s;
      run.sigma = sd.Sigma(spec.gamma);
      run.plain_decode_steps = static_cast<int64_t>(decode_steps.size());
      run.plain_step_s = Mean(decode_steps);
      run.draft_step_s = Mean(full_batch_draft_steps);
      run.verify_step_s = Mean(sd.full_batch_verify_s);
      if (!sd.full_batch_verify_s.empty()) {
        run.operators = Scaled(OperatorSecondsOf(sd.full_batch_verify_operators),
                               1.0 / static_cast<double>(sd.full_batch_verify_s.size()));
      }
      run.target_efficiency = run.plain_step_s / run.verify_step_s;
      return run;
    }
    case CaseKind::kOffload:
    case CaseKind::kOffloadPrefill:
      break;  // validate/offload_cases.h runs them on the offload runtime
  }
  throw base::Error(ToString(spec.kind) + " cases do not run on the in-memory executor bench");
}

namespace {

// An empty trace of the target's MoE shape, its source naming the gate, the run and the seed.
routing::RoutingTrace EmptyTraceOf(const executor::ExecutorConfig& c, const std::string& run,
                                   uint64_t seed) {
  routing::RoutingTrace trace;
  trace.num_layers = c.num_layers - c.first_dense_layers;
  trace.num_experts = c.num_experts;
  trace.top_k = c.top_k;
  trace.source =
      "moelab validate: executor gate of " + c.name + run + ", seed " + std::to_string(seed);
  return trace;
}

}  // namespace

routing::RoutingTrace ExecutorBench::RecordRouting(bool held_out, int64_t gamma,
                                                   int64_t sequences) {
  if (sequences < 1)
    throw base::Error("recording routing needs >= 1 sequence, got " + std::to_string(sequences));
  executor::ForwardModel& target = Target(held_out);
  const executor::ExecutorConfig& c = target.config();
  routing::RoutingTrace trace = EmptyTraceOf(c, "", seed_);
  const std::vector<executor::TokenIds> prompts =
      executor::SyntheticPrompts(sequences, 24, c.vocab_size, seed_ + 17);
  executor::SpeculativeOptions sd;
  sd.gamma = std::max<int64_t>(gamma, 1);
  sd.acceptance = executor::Acceptance::kTargetAlpha;
  sd.alpha = alpha_;
  sd.output_tokens = 25;
  sd.seed = seed_ + 17;
  sd.record = &trace;
  executor::RunSpeculative(target, *draft_, prompts, sd);
  executor::DecodeOptions decode;
  decode.output_tokens = 17;
  decode.seed = seed_ + 17;
  decode.record = &trace;
  executor::RunDecode(target, prompts, decode);
  return trace;
}

// The SD cases' runs repeat their prompts every round and at every gamma: the target's greedy
// continuation (what --acceptance alpha drafts from) is decoded once per prompts and context, long
// enough for the largest gamma asked so far, untimed.
const std::vector<executor::TokenIds>& ExecutorBench::Continuation(
    const ValidationCase& spec, const std::vector<executor::TokenIds>& prompts) {
  const auto key = std::make_tuple(spec.held_out_shape, spec.batch, spec.prompt, spec.context);
  std::vector<executor::TokenIds>& continuation = continuations_[key];
  const int64_t needed = spec.output_tokens + spec.gamma;
  if (!continuation.empty() && static_cast<int64_t>(continuation.front().size()) >= needed)
    return continuation;
  executor::ForwardModel& target = Target(spec.held_out_shape);
  executor::DecodeOptions plain;
  plain.output_tokens = needed;
  plain.synthetic_context = spec.context;
  plain.seed = seed_;
  const executor::OperatorTimes before = target.times();
  continuation = executor::RunDecode(target, prompts, plain).outputs;
  target.times() = before;
  return continuation;
}

routing::RoutingTrace ExecutorBench::RecordDecodeRouting(bool held_out, int64_t sequences,
                                                         int64_t output_tokens) {
  if (sequences < 1 || output_tokens < 2) {
    throw base::Error("recording decode routing needs >= 1 sequence and >= 2 tokens, got " +
                      std::to_string(sequences) + " and " + std::to_string(output_tokens));
  }
  executor::ForwardModel& target = Target(held_out);
  const executor::ExecutorConfig& c = target.config();
  routing::RoutingTrace trace = EmptyTraceOf(c, " in a decode run of its own", seed_);
  const std::vector<executor::TokenIds> prompts =
      executor::SyntheticPrompts(sequences, 24, c.vocab_size, seed_ + 29);
  executor::DecodeOptions decode;
  decode.output_tokens = output_tokens;
  decode.seed = seed_ + 29;
  decode.record = &trace;
  executor::RunDecode(target, prompts, decode);
  return trace;
}

}  // namespace moelab::validate
