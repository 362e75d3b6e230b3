#pragma once

// The variants of OperatorBench (profiler/operator_bench.h), one per file in this folder;
// MakeOperatorBench (operator_bench.cc) is the one place that chooses among them.

#include <memory>
#include <vector>

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
// draft_decode: the dense draft's one-token forward through the executor's Transformer.
std::unique_ptr<OperatorBench> MakeDraftBench(const std::vector<GridPoint>& points,
                                              const BenchEnvironment& env);
// norms_residual: a layer's RMSNorms and residual adds (executor/transformer.cc).
std::unique_ptr<OperatorBench> MakeNormsResidualBench(const std::vector<GridPoint>& points,
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
// expert_ffn on a GPU and the host<->device copies (device/cuda_profile.h).
std::unique_ptr<OperatorBench> MakeGpuBench(const std::vector<GridPoint>& points,
                                            const BenchEnvironment& env);

// Fills `count` bf16 values with the deterministic pattern the kernels bench uses
// ((i mod 17 - 8) / 100): small, varied, exactly representable.
void FillWeights(uint16_t* values, int64_t count);

// The weight-cycling note: "<label>: weights cycled over N blocks of B bytes (T bytes > 2 x the
// cache of C bytes), so every call reads them from DRAM".
std::string CyclingNote(const std::string& label, int64_t blocks, int64_t block_bytes,
                        int64_t cache_bytes);

}  // namespace moelab::profiler::impl
