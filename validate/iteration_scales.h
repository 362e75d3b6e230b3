#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "scheduler/scheduler.h"
#include "validate/served_engine_view.h"

namespace moelab::validate {

// What scales a simulated iteration (CalibrateEngine): a decode-only iteration by its batch's
// bucket (ServedEngineView::kDecodeBatchUpTo), one carrying a prefill chunk by its prefill
// tokens' bucket (ServedEngineView::kPrefillTokensUpTo), lone or beside decodes alike; a lone
// prefill gets the wake (EngineWake) of the idleness before it on top: lone prefills ran at
// 1.3-1.6 of their price where prefills beside decodes ran at 1.1-1.2, and those after under
// 0.1 s of idleness at 0.84-1.12 of the latter, so their excess was the wake, not their kind.
// with_prefill (all iterations with a prefill chunk beside decodes, or all of them) is the
// fallback of a bucket the calibration left with too few; lone_prefill keeps the measured ratio
// of lone prefills (reported, not priced).
struct IterationScales {
  double decode_only = 1, with_prefill = 1, lone_prefill = 1;
  std::array<double, 5> decode_by_batch{1, 1, 1, 1, 1};
  std::array<double, 2> prefill_by_tokens{1, 1};

  double Of(const scheduler::IterationPlan& plan) const {
    int64_t decodes = 0, prefill_tokens = 0;
    for (const scheduler::BatchEntry& entry : plan.batch) {
      if (entry.prefill) {
        prefill_tokens += entry.tokens;
      } else {
        ++decodes;
      }
    }
    if (prefill_tokens > 0)
      return prefill_by_tokens[ServedEngineView::PrefillTokensBucket(prefill_tokens)];
    return decode_by_batch[ServedEngineView::DecodeBatchBucket(decodes)];
  }
};

// A bucket with fewer iterations than this takes its nearest bucket's ratio (the smaller batch's
// on a tie), and the decode-only ratio when none has them; a prefill bucket keeps its own with
// kMinBucketEngineS of engine time.
inline constexpr int64_t kMinBucketIterations = 3;
// A prefill bucket's ratio is engine time over composed time, summed: what makes it noisy is how
// little engine time it averages, not how few iterations. (Decode buckets keep the count alone: a
// decode of a second would be a stall, not a measurement.) A calibration's burst leaves 2-3 prefill
// chunks over 256 tokens (1,000-2,047 tokens, 1.4-2.5 s each on a 2-vCPU VM): with the count
// alone, two of them gave way to the small chunks' ratio (1.15-1.3, chunks beside ~60 decodes),
// where the overload runs' large chunks ran at 1.0-1.1 of their price; as they hold about 30 % of
// an overload run's time, saturation was under-predicted in seven of ten records (2.8 % on
// average; results/validate-serving-avx512bf16-2026-12-07-overhead-pairs-second).
inline constexpr double kMinBucketEngineS = 1.0;

// The scales a served view gives: its engine seconds per composed second per kind (a kind it
// never ran taking the other's), per decode batch bucket and per prefill tokens bucket.
IterationScales ScalesOf(const ServedEngineView& view);

// Scale by scale, the median of several calibrations'.
IterationScales MedianScales(const std::vector<IterationScales>& runs);

}  // namespace moelab::validate
