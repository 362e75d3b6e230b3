#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "executor/executor_config.h"

namespace moelab::profiler {

// The operators a profile measures. Each is one family of samples in "moelab.profile/1"
// (profiler/README.md); ToString gives the name written in the file.
enum class OperatorFamily {
  kExpertFfn,            // kernels/expert_ffn.h on the model's expert shape
  kAttentionDecode,      // the executor's attention, one new token per sequence
  kAttentionPrefill,     // the executor's attention, a prompt into an empty cache
  kAttentionVerify,      // the executor's attention, gamma + 1 new tokens per sequence (SD verify)
  kRouter,               // MatmulBf16 hidden x experts
  kLmHead,               // MatmulBf16 hidden x vocab
  kDenseFfn,             // kernels/expert_ffn.h on the draft model's dense FFN shape
  kDraftDecode,          // the dense draft's whole decode forward through the executor (SD draft)
  kDraftDecodeWarm,      // the same pass right after another of the draft's (an SD round's second
                         // and later draft passes: the draft's weights partly still cached)
  kMemcpyHost,           // std::memcpy of a block, host to host
  kStorageRead,          // pread of a block from a file (O_DIRECT when the filesystem allows it)
  kExpertLoad,           // the offload reader's checksum and copy of a read block
  kExpertReader,         // the executor's offload reader over a store of the model's experts,
                         // alone and beside computation (seconds per expert at its concurrency)
  kNormsResidual,        // a layer's two RMSNorms and two residual adds (the executor's "other")
  kExpertFfnWorkingSet,  // expert_ffn with its weights cycled over a given working set (the cache
                         // regimes: a pass whose weights fit the cache streams them faster)
  kMemcpyH2dPinned,      // cudaMemcpyAsync host (pinned) -> device
  kMemcpyH2dPageable,    // host (pageable) -> device
  kMemcpyD2hPinned,      // device -> host (pinned)
  kMemcpyD2hPageable,    // device -> host (pageable)
  kBeamSelection,        // executor/beam_selection.h: a beam step's ranking of `tokens` beams'
                         // next tokens over the vocabulary (their logits' log-sum-exp and scan)
};

std::string ToString(OperatorFamily family);
// Every family in file order (the order samples are written in).
const std::vector<OperatorFamily>& AllOperatorFamilies();
bool IsGpuOnly(OperatorFamily family);
bool IsTransfer(OperatorFamily family);
// draft_decode or draft_decode_warm: the draft's whole pass at a context and batch.
bool IsDraftPass(OperatorFamily family);

// One measurement to make. `tokens` is the x-axis a fit uses: tokens per expert (expert_ffn),
// sequences in the batch (attention_decode and attention_verify, with `context` positions already
// cached; verify runs `queries_per_sequence` new tokens per sequence), prompt tokens
// (attention_prefill), token rows (router, lm_head, dense_ffn, norms_residual); 1 for transfers,
// whose size is `bytes`; expert_ffn_working_set: tokens per expert, its weights cycled over
// `bytes` (a whole number of experts).
struct GridPoint {
  OperatorFamily family = OperatorFamily::kExpertFfn;
  std::string device = "cpu";  // "cpu" or "cuda:<index>"
  int64_t tokens = 1;
  int64_t context = 0;               // attention_decode, attention_verify and the draft passes
  int64_t bytes = 0;                 // transfers; expert_ffn_working_set's working set
  int64_t queries_per_sequence = 1;  // attention_verify only: new tokens per sequence
  bool beside_compute = false;       // expert_reader only: while the host computes

  // "expert_ffn cpu tokens=64", "attention_decode cpu context=1024 batch=8",
  // "attention_verify cpu context=128 queries=3 batch=4", ...
  std::string Label() const;
};

// Which points to measure and how hard. Quick() and Full() are the two the CLI uses; tests build
// smaller ones. An empty list skips that family. Token counts, contexts and sizes are >= 1.
struct GridSpec {
  // expert_ffn before the ridge points: powers of two and half-octave points (3 x 2^k) where the
  // curve bends from memory-bound to compute-bound.
  std::vector<int64_t> expert_tokens;
  // Points added around the ridge point r measured on expert_ffn (EstimateRidgeTokens,
  // RidgeTokens): 0, 3 or 9.
  int ridge_points = 0;
  std::vector<int64_t> matmul_tokens;  // router, lm_head, dense_ffn
  std::vector<int64_t> beam_rows;      // beam_selection: beams ranked per call
  std::vector<int64_t> decode_contexts;
  std::vector<int64_t> decode_batches;
  std::vector<int64_t> prefill_tokens;
  // attention_verify: every (queries per sequence, context, batch); queries >= 2 (gamma + 1).
  std::vector<int64_t> verify_queries;
  std::vector<int64_t> verify_contexts;
  std::vector<int64_t> verify_batches;
  // draft_decode and draft_decode_warm: every (context, batch) of the dense draft's one-token
  // forward.
  std::vector<int64_t> draft_contexts;
  std::vector<int64_t> draft_batches;
  // Transfer sizes: these fixed sizes plus the model's expert bytes divided by each divisor,
  // rounded up to 4 KiB (O_DIRECT alignment).
  std::vector<int64_t> transfer_fixed_bytes;
  std::vector<int64_t> transfer_expert_divisors;
  int64_t storage_file_blocks = 2;  // the storage_read file holds this many of the largest block
  // expert_reader: its store holds the model's routed experts, but at most this many bytes of them
  // (at least 2 x the reads in flight experts); 0 skips the family.
  int64_t expert_reader_store_bytes = 0;
  // expert_ffn_working_set: these token counts (5 or more, so each working set's curve can be
  // interpolated) at working sets of the cache divided by each divisor, rounded to whole experts,
  // and at the DRAM regime every other operator is measured in (CyclingBlocks): WorkingSetBytes.
  std::vector<int64_t> working_set_tokens;
  std::vector<int64_t> working_set_cache_divisors;
  int repetitions = 3;
  double min_time_s = 0.05;  // Google Benchmark minimum time per repetition

