// fmoe: fine-grained expert offloading (formulas.md section 4).
//  - Expert-map store: one map per past pass (iteration): the gate probabilities [layer][expert]
//    plus the semantic embedding of its request(s). It starts with the calibration history of the
//    setup (taken as given) and grows online: every pass is stored at its end unless a stored map
//    is redundant with it (RDY = (d/L) score_sem + ((L-d)/L) score_map >= 0.995); at most 1024
//    maps, the oldest replaced first (the paper keeps up to ~50K; our runs are short).
//  - Search: at the start of a pass, semantic search (cosine of the embeddings) picks the map
//    that prefetches layers 0..d-1; after layer l is routed, trajectory search (cosine of the
//    maps over layers 0..l, kept incrementally) picks the map that prefetches layer l+d. Ties go
//    to the most recent map.
//  - Prefetch set: delta = clip(1 - score, 0, 1); the matched map's experts of the target layer
//    in decreasing probability until their probabilities sum to >= delta, at least K, at most E.
//    Copies are queued with priority p / (l - l_now) into the expert cache.
//  - Eviction: the cached expert with the highest 1 / (p * freq) goes first, i.e. the lowest
//    p * freq, with p the matched map's probability (+1e-3 so never-predicted experts still rank
//    by freq) and freq the tokens routed to the expert so far (+1). Experts the current layer
//    uses and experts prefetched for later layers of this pass are protected (a demand miss
//    takes one anyway when nothing else is left; a prefetch then stops). No LRU: it fights the
//    layer order.
//  - The cache (all accelerator memory left after the non-expert weights) starts with the most
//    popular experts by calibration counts; prefetched experts go straight into it (no staging).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <immintrin.h>

#include "policies/impl/common.h"
#include "policies/impl/factories.h"
#include "policies/impl/fmoe_eviction_walk.h"
#include "policies/impl/fmoe_lowest_few.h"
#include "policies/impl/fmoe_prefetch_order.h"
#include "policies/impl/fmoe_row_classes.h"

namespace moelab::policies::impl {
namespace {

constexpr PolicyOptionSpec kPrefetchDistanceOption{
    "prefetch-distance",
    3,
    "",
    1,
    OptionMaximum::kNone,
    "MoE layers ahead to prefetch (below the MoE layers; the default is 1 less than the MoE "
    "layers on a model with 3 or fewer)"};
constexpr size_t kStoreCapacity = 1024;
constexpr double kRedundant = 0.995;
constexpr double kProbabilityFloor = 1e-3;
// The trajectory search's layout: stored maps in blocks of kLanes, each layer's rows of a block
// expert-major, so one vector operation multiplies one expert's probability in kLanes maps. Each
// map's dot product still adds its experts' products in expert order, in float, as a scalar loop
// would: the same bits, kLanes maps at a time (multiplies and adds stay separate: this file is
// compiled with -ffp-contract=off, so no path fuses them). 16 lanes are one AVX-512 vector, or
// four SSE2 vectors on other CPUs.
constexpr size_t kLanes = 16;
typedef float FloatLanes __attribute__((vector_size(kLanes * sizeof(float))));
// Half a block's sums in double: one AVX-512 vector (GCC handles 8-double vectors well, not 16).
typedef double DoubleHalf __attribute__((vector_size(kLanes / 2 * sizeof(double))));
typedef int64_t IndexHalf __attribute__((vector_size(kLanes / 2 * sizeof(int64_t))));
// The redundancy check skips the exact cosine of a map whose estimate (the same quotient from
// precomputed reciprocal norms, a few ulps off) is this far below the threshold.
constexpr double kEstimateMargin = 1e-9;
// The most distinct rows at a layer for which the search takes the dot products per distinct
// row, picked for each map by register permutes, rather than per map: 32, two AVX-512 registers
// (batch 1 on Mixtral: 28 routings of a token and the prompt's row); all FmoeRowClasses keeps.
constexpr size_t kLookupClasses = 32;
static_assert(FmoeRowClasses::kCapacity == kLookupClasses);

double Cosine(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.empty() || a.size() != b.size()) return 0;
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += static_cast<double>(a[i]) * b[i];
    na += static_cast<double>(a[i]) * a[i];
    nb += static_cast<double>(b[i]) * b[i];
  }
  return na > 0 && nb > 0 ? dot / std::sqrt(na * nb) : 0;
}

// The option as given (refused past the MoE layers below), else 3 or, on a shallower model, one
// less than its MoE layers: a 2-layer model failed on a --prefetch-distance the user never gave.
int64_t PrefetchDistance(const PolicyOptions& options, const OffloadSetup& setup) {
  const int64_t distance = *kPrefetchDistanceOption.Resolve(options, setup);
  if (kPrefetchDistanceOption.Given(options)) return distance;
  return std::max<int64_t>(1, std::min(distance, setup.num_moe_layers - 1));
}

