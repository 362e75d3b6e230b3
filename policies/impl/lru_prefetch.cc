// lru-prefetch: Mixtral-offloading (formulas.md section 3).
//  - Every MoE layer has its own LRU cache of k experts on the accelerator (--cache-per-layer;
//    default: accelerator memory split evenly over the layers, at most E).
//  - When layer l is routed, the next layer's gate applied to layer l's hidden state (the
//    engine's speculative scores) names layer l+1's most likely experts; the top N
//    (--prefetch, default 2) that are neither cached nor staged are copied into staging buffers
//    (--staging-buffers, default 4, shared by all layers). A staged expert does not evict a
//    cached one. If layer l+1 then uses it, it replaces that layer's least recently used expert
//    (the buffers swap roles, no second copy); if not, it is dropped.
//  - A demanded expert that is neither cached nor staged is fetched into the cache, evicting the
//    layer's least recently used expert (hits are refreshed first, so a layer never evicts what
//    it is about to use unless it needs more than k experts).
// The cache starts with each layer's k most popular experts (calibration counts).
// Since staged experts enter the cache only when used, the cache evolves exactly like a plain
// per-layer LRU on the demand sequence; prefetching changes when misses are paid, not which.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <span>

#include "policies/impl/common.h"
#include "policies/impl/factories.h"

namespace moelab::policies::impl {
namespace {

constexpr PolicyOptionSpec kCachePerLayerOption{"cache-per-layer",
                                                std::nullopt,
                                                "memory / layers, at most E",
                                                1,
                                                OptionMaximum::kExpertsPerLayer,
                                                "experts cached per MoE layer"};
constexpr PolicyOptionSpec kPrefetchOption{
    "prefetch",
    2,
    "",
    0,
    OptionMaximum::kNone,
    "next-layer experts speculatively loaded (at most the staging buffers)"};
constexpr PolicyOptionSpec kStagingBuffersOption{
    "staging-buffers",
    4,
    "",
    0,
    OptionMaximum::kNone,
    "device staging buffers for speculatively loaded experts"};

class LruPrefetchPolicy : public OffloadPolicy {
 public:
  LruPrefetchPolicy(const PolicyOptions& options, const OffloadSetup& setup)
      : setup_(setup),
        prefetch_(*kPrefetchOption.Resolve(options, setup)),
        staging_(*kStagingBuffersOption.Resolve(options, setup)) {
    const int64_t experts = setup.num_experts;
    if (prefetch_ > experts) {
      throw base::Error("--prefetch " + std::to_string(prefetch_) + " exceeds the " +
                        std::to_string(experts) + " experts of a layer");
    }
    if (prefetch_ > staging_) {
      throw base::Error("--prefetch " + std::to_string(prefetch_) +
                        " needs as many staging buffers, but " + "--staging-buffers is " +
                        std::to_string(staging_));
    }
    const int64_t slots = setup.ExpertSlots(setup.num_layers, staging_);
    const int64_t per_layer = std::min(experts, slots / setup.num_moe_layers);
    if (const std::optional<int64_t> k = kCachePerLayerOption.Resolve(options, setup)) {
      k_ = *k;
      if (k_ > per_layer) {
        throw base::Error("--cache-per-layer " + std::to_string(k_) + ": " +
                          std::to_string(k_ * setup.num_moe_layers) + " cached experts of " +
                          report::FormatGigabytes(static_cast<double>(setup.expert_bytes), 2) +
                          " plus " + std::to_string(staging_) +
                          " staging buffers do not fit in accelerator memory (" +
                          report::FormatGigabytes(setup.accelerator_bytes, 2) + "); at most " +
                          std::to_string(per_layer) + " per layer fit");
      }
    } else {
      k_ = per_layer;
      if (k_ < 1) {
        throw base::Error("policy 'lru-prefetch': accelerator memory (" +
                          report::FormatGigabytes(setup.accelerator_bytes, 2) +
                          ") does not hold one expert per layer (" +
                          std::to_string(setup.num_moe_layers) + " x " +
                          report::FormatGigabytes(static_cast<double>(setup.expert_bytes), 2) +
                          ") plus " + std::to_string(staging_) +
                          " staging buffers after the non-expert weights; "
                          "raise --accelerator-memory or lower --staging-buffers");
      }
    }
    for (int64_t layer = 0; layer < setup.num_moe_layers; ++layer) {
      popularity_order_.push_back(ByPopularity(layer));
    }
    cache_.assign(static_cast<size_t>(setup.num_moe_layers), {});
    staged_.assign(static_cast<size_t>(setup.num_moe_layers), {});
  }

  std::string Name() const override { return "lru-prefetch"; }
  PolicyNeeds Needs() const override { return {false, prefetch_ > 0}; }
  std::vector<std::pair<std::string, double>> ResolvedOptions() const override {
    return {{"cache_per_layer", static_cast<double>(k_)},
            {"prefetch", static_cast<double>(prefetch_)},
            {"staging_buffers", static_cast<double>(staging_)}};
  }
  int64_t StagingBuffersUsed() const override { return staging_; }
  int64_t ExpertSlots() const override { return k_ * setup_.num_moe_layers; }

