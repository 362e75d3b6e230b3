#include "executor/serving_model.h"

#include <string>

#include "base/error.h"
#include "base/system_memory.h"
#include "executor/gpu/gpu_transformer.h"
#include "executor/hf_weights.h"
#include "executor/transformer.h"

namespace moelab::executor {

double KvBudgetBytes(const ExecutorConfig& config, const scheduler::SchedulerConfig& scheduler) {
  return static_cast<double>(scheduler.kv_blocks) * static_cast<double>(scheduler.kv_block_tokens) *
         static_cast<double>(config.num_layers) * static_cast<double>(config.kv_width()) * 2.0 *
         sizeof(float);
}

std::unique_ptr<ServingModel> MakeCpuServingModel(ModelWeights weights, int threads) {
  auto serving = std::make_unique<ServingModel>();
  serving->pool = std::make_unique<kernels::ThreadPool>(threads);
  serving->weights = std::move(weights);
  serving->model = std::make_unique<Transformer>(serving->weights, *serving->pool);
  return serving;
}

namespace {

// The draft `moelab run --workload sd` builds, beside the target, and the acceptance rule.
void AddDraft(const RunRequest& request, const ExecutorConfig& target,
              const model::PresetStore& presets, ServingModel& serving) {
  if (request.acceptance != Acceptance::kGreedy && request.acceptance != Acceptance::kCoinAlpha) {
    throw base::Error("--acceptance " + ToString(request.acceptance) +
                      ": serving accepts drafts greedily (no --alpha) or by seeded coins at "
                      "--alpha (alpha-coin)");
  }
  model::ShapeOverrides draft_shape = request.draft_shape;
  if (!draft_shape.vocab) draft_shape.vocab = target.vocab_size;
  const ExecutorConfig draft_config =
      ExecutorConfigFromSpec(presets.LoadModel(request.draft), draft_shape);
  serving.draft_weights = request.draft_weights.empty()
                              ? MakeSyntheticWeights(draft_config, request.seed + 1, *serving.pool)
                              : LoadHuggingFaceWeights(draft_config, request.draft_weights);
  if (request.device == "gpu")
    serving.draft = MakeGpuTransformer(serving.draft_weights, request.gpu_index);
  else
    serving.draft = std::make_unique<Transformer>(serving.draft_weights, *serving.pool);
  serving.speculation.draft = serving.draft.get();
  serving.speculation.gamma = request.gamma;
  if (request.acceptance == Acceptance::kCoinAlpha)
    serving.speculation.fixed_rate = scheduler::SpeculativeAcceptance{request.alpha, request.seed};
}

}  // namespace

std::unique_ptr<ServingModel> BuildServingModel(const RunRequest& request,
                                                const scheduler::SchedulerConfig& config,
                                                const model::PresetStore& presets) {
  config.Validate();
  // RunTargetConfig checks a run's positions; a server's are the scheduler's to refuse.
  RunRequest one_token = request;
  one_token.workload = Workload::kDecode;
  one_token.batch = one_token.prompt_tokens = one_token.output_tokens = 1;
  const ExecutorConfig target = RunTargetConfig(one_token, presets);
  const double kv_bytes = KvBudgetBytes(target, config);
  const double weight_bytes = WeightBytesFor(target);
  const double available = base::MemAvailableBytes();
  if (available > 0 && kv_bytes + weight_bytes > 0.9 * available) {
    throw base::Error("--kv-blocks " + std::to_string(config.kv_blocks) + " x --kv-block-tokens " +
                      std::to_string(config.kv_block_tokens) + " positions need " +
                      std::to_string(static_cast<int64_t>(kv_bytes / 1e6)) +
                      " MB of KV cache beside " +
                      std::to_string(static_cast<int64_t>(weight_bytes / 1e6)) +
                      " MB of weights, more than 90 % of the " +
                      std::to_string(static_cast<int64_t>(available / 1e6)) +
                      " MB this machine has available: lower --kv-blocks");
  }
  const int threads = request.threads > 0 ? request.threads : kernels::DefaultThreadCount();
  auto pool = std::make_unique<kernels::ThreadPool>(threads);
  auto serving = std::make_unique<ServingModel>();
  serving->weights = LoadRunWeights(target, request, *pool, serving->store);
  serving->pool = std::move(pool);
  serving->model = BuildRunModel(request, target, serving->weights, serving->store, *serving->pool,
                                 serving->offload_runtime);
  if (request.workload == Workload::kSpeculative) AddDraft(request, target, presets, *serving);
  return serving;
}

}  // namespace moelab::executor
