#include "profiler/profile_grid.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "executor/gpu/gpu_transformer.h"
#include "executor/offload/offload_runtime.h"
#include "executor/weights.h"
#include "kernels/expert_ffn.h"
#include "kernels/weight_matrix.h"
#include "base/error.h"

namespace moelab::profiler {
namespace {

constexpr int64_t kMaxTokens = 4096;
constexpr int64_t kIoAlignmentBytes = 4096;
constexpr size_t kMinWorkingSetTokens = 5;  // fit/latency_fit.cc: the interpolated form's minimum

void RequirePositive(const std::vector<int64_t>& values, const std::string& field) {
  for (int64_t v : values) {
    if (v < 1)
      throw base::Error("profile grid: " + field + " must be >= 1, got " + std::to_string(v));
  }
}

std::vector<int64_t> SortedUnique(std::vector<int64_t> values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

int64_t RoundUp(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// Positions a query at `position` sees (the sliding window, when the model has one).
int64_t Visible(int64_t position, int64_t sliding_window) {
  return sliding_window > 0 ? std::min(position + 1, sliding_window) : position + 1;
}

double AttentionWeights(const executor::ExecutorConfig& c) {
  const double qkv =
      static_cast<double>(c.hidden_size) * static_cast<double>(c.q_width() + 2 * c.kv_width());
  const double out = static_cast<double>(c.q_width()) * static_cast<double>(c.hidden_size);
  return qkv + out;
}

double ProjectionFlopsPerToken(const executor::ExecutorConfig& c) {
  return 2.0 * AttentionWeights(c);
}  // one multiply and one add per weight

}  // namespace

std::string ToString(OperatorFamily family) {
  switch (family) {
    case OperatorFamily::kExpertFfn:
      return "expert_ffn";
    case OperatorFamily::kAttentionDecode:
      return "attention_decode";
    case OperatorFamily::kAttentionPrefill:
      return "attention_prefill";
    case OperatorFamily::kAttentionVerify:
      return "attention_verify";
    case OperatorFamily::kRouter:
      return "router";
    case OperatorFamily::kLmHead:
      return "lm_head";
    case OperatorFamily::kDenseFfn:
      return "dense_ffn";
    case OperatorFamily::kDraftDecode:
      return "draft_decode";
    case OperatorFamily::kDraftDecodeWarm:
      return "draft_decode_warm";
    case OperatorFamily::kMemcpyHost:
      return "memcpy_host";
    case OperatorFamily::kStorageRead:
      return "storage_read";
    case OperatorFamily::kExpertLoad:
      return "expert_load";
    case OperatorFamily::kExpertReader:
      return "expert_reader";
    case OperatorFamily::kNormsResidual:
      return "norms_residual";
    case OperatorFamily::kExpertFfnWorkingSet:
      return "expert_ffn_working_set";
    case OperatorFamily::kMemcpyH2dPinned:
      return "memcpy_h2d_pinned";
    case OperatorFamily::kMemcpyH2dPageable:
      return "memcpy_h2d_pageable";
    case OperatorFamily::kMemcpyD2hPinned:
      return "memcpy_d2h_pinned";
    case OperatorFamily::kMemcpyD2hPageable:
      return "memcpy_d2h_pageable";
    case OperatorFamily::kBeamSelection:
      return "beam_selection";
  }
  return "?";
}

const std::vector<OperatorFamily>& AllOperatorFamilies() {
  static const std::vector<OperatorFamily> families = {OperatorFamily::kExpertFfn,
                                                       OperatorFamily::kAttentionDecode,
                                                       OperatorFamily::kAttentionPrefill,
                                                       OperatorFamily::kAttentionVerify,
                                                       OperatorFamily::kRouter,
                                                       OperatorFamily::kLmHead,
                                                       OperatorFamily::kDenseFfn,
                                                       OperatorFamily::kDraftDecode,
                                                       OperatorFamily::kDraftDecodeWarm,
                                                       OperatorFamily::kMemcpyHost,
                                                       OperatorFamily::kStorageRead,
                                                       OperatorFamily::kExpertLoad,
                                                       OperatorFamily::kExpertReader,
                                                       OperatorFamily::kNormsResidual,
                                                       OperatorFamily::kExpertFfnWorkingSet,
                                                       OperatorFamily::kMemcpyH2dPinned,
                                                       OperatorFamily::kMemcpyH2dPageable,
                                                       OperatorFamily::kMemcpyD2hPinned,
                                                       OperatorFamily::kMemcpyD2hPageable,
                                                       OperatorFamily::kBeamSelection};
  return families;
}

bool IsGpuOnly(OperatorFamily family) {
  return family == OperatorFamily::kMemcpyH2dPinned ||
         family == OperatorFamily::kMemcpyH2dPageable ||
         family == OperatorFamily::kMemcpyD2hPinned || family == OperatorFamily::kMemcpyD2hPageable;
}

bool IsDraftPass(OperatorFamily family) {
  return family == OperatorFamily::kDraftDecode || family == OperatorFamily::kDraftDecodeWarm;
}

bool IsTransfer(OperatorFamily family) {
  return IsGpuOnly(family) || family == OperatorFamily::kMemcpyHost ||
         family == OperatorFamily::kStorageRead || family == OperatorFamily::kExpertLoad ||
         family == OperatorFamily::kExpertReader;
}

std::string GridPoint::Label() const {
  std::string label = ToString(family) + " " + device;
  if (family == OperatorFamily::kAttentionDecode || IsDraftPass(family)) {
    return label + " context=" + std::to_string(context) + " batch=" + std::to_string(tokens);
  }
  if (family == OperatorFamily::kAttentionVerify) {
    return label + " context=" + std::to_string(context) +
           " queries=" + std::to_string(queries_per_sequence) + " batch=" + std::to_string(tokens);
  }
  if (family == OperatorFamily::kExpertReader)
    return label + " bytes=" + std::to_string(bytes) + (beside_compute ? " beside_compute" : "");
  if (IsTransfer(family)) return label + " bytes=" + std::to_string(bytes);
  if (family == OperatorFamily::kExpertFfnWorkingSet) {
    return label + " working_set=" + std::to_string(bytes) + " tokens=" + std::to_string(tokens);
  }
  return label + " tokens=" + std::to_string(tokens);
}

namespace {

// Both sides of every kernel seam (kernels::MatmulTokenSeams) among the expert and matmul token
// counts: the AVX512-BF16 packed decode runs 12 tokens in one pass over the weights and 13 in two,
// and with points at 12 and 16 alone the fitted curve priced 13-15 tokens between them, 10 % low
// (validate --quick's batch-12 SD verify passes, 2026-12-05).
void AddKernelSeams(GridSpec& s) {
  for (const int64_t seam : kernels::MatmulTokenSeams()) {
    for (std::vector<int64_t>* tokens : {&s.expert_tokens, &s.matmul_tokens}) {
      tokens->push_back(seam);
      tokens->push_back(seam + 1);
    }
  }
  s.expert_tokens = SortedUnique(s.expert_tokens);
  s.matmul_tokens = SortedUnique(s.matmul_tokens);
}

}  // namespace

GridSpec GridSpec::Quick() {
  GridSpec s;
  // Every token count to 24, then 32, 48 and 64: a verify or decode pass's experts and LM head
  // compute one of those where the kernel tiles calls above 24 tokens to 16 (AVX512-BF16, bf16
  // weights), so the interpolated curve answers each from its own measurement, never across a
  // kernel seam it cannot see (the AVX2
  // register tiles change at 6 and 7 tokens, the AVX512-BF16 packed decode at 12/13, the tiling at
  // 24/25). With 14, 15 and 17-23 left out the fit judged the interpolation across them and chose
  // an expert roofline 12 % low at 13 tokens, 15 % high at 24 and 16 % low at 32 (validate
  // --quick, 2026-12-07: SD verify passes of batch 6 and 12 priced 10-20 % under their plain
  // steps' error).
  for (int64_t tokens = 1; tokens <= 24; ++tokens) s.expert_tokens.push_back(tokens);
  for (int64_t tokens : {32, 48, 64, 256, 1024, 4096}) s.expert_tokens.push_back(tokens);
  s.ridge_points = 3;
  // The same rows for the matmuls (LM head, router, dense FFN, norms): the AVX2 matmul is
  // memory-bound to 5 tokens and turns compute-bound at 6 (the LM head: 2.2 ms at 1-5 tokens, 3.4
  // at 6-7 on an AVX2 EPYC), and an SD verify pass of 33-48 rows computes 48, which 32 and 64
  // alone priced 6.1 ms where it ran 6.2-6.6.
  s.matmul_tokens = s.expert_tokens;
  // A beam step's ranking grows with its beams; five counts let the fit judge interpolation, and
  // validate --quick's widths 3 and 6 stay held out.
  s.beam_rows = {1, 2, 4, 8, 16};
  // Contexts at most an octave apart from 1024 up, as in the full grid: between 1024 and 4096
  // a decode at context 2000 took a third of the 4096 samples' noise, and one quick profile's
  // 4096 samples ran 35 % faster than a rerun minutes later (59.7 vs 93.8 ms at batch 32), which
  // priced attention at context 2000 and batch 20 24 % low.
  // And 16: below its smallest context the fitted-profile source uses that context's curve as is,
  // so a decode at context 16-24 (validate --cases offload) was priced at context 128's attention,
  // 0.20 ms a layer at batch 1 where it ran 0.12 (2026-11-29).
  s.decode_contexts = {16, 128, 1024, 2048, 4096};
  // Six batches, so the fit can interpolate over batch (it needs 5 distinct counts) and
  // leave-one-out is not decided by extrapolation: with 1, 4 and 32 it chose the constant for
  // context 16 in 9 of 13 quick validations (batch 1 noisy, 0.11-0.39 ms, against batch 4's
  // 0.11-0.18) and priced batch 32 at 0.13-0.24 ms against 0.53-0.65 measured. None of them a
  // batch of validate --quick's decode cases (2, 3, 6, 12, 20), which stay held out.
  s.decode_batches = {1, 4, 8, 16, 24, 32};
  // Prefill attention grows with the prompt squared, and the quadratic form needs more points
  // than its three parameters (fit/latency_fit.h). From 16: with 64 the smallest, the forms could
  // not tell the projections' linear term from a constant, and a quick validation priced a 48-token
  // prompt's attention at twice the 2.8 ms a layer it took (a 4 ms "intercept" below the grid).
  s.prefill_tokens = {16, 32, 64, 128, 256, 512, 1024};
  // gamma 1, 2, 4; contexts around the SD contexts of `validate --quick` (~250 positions).
  s.verify_queries = {2, 3, 5};
  s.verify_contexts = {128, 512};
  // Five batches, as the draft's, for the same reason (three let context 128 go constant).
  s.verify_batches = {1, 2, 4, 8, 16};
  s.draft_contexts = {128, 512};
  // Five batches: with three (1, 4, 16) the fit could not interpolate, and leave-one-out over
  // three points, two of them held out by extrapolation, preferred a constant (1.72 ms at context
  // 128 whatever the batch, r2 -0.46 against the line's 0.90): a quick q4_0 validation priced
  // batch 12's draft forward at 2.59 ms against 3.73 measured and over-predicted its SD speedups
  // by 10-17 %.
  s.draft_batches = {1, 2, 4, 8, 16};
  s.transfer_fixed_bytes = {65536, int64_t{1} << 20};
  s.transfer_expert_divisors = {1};
  s.storage_file_blocks = 2;
  // The default validate model's 32 experts (96 MB) whole; a 0.1 s pass on this project's disks.
  s.expert_reader_store_bytes = int64_t{256} << 20;
  // The decode regimes: by 64 tokens an expert is compute-bound and the cache no longer matters
  // (a 22 MB expert: 1 token 0.40 ms cycled over 44 MB, 0.72 over 1 GB; 64 tokens 7.7 and 7.3).
  s.working_set_tokens = {1, 2, 4, 16, 64};
  // The reported cache bounds the step, not where it is (a VM reporting 480 MiB streamed 54 GB/s
  // over 88 MB, 40 over 176, 32 over 352 and DRAM's 30 over 1 GB), so fractions of the cache,
  // closest where the step usually is: a model of 140 MB priced between 126 and 252 MB points
  // missed its decode by 10 %.
  s.working_set_cache_divisors = {16, 8, 6, 4, 3, 2};
  s.repetitions = 3;
  s.min_time_s = 0.05;
  AddKernelSeams(s);
  return s;
}

GridSpec GridSpec::Full() {
  GridSpec s;
  std::vector<int64_t> tokens;
  for (int64_t t = 1; t <= kMaxTokens; t *= 2) tokens.push_back(t);
  for (int64_t t = 3; t <= kMaxTokens; t *= 2) tokens.push_back(t);
  // Every count to 24, as Quick (register tiles, the packed decode's 12/13, the tiling's 24/25).
  for (int64_t t = 1; t <= 24; ++t) tokens.push_back(t);
  s.expert_tokens = SortedUnique(tokens);
  s.ridge_points = 9;
  s.matmul_tokens = s.expert_tokens;
  s.beam_rows = {1, 2, 3, 4, 6, 8, 16, 32};
  s.decode_contexts = {16, 32, 64, 128, 256, 512, 1024, 2048, 4096};
  s.decode_batches = {1, 2, 4, 8, 16, 32};
  s.prefill_tokens = {16, 32, 64, 128, 256, 512, 1024, 2048};
  s.verify_queries = {2, 3, 5, 9};  // gamma 1, 2, 4, 8
  s.verify_contexts = {128, 512, 2048};
  s.verify_batches = {1, 2, 4, 8, 16};  // as Quick's
  s.draft_contexts = {128, 512, 2048};
  s.draft_batches = {1, 2, 4, 8, 16};  // as Quick's
  s.transfer_fixed_bytes = {4096, 65536, int64_t{1} << 20};
  s.transfer_expert_divisors = {16, 4, 1};
  s.storage_file_blocks = 4;
  s.expert_reader_store_bytes = int64_t{512} << 20;
  s.working_set_tokens = {1, 2, 4, 8, 16, 32, 64};
  s.working_set_cache_divisors = {32, 16, 12, 8, 6, 4, 3, 2, 1};
  s.repetitions = 5;
  s.min_time_s = 0.2;
  AddKernelSeams(s);
  return s;
}

void GridSpec::Validate() const {
  RequirePositive(expert_tokens, "expert_tokens");
  RequirePositive(matmul_tokens, "matmul_tokens");
  RequirePositive(decode_contexts, "decode_contexts");
  RequirePositive(decode_batches, "decode_batches");
  RequirePositive(prefill_tokens, "prefill_tokens");
  RequirePositive(verify_contexts, "verify_contexts");
  RequirePositive(verify_batches, "verify_batches");
  RequirePositive(draft_contexts, "draft_contexts");
  RequirePositive(draft_batches, "draft_batches");
  for (int64_t q : verify_queries) {
    if (q < 2) {
      throw base::Error(
          "profile grid: verify_queries must be >= 2 (one query per sequence is "
          "attention_decode), got " +
          std::to_string(q));
    }
  }
  RequirePositive(transfer_fixed_bytes, "transfer_fixed_bytes");
  RequirePositive(transfer_expert_divisors, "transfer_expert_divisors");
  if (ridge_points != 0 && ridge_points != 3 && ridge_points != 9) {
    throw base::Error("profile grid: ridge_points must be 0, 3 or 9, got " +
                      std::to_string(ridge_points));
  }
  if (storage_file_blocks < 1) throw base::Error("profile grid: storage_file_blocks must be >= 1");
  if (expert_reader_store_bytes < 0)
    throw base::Error(
        "profile grid: expert_reader_store_bytes must be >= 0 (0 skips expert_reader)");
  RequirePositive(working_set_tokens, "working_set_tokens");
  RequirePositive(working_set_cache_divisors, "working_set_cache_divisors");
  if (!working_set_cache_divisors.empty() &&
      SortedUnique(working_set_tokens).size() < kMinWorkingSetTokens) {
    throw base::Error("profile grid: working_set_tokens needs at least " +
                      std::to_string(kMinWorkingSetTokens) +
                      " distinct counts (each working set's curve is interpolated), got " +
                      std::to_string(SortedUnique(working_set_tokens).size()));
  }
  if (repetitions < 1)
    throw base::Error("profile grid: repetitions must be >= 1, got " + std::to_string(repetitions));
  if (!(min_time_s > 0 && std::isfinite(min_time_s)))
    throw base::Error("profile grid: min_time_s must be > 0");
}

std::vector<int64_t> RidgeTokens(double ridge_tokens, int count,
                                 const std::vector<int64_t>& taken) {
  std::vector<double> factors;
  if (count == 3) factors = {0.75, 1.0, 1.5};
  if (count == 9) factors = {0.5, 0.625, 0.75, 0.875, 1.0, 1.25, 1.5, 1.75, 2.0};
  if (count != 0 && factors.empty()) throw base::Error("ridge points: count must be 0, 3 or 9");
  if (!(ridge_tokens > 0) || !std::isfinite(ridge_tokens))
    throw base::Error("ridge points: the ridge must be a positive number of tokens");
  std::vector<int64_t> used = taken;
  std::vector<int64_t> points;
  for (double f : factors) {
    int64_t t = std::clamp<int64_t>(std::llround(f * ridge_tokens), 1, kMaxTokens);
    // Move to the next free count (downwards once the top is reached, so the count holds).
    while (std::find(used.begin(), used.end(), t) != used.end()) t = t < kMaxTokens ? t + 1 : 1;
    used.push_back(t);
    points.push_back(t);
  }
  std::sort(points.begin(), points.end());
  return points;
}

double EstimateRidgeTokens(const std::vector<std::pair<int64_t, double>>& tokens_seconds) {
  std::vector<std::pair<int64_t, double>> samples = tokens_seconds;
  std::sort(samples.begin(), samples.end());
  if (samples.size() < 2 || samples.front().first == samples.back().first) {
    throw base::Error("ridge estimate: needs expert_ffn samples at two or more token counts");
  }
  double floor_s = std::numeric_limits<double>::infinity();
  for (const auto& [tokens, seconds] : samples) {
    if (tokens <= 8 || tokens == samples.front().first) floor_s = std::min(floor_s, seconds);
  }
  double slope_s = std::numeric_limits<double>::infinity();
  for (size_t i = samples.size() >= 2 ? samples.size() - 2 : 0; i < samples.size(); ++i) {
    slope_s = std::min(slope_s, samples[i].second / static_cast<double>(samples[i].first));
  }
  if (!(floor_s > 0) || !(slope_s > 0))
    throw base::Error("ridge estimate: expert_ffn times must be positive");
  return std::clamp(floor_s / slope_s, 1.0, static_cast<double>(kMaxTokens));
}

std::vector<int64_t> TransferBytes(const GridSpec& spec, int64_t expert_bytes) {
  std::vector<int64_t> sizes;
  for (int64_t b : spec.transfer_fixed_bytes) sizes.push_back(RoundUp(b, kIoAlignmentBytes));
  for (int64_t d : spec.transfer_expert_divisors) {
    sizes.push_back(RoundUp(std::max<int64_t>(1, (expert_bytes + d - 1) / d), kIoAlignmentBytes));
  }
  return SortedUnique(sizes);
}

int64_t CyclingBlocks(int64_t block_bytes, int64_t cache_bytes) {
  if (block_bytes < 1) throw base::Error("cycling blocks: block size must be >= 1 byte");
  return std::max<int64_t>(0, 2 * cache_bytes) / block_bytes + 1;
}

int64_t EffectiveCacheBytes(int64_t reported_l3_bytes) {
  return std::max(reported_l3_bytes, kMinEffectiveCacheBytes);
}

double AttentionWeightBytes(const executor::ExecutorConfig& c) {
  return AttentionWeights(c) * kernels::StoredBitsPerWeight(c.attention_format) / 8.0;
}

int64_t ExpertBytes(const executor::ExecutorConfig& c) {
  // In the target's expert format (scales included): the block the offload store reads.
  return static_cast<int64_t>(
      std::ceil(kernels::ExpertFfnWeightBytes(c.hidden_size, c.expert_intermediate_size) *
                kernels::StoredBitsPerWeight(c.expert_format) / 16.0));
}

std::vector<int64_t> WorkingSetBytes(const GridSpec& spec, int64_t expert_bytes,
                                     int64_t cache_bytes) {
  if (spec.working_set_cache_divisors.empty()) return {};
  if (expert_bytes < 1) throw base::Error("working sets: the expert must be >= 1 byte");
  std::vector<int64_t> experts = {CyclingBlocks(expert_bytes, cache_bytes)};
  for (int64_t divisor : spec.working_set_cache_divisors) {
    const double target = static_cast<double>(cache_bytes) / static_cast<double>(divisor);
    experts.push_back(
        std::min(experts.front(),
                 std::max<int64_t>(1, std::llround(target / static_cast<double>(expert_bytes)))));
  }
  std::vector<int64_t> bytes;
  for (int64_t n : SortedUnique(experts)) bytes.push_back(n * expert_bytes);
  return bytes;
}

std::vector<int64_t> GpuGemmTokens(const std::vector<int64_t>& cpu_tokens) {
  if (cpu_tokens.empty()) return {};
  const int64_t block = executor::kGpuGemmRows;
  const int64_t largest = *std::max_element(cpu_tokens.begin(), cpu_tokens.end());
  // The block count the largest CPU count takes, and at least three distinct counts for a fit.
  const int64_t top = std::max((largest + block - 1) / block * block, 3 * block);
  std::vector<int64_t> tokens = {1};
  for (int64_t t : {block, 2 * block, 3 * block, 4 * block}) {
    if (t <= top) tokens.push_back(t);
  }
  for (int64_t t = 8 * block; t <= top; t *= 2) tokens.push_back(t);
  if (tokens.back() != top) tokens.push_back(top);
  return tokens;
}

std::vector<GridPoint> MakeProfileGrid(const executor::ExecutorConfig& target,
                                       const executor::ExecutorConfig& draft, const GridSpec& spec,
                                       int64_t cache_bytes, int gpu_index, bool cpu_operators) {
  spec.Validate();
  std::vector<GridPoint> points;
  auto add = [&](OperatorFamily family, const std::string& device, int64_t tokens, int64_t context,
                 int64_t bytes) {
    points.push_back(GridPoint{family, device, tokens, context, bytes});
  };
  const std::vector<int64_t> expert_tokens = SortedUnique(spec.expert_tokens);
  const std::vector<int64_t> matmul_tokens = SortedUnique(spec.matmul_tokens);
  // The operators a forward pass runs, on `device`. A GPU's GEMMs run on blocks of 64 rows, so
  // there the FFNs take GpuGemmTokens (distinct block counts) instead of the CPU's counts, most of
  // which would cost what 64 tokens do. The router and the LM head keep the CPU's counts: on the
  // GPU their time follows the rows, not the blocks (the router's probabilities and the logits
  // come back to the host row by row, and the host routes each token).
  const auto add_compute = [&](const std::string& device) {
    const bool gpu = device != "cpu";
    const std::vector<int64_t> expert_points = gpu ? GpuGemmTokens(expert_tokens) : expert_tokens;
    const std::vector<int64_t> ffn_points = gpu ? GpuGemmTokens(matmul_tokens) : matmul_tokens;
    if (target.is_moe()) {
      for (int64_t t : expert_points) add(OperatorFamily::kExpertFfn, device, t, 0, 0);
    }
    for (int64_t context : SortedUnique(spec.decode_contexts)) {
      if (context > target.max_positions) continue;
      for (int64_t batch : SortedUnique(spec.decode_batches))
        add(OperatorFamily::kAttentionDecode, device, batch, context, 0);
    }
    for (int64_t t : SortedUnique(spec.prefill_tokens)) {
      if (t <= target.max_positions) add(OperatorFamily::kAttentionPrefill, device, t, 0, 0);
    }
    for (int64_t queries : SortedUnique(spec.verify_queries)) {
      for (int64_t context : SortedUnique(spec.verify_contexts)) {
        if (context + queries > target.max_positions) continue;
        for (int64_t batch : SortedUnique(spec.verify_batches)) {
          points.push_back(
              GridPoint{OperatorFamily::kAttentionVerify, device, batch, context, 0, queries});
        }
      }
    }
    if (target.is_moe()) {
      for (int64_t t : matmul_tokens) add(OperatorFamily::kRouter, device, t, 0, 0);
    }
    for (int64_t t : matmul_tokens) add(OperatorFamily::kLmHead, device, t, 0, 0);
    if (draft.dense_intermediate_size > 0) {
      for (int64_t t : ffn_points) add(OperatorFamily::kDenseFfn, device, t, 0, 0);
    }
    if (!draft.is_moe()) {
      for (int64_t context : SortedUnique(spec.draft_contexts)) {
        if (context + 1 > draft.max_positions) continue;
        for (int64_t batch : SortedUnique(spec.draft_batches))
          add(OperatorFamily::kDraftDecode, device, batch, context, 0);
      }
      // On a CPU the draft's weights (tens of MB) partly outlive one pass in the caches: the
      // round's later passes ran 11-19 % faster than its first here. A GPU's L2 keeps little of
      // them, so its draft passes are all priced as the first. After the draft_decode points, not
      // between them: a family is a run of consecutive points, and each run builds its bench.
      for (int64_t context : SortedUnique(spec.draft_contexts)) {
        if (gpu || context + 1 > draft.max_positions) continue;
        for (int64_t batch : SortedUnique(spec.draft_batches))
          add(OperatorFamily::kDraftDecodeWarm, device, batch, context, 0);
      }
    }
  };
  // Transfers move expert-sized blocks (a dense target's FFN when it has no experts).
  const int64_t block = target.is_moe() ? ExpertBytes(target)
                                        : static_cast<int64_t>(kernels::ExpertFfnWeightBytes(
                                              target.hidden_size, target.dense_intermediate_size));
  const std::vector<int64_t> sizes = TransferBytes(spec, block);
  if (cpu_operators) {
    add_compute("cpu");
    for (int64_t b : sizes) add(OperatorFamily::kMemcpyHost, "cpu", 1, 0, b);
    for (int64_t b : sizes) add(OperatorFamily::kStorageRead, "cpu", 1, 0, b);
    for (int64_t b : sizes) add(OperatorFamily::kExpertLoad, "cpu", 1, 0, b);
    if (target.is_moe() && spec.expert_reader_store_bytes > 0) {
      // Alone, then beside computation: each round measures the two back to back.
      for (const bool beside : {false, true}) {
        GridPoint p{OperatorFamily::kExpertReader, "cpu", 1, 0, ExpertBytes(target)};
        p.beside_compute = beside;
        points.push_back(p);
      }
    }
    for (int64_t t : matmul_tokens) add(OperatorFamily::kNormsResidual, "cpu", t, 0, 0);
    for (int64_t t : SortedUnique(spec.beam_rows))
      add(OperatorFamily::kBeamSelection, "cpu", t, 0, 0);
    if (target.is_moe()) {
      for (int64_t working_set : WorkingSetBytes(spec, ExpertBytes(target), cache_bytes)) {
        for (int64_t t : SortedUnique(spec.working_set_tokens))
          add(OperatorFamily::kExpertFfnWorkingSet, "cpu", t, 0, working_set);
      }
    }
  }
  if (gpu_index >= 0) {
    const std::string gpu = "cuda:" + std::to_string(gpu_index);
    add_compute(gpu);
    for (int64_t t : matmul_tokens) add(OperatorFamily::kNormsResidual, gpu, t, 0, 0);
    for (OperatorFamily family :
         {OperatorFamily::kMemcpyH2dPinned, OperatorFamily::kMemcpyH2dPageable,
          OperatorFamily::kMemcpyD2hPinned, OperatorFamily::kMemcpyD2hPageable}) {
      for (int64_t b : sizes) add(family, gpu, 1, 0, b);
    }
  }
  return points;
}

PointWork WorkOf(const GridPoint& p, const executor::ExecutorConfig& target,
                 const executor::ExecutorConfig& draft) {
  const double t = static_cast<double>(p.tokens);
  const executor::ExecutorConfig& c = target;
  switch (p.family) {
    case OperatorFamily::kExpertFfn:
    case OperatorFamily::kExpertFfnWorkingSet:
      return {static_cast<double>(ExpertBytes(c)),
              kernels::ExpertFfnFlops(p.tokens, c.hidden_size, c.expert_intermediate_size)};
    case OperatorFamily::kDenseFfn:
      return {kernels::ExpertFfnWeightBytes(draft.hidden_size, draft.dense_intermediate_size),
              kernels::ExpertFfnFlops(p.tokens, draft.hidden_size, draft.dense_intermediate_size)};
    case OperatorFamily::kRouter: {
      const double weights =
          static_cast<double>(c.hidden_size) * static_cast<double>(c.num_experts);
      return {2.0 * weights, 2.0 * t * weights};
    }
    case OperatorFamily::kLmHead: {
      const double weights = static_cast<double>(c.hidden_size) * static_cast<double>(c.vocab_size);
      return {2.0 * weights, 2.0 * t * weights};
    }
    case OperatorFamily::kAttentionDecode:
    case OperatorFamily::kAttentionVerify: {
      // A sequence's queries share its cache: the K/V rows the last query sees are read once per
      // sequence (decode is the one-query case).
      const int64_t queries =
          p.family == OperatorFamily::kAttentionVerify ? p.queries_per_sequence : 1;
      double visible_sum = 0;
      for (int64_t i = 0; i < queries; ++i)
        visible_sum += static_cast<double>(Visible(p.context + i, c.sliding_window));
      const double read = static_cast<double>(Visible(p.context + queries - 1, c.sliding_window));
      const double kv_row_bytes =
          2.0 * 4.0 * static_cast<double>(c.kv_width());  // keys + values, fp32
      const double per_head_position = 4.0 * static_cast<double>(c.head_dim);  // q.k and p.v
      return {AttentionWeightBytes(c) + t * read * kv_row_bytes,
              t * static_cast<double>(queries) * ProjectionFlopsPerToken(c) +
                  t * static_cast<double>(c.num_heads) * per_head_position * visible_sum};
    }
    case OperatorFamily::kDraftDecode:
    case OperatorFamily::kDraftDecodeWarm: {
      // Every weight once (the embedding row aside), plus each sequence's K/V in every layer.
      const double visible = static_cast<double>(Visible(p.context, draft.sliding_window));
      const double kv_bytes = t * visible * 2.0 * 4.0 * static_cast<double>(draft.kv_width()) *
                              static_cast<double>(draft.num_layers);
      const double weights = executor::WeightBytesFor(draft);
      const double attention_flops = t * static_cast<double>(draft.num_layers) *
                                     static_cast<double>(draft.num_heads) * 4.0 *
                                     static_cast<double>(draft.head_dim) * visible;
      return {weights + kv_bytes, t * weights + attention_flops};  // 2 FLOP per 2-byte weight
    }
    case OperatorFamily::kAttentionPrefill: {
      double visible_sum = 0;
      for (int64_t position = 0; position < p.tokens; ++position) {
        visible_sum += static_cast<double>(Visible(position, c.sliding_window));
      }
      const double kv_row_bytes = 2.0 * 4.0 * static_cast<double>(c.kv_width());
      return {AttentionWeightBytes(c) + t * kv_row_bytes,
              t * ProjectionFlopsPerToken(c) + 4.0 * static_cast<double>(c.num_heads) *
                                                   static_cast<double>(c.head_dim) * visible_sum};
    }
    case OperatorFamily::kNormsResidual: {
      // Two RMSNorms (read and write the rows) and two residual adds (read two, write one), fp32.
      const double values = t * static_cast<double>(c.hidden_size);
      return {10.0 * 4.0 * values, 10.0 * values};
    }
    case OperatorFamily::kBeamSelection: {
      // Each row's fp32 logits read twice (the log-sum-exp, then the scan); an exponential, a
      // subtraction and a comparison or two per logit.
      const double logits = t * static_cast<double>(c.vocab_size);
      return {2.0 * 4.0 * logits, 8.0 * logits};
    }
    case OperatorFamily::kMemcpyHost:
    case OperatorFamily::kStorageRead:
    case OperatorFamily::kExpertLoad:
    case OperatorFamily::kExpertReader:
    case OperatorFamily::kMemcpyH2dPinned:
    case OperatorFamily::kMemcpyH2dPageable:
    case OperatorFamily::kMemcpyD2hPinned:
    case OperatorFamily::kMemcpyD2hPageable:
      return {static_cast<double>(p.bytes), 0.0};
  }
  return {};
}

namespace {

// A matmul's shape carries its kernel's token tiling where a call computes more rows than it has
// tokens: the fit prices tokens as the rows the kernel computes. On the CPU, the kernel's register
// tiling (kernels/weight_matrix.h); on a GPU, the FFNs' GEMMs, which always run on blocks of
// kGpuGemmRows rows (executor/gpu/gpu_transformer.h), so 1..64 tokens cost what 64 do (not the
// router's or the LM head's time, which follows the rows copied back to the host).
nlohmann::json WithTokenTiling(nlohmann::json shape, const GridPoint& p,
                               kernels::WeightFormat format) {
  if (p.device != "cpu") {
    if (p.family == OperatorFamily::kExpertFfn || p.family == OperatorFamily::kDenseFfn)
      shape["token_tiling"] = {{"exact_up_to", 0}, {"multiple", executor::kGpuGemmRows}};
    return shape;
  }
  const kernels::TokenTiling tiling = kernels::MatmulTokenTiling(format);
  if (!tiling.exact()) {
    shape["token_tiling"] = {{"exact_up_to", tiling.exact_up_to}, {"multiple", tiling.multiple}};
  }
  return shape;
}

}  // namespace

nlohmann::json ShapeOf(const GridPoint& p, const executor::ExecutorConfig& target,
                       const executor::ExecutorConfig& draft) {
  const executor::ExecutorConfig& c = target;
  constexpr kernels::WeightFormat kBf16 = kernels::WeightFormat::kBf16;
  switch (p.family) {
    case OperatorFamily::kExpertFfn:
      return WithTokenTiling(
          {{"hidden", c.hidden_size}, {"intermediate", c.expert_intermediate_size}}, p,
          c.expert_format);
    case OperatorFamily::kExpertFfnWorkingSet:
      return WithTokenTiling({{"hidden", c.hidden_size},
                              {"intermediate", c.expert_intermediate_size},
                              {"working_set_bytes", p.bytes}},
                             p, c.expert_format);
    case OperatorFamily::kDenseFfn:
      return WithTokenTiling(
          {{"hidden", draft.hidden_size}, {"intermediate", draft.dense_intermediate_size}}, p,
          kBf16);
    case OperatorFamily::kRouter:
      return WithTokenTiling({{"hidden", c.hidden_size}, {"experts", c.num_experts}}, p, kBf16);
    case OperatorFamily::kLmHead:
      return WithTokenTiling({{"hidden", c.hidden_size}, {"vocab", c.vocab_size}}, p, kBf16);
    case OperatorFamily::kAttentionDecode:
    case OperatorFamily::kAttentionPrefill:
    case OperatorFamily::kAttentionVerify: {
      nlohmann::json shape = {{"hidden", c.hidden_size},
                              {"heads", c.num_heads},
                              {"kv_heads", c.num_kv_heads},
                              {"head_dim", c.head_dim}};
      if (c.sliding_window > 0) shape["sliding_window"] = c.sliding_window;
      if (p.family != OperatorFamily::kAttentionPrefill) shape["context"] = p.context;
      if (p.family == OperatorFamily::kAttentionVerify)
        shape["queries_per_sequence"] = p.queries_per_sequence;
      return shape;
    }
    case OperatorFamily::kDraftDecode:
    case OperatorFamily::kDraftDecodeWarm:
      return {{"model", draft.name},         {"layers", draft.num_layers},
              {"hidden", draft.hidden_size}, {"intermediate", draft.dense_intermediate_size},
              {"heads", draft.num_heads},    {"kv_heads", draft.num_kv_heads},
              {"head_dim", draft.head_dim},  {"vocab", draft.vocab_size},
              {"context", p.context}};
    case OperatorFamily::kNormsResidual:
      return {{"hidden", c.hidden_size}};
    case OperatorFamily::kBeamSelection:
      return {{"vocab", c.vocab_size}};
    case OperatorFamily::kMemcpyHost:
    case OperatorFamily::kStorageRead:
    case OperatorFamily::kExpertLoad:
    case OperatorFamily::kMemcpyH2dPinned:
    case OperatorFamily::kMemcpyH2dPageable:
    case OperatorFamily::kMemcpyD2hPinned:
    case OperatorFamily::kMemcpyD2hPageable:
      return {{"bytes", p.bytes}};
    case OperatorFamily::kExpertReader: {
      // How the reader ran: the bandwidth a storage-tier machine is priced at depends on all three
      // (fit/storage_tier_hardware.h uses the samples whose reads in flight match the run's).
      const executor::offload::OffloadOptions options;
      return {{"bytes", p.bytes},
              {"beside_compute", p.beside_compute},
              {"reads_in_flight", options.reader_threads},
              {"reader", executor::offload::ToString(options.reader)}};
    }
  }
  return nlohmann::json::object();
}

}  // namespace moelab::profiler