  std::vector<ExpertRef> InitialPlacement() override {
    std::vector<ExpertRef> placed;
    for (int64_t layer = 0; layer < setup_.num_moe_layers; ++layer) {
      const std::vector<int32_t>& order = popularity_order_[layer];
      // cache_[layer] is most recent first: the most popular expert is the most recent.
      for (int64_t i = 0; i < k_; ++i) {
        cache_[layer].push_back(order[static_cast<size_t>(i)]);
        placed.push_back({static_cast<int32_t>(layer), order[static_cast<size_t>(i)]});
      }
    }
    return placed;
  }

  void PlanLayer(const LayerDemand& demand, LayerPlan& plan) override {
    const int32_t layer = demand.layer;
    std::vector<int32_t>& cache = cache_[layer];
    std::vector<int32_t>& staged = staged_[layer];
    auto demanded = [&](int32_t expert) {
      return std::any_of(demand.experts.begin(), demand.experts.end(),
                         [&](const ExpertDemand& d) { return d.expert == expert; });
    };
    auto contains = [](const std::vector<int32_t>& list, int32_t expert) {
      return std::find(list.begin(), list.end(), expert) != list.end();
    };
    // The least recently used cached expert this layer does not need now (else the LRU one).
    auto victim = [&]() {
      for (auto it = cache.rbegin(); it != cache.rend(); ++it) {
        if (!demanded(*it)) return *it;
      }
      return cache.back();
    };

    // Hits are decided against the cache as the previous pass left it (a layer that needs more
    // than k experts may then evict one of its own hits; the engine lets it finish first).
    hit_.assign(demand.experts.size(), 0);
    for (size_t i = 0; i < demand.experts.size(); ++i) {
      const int32_t expert = demand.experts[i].expert;
      AddDecision(plan, expert, ExpertAction::kResident);
      if (const auto it = std::find(cache.begin(), cache.end(), expert); it != cache.end()) {
        hit_[i] = 1;
        // The most recent now: the ones before it move back one place (the cache holds each
        // expert once; an erase and an insert at the front moved the tail twice).
        std::rotate(cache.begin(), it, it + 1);
      }
    }
    for (size_t i = 0; i < demand.experts.size(); ++i) {
      const int32_t expert = demand.experts[i].expert;
      if (hit_[i]) continue;
      ExpertDecision& decision = plan.decisions[i];
      const bool from_staging = contains(staged, expert);
      if (from_staging) {
        decision.promote = true;
        staged.erase(std::find(staged.begin(), staged.end(), expert));
        --staged_total_;
      } else {
        decision.action = ExpertAction::kFetch;
        decision.target = FetchTarget::kCache;
      }
      if (static_cast<int64_t>(cache.size()) >= k_) {
        const int32_t out = victim();
        cache.erase(std::find(cache.begin(), cache.end(), out));
        decision.evict = ExpertRef{layer, out};
      }
      cache.insert(cache.begin(), expert);
    }
    for (int32_t expert : staged) plan.discard_staged.push_back({layer, expert});
    staged_total_ -= static_cast<int64_t>(staged.size());
    staged.clear();

    // Speculative loading of the next layer's most likely experts.
    const int32_t next = layer + 1;
    if (prefetch_ == 0 || next >= setup_.num_moe_layers || demand.next_layer_scores.empty()) return;
    // The first prefetch_ experts of the popularity order stably sorted by score (what a
    // std::stable_sort of all of them gives there): each expert a key, its score's order-keeping
    // bits above its place in the popularity order (earlier: larger), so that the largest keys
    // are the wanted experts in order; kept in a short sorted list by a branch-free insertion
    // (the insertion with branches on the scores mispredicted: half this function's time).
    // O(E x prefetch_), no buffer to allocate.
    const std::vector<int32_t>& by_popularity = popularity_order_[next];
    const size_t wanted = static_cast<size_t>(prefetch_);
    const size_t listed = TopByScore(by_popularity, demand.next_layer_scores, wanted);
    std::vector<int32_t>& order = scratch_order_;
    for (size_t i = 0; i < listed; ++i) {
      const int32_t expert = order[i];
      if (demand.next_layer_scores[expert] <= 0) break;
      if (contains(cache_[next], expert) || contains(staged_[next], expert)) continue;
      if (staged_total_ >= staging_) break;
      staged_[next].push_back(expert);
      ++staged_total_;
      ++stats_.prefetches_issued;
      // Built in place: a request built on the stack and copied in stalled on its own stores.
      PrefetchRequest& request = plan.prefetches.emplace_back();
      request.expert = {next, expert};
      request.target = FetchTarget::kStaged;
      request.priority = static_cast<double>(demand.next_layer_scores[expert]);
    }
  }

  PolicyStats Stats() const override { return stats_; }

