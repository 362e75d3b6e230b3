#include "executor/expert_parallel_run.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "base/error.h"
#include "base/hash.h"
#include "base/input_file.h"
#include "base/limits.h"
#include "base/number_lists.h"
#include "executor/expert_parallel.h"
#include "executor/expert_parallel_chunks.h"
#include "executor/expert_placement.h"
#include "executor/generation.h"
#include "executor/hf_weights.h"
#include "executor/tensor_parallel_attention.h"
#include "executor/transformer.h"
#include "report/provenance.h"

namespace moelab::executor {
namespace {

// What every rank checks before building anything; `key` is what they compare.
struct Prepared {
  ExecutorConfig config;
  ExpertPlacement placement;
  int64_t chunks = 1;  // kAutoChunks: chosen once the weights are built
  uint64_t key = 0;
  std::string described;  // the key's parts a person can compare (build, model, weights, options)
};

uint64_t HashText(uint64_t hash, const std::string& text) {
  for (unsigned char c : text) hash = base::Mix64(hash ^ c);
  return base::Mix64(hash ^ text.size());
}

void RefuseWithExpertParallel(bool refused, const std::string& what) {
  if (refused) throw base::Error("--expert-parallel runs " + what);
}

// The request's refusals under expert parallelism, then the config and the placement.
Prepared Prepare(const RunRequest& request, const ExpertParallelOptions& options,
                 const model::PresetStore& presets, int world_size) {
  options.Validate();
  if (options.ranks != world_size) {
    throw base::Error("--expert-parallel " + std::to_string(options.ranks) +
                      ", but mpirun started " + std::to_string(world_size) +
                      " ranks: run it as mpirun -n " + std::to_string(options.ranks) +
                      " moelab run --expert-parallel " + std::to_string(options.ranks) + " ...");
  }
  RefuseWithExpertParallel(
      request.workload != Workload::kPrefill && request.workload != Workload::kDecode,
      "--workload prefill or decode (beam and sd are not split across ranks yet)");
  RefuseWithExpertParallel(request.device != "cpu", "on the CPU (--device cpu)");
  RefuseWithExpertParallel(request.offload.has_value(), "with every expert in RAM (no --offload)");
  RefuseWithExpertParallel(request.temperature != 0, "greedy decoding (--temperature 0)");
  RefuseWithExpertParallel(request.routing.kind != routing::RoutingSpec::Kind::kGate,
                           "the model's own gate (--routing gate)");
  RefuseWithExpertParallel(request.trace_requested || request.record_timeline,
                           "without --trace-out and --timeline-out (one rank's view only)");
  if (options.attention == "data-parallel" && request.batch < options.ranks) {
    throw base::Error("--batch " + std::to_string(request.batch) + " is below --expert-parallel " +
                      std::to_string(options.ranks) +
                      ": data-parallel attention gives every rank at least one sequence");
  }
  Prepared prepared;
  prepared.chunks = ParseEpChunks(options.chunks);
  prepared.config = RunTargetConfig(request, presets);
  const ExecutorConfig& c = prepared.config;
  if (!c.is_moe())
    throw base::Error("--expert-parallel spreads routed experts; model '" + c.name + "' is dense");
  if (options.attention == "tensor-parallel") {
    // What KeepTensorParallelShareOfRank refuses, said before any weight is built.
    if (c.num_kv_heads % options.ranks != 0) {
      throw base::Error("--attention tensor-parallel splits the KV heads over the ranks: " +
                        std::to_string(c.num_kv_heads) + " KV heads do not divide by " +
                        std::to_string(options.ranks) + " ranks (give --kv-heads a multiple of " +
                        std::to_string(options.ranks) + ")");
    }
    if (request.attention_bits != 16) {
      throw base::Error(
          "--attention tensor-parallel runs bf16 attention weights (--attention-bits 16): "
          "quantized blocks split by heads would be dequantized and quantized again");
    }
  }
  prepared.placement = options.placement_file.empty()
                           ? ContiguousPlacement(c.num_experts, options.ranks)
                           : LoadPlacement(options.placement_file, c.num_experts, options.ranks);
  // The build, the model (its file's bytes when it is one), the weights file, every option that
  // shapes the run, and the placement: ranks that differ in any would compute different things.
  // `described` is what a mismatch prints: the file contents stand in it as their hash.
  const nlohmann::json provenance = report::Provenance();
  std::string described = "moelab " + provenance.value("version", "") + " git " +
                          provenance.value("git_commit", "") + ", --model " + request.model;
  if (std::filesystem::is_regular_file(request.model)) {
    char hash[24];
    std::snprintf(hash, sizeof(hash), "%016llx",
                  static_cast<unsigned long long>(HashText(
                      0, base::ReadInputFile(request.model, base::kMaxJsonFileBytes, "--model"))));
    described += " (file hash " + std::string(hash) + ")";
  }
  described += " " + std::to_string(c.num_layers) + "x" + std::to_string(c.hidden_size) + "x" +
               std::to_string(c.num_experts) + "x" + std::to_string(c.expert_intermediate_size) +
               "x" + std::to_string(c.vocab_size) + " bits " + std::to_string(request.expert_bits) +
               "/" + std::to_string(request.attention_bits);
  if (!request.weights.empty()) {
    std::error_code error;
    described += ", --weights " + request.weights + " (" +
                 std::to_string(std::filesystem::file_size(request.weights, error)) + " bytes)";
  }
  described += ", " + ToString(request.workload) + " batch " + std::to_string(request.batch) +
               " prompt " + std::to_string(request.prompt_tokens) + " tokens " +
               std::to_string(request.output_tokens) + " seed " + std::to_string(request.seed) +
               " chunks " + options.chunks + " attention " + options.attention;
  prepared.described = described;
  const std::string key =
      described + " build " + provenance["build"].dump() + " " + prepared.placement.Key();
  prepared.key = HashText(0, key);
  return prepared;
}

// Every rank's refusal, or nothing: each rank throws the same AgreedError when any refused.
void Agree(parallel::Communicator& communicator, const std::string& error) {
  const std::vector<std::string> errors = communicator.AllGatherBytes(error);
  bool all_same = true;
  int first = -1;
  for (int r = 0; r < communicator.size(); ++r) {
    if (!errors[r].empty() && first < 0) first = r;
    all_same = all_same && errors[r] == errors[0];
  }
  if (first < 0) return;
  if (all_same) throw parallel::AgreedError(errors[0]);
  throw parallel::AgreedError("rank " + std::to_string(first) + " of " +
                              std::to_string(communicator.size()) + ": " + errors[first]);
}

// The model's weights with only this rank's routed experts (the others empty).
ModelWeights LoadRankWeights(const RunRequest& request, const ExecutorConfig& config,
                             const ExpertPlacement& placement, int rank,
                             kernels::ThreadPool& pool) {
  ModelWeights weights;
  if (request.weights.empty()) {
    std::vector<std::pair<int64_t, FfnWeights>> kept;  // (moe layer * experts + expert, weights)
    const ExpertSink keep = [&](int64_t moe_layer, int64_t expert, const FfnWeights& w) {
      if (placement.rank_of_expert[expert] == rank)
        kept.push_back({moe_layer * config.num_experts + expert, w});
    };
    weights = MakeSyntheticWeights(config, request.seed, pool, &keep);
    for (LayerWeights& layer : weights.layers)
      if (layer.experts.empty() && !layer.router.empty())
        layer.experts.resize(static_cast<size_t>(config.num_experts));
    for (auto& [index, w] : kept) {
      const int64_t layer = index / config.num_experts + config.first_dense_layers;
      weights.layers[layer].experts[index % config.num_experts] = std::move(w);
    }
    return weights;
  }
  weights = LoadHuggingFaceWeights(config, request.weights);
  for (LayerWeights& layer : weights.layers) {
    for (size_t e = 0; e < layer.experts.size(); ++e)
      if (placement.rank_of_expert[e] != rank) layer.experts[e] = FfnWeights{};
  }
  return weights;
}

// Bytes one decode token reads, each routed expert counted at its full size (this rank holds few).
double WeightBytesPerToken(const ExecutorConfig& config, const ModelWeights& weights) {
  FfnWeights expert;
  expert.Allocate(config.hidden_size, config.expert_intermediate_size, config.expert_format);
  const double held = weights.layers[config.first_dense_layers].experts[0].StoredBytes();
  const double counted =
      static_cast<double>((config.num_layers - config.first_dense_layers) * config.top_k);
  return weights.BytesPerToken() + counted * (expert.StoredBytes() - held);
}

std::string PackOutputs(const std::vector<TokenIds>& outputs) {
  std::string bytes;
  for (const TokenIds& tokens : outputs) {
    const int32_t count = static_cast<int32_t>(tokens.size());
    bytes.append(reinterpret_cast<const char*>(&count), sizeof count);
    bytes.append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(int32_t));
  }
  return bytes;
}

void UnpackOutputs(const std::string& bytes, std::vector<TokenIds>& outputs) {
  size_t at = 0;
  while (at + sizeof(int32_t) <= bytes.size()) {
    int32_t count = 0;
    std::memcpy(&count, bytes.data() + at, sizeof count);
    at += sizeof count;
    TokenIds tokens(static_cast<size_t>(count));
    std::memcpy(tokens.data(), bytes.data() + at, tokens.size() * sizeof(int32_t));
    at += tokens.size() * sizeof(int32_t);
    outputs.push_back(std::move(tokens));
  }
}

// The job's steps: each the slowest rank's seconds, tokens summed over ranks (or, when every rank
// ran every sequence, `tokens_replicated`, this rank's).
std::vector<StepTime> JobSteps(parallel::Communicator& communicator, std::vector<StepTime> steps,
                               bool tokens_replicated) {
  std::vector<double> seconds, tokens, positions;
  for (const StepTime& s : steps) {
    seconds.push_back(s.seconds);
    tokens.push_back(static_cast<double>(s.tokens));
    positions.push_back(static_cast<double>(s.positions));
  }
  communicator.AllReduceMax(seconds.data(), static_cast<int64_t>(seconds.size()));
  if (!tokens_replicated) {
    communicator.AllReduceSum(tokens.data(), static_cast<int64_t>(tokens.size()));
    communicator.AllReduceSum(positions.data(), static_cast<int64_t>(positions.size()));
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    steps[i].seconds = seconds[i];
    steps[i].tokens = static_cast<int64_t>(tokens[i]);
    steps[i].positions = static_cast<int64_t>(positions[i]);
  }
  return steps;
}

}  // namespace

