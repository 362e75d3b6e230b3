// The operators of a forward pass on "cuda:N", measured through the executor's GPU backend
// (executor/gpu/gpu_transformer.h), so a sample is the code `moelab run --device gpu` runs with
// its launches, its 64-row GEMM blocks and its host round trips (the router's probabilities come
// back to the host, which builds the experts' token lists). The sample is the backend's own
// operator time (CUDA events around each operator of the pass; manual timing) divided over the
// harness's layers, or, for draft_decode, the wall time of the draft's whole pass.
//
// Harnesses (synthetic weights, copied to the device once per bench):
// - attention_decode / _verify / _prefill: the target's attention shape in a dense model of L
//   layers whose FFN (width 1) and vocabulary (2) cost next to nothing, L = CyclingBlocks(layer
//   weight bytes, L2) (capped at 64 and by a KV budget of min(8 GiB, a quarter of the device's
//   memory)), so every layer's weights come from device memory as in a real pass, where the experts
//   stream through the L2 in between; decode and verify over caches set to `context` positions and
//   cut back after the pass, prefill a prompt into an emptied cache; sample = attention time / L.
// - expert_ffn, router, lm_head, norms_residual: the target (no shared experts, no dense first
//   layers) with at least its own layer count; a pass of `tokens` tokens as sequences of up to 64
//   new tokens into emptied caches. expert_ffn's harness has only K experts and forces every token
//   to all of them, so each runs all `tokens` (sample = experts time / (L K): its two GEMMs and
//   SwiGLU); router = router time / L (GEMM, softmax, the probabilities back to the host, the
//   host's top-K and token lists, the gather of each expert's rows and the weighted combine);
//   norms_residual = the "other" time / L (two RMSNorms and two residual adds per layer, plus the
//   pass's token uploads and embedding spread over the layers as over a real pass's); lm_head = the
//   final norm, the LM head GEMM and the logits back to the host, over `tokens` logit rows.
// - dense_ffn, draft_decode: the draft model; dense_ffn = its FFN time / layers at `tokens` rows;
//   draft_decode = the wall time of one token per sequence over `context` cached positions. The
//   draft's weights are not evicted between passes: a GPU's L2 (50 MB on an H100) holds a small
//   draft, as it does across an SD round's gamma draft passes.
#include <algorithm>
#include <chrono>
#include <memory>
#include <numeric>
#include <vector>

#include "base/error.h"
#include "device/gpu_devices.h"
#include "executor/gpu/gpu_transformer.h"
#include "executor/weights.h"
#include "profiler/impl/benches.h"
#include "routing/routing_source.h"

namespace moelab::profiler::impl {
namespace {

constexpr int64_t kMaxHarnessLayers = 64;
constexpr int64_t kTokensPerSequence = executor::kGpuGemmRows;

// Every token to experts 0..K-1 at every layer: each of a layer's K experts runs every token.
class FirstExpertsRouting : public routing::RoutingSource {
 public:
  explicit FirstExpertsRouting(int64_t top_k) : top_k_(top_k) {}
  std::string Describe() const override { return "every token to experts 0..K-1"; }
  void Route(int64_t step, int64_t layer, int64_t tokens,
             std::vector<std::vector<int32_t>>& out) override {
    if (step < 0 || layer < 0 || tokens < 0)
      throw base::Error("forced routing: negative step, layer or token count (a bug)");
    std::vector<int32_t> experts(static_cast<size_t>(top_k_));
    std::iota(experts.begin(), experts.end(), 0);
    out.assign(static_cast<size_t>(tokens), experts);
  }

