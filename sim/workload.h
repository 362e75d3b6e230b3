#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moelab::sim {

// What the simulated engine serves (docs: sim/README.md, "Workloads").
enum class WorkloadKind {
  kDecode,   // one request: prefill of --prompt tokens (gives token 1), then --tokens - 1 steps
  kPrefill,  // --batch prompts in one pass (TTFT)
  kBeam,     // one request, prefill then --tokens - 1 steps of --beam W tokens
  kBatch,    // --batch requests decoded together
  kVerify,   // speculative-decoding target side: prefill, then verify passes of gamma + 1
             // positions per sequence, each accepting sigma (gamma + 1) tokens (formulas.md 1)
};
std::string ToString(WorkloadKind kind);
// Error listing the valid names.
WorkloadKind WorkloadKindFromString(const std::string& name);

// Bounds on what one simulation may be asked to do (docs/limits.md). Passes, per-pass request
// lists and the KV cache all grow with these, so they are refused before anything is built:
// 2^20 positions per sequence is above every preset's context window; 2^16 requests or 1024 beams
// are above any served batch; sequences x positions is capped at 2^26 (about 0.5 GB of per-pass
// bookkeeping and minutes of simulation at the cap).
inline constexpr int64_t kMaxSequencePositions = int64_t{1} << 20;
inline constexpr int64_t kMaxBatch = int64_t{1} << 16;
inline constexpr int64_t kMaxBeamWidth = 1024;
inline constexpr int64_t kMaxSimulatedTokens = int64_t{1} << 26;

struct Workload {
  WorkloadKind kind = WorkloadKind::kDecode;
  int64_t prompt_tokens = 128;
  int64_t output_tokens = 64;
  int64_t batch = 1;
  int64_t beam_width = 4;
  int64_t gamma = 4;   // kVerify
  double alpha = 0.8;  // kVerify: per-token acceptance rate

  // Error naming the option (--prompt, --tokens, --batch, --beam, --gamma, --alpha) and, for a
  // value above the bounds above, the bound and why.
  void Validate() const;
  // Tokens kept in the KV cache at the end (all sequences), for memory.
  int64_t KvTokens() const;
};

// One forward pass.
struct Iteration {
  std::string kind;  // "prefill", "decode", "beam", "verify"
  int64_t batch = 1;
  int64_t tokens_per_sequence = 1;
  int64_t context_length = 0;
  bool logits_for_all_positions = true;
  std::vector<int64_t> requests;  // requests whose tokens it carries
  int64_t tokens() const { return batch * tokens_per_sequence; }
};

// The passes of a workload, in order; the first is always the prefill.
std::vector<Iteration> BuildIterations(const Workload& workload);

}  // namespace moelab::sim
