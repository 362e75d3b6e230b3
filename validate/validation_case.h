#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace moelab::validate {

// One held-out configuration `moelab validate` predicts and then runs: none is a grid point the
// profile measured as such (batches, prompt lengths, contexts and gammas between or beyond the
// profile's; one model shape with a layer count the profile never ran).
// kOffload / kOffloadPrefill: the offload simulator against the executor's offload runtime,
// decode TPOT / prefill TTFT (validate/offload_cases.h); `--cases offload` selects both and only
// when named.
enum class CaseKind { kDecode, kPrefill, kSd, kBeam, kOffload, kOffloadPrefill };
std::string ToString(CaseKind kind);
// decode | prefill | sd | beam | offload; Error otherwise.
CaseKind CaseKindFromString(const std::string& name);
// The quantity a kind is judged on: "tpot_s", "ttft_s", "speedup", "tpot_s", "tpot_s", "ttft_s".
std::string QuantityOf(CaseKind kind);

struct ValidationCase {
  CaseKind kind = CaseKind::kDecode;
  bool held_out_shape = false;  // the model with ValidationPlan::held_out_layers layers
  int64_t batch = 1;            // sequences (beam: 1 prompt, beam_width beams)
  int64_t prompt = 8;           // prompt tokens per sequence
  int64_t context = 0;          // cached positions before the prompt (synthetic keys/values)
  int64_t output_tokens = 9;    // per sequence, including the prefill's
  int64_t gamma = 0;            // sd
  int64_t beam_width = 0;       // beam
  std::string policy;           // offload
  int64_t expert_slots = 0;     // offload: experts the RAM budget holds (cache and staging)

  // Positions in each sequence's cache, averaged over the decode steps: what the decode and
  // verify passes are predicted at.
  int64_t MeanDecodeContext() const;
  // "sd B=3 gamma=2", "decode B=6 ctx=300 [held-out shape]", "offload fmoe 16 experts B=4", ...
  std::string Label() const;
};

// Runs of a case per round: a prefill (in memory or offloaded) is one step of 0.2-2 s, so a burst
// of load decides a whole run and there are no steps for a median to leave it out of; it runs
// three times a round (a quick plan's prefills add about 10 s a round). Every other kind once.
int RunsPerRound(CaseKind kind);

// Whether two SD cases' speedup references are the same plain decode: the same model, requests
// (batch, prompt, seeded tokens), context and tokens, whatever their gammas. Each SD case runs that
// decode right before its SD run; the speedup divides by all of them pooled.
bool SameSdBaseline(const ValidationCase& a, const ValidationCase& b);

struct ValidationPlan {
  std::vector<ValidationCase> cases;
  int64_t held_out_layers = 0;  // 0: no held-out shape case
};

// The cases of `kinds` (every kind but offload when empty; offload cases come from OffloadPlan,
// validate/offload_cases.h): --quick keeps the run under 10 minutes on a
// 2-core machine with the default shapes; the full plan adds batches, contexts and gammas.
// `target_layers` is the model's layer count (the held-out shape takes a different one).
ValidationPlan DefaultPlan(bool quick, const std::set<CaseKind>& kinds, int64_t target_layers);

}  // namespace moelab::validate