class FmoePolicy : public OffloadPolicy {
 public:
  FmoePolicy(const PolicyOptions& options, const OffloadSetup& setup)
      : setup_(setup),
        layers_(setup.num_moe_layers),
        experts_(setup.num_experts),
        distance_(PrefetchDistance(options, setup)),
        cached_(static_cast<size_t>(layers_ * experts_), 0),
        cached_bits_(static_cast<size_t>((layers_ * experts_ + 63) / 64), 0),
        // Every expert counts as stamped until the first pass (as a stamp and pass_ both at -1).
        stamped_bits_(cached_bits_.size(), ~uint64_t{0}),
        freq_(static_cast<size_t>(layers_ * experts_), 1.0),
        current_(static_cast<size_t>(layers_ * experts_), 0.0f) {
    if (distance_ >= layers_ && layers_ > 1) {
      throw base::Error("--prefetch-distance " + std::to_string(distance_) + " must be below the " +
                        std::to_string(layers_) + " MoE layers");
    }
    slots_ = std::min(setup.ExpertSlots(setup.num_layers, 0), layers_ * experts_);
    if (slots_ < 1) {
      throw base::Error("policy 'fmoe': accelerator memory (" +
                        report::FormatGigabytes(setup.accelerator_bytes, 2) +
                        ") leaves no room for a single expert of " +
                        report::FormatGigabytes(static_cast<double>(setup.expert_bytes), 2) +
                        " after the non-expert weights and KV cache; raise --accelerator-memory");
    }
    for (const OffloadSetup::ExpertMap& map : setup.history) {
      if (store_.size() >= kStoreCapacity) break;
      Store(map.semantic, map.probabilities, /*deduplicate=*/false);
    }
  }

  std::string Name() const override { return "fmoe"; }
  PolicyNeeds Needs() const override { return {true, false}; }
  std::vector<std::pair<std::string, double>> ResolvedOptions() const override {
    return {{"prefetch_distance", static_cast<double>(distance_)}};
  }
  int64_t ExpertSlots() const override { return slots_; }

  std::vector<ExpertRef> InitialPlacement() override {
    std::vector<ExpertRef> placed;
    for (const model::ExpertId& id : model::PlaceByPopularity(PopularityOrFlat(setup_), slots_)) {
      Cache(FlatIndex(setup_, id.layer, id.expert));
      placed.push_back({static_cast<int32_t>(id.layer), static_cast<int32_t>(id.expert)});
    }
    return placed;
  }

  void BeginIteration(const IterationInfo& info, LayerPlan& plan) override {
    ++pass_;
    std::fill(stamped_bits_.begin(), stamped_bits_.end(), 0);  // nothing stamped in this pass yet
    current_layer_ = 0;
    semantic_ = info.semantic;
    std::fill(current_.begin(), current_.end(), 0.0f);
    current_norm2_ = 0;
    dots_.assign(store_.size(), 0.0);
    // Stored maps share few distinct embeddings (a request's passes all carry its own): one
    // cosine per distinct embedding, kept for EndIteration's redundancy check (neither the
    // pass's embedding nor the store changes before then).
    for (size_t c = 0; c < semantics_.size(); ++c) {
      semantic_scores_[c] = semantics_[c].maps > 0 ? Cosine(semantic_, semantics_[c].values) : 0;
    }
    matched_ = -1;
    double best = -2;
    for (size_t y = 0; y < store_.size(); ++y) {
      const double score = semantic_scores_[store_[y].semantic_class];
      if (score >= best) {
        best = score;
        matched_ = static_cast<int64_t>(y);
      }
    }
    ++stats_.searches;
    for (int64_t target = 0; target < std::min(distance_, layers_); ++target) {
      PrefetchLayer(target, -1, matched_ < 0 ? 0.0 : best, plan);
    }
  }

  void PlanLayer(const LayerDemand& demand, LayerPlan& plan) override {
    const int64_t layer = demand.layer;
    current_layer_ = layer;
    // This pass's map row for the layer: the gate's probabilities, or the routed token shares.
    float* row = &current_[static_cast<size_t>(layer * experts_)];
    if (static_cast<int64_t>(demand.gate_probabilities.size()) == experts_) {
      std::copy(demand.gate_probabilities.begin(), demand.gate_probabilities.end(), row);
    } else {
      const double routed = static_cast<double>(demand.tokens * setup_.top_k);
      for (const ExpertDemand& d : demand.experts) {
        row[d.expert] = static_cast<float>(static_cast<double>(d.tokens) / routed);
      }
    }
    for (int64_t e = 0; e < experts_; ++e) current_norm2_ += static_cast<double>(row[e]) * row[e];
    // Trajectory search over layers 0..layer when a layer + d is left to prefetch: scored while
    // the dot products are summed.
    const int64_t target = layer + distance_;
    scoring_ = target < layers_ && !dots_.empty()
                   ? inverse_norms_[static_cast<size_t>(layer)].data()
                   : nullptr;
    if (scoring_) {
      std::fill(highest_, highest_ + kLanes, -2.0);
      std::fill(highest_at_, highest_at_ + kLanes, -1);
    }
    AccumulateDots(layer, row);

    for (const ExpertDemand& d : demand.experts) {
      const int64_t flat = FlatIndex(setup_, layer, d.expert);
      freq_[static_cast<size_t>(flat)] += static_cast<double>(d.tokens);
      Stamp(flat);  // in use: not evicted by this layer's misses
    }
    hit_.assign(demand.experts.size(), 0);
    FmoeLowestFew lowest_few;
    for (size_t i = 0; i < demand.experts.size(); ++i) {
      hit_[i] = cached_[static_cast<size_t>(FlatIndex(setup_, layer, demand.experts[i].expert))];
    }
    for (size_t i = 0; i < demand.experts.size(); ++i) {
      const ExpertDemand& d = demand.experts[i];
      const int64_t flat = FlatIndex(setup_, layer, d.expert);
      ExpertDecision& decision = AddDecision(plan, d.expert, ExpertAction::kResident);
      if (!hit_[i]) {
        decision.action = ExpertAction::kFetch;
        decision.target = FetchTarget::kCache;
        if (cached_count_ >= slots_) {
          int64_t victim = Victim(lowest_few);
          if (victim < 0) victim = Victim(/*allow_protected=*/true);
          Evict(victim);
          decision.evict = RefOf(setup_, victim);
        }
        Cache(flat);
      }
    }

    // Then prefetch layer + d from the best match.
    if (target >= layers_) return;
    double best = -2;
    matched_ = BestTrajectory(best);
    if (matched_ >= 0) best = current_norm2_ > 0 ? best / std::sqrt(current_norm2_) : 0;
    ++stats_.searches;
    PrefetchLayer(target, layer, matched_ < 0 ? 0.0 : best, plan);
  }

