#include "sim/workload.h"

#include <cmath>

#include "base/error.h"
#include "model/moe_math.h"

namespace moelab::sim {

std::string ToString(WorkloadKind kind) {
  switch (kind) {
    case WorkloadKind::kDecode:
      return "decode";
    case WorkloadKind::kPrefill:
      return "prefill";
    case WorkloadKind::kBeam:
      return "beam";
    case WorkloadKind::kBatch:
      return "batch";
    case WorkloadKind::kVerify:
      return "verify";
  }
  return "?";
}

WorkloadKind WorkloadKindFromString(const std::string& name) {
  for (WorkloadKind kind : {WorkloadKind::kDecode, WorkloadKind::kPrefill, WorkloadKind::kBeam,
                            WorkloadKind::kBatch, WorkloadKind::kVerify}) {
    if (ToString(kind) == name) return kind;
  }
  throw base::Error("--workload: unknown workload '" + name +
                    "'; valid: decode, prefill, beam, batch, verify");
}

void Workload::Validate() const {
  if (prompt_tokens < 1)
    throw base::Error("--prompt must be at least 1, got " + std::to_string(prompt_tokens));
  if (output_tokens < 1)
    throw base::Error("--tokens must be at least 1, got " + std::to_string(output_tokens));
  if (batch < 1) throw base::Error("--batch must be at least 1, got " + std::to_string(batch));
  if ((kind == WorkloadKind::kDecode || kind == WorkloadKind::kBeam) && batch != 1) {
    throw base::Error("--batch " + std::to_string(batch) + ": --workload " + ToString(kind) +
                      " serves one request; use --workload batch for several");
  }
  if (kind == WorkloadKind::kBeam && beam_width < 1) {
    throw base::Error("--beam must be at least 1, got " + std::to_string(beam_width));
  }
  if (kind == WorkloadKind::kVerify) {
    if (gamma < 1) throw base::Error("--gamma must be at least 1, got " + std::to_string(gamma));
    if (!(alpha >= 0 && alpha < 1))
      throw base::Error("--alpha must be in [0, 1), got " + std::to_string(alpha));
  }
  const auto at_most = [](const char* option, int64_t value, int64_t limit, const char* why) {
    if (value > limit) {
      throw base::Error(std::string(option) + " " + std::to_string(value) +
                        " is above the limit of " + std::to_string(limit) + " (" + why +
                        "; docs/limits.md)");
    }
  };
  at_most("--prompt", prompt_tokens, kMaxSequencePositions,
          "positions per sequence, above every model's context");
  at_most("--tokens", output_tokens, kMaxSequencePositions,
          "positions per sequence, above every model's context");
  at_most("--batch", batch, kMaxBatch, "requests served together");
  if (kind == WorkloadKind::kBeam)
    at_most("--beam", beam_width, kMaxBeamWidth, "beams of one request");
  if (kind == WorkloadKind::kVerify)
    at_most("--gamma", gamma, kMaxSequencePositions, "draft tokens per pass");
  const int64_t length =
      prompt_tokens + output_tokens + (kind == WorkloadKind::kVerify ? gamma : 0);
  at_most("--prompt + --tokens", length, kMaxSequencePositions,
          "positions per sequence, above every model's context");
  at_most("sequences x positions (--batch or --beam times --prompt + --tokens)", KvTokens(),
          kMaxSimulatedTokens, "the simulation's bookkeeping and time grow with it");
}

int64_t Workload::KvTokens() const {
  const int64_t length =
      prompt_tokens + output_tokens + (kind == WorkloadKind::kVerify ? gamma : 0);
  if (kind == WorkloadKind::kBeam) return beam_width * length;
  return batch * length;
}

std::vector<Iteration> BuildIterations(const Workload& workload) {
  workload.Validate();
  std::vector<int64_t> requests;
  for (int64_t r = 0; r < workload.batch; ++r) requests.push_back(r);
  std::vector<Iteration> passes;
  Iteration prefill;
  prefill.kind = "prefill";
  prefill.batch = workload.batch;
  prefill.tokens_per_sequence = workload.prompt_tokens;
  prefill.logits_for_all_positions = false;
  prefill.requests = requests;
  passes.push_back(prefill);
  if (workload.kind == WorkloadKind::kPrefill) return passes;

  const int64_t later = workload.output_tokens - 1;
  if (workload.kind == WorkloadKind::kVerify) {
    const double sigma = model::AcceptedLengthFraction(workload.alpha, workload.gamma);
    const double per_round = sigma * static_cast<double>(workload.gamma + 1);
    const int64_t rounds =
        later > 0 ? static_cast<int64_t>(std::ceil(static_cast<double>(later) / per_round - 1e-9))
                  : 0;
    for (int64_t round = 0; round < rounds; ++round) {
      Iteration verify;
      verify.kind = "verify";
      verify.batch = workload.batch;
      verify.tokens_per_sequence = workload.gamma + 1;
      verify.context_length =
          workload.prompt_tokens +
          static_cast<int64_t>(std::floor(per_round * static_cast<double>(round)));
      verify.requests = requests;
      passes.push_back(verify);
    }
    return passes;
  }
  for (int64_t step = 0; step < later; ++step) {
    Iteration decode;
    decode.kind = workload.kind == WorkloadKind::kBeam ? "beam" : "decode";
    decode.batch = workload.kind == WorkloadKind::kBeam ? workload.beam_width : workload.batch;
    decode.context_length = workload.prompt_tokens + step;
    decode.requests = workload.kind == WorkloadKind::kBeam ? std::vector<int64_t>{0} : requests;
    passes.push_back(decode);
  }
  return passes;
}

}  // namespace moelab::sim