void ExpertParallelOptions::Validate() const {
  if (ranks < 1)
    throw base::Error("--expert-parallel must be at least 1 rank, got " + std::to_string(ranks));
  ParseEpChunks(chunks);
  if (attention != "data-parallel" && attention != "tensor-parallel") {
    throw base::Error("--attention must be data-parallel or tensor-parallel, got '" + attention +
                      "'");
  }
}

int64_t ParseEpChunks(const std::string& text) {
  if (text == "auto") return ExpertParallelOptions::kAutoChunks;
  // A chunk holds at least one token of a pass; more chunks than kMaxChunks is no pipeline.
  return base::ParseWholeNumber(text, "ep-chunks", 1, kMaxEpChunks, "auto");
}

void CheckExpertParallelRun(const RunRequest& request, const ExpertParallelOptions& options,
                            const model::PresetStore& presets, int world_size) {
  Prepare(request, options, presets, world_size);
}

RunResult RunExpertParallel(const RunRequest& request, const ExpertParallelOptions& options,
                            const model::PresetStore& presets,
                            parallel::Communicator& communicator) {
  Prepared prepared;
  std::string error;
  try {
    prepared = Prepare(request, options, presets, communicator.size());
  } catch (const base::Error& e) {
    error = e.what();
  }
  Agree(communicator, error);
  const std::vector<uint64_t> keys = communicator.AllGather(prepared.key);
  const std::vector<std::string> described = communicator.AllGatherBytes(prepared.described);
  for (int r = 1; r < communicator.size(); ++r) {
    if (keys[r] != keys[0]) {
      throw parallel::AgreedError(
          "rank " + std::to_string(r) +
          " runs a different build, model file, weights or options than rank 0 (their start "
          "hashes differ; rank 0: " +
          described[0] + "; rank " + std::to_string(r) + ": " + described[r] +
          "): every rank must run the same moelab with the same arguments");
    }
  }
  const ExecutorConfig& config = prepared.config;
  const int rank = communicator.rank();
  const int ranks = communicator.size();
  kernels::ThreadPool pool(request.threads > 0 ? request.threads : kernels::DefaultThreadCount());
  const bool tensor_parallel = options.attention == "tensor-parallel";
  ModelWeights weights = LoadRankWeights(request, config, prepared.placement, rank, pool);
  if (tensor_parallel) {
    error.clear();
    try {
      KeepTensorParallelShareOfRank(weights, rank, ranks);
    } catch (const base::Error& e) {
      error = e.what();
    }
    Agree(communicator, error);
  }
  const int64_t moe_layers = config.num_layers - config.first_dense_layers;
  const std::vector<TokenIds> prompts =
      SyntheticPrompts(request.batch, request.prompt_tokens, config.vocab_size, request.seed);
  // Data-parallel attention: rank r attends (and routes) sequences [r B / R, (r + 1) B / R);
  // tensor-parallel: every rank attends every sequence, over its heads.
  const int64_t first = tensor_parallel ? 0 : request.batch * rank / ranks;
  const int64_t end = tensor_parallel ? request.batch : request.batch * (rank + 1) / ranks;
  const std::vector<TokenIds> mine(prompts.begin() + first, prompts.begin() + end);
  int64_t chunks = prepared.chunks;
  if (chunks == ExpertParallelOptions::kAutoChunks) {
    // The MoE block's tokens on this rank: its sequences' prompts, or its share of all of them.
    const int64_t moe_tokens = tensor_parallel ? request.prompt_tokens * request.batch / ranks
                                               : request.prompt_tokens * (end - first);
    chunks = AutoEpChunks(communicator, config, weights, prepared.placement,
                          std::max<int64_t>(1, moe_tokens), pool);
  }
  ExpertParallel expert_parallel(communicator, prepared.placement, chunks, config.hidden_size,
                                 moe_layers, pool);
  expert_parallel.stats().chunks_auto = prepared.chunks == ExpertParallelOptions::kAutoChunks;
  expert_parallel.stats().attention = options.attention;
  Transformer model(weights, pool);
  model.set_expert_parallel(&expert_parallel);
  TensorParallelAttention attention(communicator);
  if (tensor_parallel) model.set_tensor_parallel_attention(&attention);

  DecodeOptions decode;
  decode.output_tokens = request.workload == Workload::kPrefill ? 0 : request.output_tokens;
  decode.seed = request.seed;
  // The ranks load their weights at different speeds (a first touch of a rank's share takes
  // seconds on some machines): without a barrier the first step's first exchange waits for the
  // slowest rank, and that wait, measured seconds beside a 0.2-s prefill, was counted as the step.
  communicator.Barrier();
  double warm_up_reduce_s = 0, warm_up_moe_gather_s = 0, warm_up_logits_gather_s = 0;
  if (options.warm_up_prefill) {
    DecodeOptions warm_up = decode;
    warm_up.output_tokens = 0;
    RunDecode(model, mine, warm_up);
    expert_parallel.ResetMeasurements();
    warm_up_reduce_s = attention.attention_reduce_s();
    warm_up_moe_gather_s = attention.moe_gather_s();
    warm_up_logits_gather_s = attention.logits_gather_s();
    communicator.Barrier();
  }
  const DecodeResult run = RunDecode(model, mine, decode);

  RunResult result;
  result.workload = request.workload;
  result.machine = RunMachineOf(request, pool);
  result.device = model.device();
  result.model = {config, weights.source, WeightBytesFor(config)};
  result.batch = request.batch;
  result.prompt_tokens = request.prompt_tokens;
  result.output_tokens = request.output_tokens;
  result.seed = request.seed;
  result.routing = "model gate";
  result.weight_bytes_per_token = WeightBytesPerToken(config, weights);
  result.step_times = JobSteps(communicator, run.steps, /*tokens_replicated=*/tensor_parallel);
  double prefill_s = 0, decode_s = 0;
  for (const StepTime& s : result.step_times)
    (s.kind == "prefill" ? prefill_s : decode_s) += s.seconds;
  result.ttft_s = prefill_s;
  const double later_tokens = static_cast<double>(request.output_tokens - 1);
  if (request.workload == Workload::kPrefill) {
    result.tokens_per_s = static_cast<double>(request.batch * request.prompt_tokens) / prefill_s;
  } else if (later_tokens > 0) {
    result.tpot_s = decode_s / later_tokens;
    result.tokens_per_s = static_cast<double>(request.batch) * later_tokens / decode_s;
    result.decode_weight_bandwidth_bytes_per_s =
        result.weight_bytes_per_token / (decode_s / later_tokens);
  }
  if (request.workload == Workload::kDecode && tensor_parallel) {
    result.outputs = run.outputs;  // every rank decoded every sequence, to the same tokens
  } else if (request.workload == Workload::kDecode) {
    std::vector<TokenIds> outputs;
    for (const std::string& bytes : communicator.AllGatherBytes(PackOutputs(run.outputs)))
      UnpackOutputs(bytes, outputs);
    result.outputs = std::move(outputs);
  }
  result.operator_times = run.prefill_operators;  // the measured run's, without a warm-up's
  result.operator_times += run.decode_operators;
  result.operator_times_by_step_kind["prefill"] = run.prefill_operators;
  if (request.workload != Workload::kPrefill)
    result.operator_times_by_step_kind["decode"] = run.decode_operators;
  result.expert_parallel = expert_parallel.stats();
  result.expert_parallel->attention_reduce_s = attention.attention_reduce_s() - warm_up_reduce_s;
  result.expert_parallel->moe_gather_s = attention.moe_gather_s() - warm_up_moe_gather_s;
  result.expert_parallel->logits_gather_s = attention.logits_gather_s() - warm_up_logits_gather_s;
  result.expert_parallel_rank = rank;
  communicator.Barrier();
  return result;
}

}  // namespace moelab::executor