  void EndIteration() override {
    // Redundancy against every stored map: the trajectory cosine over all layers is the dot
    // product accumulated during the pass (maps stored before it began), so no second pass over
    // the store's probabilities is needed.
    const double d = static_cast<double>(distance_), l = static_cast<double>(layers_);
    const double inverse_current = current_norm2_ > 0 ? 1.0 / std::sqrt(current_norm2_) : 0;
    const double* inverse_norm =
        inverse_norms_.empty() ? nullptr : inverse_norms_[static_cast<size_t>(layers_ - 1)].data();
    for (size_t y = 0; y < dots_.size(); ++y) {
      const double semantic_score = semantic_scores_[store_[y].semantic_class];
      const double estimate =
          d / l * semantic_score + (l - d) / l * (dots_[y] * inverse_norm[y] * inverse_current);
      if (estimate < kRedundant - kEstimateMargin) continue;  // far from redundant
      const double norm2 = store_[y].prefix_norm2.back();
      const double map_score =
          norm2 > 0 && current_norm2_ > 0 ? dots_[y] / std::sqrt(norm2 * current_norm2_) : 0;
      if (d / l * semantic_score + (l - d) / l * map_score >= kRedundant) return;
    }
    Store(semantic_, current_, /*deduplicate=*/false);
  }

  PolicyStats Stats() const override {
    PolicyStats stats = stats_;
    stats.map_store_size = static_cast<int64_t>(store_.size());
    return stats;
  }

 private:
  struct StoredMap {
    std::vector<float> semantic;
    std::vector<float> probabilities;  // [layer][expert]
    std::vector<double> prefix_norm2;  // [layer]: squared norm of rows 0..layer
    size_t semantic_class = 0;         // its embedding in semantics_
    bool finite = true;                // every probability finite (Victim's ordered values)
  };
  // A distinct semantic embedding of the store and how many stored maps carry it.
  struct SemanticClass {
    std::vector<float> values;
    int64_t maps = 0;
  };

