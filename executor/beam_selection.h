#pragma once

#include <cstdint>
#include <vector>

namespace moelab::executor {

// One next-token candidate of a beam search step: a beam (`parent`) extended by `token`.
struct BeamCandidate {
  double score;    // the parent's log-probability plus the token's
  int64_t parent;  // index of the beam it extends
  int32_t token;
  float token_log_probability = 0;  // the token's own, without its beam's
};

// The order beam search keeps: higher score first, then the lower parent, then the lower token
// (a total order, so the kept beams do not depend on how the candidates were visited).
bool BetterBeamCandidate(const BeamCandidate& a, const BeamCandidate& b);

// A beam search step's ranking over the vocabulary, after the forward pass: the `kept` best of
// the `alive` x `vocab` candidates (each beam's log-softmax of its row of `logits` added to its
// log-probability), best first, in `candidates` (cleared first). The work is the beams' rows
// (a log-sum-exp and a scan each): what the profiler measures as beam_selection and the cost
// sources price with the pass (model::ForwardShape::ranked_rows).
void RankBeamCandidates(const float* logits, int64_t alive, int64_t vocab,
                        const std::vector<double>& beam_log_probabilities, int64_t kept,
                        std::vector<BeamCandidate>& candidates);

}  // namespace moelab::executor
