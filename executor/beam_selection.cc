#include "executor/beam_selection.h"

#include <algorithm>
#include <limits>

#include "base/error.h"
#include "kernels/elementwise.h"

namespace moelab::executor {

bool BetterBeamCandidate(const BeamCandidate& a, const BeamCandidate& b) {
  if (a.score != b.score) return a.score > b.score;
  if (a.parent != b.parent) return a.parent < b.parent;
  return a.token < b.token;
}

void RankBeamCandidates(const float* logits, int64_t alive, int64_t vocab,
                        const std::vector<double>& beam_log_probabilities, int64_t kept,
                        std::vector<BeamCandidate>& candidates) {
  if (alive < 1 || vocab < 1 || kept < 1 || kept > alive * vocab ||
      static_cast<int64_t>(beam_log_probabilities.size()) != alive) {
    throw base::Error("beam ranking: " + std::to_string(alive) + " beams (" +
                      std::to_string(beam_log_probabilities.size()) + " log-probabilities) x " +
                      std::to_string(vocab) + " tokens cannot keep " + std::to_string(kept));
  }
  // The `kept` best of alive x vocab candidates are among each beam's own `kept` best (the order
  // is total, the same within a beam as across), so each beam keeps its best in a short sorted
  // list and only those are ranked: the same beams as ranking all of them, without
  // materializing width x vocab candidates a step.
  candidates.clear();
  for (int64_t b = 0; b < alive; ++b) {
    const float* row = logits + b * vocab;
    // Each token's log-probability as LogSoftmax writes it, computed where it is read.
    const float log_sum = kernels::LogSumExp(row, vocab);
    const size_t first_of_beam = candidates.size();
    // Once the beam holds `kept`, the log-probability of its worst: a token below it scores no
    // more (the same beam's score grows with it) and, on a tie, has the higher token id, so it
    // cannot enter; a float test skips its double score and comparison.
    float worst_kept = -std::numeric_limits<float>::infinity();
    for (int64_t t = 0; t < vocab; ++t) {
      const float log_probability = row[t] - log_sum;
      if (log_probability < worst_kept) continue;
      const BeamCandidate c{beam_log_probabilities[static_cast<size_t>(b)] + log_probability, b,
                            static_cast<int32_t>(t), log_probability};
      const int64_t held = static_cast<int64_t>(candidates.size() - first_of_beam);
      if (held == kept && !BetterBeamCandidate(c, candidates.back())) continue;
      if (held == kept) candidates.pop_back();
      candidates.insert(std::upper_bound(candidates.begin() + static_cast<int64_t>(first_of_beam),
                                         candidates.end(), c, BetterBeamCandidate),
                        c);
      if (static_cast<int64_t>(candidates.size() - first_of_beam) == kept)
        worst_kept = candidates.back().token_log_probability;
    }
  }
  std::partial_sort(candidates.begin(), candidates.begin() + kept, candidates.end(),
                    BetterBeamCandidate);
  candidates.resize(static_cast<size_t>(kept));
}

}  // namespace moelab::executor