  // dots_[y] += (this pass's row at `layer`) . (map y's row), for every stored map; with
  // scoring_, their trajectory scores too, while the sums are at hand. On AVX-512 CPUs the same
  // code is compiled for 16-lane vectors, four blocks at a time (independent chains the processor
  // overlaps); on AVX2 for 8-lane vectors, two blocks at a time; elsewhere one block, which SSE2
  // already splits into four chains. Same bits every way.
  //   When the layer's stored rows take few distinct values (FmoeRowClasses: at batch 1 the
  // routings of one token), the row's dot product with each distinct row is taken once, in the
  // same float sum, and each map's looked up by its class: `by_class` holds the maps' classes.
  void AccumulateDots(int64_t layer, const float* row) {
    static const bool avx512 = __builtin_cpu_supports("avx512f");
    static const bool avx2 = __builtin_cpu_supports("avx2");
    if (avx512) {
      AccumulateDotsAvx512(layer, row, ClassDots(layer, row));
    } else if (avx2) {
      AccumulateDotsAvx2(layer, row, ClassDots(layer, row));
    } else if (experts_ == 8) {
      // Eight experts (Mixtral's E) get an unrolled loop with the row's lanes kept in registers.
      AccumulateDots<8, 1>(layer, row);
    } else {
      AccumulateDots<0, 1>(layer, row);
    }
  }
  // class_dots_[c] = row . (class c's row) for every class of the layer's rows (kLookupClasses
  // entries), and the maps' classes; null (each map's dot product taken from its row) unless
  // every map has a class.
  const int32_t* ClassDots(int64_t layer, const float* row) {
    if (dots_.empty()) return nullptr;
    const FmoeRowClasses& classes = row_classes_[static_cast<size_t>(layer)];
    if (!classes.Complete()) return nullptr;
    // The same sums as the search's over stored maps, kLanes classes at a time.
    const size_t experts = static_cast<size_t>(experts_);
    const size_t blocks = (static_cast<size_t>(classes.Count()) + kLanes - 1) / kLanes;
    class_dots_.assign(kLookupClasses, 0.0f);
    const float* stored = classes.BlockedRows();
    for (size_t b = 0; b < blocks; ++b, stored += kLanes * experts) {
      FloatLanes dot = {};
      for (size_t e = 0; e < experts; ++e) {
        FloatLanes column;
        std::memcpy(&column, stored + e * kLanes, sizeof(column));
        dot += row[e] * column;
      }
      std::memcpy(&class_dots_[b * kLanes], &dot, sizeof(dot));
    }
    return classes.Ids();
  }
  __attribute__((target("avx512f"))) void AccumulateDotsAvx512(int64_t layer, const float* row,
                                                               const int32_t* by_class) {
    if (by_class) {
      AccumulateByClassAvx512(layer, row, by_class);
    } else if (experts_ == 8) {
      AccumulateDots<8, 4>(layer, row);
    } else {
      AccumulateDots<0, 4>(layer, row);
    }
  }
  // By class on AVX-512: a block's 16 dot products picked from the 32 classes' in two registers
  // by one permute (a gather, or the generic code's lane inserts, cost more than the products).
  __attribute__((target("avx512f"))) void AccumulateByClassAvx512(int64_t layer, const float* row,
                                                                  const int32_t* by_class) {
    const size_t maps = dots_.size();
    const size_t experts = static_cast<size_t>(experts_);
    const LaneOutputs outputs{dots_.data(), scoring_};
    LaneMaxima highest;
    std::memcpy(highest.score, highest_, sizeof(highest.score));
    std::memcpy(highest.at, highest_at_, sizeof(highest.at));
    const __m512 low = _mm512_loadu_ps(class_dots_.data());
    const __m512 high = _mm512_loadu_ps(class_dots_.data() + kLanes);
    size_t y = 0;
    for (; y + kLanes <= maps; y += kLanes) {
      const __m512 picked = _mm512_permutex2var_ps(low, _mm512_loadu_si512(by_class + y), high);
      FloatLanes dot;
      std::memcpy(&dot, &picked, sizeof(dot));
      AddLanes(dot, y, outputs, highest);
    }
    std::memcpy(highest_, highest.score, sizeof(highest.score));
    std::memcpy(highest_at_, highest.at, sizeof(highest.at));
    AccumulateTail(y, rows_[static_cast<size_t>(layer)].data() + y * experts, row, experts);
  }
  // AVX2, written with intrinsics (GCC spills the 16-lane generic vectors to the stack under
  // this target): a block's 16 maps are two 8-float vectors, their sums four 4-double vectors,
  // with the same operations in the same order per map as the generic code (multiply, then add:
  // no FMA), so the same bits. The last, partial block goes through the generic tail.
  __attribute__((target("avx2"))) void AccumulateDotsAvx2(int64_t layer, const float* row,
                                                          const int32_t* by_class) {
    if (by_class) {
      AccumulateDotsAvx2<true>(layer, row, by_class);
    } else {
      AccumulateDotsAvx2<false>(layer, row, nullptr);
    }
  }
  template <bool kByClass>
  __attribute__((target("avx2"), always_inline)) void AccumulateDotsAvx2(int64_t layer,
                                                                         const float* row,
                                                                         const int32_t* by_class) {
    const size_t maps = dots_.size();
    if (maps == 0) return;
    const size_t experts = static_cast<size_t>(experts_);
    const size_t block = kLanes * experts;
    const float* stored = rows_[static_cast<size_t>(layer)].data();
    double* dots = dots_.data();
    const double* scoring = scoring_;
    __m256d highest[4], highest_at[4];  // per lane, as highest_ / highest_at_ (indices as doubles)
    for (size_t q = 0; q < 4; ++q) {
      highest[q] = _mm256_loadu_pd(highest_ + 4 * q);
      highest_at[q] = _mm256_setr_pd(
          static_cast<double>(highest_at_[4 * q]), static_cast<double>(highest_at_[4 * q + 1]),
          static_cast<double>(highest_at_[4 * q + 2]), static_cast<double>(highest_at_[4 * q + 3]));
    }
    const __m256d lane_offsets[4] = {_mm256_setr_pd(0, 1, 2, 3), _mm256_setr_pd(4, 5, 6, 7),
                                     _mm256_setr_pd(8, 9, 10, 11), _mm256_setr_pd(12, 13, 14, 15)};
    size_t y = 0;
    // By class: the 32 classes' dot products in four registers; 8 maps' picked by a permute of
    // each and blends on bits 3 and 4 of their classes (cheaper than a gather).
    __m256 table[4] = {};
    if constexpr (kByClass) {
      for (size_t t = 0; t < 4; ++t) table[t] = _mm256_loadu_ps(class_dots_.data() + 8 * t);
    }
    const auto pick = [&table](const int32_t* ids) __attribute__((target("avx2"), always_inline)) {
      const __m256i id = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ids));
      const __m256 bit3 = _mm256_castsi256_ps(_mm256_slli_epi32(id, 28));
      const __m256 bit4 = _mm256_castsi256_ps(_mm256_slli_epi32(id, 27));
      const __m256 below16 = _mm256_blendv_ps(_mm256_permutevar8x32_ps(table[0], id),
                                              _mm256_permutevar8x32_ps(table[1], id), bit3);
      const __m256 from16 = _mm256_blendv_ps(_mm256_permutevar8x32_ps(table[2], id),
                                             _mm256_permutevar8x32_ps(table[3], id), bit3);
      return _mm256_blendv_ps(below16, from16, bit4);
    };
    for (; y + kLanes <= maps; y += kLanes, stored += block) {
      __m256 dot_low = _mm256_setzero_ps(), dot_high = _mm256_setzero_ps();
      if constexpr (kByClass) {
        dot_low = pick(by_class + y);
        dot_high = pick(by_class + y + 8);
      }
      for (size_t e = 0; !kByClass && e < experts; ++e) {
        const __m256 weight = _mm256_set1_ps(row[e]);
        dot_low =
            _mm256_add_ps(dot_low, _mm256_mul_ps(weight, _mm256_loadu_ps(stored + e * kLanes)));
        dot_high = _mm256_add_ps(dot_high,
                                 _mm256_mul_ps(weight, _mm256_loadu_ps(stored + e * kLanes + 8)));
      }
      const __m256d dot[4] = {_mm256_cvtps_pd(_mm256_castps256_ps128(dot_low)),
                              _mm256_cvtps_pd(_mm256_extractf128_ps(dot_low, 1)),
                              _mm256_cvtps_pd(_mm256_castps256_ps128(dot_high)),
                              _mm256_cvtps_pd(_mm256_extractf128_ps(dot_high, 1))};
      const __m256d first = _mm256_set1_pd(static_cast<double>(y));
      for (size_t q = 0; q < 4; ++q) {
        const __m256d sum = _mm256_add_pd(_mm256_loadu_pd(dots + y + 4 * q), dot[q]);
        _mm256_storeu_pd(dots + y + 4 * q, sum);
        if (!scoring) continue;
        const __m256d score = _mm256_mul_pd(sum, _mm256_loadu_pd(scoring + y + 4 * q));
        const __m256d reached = _mm256_cmp_pd(score, highest[q], _CMP_GE_OQ);
        highest[q] = _mm256_blendv_pd(highest[q], score, reached);
        highest_at[q] =
            _mm256_blendv_pd(highest_at[q], _mm256_add_pd(first, lane_offsets[q]), reached);
      }
    }
    for (size_t q = 0; q < 4; ++q) {
      _mm256_storeu_pd(highest_ + 4 * q, highest[q]);
      double at[4];
      _mm256_storeu_pd(at, highest_at[q]);
      for (size_t i = 0; i < 4; ++i) highest_at_[4 * q + i] = static_cast<int64_t>(at[i]);
    }
    AccumulateTail(y, stored, row, experts);
  }
  // The maps of the last, partial block (from map y, at `stored`), one at a time, scored in lane 0.
  void AccumulateTail(size_t y, const float* stored, const float* row, size_t experts) {
    double* dots = dots_.data();
    for (size_t lane = 0; y < dots_.size(); ++y, ++lane) {
      float dot = 0;
      for (size_t e = 0; e < experts; ++e) dot += row[e] * stored[e * kLanes + lane];
      dots[y] += dot;
      if (scoring_) {
        const double score = dots[y] * scoring_[y];
        if (score >= highest_[0]) {
          highest_[0] = score;
          highest_at_[0] = static_cast<int64_t>(y);
        }
      }
    }
  }
  // Always inlined, so each caller's instruction set compiles it.
  template <size_t kExperts, size_t kGroup>  // kExperts 0: experts_
  __attribute__((always_inline)) void AccumulateDots(int64_t layer, const float* row) {
    const size_t maps = dots_.size();
    if (maps == 0) return;
    const size_t experts = kExperts > 0 ? kExperts : static_cast<size_t>(experts_);
    const size_t block = kLanes * experts;
    const float* stored = rows_[static_cast<size_t>(layer)].data();
    double* dots = dots_.data();
    // Locals, not members: stores through them would otherwise force reloads of every member.
    const LaneOutputs outputs{dots, scoring_};
    LaneMaxima highest;
    std::memcpy(highest.score, highest_, sizeof(highest.score));
    std::memcpy(highest.at, highest_at_, sizeof(highest.at));
    size_t y = 0;
    for (; y + kGroup * kLanes <= maps; y += kGroup * kLanes, stored += kGroup * block) {
      FloatLanes dot[kGroup] = {};
      for (size_t e = 0; e < experts; ++e) {
        for (size_t g = 0; g < kGroup; ++g) {
          FloatLanes column;
          std::memcpy(&column, stored + g * block + e * kLanes, sizeof(column));
          dot[g] += row[e] * column;
        }
      }
      for (size_t g = 0; g < kGroup; ++g) AddLanes(dot[g], y + g * kLanes, outputs, highest);
    }
    for (; y + kLanes <= maps; y += kLanes, stored += block) {
      FloatLanes dot = {};
      for (size_t e = 0; e < experts; ++e) {
        FloatLanes column;
        std::memcpy(&column, stored + e * kLanes, sizeof(column));
        dot += row[e] * column;
      }
      AddLanes(dot, y, outputs, highest);
    }
    std::memcpy(highest_, highest.score, sizeof(highest.score));
    std::memcpy(highest_at_, highest.at, sizeof(highest.at));
    AccumulateTail(y, stored, row, experts);
  }

  struct LaneOutputs {
    double* dots;
    const double* scoring;  // inverse norms; null: not scoring this layer
  };
  // Per lane: the highest score so far and the latest map reaching it (ties go to the later map).
  struct LaneMaxima {
    DoubleHalf score[2];
    IndexHalf at[2];
  };
  // dots[y + i] += dot[i] for the kLanes maps of a block (float to double, then the double sum);
  // when scoring, the running maxima of their scores per lane (no score is kept: BestTrajectory
  // recomputes the winner's).
  __attribute__((always_inline)) static void AddLanes(FloatLanes dot, size_t y,
                                                      const LaneOutputs& out, LaneMaxima& highest) {
    const DoubleHalf half[2] = {
        __builtin_convertvector(__builtin_shufflevector(dot, dot, 0, 1, 2, 3, 4, 5, 6, 7),
                                DoubleHalf),
        __builtin_convertvector(__builtin_shufflevector(dot, dot, 8, 9, 10, 11, 12, 13, 14, 15),
                                DoubleHalf)};
    for (size_t h = 0; h < 2; ++h) {
      const size_t at = y + h * kLanes / 2;
      DoubleHalf sum;
      std::memcpy(&sum, out.dots + at, sizeof(sum));
      sum += half[h];
      std::memcpy(out.dots + at, &sum, sizeof(sum));
      if (!out.scoring) continue;
      DoubleHalf inverse;
      std::memcpy(&inverse, out.scoring + at, sizeof(inverse));
      const DoubleHalf score = sum * inverse;
      const IndexHalf reached = score >= highest.score[h];
      const int64_t first = static_cast<int64_t>(at);
      const IndexHalf index = IndexHalf{0, 1, 2, 3, 4, 5, 6, 7} + first;
      highest.score[h] = reached ? score : highest.score[h];
      highest.at[h] = reached ? index : highest.at[h];
    }
  }

  // The stored map with the highest trajectory score dots_[y] / |map y's rows 0..layer| (cosine
  // x |current|: the same argmax), the latest index among equals, and its score in `best`; -1
  // for an empty store. AccumulateDots kept each lane's maximum and the latest map reaching it
  // (max is exact in any order): the answer is the latest of the lanes reaching the top.
  int64_t BestTrajectory(double& best) {
    if (dots_.empty()) return -1;
    const double top = *std::max_element(highest_, highest_ + kLanes);
    int64_t latest = -1;
    for (size_t lane = 0; lane < kLanes; ++lane) {
      if (highest_[lane] == top) latest = std::max(latest, highest_at_[lane]);
    }
    // The score AccumulateDots compared, computed again (the same product of the same numbers).
    best = dots_[static_cast<size_t>(latest)] * scoring_[static_cast<size_t>(latest)];
    return latest;
  }

  // The cached expert with the lowest p * freq (the highest eviction priority), or -1; p = the
  // matched map's probability + kProbabilityFloor (the floor alone without a match). Walks the
  // cached experts only, in index order (a bit set of the cache), as a scan of all would.
  // Protected: in use by the current layer, or prefetched for a later layer of this pass.
  int64_t Victim(bool allow_protected) const {
    int64_t victim = -1;
    double lowest = 0;
    ForEachEvictable(allow_protected, [&](int64_t flat, double value) {
      // The first as is (whatever its value), then only a strictly lower one.
      if (victim < 0 || value < lowest) {
        victim = flat;
        lowest = value;
      }
    });
    return victim;
  }
  // Victim(false) within one planning step (a layer's demand misses, or one PrefetchLayer), in
  // which the values are fixed and candidates are only removed (evicted, or stamped and so
  // protected; a newly cached expert is stamped first): `few` keeps the step's lowest candidates
  // (FmoeLowestFew), so the cache is walked again only when they are all gone. Ordered values
  // need a finite matched map; otherwise every call walks.
  int64_t Victim(FmoeLowestFew& few) const {
    if (matched_ >= 0 && !store_[static_cast<size_t>(matched_)].finite) return Victim(false);
    const int64_t current_layer_start = current_layer_ * experts_;
    const auto evictable = [&](int64_t flat) {
      const size_t word = static_cast<size_t>(flat) / 64;
      const uint64_t bit = uint64_t{1} << (flat % 64);
      return (cached_bits_[word] & bit) != 0 &&
             !((stamped_bits_[word] & bit) != 0 && flat >= current_layer_start);
    };
    if (const int64_t kept = few.First(evictable); kept >= 0) return kept;
    candidate_words_.resize(cached_bits_.size());
    for (size_t word = 0; word < cached_bits_.size(); ++word)
      candidate_words_[word] = cached_bits_[word] & ~ProtectedBits(word);
    const float* p =
        matched_ < 0 ? nullptr : store_[static_cast<size_t>(matched_)].probabilities.data();
    OfferLowestEvictable(candidate_words_.data(), candidate_words_.size(),
                         {p, kProbabilityFloor, freq_.data()}, few);
    return few.empty() ? -1 : few.First([](int64_t) { return true; });
  }
  // visit(flat, value) for each cached expert, in index order, that may be evicted: not
  // protected unless allow_protected (Victim(bool) only: the hot walk is OfferLowestEvictable).
  template <typename Visit>
  void ForEachEvictable(bool allow_protected, Visit visit) const {
    const float* p =
        matched_ < 0 ? nullptr : store_[static_cast<size_t>(matched_)].probabilities.data();
    for (size_t word = 0; word < cached_bits_.size(); ++word) {
      uint64_t bits = cached_bits_[word];
      const int64_t first = static_cast<int64_t>(word * 64);
      if (!allow_protected) bits &= ~ProtectedBits(word);
      for (; bits != 0; bits &= bits - 1) {
        const int64_t flat = first + std::countr_zero(bits);
        const double probability =
            p ? p[static_cast<size_t>(flat)] + kProbabilityFloor : kProbabilityFloor;
        visit(flat, probability * freq_[static_cast<size_t>(flat)]);
      }
    }
  }

  // Word `word` of the protected experts: stamped this pass, at the current layer or later.
  uint64_t ProtectedBits(size_t word) const {
    const int64_t current_layer_start = current_layer_ * experts_;
    const int64_t first = static_cast<int64_t>(word * 64);
    const uint64_t current_or_later = current_layer_start <= first ? ~uint64_t{0}
                                      : current_layer_start >= first + 64
                                          ? 0
                                          : ~uint64_t{0} << (current_layer_start - first);
    return stamped_bits_[word] & current_or_later;
  }

  // Marks an expert in use or wanted in this pass (BeginIteration clears the marks).
  void Stamp(int64_t flat) {
    stamped_bits_[static_cast<size_t>(flat) / 64] |= uint64_t{1} << (flat % 64);
  }

  void Evict(int64_t flat) {
    cached_[static_cast<size_t>(flat)] = 0;
    cached_bits_[static_cast<size_t>(flat) / 64] &= ~(uint64_t{1} << (flat % 64));
    --cached_count_;
  }
  void Cache(int64_t flat) {
    cached_[static_cast<size_t>(flat)] = 1;
    cached_bits_[static_cast<size_t>(flat) / 64] |= uint64_t{1} << (flat % 64);
    ++cached_count_;
  }

  void PrefetchLayer(int64_t target, int64_t now, double score, LayerPlan& plan) {
    if (matched_ < 0) return;
    const double delta = std::clamp(1.0 - score, 0.0, 1.0);
    const float* p = &store_[static_cast<size_t>(matched_)]
                          .probabilities[static_cast<size_t>(target * experts_)];
    prefetch_order_.Start(
        target, p,
        setup_.popularity.empty() ? nullptr : &setup_.popularity[static_cast<size_t>(target)]);
    double mass = 0;
    FmoeLowestFew lowest_few;
    for (int64_t n = 0; n < experts_; ++n) {
      if (n >= setup_.top_k && mass >= delta) break;
      const int32_t expert = prefetch_order_.Next();
      mass += p[expert];
      const int64_t flat = FlatIndex(setup_, target, expert);
      Stamp(flat);  // wanted later in this pass
      if (cached_[static_cast<size_t>(flat)]) continue;
      std::optional<ExpertRef> evict;
      if (cached_count_ >= slots_) {
        const int64_t victim = Victim(lowest_few);
        if (victim < 0) break;  // everything cached is wanted in this pass
        Evict(victim);
        evict = RefOf(setup_, victim);
      }
      Cache(flat);
      ++stats_.prefetches_issued;
      plan.prefetches.push_back(
          {{static_cast<int32_t>(target), expert},
           FetchTarget::kCache,
           evict,
           static_cast<double>(p[expert]) / static_cast<double>(target - now)});
    }
  }

  void Store(const std::vector<float>& semantic, const std::vector<float>& probabilities,
             bool deduplicate) {
    if (probabilities.size() != static_cast<size_t>(layers_ * experts_)) return;
    StoredMap map{semantic, probabilities, std::vector<double>(static_cast<size_t>(layers_), 0.0)};
    double norm2 = 0;
    for (int64_t layer = 0; layer < layers_; ++layer) {
      for (int64_t e = 0; e < experts_; ++e) {
        const double v = probabilities[static_cast<size_t>(layer * experts_ + e)];
        norm2 += v * v;
      }
      map.prefix_norm2[static_cast<size_t>(layer)] = norm2;
    }
    if (norm2 <= 0) return;
    // Floats square to at most ~1.2e77: the sum is finite exactly when every value is.
    map.finite = std::isfinite(norm2);
    const double d = static_cast<double>(distance_), l = static_cast<double>(layers_);
    for (const StoredMap& other : store_) {
      if (!deduplicate) break;
      const double redundancy = d / l * Cosine(semantic, other.semantic) +
                                (l - d) / l * Cosine(probabilities, other.probabilities);
      if (redundancy >= kRedundant) return;
    }
    map.semantic_class = SemanticClassOf(map.semantic);
    size_t slot = store_.size();
    if (store_.size() < kStoreCapacity) {
      store_.push_back(std::move(map));
      if (rows_.empty()) {
        rows_.resize(static_cast<size_t>(layers_));
        inverse_norms_.resize(static_cast<size_t>(layers_));
        row_classes_.assign(static_cast<size_t>(layers_), FmoeRowClasses(experts_, kLanes));
      }
      const size_t blocks = (slot + kLanes) / kLanes;
      for (int64_t layer = 0; layer < layers_; ++layer) {
        rows_[static_cast<size_t>(layer)].resize(blocks * kLanes * static_cast<size_t>(experts_));
        inverse_norms_[static_cast<size_t>(layer)].resize(slot + 1);
      }
    } else {
      slot = oldest_;
      --semantics_[store_[oldest_].semantic_class].maps;
      store_[oldest_] = std::move(map);
      oldest_ = (oldest_ + 1) % kStoreCapacity;
    }
    const StoredMap& stored = store_[slot];
    const size_t block_start = slot / kLanes * kLanes * static_cast<size_t>(experts_);
    for (int64_t layer = 0; layer < layers_; ++layer) {
      float* block = &rows_[static_cast<size_t>(layer)][block_start];
      for (int64_t e = 0; e < experts_; ++e) {
        block[static_cast<size_t>(e) * kLanes + slot % kLanes] =
            probabilities[static_cast<size_t>(layer * experts_ + e)];
      }
      row_classes_[static_cast<size_t>(layer)].Set(
          slot, &probabilities[static_cast<size_t>(layer * experts_)]);
      const double norm2 = stored.prefix_norm2[static_cast<size_t>(layer)];
      inverse_norms_[static_cast<size_t>(layer)][slot] = norm2 > 0 ? 1.0 / std::sqrt(norm2) : 0.0;
    }
  }

  // The class of `semantic` in semantics_, added (or reusing a class no map carries any more)
  // when new; counts the map in.
  size_t SemanticClassOf(const std::vector<float>& semantic) {
    size_t unused = semantics_.size();
    for (size_t c = 0; c < semantics_.size(); ++c) {
      const std::vector<float>& values = semantics_[c].values;
      if (semantics_[c].maps > 0 && values.size() == semantic.size() &&
          std::memcmp(values.data(), semantic.data(), semantic.size() * sizeof(float)) == 0) {
        ++semantics_[c].maps;
        return c;
      }
      if (semantics_[c].maps == 0 && unused == semantics_.size()) unused = c;
    }
    if (unused == semantics_.size()) {
      semantics_.emplace_back();
      semantic_scores_.push_back(0);
    }
    semantics_[unused] = {semantic, 1};
    return unused;
  }

  OffloadSetup setup_;
  int64_t layers_, experts_, distance_;
  int64_t slots_ = 0;
  std::vector<char> cached_;            // [flat]
  std::vector<uint64_t> cached_bits_;   // the same as a bit set, for Victim's walk
  std::vector<uint64_t> stamped_bits_;  // [flat] as bits: in use or wanted in this pass
  std::vector<double> freq_;            // [flat]
  int64_t cached_count_ = 0;
  int64_t pass_ = -1;
  int64_t current_layer_ = 0;
  std::vector<float> semantic_;
  std::vector<float> current_;  // this pass's map [layer][expert]
  double current_norm2_ = 0;
  std::vector<double> dots_;  // [stored map]: dot product with current_ so far
  int64_t matched_ = -1;
  std::vector<StoredMap> store_;
  // [layer]: the rows of maps y..y+kLanes-1 (y a multiple of kLanes) at y * E, expert-major:
  // expert e of map y + i at y * E + e * kLanes + i (the search's layout).
  std::vector<std::vector<float>> rows_;
  std::vector<std::vector<double>> inverse_norms_;  // [layer][map]: 1 / |rows 0..layer|
  std::vector<FmoeRowClasses> row_classes_;         // [layer]: the distinct rows of rows_
  std::vector<float> class_dots_;  // [class]: this pass's row . the class's row (ClassDots)
  size_t oldest_ = 0;
  std::vector<SemanticClass> semantics_;
  std::vector<double> semantic_scores_;  // [class]: cosine with this pass's embedding
  const double* scoring_ = nullptr;      // inverse norms of the layer being scored, or null
  double highest_[kLanes] = {};          // the highest score so far, per lane
  int64_t highest_at_[kLanes] = {};      // the latest map reaching it, per lane
  FmoePrefetchOrder prefetch_order_{setup_.num_experts};
  mutable std::vector<uint64_t> candidate_words_;  // Victim's walk: cached and not protected
  std::vector<char> hit_;
  PolicyStats stats_;
};

}  // namespace

std::vector<PolicyOptionSpec> FmoeOptions() { return {kPrefetchDistanceOption}; }

std::unique_ptr<OffloadPolicy> MakeFmoePolicy(const PolicyOptions& options,
                                              const OffloadSetup& setup) {
  return std::make_unique<FmoePolicy>(options, setup);
}

}  // namespace moelab::policies::impl