  // --quick: 3 rounds of >= 50 ms repetitions, coarse lists (109 points for the default model
  // and 3 ridge points, about 2 minutes on 2 cores; 3 transfer sizes, the fewest a bytes fit
  // takes).
  static GridSpec Quick();
  // The full profile: 5 repetitions of >= 200 ms, every power of two and half-octave point.
  static GridSpec Full();
  void Validate() const;  // throws moelab::Error naming the field
};

// The ridge-point candidates: 3 -> {0.75, 1, 1.5} x r, 9 -> {0.5, 0.625, 0.75, 0.875, 1, 1.25,
// 1.5, 1.75, 2} x r, rounded and clamped to [1, 4096]; a candidate already in `taken` (or chosen
// before it) moves up by one token until it is new, so the count is always `count` and the grid
// never repeats a point.
std::vector<int64_t> RidgeTokens(double ridge_tokens, int count, const std::vector<int64_t>& taken);

// The ridge point (tokens per expert where the expert FFN turns from weight-bandwidth-bound to
// compute-bound) from (tokens, seconds) samples: the memory floor t0 is the fastest time at <= 8
// tokens, the compute slope c the smallest seconds-per-token among the two largest token counts;
// r = t0 / c, clamped to [1, 4096]. Needs at least two samples with distinct token counts.
double EstimateRidgeTokens(const std::vector<std::pair<int64_t, double>>& tokens_seconds);

// Transfer sizes for a model whose expert is `expert_bytes` (sorted, distinct, 4 KiB multiples).
std::vector<int64_t> TransferBytes(const GridSpec& spec, int64_t expert_bytes);

// How many copies of a `block_bytes` operand to cycle through so the cycle exceeds twice the
// last-level cache (so each call reads its operand from DRAM): floor(2 cache / block) + 1.
int64_t CyclingBlocks(int64_t block_bytes, int64_t cache_bytes);

// The last-level cache the CPU benches work against: the L3 the machine reports, but at least
// kMinEffectiveCacheBytes. A virtual machine reports its own slice's L3 while the host's cache can
// be several times larger (3D V-cache: 96 MiB per CCD): on this project's Zen 3 VM, which reports
// 32 MiB, one expert's 22 MB of weights cycled over 88 MB (2 x the reported L3) ran at 38-41 GB/s,
// over 352 MB or more at 30-32 GB/s, the rate of the executor's own decode step.
constexpr int64_t kMinEffectiveCacheBytes = int64_t{256} << 20;
int64_t EffectiveCacheBytes(int64_t reported_l3_bytes);

// expert_ffn_working_set's working sets for an expert of `expert_bytes` against `cache_bytes`:
// for each divisor d, max(1, round(cache / d / expert)) experts, and CyclingBlocks(expert, cache)
// experts (the DRAM regime, the largest), in bytes, sorted and distinct. Empty when the divisors
// are.
std::vector<int64_t> WorkingSetBytes(const GridSpec& spec, int64_t expert_bytes,
                                     int64_t cache_bytes);

// The token counts a GPU's FFN operators (expert_ffn, dense_ffn) are measured
// at, for a grid whose CPU counts are `cpu_tokens`: the executor's GPU GEMMs run on blocks of
// kGpuGemmRows (64) rows, so 1..64 tokens cost the same; 1, 64, 128, 192, 256, then 512, 1024, ...
// up to the largest CPU count rounded up to a block (at least 192): distinct block counts, at least
// three, as many as an interpolated fit needs where the grid reaches that far.
std::vector<int64_t> GpuGemmTokens(const std::vector<int64_t>& cpu_tokens);

// Every point of a profile except the ridge points, in file order. GPU points (every operator of
// a forward pass, measured through the executor's GPU backend, and the host<->device copies on
// "cuda:<gpu_index>") only when gpu_index >= 0; CPU points only when `cpu_operators` (validate
// --device gpu leaves them out). Contexts and prefill tokens above target.max_positions are
// dropped (the model cannot hold them). `cache_bytes` (EffectiveCacheBytes) places the
// expert_ffn_working_set points (CPU only).
std::vector<GridPoint> MakeProfileGrid(const executor::ExecutorConfig& target,
                                       const executor::ExecutorConfig& draft, const GridSpec& spec,
                                       int64_t cache_bytes, int gpu_index,
                                       bool cpu_operators = true);

// What one call at `point` does: bytes of the operands it must read (weights, KV cache, the
// block for transfers) and floating-point operations (multiply-add = 2).
struct PointWork {
  double bytes = 0;
  double flops = 0;
};
PointWork WorkOf(const GridPoint& point, const executor::ExecutorConfig& target,
                 const executor::ExecutorConfig& draft);

// The "shape" object of a sample: the dimensions the operator ran at.
nlohmann::json ShapeOf(const GridPoint& point, const executor::ExecutorConfig& target,
                       const executor::ExecutorConfig& draft);

// Bytes of one expert (gate, up and down) of `config` as stored in its expert format (scales
// included): the block the offload store reads.
int64_t ExpertBytes(const executor::ExecutorConfig& config);
// Bytes of one layer's attention projections (q|k|v and o) as stored in `config`'s attention
// format (scales included).
double AttentionWeightBytes(const executor::ExecutorConfig& config);

}  // namespace moelab::profiler