 private:
  int64_t top_k_;
};

bool IsAttention(OperatorFamily f) {
  return f == OperatorFamily::kAttentionDecode || f == OperatorFamily::kAttentionVerify ||
         f == OperatorFamily::kAttentionPrefill;
}
bool OnTarget(OperatorFamily f) {
  return f == OperatorFamily::kExpertFfn || f == OperatorFamily::kRouter ||
         f == OperatorFamily::kLmHead || f == OperatorFamily::kNormsResidual;
}

}  // namespace

PassHarness PlanPassHarness(const std::vector<GridPoint>& points, const BenchEnvironment& env,
                            int64_t l2_bytes, double device_memory_bytes) {
  const OperatorFamily family = points.front().family;
  int64_t max_context = 0, max_tokens = 1, max_queries = 1;
  for (const GridPoint& p : points) {
    max_context = std::max(max_context, p.context);
    max_tokens = std::max(max_tokens, p.tokens);
    max_queries = std::max(max_queries, p.queries_per_sequence);
  }
  const std::string label = ToString(family) + " " + points.front().device;
  const executor::ExecutorConfig& target = *env.target;
  PassHarness h;
  if (IsAttention(family)) {
    h.cached = family != OperatorFamily::kAttentionPrefill;
    const int64_t positions = h.cached ? max_context + max_queries : max_tokens;
    const int64_t sequences = h.cached ? max_tokens : 1;
    const double kv_per_layer = static_cast<double>(sequences) * static_cast<double>(positions) *
                                static_cast<double>(target.kv_width()) * 8.0;
    const int64_t cycling =
        std::min(kMaxHarnessLayers,
                 CyclingBlocks(static_cast<int64_t>(AttentionWeightBytes(target)), l2_bytes));
    const double budget = std::min(8.0 * (1 << 30), 0.25 * device_memory_bytes);
    h.layers = std::max<int64_t>(
        1, std::min<int64_t>(cycling, static_cast<int64_t>(budget / kv_per_layer)));
    h.config = AttentionHarnessConfig(target, h.layers, positions);
    h.caches = sequences;
    h.capacity = positions;
    h.note = label + ": the executor's GPU backend, attention over " + std::to_string(h.layers) +
             " layers of the target's attention shape (" +
             std::to_string(static_cast<int64_t>(AttentionWeightBytes(target))) +
             " weight bytes per layer, L2 " + std::to_string(l2_bytes) +
             " bytes); CUDA event timing; samples are attention time per layer";
  } else if (OnTarget(family)) {
    // The target at its own layer count (the pass's uploads and embedding, timed as "other",
    // spread over as many layers as a real pass's), without shared experts or dense layers.
    // Only the measured operator needs real weights: expert_ffn's harness has just the K experts
    // every token is forced to (K x 22 MB per layer at the default shape, L layers cycling the
    // L2), and the router's, LM head's and norms' harnesses have experts of width 64, whose time
    // is not theirs (the routing's dispatch, timed with the router, moves hidden-wide rows
    // whatever the experts' width). A harness is built each profile round, and the full target's
    // 1.4 GB of synthetic weights, four times a round, took most of a GPU profile's 260 s.
    h.config = target;
    h.config.name = target.name + " GPU pass harness";
    h.config.first_dense_layers = 0;
    h.config.num_shared_experts = 0;
    h.config.shared_expert_intermediate_size = 0;
    h.config.shared_expert_gate = false;
    h.layers = target.num_layers;
    h.force_first_experts = family == OperatorFamily::kExpertFfn;
    if (h.force_first_experts) {
      h.config.num_experts = target.top_k;
      const int64_t layer_expert_bytes = target.top_k * ExpertBytes(target);
      h.layers = std::max(h.layers,
                          std::min(kMaxHarnessLayers, CyclingBlocks(layer_expert_bytes, l2_bytes)));
    } else {
      h.config.expert_intermediate_size = kTokensPerSequence;
    }
    h.config.num_layers = h.layers;
    h.config.max_positions = std::max(h.config.max_positions, kTokensPerSequence);
    h.config.Validate();
    h.caches = (max_tokens + kTokensPerSequence - 1) / kTokensPerSequence;
    h.capacity = kTokensPerSequence;
    h.note = label + ": the executor's GPU backend, a pass of the target (" +
             std::to_string(h.layers) + " layers, no shared experts or dense layers" +
             (h.force_first_experts
                  ? ", only the K experts every token is forced to (sample: expert time per "
                    "layer over K)"
                  : ", experts of width " + std::to_string(kTokensPerSequence) +
                        " (not this operator's time)") +
             ") as sequences of up to " + std::to_string(kTokensPerSequence) +
             " new tokens; CUDA event timing";
  } else if (family == OperatorFamily::kDenseFfn || family == OperatorFamily::kDraftDecode) {
    h.config = *env.draft;
    h.layers = h.config.num_layers;
    if (family == OperatorFamily::kDenseFfn) {
      h.config.max_positions = std::max(h.config.max_positions, kTokensPerSequence);
      h.caches = (max_tokens + kTokensPerSequence - 1) / kTokensPerSequence;
      h.capacity = kTokensPerSequence;
    } else {
      h.caches = max_tokens;
      h.capacity = max_context + 1;
    }
    h.note = label + ": the executor's GPU backend, the draft model (" + std::to_string(h.layers) +
             " layers); " +
             (family == OperatorFamily::kDraftDecode
                  ? "host wall time of the whole pass"
                  : "CUDA event timing; samples are FFN time per layer");
  } else {
    throw base::Error("GPU pass bench: " + ToString(family) + " is not an operator of a pass");
  }
  return h;
}

ForwardPassBench::ForwardPassBench(OperatorFamily family, PassHarness harness,
                                   std::unique_ptr<executor::ForwardModel> model)
    : family_(family), harness_(std::move(harness)), model_(std::move(model)) {
  if (harness_.force_first_experts)
    forced_ = std::make_unique<FirstExpertsRouting>(model_->config().top_k);
  notes_.push_back(harness_.note);
  caches_.reserve(static_cast<size_t>(harness_.caches));
  for (int64_t i = 0; i < harness_.caches; ++i)
    caches_.push_back(model_->NewCache(harness_.capacity));
}

ForwardPassBench::~ForwardPassBench() = default;

double ForwardPassBench::time_scale() const {
  switch (family_) {
    case OperatorFamily::kLmHead:
    case OperatorFamily::kDraftDecode:
      return 1.0;
    case OperatorFamily::kExpertFfn:
      return 1.0 / static_cast<double>(harness_.layers * model_->config().top_k);
    default:
      return 1.0 / static_cast<double>(harness_.layers);
  }
}

void ForwardPassBench::Run(benchmark::State& state, const GridPoint& point) {
  RunGuarded(state, [&] {
    for (auto _ : state) state.SetIterationTime(Pass(point));
  });
}

double ForwardPassBench::Pass(const GridPoint& point) {
  std::vector<executor::SequenceInput> batch;
  executor::ForwardOptions options;
  options.logits = executor::LogitRows::kLastPerSequence;
  options.routing = forced_.get();
  const bool over_context =
      harness_.cached ||
      family_ == OperatorFamily::kDraftDecode;  // sequences over a cached context
  if (over_context) {
    const int64_t per_sequence =
        family_ == OperatorFamily::kAttentionVerify ? point.queries_per_sequence : 1;
    for (int64_t b = 0; b < point.tokens; ++b) {
      SetCacheLength(caches_[static_cast<size_t>(b)], point.context);
      batch.push_back({&caches_[static_cast<size_t>(b)],
                       std::vector<int32_t>(static_cast<size_t>(per_sequence), 1)});
    }
  } else {
    // A prompt (attention_prefill) or `tokens` rows as sequences of up to 64 new tokens.
    options.step_kind = "prefill";
    if (family_ == OperatorFamily::kLmHead) options.logits = executor::LogitRows::kAll;
    const int64_t chunk = IsAttention(family_) ? point.tokens : kTokensPerSequence;
    for (int64_t first = 0, s = 0; first < point.tokens; first += chunk, ++s) {
      executor::KvCache& cache = caches_[static_cast<size_t>(s)];
      cache.Truncate(0);
      batch.push_back({&cache, std::vector<int32_t>(
                                   static_cast<size_t>(std::min(chunk, point.tokens - first)), 1)});
    }
  }
  const executor::OperatorTimes before = model_->times();
  const auto start = std::chrono::steady_clock::now();
  model_->Forward(batch, options, logits_);
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const executor::OperatorTimes spent = model_->times().Since(before);
  if (over_context) {
    for (executor::SequenceInput& s : batch) s.cache->Truncate(point.context);
  }
  switch (family_) {
    case OperatorFamily::kAttentionDecode:
    case OperatorFamily::kAttentionVerify:
    case OperatorFamily::kAttentionPrefill:
      return spent.attention_s;
    case OperatorFamily::kRouter:
      return spent.router_s;
    case OperatorFamily::kExpertFfn:
    case OperatorFamily::kDenseFfn:
      return spent.experts_s;
    case OperatorFamily::kLmHead:
      return spent.lm_head_s;
    case OperatorFamily::kNormsResidual:
      return spent.other_s;
    case OperatorFamily::kDraftDecode:
      return wall_s;
    default:
      throw base::Error("GPU pass bench: " + ToString(family_) + " is not an operator of a pass");
  }
}

std::unique_ptr<OperatorBench> MakeGpuPassBench(const std::vector<GridPoint>& points,
                                                const BenchEnvironment& env) {
  const std::string& device = points.front().device;
  const int gpu = GpuIndex(device);
  const std::string reason = executor::GpuUnavailableReason(gpu);
  if (!reason.empty())
    throw base::Error(ToString(points.front().family) + " " + device + ": " + reason);
  double device_memory_bytes = 0;
  int64_t l2_bytes = 0;
  for (const device::GpuDevice& d : device::DetectGpus().devices) {
    if (d.index != gpu) continue;
    device_memory_bytes = d.memory_bytes;
    l2_bytes = d.l2_bytes;
  }
  if (!(device_memory_bytes > 0) || l2_bytes <= 0)
    throw base::Error(ToString(points.front().family) + " " + device +
                      ": the GPU inventory does not list this device's memory and L2");
  PassHarness harness = PlanPassHarness(points, env, l2_bytes, device_memory_bytes);
  std::unique_ptr<executor::ForwardModel> model;
  {
    // The host copy of the weights is only needed while the model copies them to the device.
    const executor::ModelWeights weights =
        executor::MakeSyntheticWeights(harness.config, env.seed, *env.pool);
    model = executor::MakeGpuTransformer(weights, gpu);
  }
  return std::make_unique<ForwardPassBench>(points.front().family, std::move(harness),
                                            std::move(model));
}

}  // namespace moelab::profiler::impl