 private:
  // Writes scratch_order_[0, n) with the n experts of `by_popularity` a stable sort by score,
  // highest first, puts first; returns n (wanted, or fewer when there are fewer experts).
  size_t TopByScore(const std::vector<int32_t>& by_popularity, std::span<const float> scores,
                    size_t wanted) {
    switch (wanted) {  // the usual lists in registers
      case 1:
        return TopByScoreFixed<1>(by_popularity, scores);
      case 2:
        return TopByScoreFixed<2>(by_popularity, scores);
      case 3:
        return TopByScoreFixed<3>(by_popularity, scores);
      case 4:
        return TopByScoreFixed<4>(by_popularity, scores);
      default:
        break;
    }
    scratch_keys_.assign(wanted, 0);
    return TopByScoreInto(by_popularity, scores, std::span(scratch_keys_));
  }
  template <size_t kWanted>
  size_t TopByScoreFixed(const std::vector<int32_t>& by_popularity, std::span<const float> scores) {
    std::array<uint64_t, kWanted> top{};
    return TopByScoreInto(by_popularity, scores, std::span<uint64_t, kWanted>(top));
  }
  // `top` starts all 0: every real key is above it (its low half is ~place, place < 2^32 - 1).
  template <size_t kExtent>
  size_t TopByScoreInto(const std::vector<int32_t>& by_popularity, std::span<const float> scores,
                        std::span<uint64_t, kExtent> top) {
    bool nan = false;
    for (size_t place = 0; place < by_popularity.size(); ++place) {
      const float score = scores[static_cast<size_t>(by_popularity[place])];
      nan |= score != score;
      // -0 and +0 compare equal: one key for both. Negative scores' bits all flip, the others'
      // sign bit only.
      const uint32_t bits = std::bit_cast<uint32_t>(score + 0.0f);
      const uint32_t flip = static_cast<uint32_t>(static_cast<int32_t>(bits) >> 31) | 0x80000000u;
      uint64_t key = static_cast<uint64_t>(bits ^ flip) << 32 | (0xFFFFFFFFu - place);
      for (uint64_t& slot : top) {
        const uint64_t keep = 0 - static_cast<uint64_t>(slot > key);  // all ones: slot stays
        const uint64_t higher = (slot & keep) | (key & ~keep);
        key = (key & keep) | (slot & ~keep);
        slot = higher;
      }
    }
    if (nan) [[unlikely]]
      return TopByScoreWithNaN(by_popularity, scores, top.size());
    const size_t listed = std::min(top.size(), by_popularity.size());
    scratch_order_.resize(top.size());
    for (size_t i = 0; i < listed; ++i)
      scratch_order_[i] = by_popularity[0xFFFFFFFFu - (top[i] & 0xFFFFFFFFu)];
    return listed;
  }
  // The same with a NaN among the scores, by the comparisons a stable sort would make (a NaN
  // compares false with everything, which no key order reproduces).
  size_t TopByScoreWithNaN(const std::vector<int32_t>& by_popularity, std::span<const float> scores,
                           size_t wanted) {
    std::vector<int32_t>& order = scratch_order_;
    order.resize(wanted);
    size_t listed = 0;
    for (const int32_t expert : by_popularity) {
      const float score = scores[static_cast<size_t>(expert)];
      size_t at = listed;
      while (at > 0 && score > scores[static_cast<size_t>(order[at - 1])]) --at;  // ties behind
      if (at >= wanted) continue;
      if (listed < wanted) ++listed;
      for (size_t j = listed - 1; j > at; --j) order[j] = order[j - 1];
      order[at] = expert;
    }
    return listed;
  }

  // The layer's experts, most popular first (ties: lower index first).
  std::vector<int32_t> ByPopularity(int64_t layer) const {
    std::vector<int32_t> order(static_cast<size_t>(setup_.num_experts));
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return Popularity(setup_, layer, a) > Popularity(setup_, layer, b);
    });
    return order;
  }

  OffloadSetup setup_;
  int64_t prefetch_, staging_;
  int64_t k_ = 0;
  std::vector<std::vector<int32_t>> popularity_order_;  // [layer], most popular first
  std::vector<int32_t> scratch_order_;
  std::vector<uint64_t> scratch_keys_;
  std::vector<char> hit_;
  std::vector<std::vector<int32_t>> cache_;   // [layer], most recent first
  std::vector<std::vector<int32_t>> staged_;  // [layer], experts in staging buffers
  int64_t staged_total_ = 0;
  PolicyStats stats_;
};

}  // namespace

std::vector<PolicyOptionSpec> LruPrefetchOptions() {
  return {kCachePerLayerOption, kPrefetchOption, kStagingBuffersOption};
}

std::unique_ptr<OffloadPolicy> MakeLruPrefetchPolicy(const PolicyOptions& options,
                                                     const OffloadSetup& setup) {
  return std::make_unique<LruPrefetchPolicy>(options, setup);
}

}  // namespace moelab::policies::impl
