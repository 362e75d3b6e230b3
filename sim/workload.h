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

struct Workload {
  WorkloadKind kind = WorkloadKind::kDecode;
  int64_t prompt_tokens = 128;
  int64_t output_tokens = 64;
  int64_t batch = 1;
  int64_t beam_width = 4;
  int64_t gamma = 4;   // kVerify
  double alpha = 0.8;  // kVerify: per-token acceptance rate

  // Error naming the option (--prompt, --tokens, --batch, --beam, --gamma, --alpha).
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
