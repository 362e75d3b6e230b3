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
#include <cmath>

#include "policies/impl/common.h"
#include "policies/impl/factories.h"

namespace moelab::policies::impl {
namespace {

constexpr int64_t kDefaultPrefetchDistance = 3;
constexpr size_t kStoreCapacity = 1024;
constexpr double kRedundant = 0.995;
constexpr double kProbabilityFloor = 1e-3;

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

class FmoePolicy : public OffloadPolicy {
 public:
  FmoePolicy(const PolicyOptions& options, const OffloadSetup& setup)
      : setup_(setup),
        layers_(setup.num_moe_layers),
        experts_(setup.num_experts),
        distance_(
            OptionOr(options.prefetch_distance, kDefaultPrefetchDistance, 1, "prefetch-distance")),
        cached_(static_cast<size_t>(layers_ * experts_), 0),
        freq_(static_cast<size_t>(layers_ * experts_), 1.0),
        stamp_(static_cast<size_t>(layers_ * experts_), -1),
        current_(static_cast<size_t>(layers_ * experts_), 0.0f) {
    if (distance_ >= layers_ && layers_ > 1) {
      throw Error("--prefetch-distance " + std::to_string(distance_) + " must be below the " +
                  std::to_string(layers_) + " MoE layers");
    }
    slots_ = std::min(setup.ExpertSlots(setup.num_layers, 0), layers_ * experts_);
    if (slots_ < 1) {
      throw Error("policy 'fmoe': accelerator memory (" + GigaBytes(setup.accelerator_bytes) +
                  ") leaves no room for a single expert of " +
                  GigaBytes(static_cast<double>(setup.expert_bytes)) +
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
    for (const ExpertId& id : PlaceByPopularity(PopularityOrFlat(setup_), slots_)) {
      cached_[static_cast<size_t>(FlatIndex(setup_, id.layer, id.expert))] = 1;
      placed.push_back({static_cast<int32_t>(id.layer), static_cast<int32_t>(id.expert)});
    }
    cached_count_ = static_cast<int64_t>(placed.size());
    return placed;
  }

  void BeginIteration(const IterationInfo& info, LayerPlan& plan) override {
    ++pass_;
    current_layer_ = 0;
    semantic_ = info.semantic;
    std::fill(current_.begin(), current_.end(), 0.0f);
    current_norm2_ = 0;
    dots_.assign(store_.size(), 0.0);
    matched_ = -1;
    double best = -2;
    for (size_t y = 0; y < store_.size(); ++y) {
      const double score = Cosine(semantic_, store_[y].semantic);
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
    // One pass over the layer's rows of every stored map, contiguous in memory.
    const float* stored = dots_.empty() ? nullptr : rows_[static_cast<size_t>(layer)].data();
    for (size_t y = 0; y < dots_.size(); ++y, stored += experts_) {
      float dot = 0;
      for (int64_t e = 0; e < experts_; ++e) dot += row[e] * stored[e];
      dots_[y] += dot;
    }

    for (const ExpertDemand& d : demand.experts) {
      const int64_t flat = FlatIndex(setup_, layer, d.expert);
      freq_[static_cast<size_t>(flat)] += static_cast<double>(d.tokens);
      stamp_[static_cast<size_t>(flat)] = pass_;  // in use: not evicted by this layer's misses
    }
    hit_.assign(demand.experts.size(), 0);
    for (size_t i = 0; i < demand.experts.size(); ++i) {
      hit_[i] = cached_[static_cast<size_t>(FlatIndex(setup_, layer, demand.experts[i].expert))];
    }
    for (size_t i = 0; i < demand.experts.size(); ++i) {
      const ExpertDemand& d = demand.experts[i];
      const int64_t flat = FlatIndex(setup_, layer, d.expert);
      ExpertDecision decision = Decide(d.expert, ExpertAction::kResident);
      if (!hit_[i]) {
        decision.action = ExpertAction::kFetch;
        decision.target = FetchTarget::kCache;
        if (cached_count_ >= slots_) {
          int64_t victim = Victim(/*allow_protected=*/false);
          if (victim < 0) victim = Victim(/*allow_protected=*/true);
          Evict(victim);
          decision.evict = RefOf(setup_, victim);
        }
        cached_[static_cast<size_t>(flat)] = 1;
        ++cached_count_;
      }
      plan.decisions.push_back(decision);
    }

    // Trajectory search over layers 0..layer, then prefetch layer + d.
    const int64_t target = layer + distance_;
    if (target >= layers_) return;
    double best = -2;
    matched_ = -1;
    const double* inverse_norm =
        inverse_norms_.empty() ? nullptr : inverse_norms_[static_cast<size_t>(layer)].data();
    for (size_t y = 0; y < dots_.size(); ++y) {
      const double score = dots_[y] * inverse_norm[y];  // cosine x |current|, same argmax
      if (score >= best) {
        best = score;
        matched_ = static_cast<int64_t>(y);
      }
    }
    if (matched_ >= 0) best = current_norm2_ > 0 ? best / std::sqrt(current_norm2_) : 0;
    ++stats_.searches;
    PrefetchLayer(target, layer, matched_ < 0 ? 0.0 : best, plan);
  }

  void EndIteration() override {
    // Redundancy against every stored map: the trajectory cosine over all layers is the dot
    // product accumulated during the pass (maps stored before it began), so no second pass over
    // the store's probabilities is needed.
    const double d = static_cast<double>(distance_), l = static_cast<double>(layers_);
    for (size_t y = 0; y < dots_.size(); ++y) {
      const double norm2 = store_[y].prefix_norm2.back();
      const double map_score =
          norm2 > 0 && current_norm2_ > 0 ? dots_[y] / std::sqrt(norm2 * current_norm2_) : 0;
      if (d / l * Cosine(semantic_, store_[y].semantic) + (l - d) / l * map_score >= kRedundant)
        return;
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
  };

  double Probability(int64_t flat) const {
    if (matched_ < 0) return kProbabilityFloor;
    return store_[static_cast<size_t>(matched_)].probabilities[static_cast<size_t>(flat)] +
           kProbabilityFloor;
  }

  // The cached expert with the lowest p * freq (the highest eviction priority), or -1.
  int64_t Victim(bool allow_protected) const {
    int64_t victim = -1;
    double lowest = 0;
    for (int64_t flat = 0; flat < layers_ * experts_; ++flat) {
      if (!cached_[static_cast<size_t>(flat)]) continue;
      if (!allow_protected && Protected(flat)) continue;
      const double value = Probability(flat) * freq_[static_cast<size_t>(flat)];
      if (victim < 0 || value < lowest) {
        victim = flat;
        lowest = value;
      }
    }
    return victim;
  }

  // In use by the current layer, or prefetched for a later layer of this pass.
  bool Protected(int64_t flat) const {
    return stamp_[static_cast<size_t>(flat)] == pass_ && flat / experts_ >= current_layer_;
  }

  void Evict(int64_t flat) {
    cached_[static_cast<size_t>(flat)] = 0;
    --cached_count_;
  }

  void PrefetchLayer(int64_t target, int64_t now, double score, LayerPlan& plan) {
    if (matched_ < 0) return;
    const double delta = std::clamp(1.0 - score, 0.0, 1.0);
    const float* p = &store_[static_cast<size_t>(matched_)]
                          .probabilities[static_cast<size_t>(target * experts_)];
    std::vector<int32_t>& order = scratch_;
    order.resize(static_cast<size_t>(experts_));
    for (int64_t e = 0; e < experts_; ++e) order[static_cast<size_t>(e)] = static_cast<int32_t>(e);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      if (p[a] != p[b]) return p[a] > p[b];
      return Popularity(setup_, target, a) > Popularity(setup_, target, b);
    });
    double mass = 0;
    for (int64_t n = 0; n < experts_; ++n) {
      if (n >= setup_.top_k && mass >= delta) break;
      const int32_t expert = order[static_cast<size_t>(n)];
      mass += p[expert];
      const int64_t flat = FlatIndex(setup_, target, expert);
      stamp_[static_cast<size_t>(flat)] = pass_;  // wanted later in this pass
      if (cached_[static_cast<size_t>(flat)]) continue;
      std::optional<ExpertRef> evict;
      if (cached_count_ >= slots_) {
        const int64_t victim = Victim(/*allow_protected=*/false);
        if (victim < 0) break;  // everything cached is wanted in this pass
        Evict(victim);
        evict = RefOf(setup_, victim);
      }
      cached_[static_cast<size_t>(flat)] = 1;
      ++cached_count_;
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
    const double d = static_cast<double>(distance_), l = static_cast<double>(layers_);
    for (const StoredMap& other : store_) {
      if (!deduplicate) break;
      const double redundancy = d / l * Cosine(semantic, other.semantic) +
                                (l - d) / l * Cosine(probabilities, other.probabilities);
      if (redundancy >= kRedundant) return;
    }
    size_t slot = store_.size();
    if (store_.size() < kStoreCapacity) {
      store_.push_back(std::move(map));
      if (rows_.empty()) {
        rows_.resize(static_cast<size_t>(layers_));
        inverse_norms_.resize(static_cast<size_t>(layers_));
      }
      for (int64_t layer = 0; layer < layers_; ++layer) {
        rows_[static_cast<size_t>(layer)].resize((slot + 1) * static_cast<size_t>(experts_));
        inverse_norms_[static_cast<size_t>(layer)].resize(slot + 1);
      }
    } else {
      slot = oldest_;
      store_[oldest_] = std::move(map);
      oldest_ = (oldest_ + 1) % kStoreCapacity;
    }
    const StoredMap& stored = store_[slot];
    for (int64_t layer = 0; layer < layers_; ++layer) {
      std::copy_n(&probabilities[static_cast<size_t>(layer * experts_)], experts_,
                  &rows_[static_cast<size_t>(layer)][slot * static_cast<size_t>(experts_)]);
      const double norm2 = stored.prefix_norm2[static_cast<size_t>(layer)];
      inverse_norms_[static_cast<size_t>(layer)][slot] = norm2 > 0 ? 1.0 / std::sqrt(norm2) : 0.0;
    }
  }

  OffloadSetup setup_;
  int64_t layers_, experts_, distance_;
  int64_t slots_ = 0;
  std::vector<char> cached_;    // [flat]
  std::vector<double> freq_;    // [flat]
  std::vector<int64_t> stamp_;  // [flat]: pass in which it is in use or wanted
  int64_t cached_count_ = 0;
  int64_t pass_ = -1;
  int64_t current_layer_ = 0;
  std::vector<float> semantic_;
  std::vector<float> current_;  // this pass's map [layer][expert]
  double current_norm2_ = 0;
  std::vector<double> dots_;  // [stored map]: dot product with current_ so far
  int64_t matched_ = -1;
  std::vector<StoredMap> store_;
  std::vector<std::vector<float>> rows_;  // [layer]: row of map y at y * E (the search's layout)
  std::vector<std::vector<double>> inverse_norms_;  // [layer][map]: 1 / |rows 0..layer|
  size_t oldest_ = 0;
  std::vector<int32_t> scratch_;
  std::vector<char> hit_;
  PolicyStats stats_;
};

}  // namespace

std::unique_ptr<OffloadPolicy> MakeFmoePolicy(const PolicyOptions& options,
                                              const OffloadSetup& setup) {
  return std::make_unique<FmoePolicy>(options, setup);
}

}  // namespace moelab::policies::impl
