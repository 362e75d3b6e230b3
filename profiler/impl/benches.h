#pragma once

// The variants of OperatorBench (profiler/operator_bench.h), one per file in this folder;
// MakeOperatorBench (operator_bench.cc) is the one place that chooses among them.

#include <memory>
#include <string>
#include <vector>

#include "executor/executor_config.h"
#include "executor/forward_model.h"
#include "executor/kv_cache.h"
#include "routing/routing_source.h"
#include "profiler/operator_bench.h"

namespace moelab::profiler::impl {

// expert_ffn (the target's expert shape) and dense_ffn (the draft's dense FFN) on the CPU.
std::unique_ptr<OperatorBench> MakeFfnBench(const std::vector<GridPoint>& points,
                                            const BenchEnvironment& env);
// router and lm_head.
std::unique_ptr<OperatorBench> MakeMatmulBench(const std::vector<GridPoint>& points,
                                               const BenchEnvironment& env);
// attention_decode, attention_verify and attention_prefill through the executor's Transformer.
std::unique_ptr<OperatorBench> MakeAttentionBench(const std::vector<GridPoint>& points,
                                                  const BenchEnvironment& env);
// draft_decode, draft_decode_warm: the dense draft's one-token forward through the executor's
// Transformer (after a flush; warm: right after another of its own).
std::unique_ptr<OperatorBench> MakeDraftBench(const std::vector<GridPoint>& points,
                                              const BenchEnvironment& env);
// norms_residual: a layer's RMSNorms and residual adds (executor/transformer.cc).
std::unique_ptr<OperatorBench> MakeNormsResidualBench(const std::vector<GridPoint>& points,
                                                      const BenchEnvironment& env);
// beam_selection: a beam step's ranking over the vocabulary (executor/beam_selection.h).
std::unique_ptr<OperatorBench> MakeBeamSelectionBench(const std::vector<GridPoint>& points,
                                                      const BenchEnvironment& env);
// memcpy_host.
std::unique_ptr<OperatorBench> MakeHostCopyBench(const std::vector<GridPoint>& points,
                                                 const BenchEnvironment& env);
// storage_read.
std::unique_ptr<OperatorBench> MakeStorageReadBench(const std::vector<GridPoint>& points,
                                                    const BenchEnvironment& env);
// expert_load: the offload reader's checksum and copy (executor/offload/checksum.h).
std::unique_ptr<OperatorBench> MakeExpertLoadBench(const std::vector<GridPoint>& points,
                                                   const BenchEnvironment& env);
// expert_reader: the executor's offload reader over a store of the model's experts, alone and
// beside computation (executor/offload/reader_pass.h).
std::unique_ptr<OperatorBench> MakeExpertReaderBench(const std::vector<GridPoint>& points,
                                                     const BenchEnvironment& env);
// The host<->device copies on a GPU (device/cuda_profile.h).
std::unique_ptr<OperatorBench> MakeGpuCopyBench(const std::vector<GridPoint>& points,
                                                const BenchEnvironment& env);
// Every operator of a forward pass on a GPU (expert_ffn, the three attentions, router, lm_head,
// dense_ffn, draft_decode, norms_residual), measured through the executor's GPU backend
// (gpu_pass_bench.cc): a harness model (PlanPassHarness) run by ForwardPassBench.
std::unique_ptr<OperatorBench> MakeGpuPassBench(const std::vector<GridPoint>& points,
                                                const BenchEnvironment& env);

// The model a forward-pass bench runs for `points` (one family) and how: its config, layer count,
// KV caches, whether every token is forced to experts 0..K-1 (expert_ffn), and the profile's note.
struct PassHarness {
  executor::ExecutorConfig config;
  int64_t layers = 1;
  bool cached = false;  // attention over cached positions (decode, verify)
  int64_t caches = 1;
  int64_t capacity = 1;
  bool force_first_experts = false;
  std::string note;
};
PassHarness PlanPassHarness(const std::vector<GridPoint>& points, const BenchEnvironment& env,
                            int64_t l2_bytes, double device_memory_bytes);

// Measures one operator family through a ForwardModel's own operator times (draft_decode: the
// pass's wall time). The GPU bench runs it on the GPU backend; it runs on any ForwardModel.
class ForwardPassBench : public OperatorBench {
 public:
  ForwardPassBench(OperatorFamily family, PassHarness harness,
                   std::unique_ptr<executor::ForwardModel> model);
  ~ForwardPassBench() override;
  bool manual_time() const override { return true; }
  double time_scale() const override;
  void Run(benchmark::State& state, const GridPoint& point) override;
  // One pass at `point`: the family's seconds over all the harness's layers (before time_scale).
  double Pass(const GridPoint& point);

 private:
  OperatorFamily family_;
  PassHarness harness_;
  std::unique_ptr<routing::RoutingSource> forced_;  // expert_ffn: every token to experts 0..K-1
  std::unique_ptr<executor::ForwardModel> model_;
  std::vector<executor::KvCache> caches_;
  std::vector<float> logits_;
};
// The GPU index of a "cuda:<index>" device name; Error otherwise.
int GpuIndex(const std::string& device);

// The attention benches' harness: the target's attention shape in a dense model of `layers`
// layers whose FFN (width 1) and vocabulary (2) cost next to nothing.
executor::ExecutorConfig AttentionHarnessConfig(const executor::ExecutorConfig& target,
                                                int64_t layers, int64_t max_positions);
// Cuts a cache back or extends it to `length` positions (their contents do not change the time).
void SetCacheLength(executor::KvCache& cache, int64_t length);

// Fills `count` bf16 values with the deterministic pattern the kernels bench uses
// ((i mod 17 - 8) / 100): small, varied, exactly representable.
void FillWeights(uint16_t* values, int64_t count);

// The weight-cycling note: "<label>: weights cycled over N blocks of B bytes (T bytes > 2 x the
// cache of C bytes), so every call reads them from DRAM".
std::string CyclingNote(const std::string& label, int64_t blocks, int64_t block_bytes,
                        int64_t cache_bytes);

}  // namespace moelab::profiler::impl
