#include "validate/iteration_scales.h"

#include "base/stats.h"

namespace moelab::validate {
namespace {

// A decode bucket measured well enough to take its own ratio.
bool DecodeEnough(int64_t iterations) { return iterations >= kMinBucketIterations; }

// The same for a prefill bucket, whose few large chunks can hold seconds (kMinBucketEngineS).
bool PrefillEnough(int64_t iterations, double engine_s, double ratio) {
  return ratio > 0 &&
         (iterations >= kMinBucketIterations || (iterations > 0 && engine_s >= kMinBucketEngineS));
}

}  // namespace

IterationScales ScalesOf(const ServedEngineView& view) {
  IterationScales scales;
  scales.decode_only =
      view.decode_only_iterations > 0 ? view.decode_only_scale : view.with_prefill_scale;
  // Iterations with a prefill chunk, per kind: lone prefills take their own scale when the view
  // has at least kMinBucketIterations of them, prefills beside decodes likewise; a kind with
  // fewer takes all prefill iterations' together (so lone ones can weigh on it).
  const double any_prefill =
      view.decode_only_iterations < view.iterations ? view.with_prefill_scale : scales.decode_only;
  const int64_t mixed_iterations =
      view.iterations - view.decode_only_iterations - view.lone_prefill_iterations;
  scales.with_prefill =
      mixed_iterations >= kMinBucketIterations ? view.mixed_prefill_scale : any_prefill;
  scales.lone_prefill =
      view.lone_prefill_iterations >= kMinBucketIterations ? view.lone_prefill_scale : any_prefill;
  // By prefill tokens: a bucket with too little (PrefillEnough) takes the other's when that has
  // enough, else with_prefill.
  const auto prefill_enough = [&](size_t b) {
    return PrefillEnough(view.prefill_iterations_by_tokens[b], view.prefill_engine_s_by_tokens[b],
                         view.prefill_scale_by_tokens[b]);
  };
  for (size_t b = 0; b < scales.prefill_by_tokens.size(); ++b) {
    const size_t other = 1 - b;
    scales.prefill_by_tokens[b] = prefill_enough(b)       ? view.prefill_scale_by_tokens[b]
                                  : prefill_enough(other) ? view.prefill_scale_by_tokens[other]
                                                          : scales.with_prefill;
  }
  const auto decode_enough = [&](size_t b) {
    return DecodeEnough(view.decode_iterations_by_batch[b]);
  };
  const size_t buckets = scales.decode_by_batch.size();
  for (size_t b = 0; b < buckets; ++b) {
    scales.decode_by_batch[b] = scales.decode_only;
    for (size_t distance = 0; distance < buckets; ++distance) {
      const size_t below = b >= distance ? b - distance : buckets;
      const size_t above = b + distance;
      if (below < buckets && decode_enough(below)) {
        scales.decode_by_batch[b] = view.decode_scale_by_batch[below];
        break;
      }
      if (above < buckets && decode_enough(above)) {
        scales.decode_by_batch[b] = view.decode_scale_by_batch[above];
        break;
      }
    }
  }
  return scales;
}

IterationScales MedianScales(const std::vector<IterationScales>& runs) {
  const auto median = [&](auto field) {
    std::vector<double> values;
    for (const IterationScales& run : runs) values.push_back(field(run));
    return base::Median(values);
  };
  IterationScales scales;
  scales.decode_only = median([](const IterationScales& s) { return s.decode_only; });
  scales.with_prefill = median([](const IterationScales& s) { return s.with_prefill; });
  scales.lone_prefill = median([](const IterationScales& s) { return s.lone_prefill; });
  for (size_t b = 0; b < scales.decode_by_batch.size(); ++b)
    scales.decode_by_batch[b] =
        median([b](const IterationScales& s) { return s.decode_by_batch[b]; });
  for (size_t b = 0; b < scales.prefill_by_tokens.size(); ++b)
    scales.prefill_by_tokens[b] =
        median([b](const IterationScales& s) { return s.prefill_by_tokens[b]; });
  return scales;
}

}  // namespace moelab::validate
