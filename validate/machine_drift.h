#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "executor/executor_config.h"
#include "kernels/expert_ffn.h"
#include "kernels/packed_matrix.h"
#include "kernels/thread_pool.h"

namespace moelab::validate {

// How fast the machine runs now against while it was profiled. A shared machine's memory speed
// drifts by 10-20 % over minutes (other tenants of the host): on this project's 2-core VM, three
// `validate --quick` runs of one build, each profiling and then running its cases within five
// minutes, measured the same decode step 15 % slower and 20 % faster than their profiles
// predicted, while the per-operator model was within 2-3 % in runs whose machine held steady. The
// anchor re-times one operator of a bf16 profile (expert_ffn at one token), the same way, before
// and after the profile and before and after every round, so the runs' predictions can be put at
// the machine's speed while they ran.
//
// The anchor: the target's expert FFN shape at one token (kernels/expert_ffn.h, the executor's
// call) over enough packed bf16 copies that they come from DRAM (profiler/profile_grid.h
// CyclingBlocks of EffectiveCacheBytes): memory-bound, as decode, the cases the drift moves most.
// It is bf16 whatever formats validate runs (--expert-bits): a probe of the machine's memory
// speed, not an operator of a quantized profile, so it does not see compute-bound drift.
class SpeedAnchor {
 public:
  SpeedAnchor(const executor::ExecutorConfig& target, kernels::ThreadPool& pool);

  // Seconds of one pass over every copy: the median of `passes` passes. 25 passes (about 0.5 s
  // on the default expert): with 7 (0.14 s) the anchor's own scatter between rounds was 15 %
  // (17.0..20.0 ms), as large as the drift it corrects, and its 1.12 factor made one run's
  // median error 9.9 % where the unadjusted predictions had 4.5 %.
  double MeasureSeconds(int passes = kPasses);
  static constexpr int kPasses = 25;
  std::string Describe() const;

  // The compute anchor beside it: the same expert FFN at kComputeTokens tokens (compute-bound on
  // every path here: its weights take a tenth of the call's time even from DRAM), one copy per
  // pass in turn, the median of `passes` passes. The memory anchor does not see a slowdown of the
  // cores themselves (another tenant's thread on the host core, a lower clock): in one quick run
  // every decode case ran 8-26 % slower than predicted while the memory anchor read 0.96.
  double MeasureComputeSeconds(int passes = kComputePasses);
  static constexpr int kComputePasses = 9;
  static constexpr int64_t kComputeTokens = 64;
  std::string DescribeCompute() const;

 private:
  kernels::ThreadPool& pool_;
  int64_t hidden_ = 0;
  int64_t width_ = 0;
  std::vector<kernels::PackedBf16Matrix> gate_up_, down_;
  std::vector<float> x_, out_;
  kernels::ExpertFfnScratch scratch_;
};

// The anchor's times around the profile and during the rounds, and the factor the predictions of
// times are multiplied by: median(round times) / mean(profile times), applied only when every
// round's time lies on the same side of the profile's mean (a shift, not scatter around it) and
// the factor lies outside the anchor's own scatter across the rounds ((max - min) / median of the
// round times): a drift inside it cannot be told from the anchor's noise. The anchor is a moment's
// probe (0.5 s) and the noise on a shared host is faster than a round: 12 alternating pairs of
// the anchor's kernel (1-token expert FFN, `moelab_kernels_bench`) and a batch-2 decode
// (`moelab run`) on the Xeon spread 55 % and 44 % with a correlation of -0.05; in one quick run
// rounds 2-3 read the anchor 20 % slow (the first one not) while the cases ran at the profile's
// speed, and applying it took the headline median from 4.9 % to 11.9 %. On this project's Xeon the
// anchor's round times spread 8-26 % even at 25 passes, and in five of six quick runs a factor
// within that spread (0.90-1.12) moved the headline median error the wrong way (2.8 % as
// priced, 6.2 % adjusted); the one run whose profile ran through a burst (factor 0.535, spread 42
// %) it helped (52 % -> 30 %). 1 when the profile was reused (no anchor at its time).
struct MachineDrift {
  std::string anchor;
  std::vector<double> profile_s;  // before and after the profile
  std::vector<double> rounds_s;   // before every round and after the last
  double factor = 1.0;            // as measured
  double scatter = 0;             // (max - min) / median of rounds_s
  bool measured = false;
  bool one_sided = false;  // every round's time above, or every one below, the profile's mean
  bool applied = false;    // one_sided and |factor - 1| > scatter
  double applied_factor() const { return applied ? factor : 1.0; }

  // The compute anchor's times, factor and scatter, the same way. Reported, not applied: which
  // share of each prediction is compute-bound is not known per case yet.
  std::string compute_anchor;
  std::vector<double> compute_profile_s, compute_rounds_s;
  double compute_factor = 1.0;
  double compute_scatter = 0;
  bool compute_measured = false;

  void Compute();  // factor from profile_s and rounds_s; Error when a time is not positive
  nlohmann::json ToJson() const;
};

}  // namespace moelab::validate
