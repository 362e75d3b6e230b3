#include "routing/correlated_routing.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <sstream>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/hash.h"
#include "routing/tuple_hash.h"

namespace moelab::routing {
namespace {

// Salts keep this generator's streams unrelated to uniform/popularity routing of the same seed.
constexpr uint64_t kChoiceSalt = 0x636f72722d63686fULL;  // "corr-cho"
constexpr uint64_t kFreshSalt = 0x636f72722d667265ULL;   // "corr-fre"
constexpr uint64_t kOrderSalt = 0x636f72722d6f7264ULL;   // "corr-ord"
constexpr double kMaxLocality = 0.99;
constexpr int64_t kMaxTopK = 64;  // fixed scratch sizes; no MoE routes to more experts per token //
                                  // locality 1 would chain every token back to the first one

using internal::SaltedSeed;
using internal::TupleHash;
using internal::TupleHashFrom;
using internal::TuplePrefixFrom;
using internal::TupleStep;

// A probability as a 53-bit integer threshold, so decisions are integer comparisons and identical
// on every platform.
uint64_t Threshold(double probability) {
  return static_cast<uint64_t>(std::llround(std::ldexp(probability, 53)));
}

// x % n and base::SplitMix64Stream::Below's rejection threshold (2^64 - n) % n for a fixed n,
// without a 64-bit division per draw (the uniform fresh draw's divisions were most of the
// generator's time): Lemire's fastmod with a 128-bit constant, exact for every 64-bit x and n >= 1
// (Lemire, Kaser, Kurz 2019, "Faster remainder by direct computation").
class FixedModulus {
 public:
  __extension__ typedef unsigned __int128 Wide;
  explicit FixedModulus(uint64_t n)
      : n_(n), threshold_((0 - n) % n), m_(~static_cast<Wide>(0) / n + 1) {}
  uint64_t n() const { return n_; }
  uint64_t threshold() const { return threshold_; }
  uint64_t Of(uint64_t x) const {
    const Wide low = m_ * x;
    const Wide bottom = (static_cast<Wide>(static_cast<uint64_t>(low)) * n_) >> 64;
    const Wide top = (low >> 64) * n_;
    return static_cast<uint64_t>((bottom + top) >> 64);
  }

 private:
  uint64_t n_, threshold_;
  Wide m_;
};

// The same draw as random.Below(modulus.n()), without its divisions.
uint64_t Below(base::SplitMix64Stream& random, const FixedModulus& modulus) {
  for (;;) {
    const uint64_t x = random.Next();
    if (x >= modulus.threshold()) return modulus.Of(x);
  }
}

std::string Shape(int64_t num_layers, int64_t num_experts, int64_t top_k) {
  return std::to_string(num_layers) + " MoE layers x " + std::to_string(num_experts) +
         " experts, top-" + std::to_string(top_k);
}

std::string FormatProbability(double p) {
  std::ostringstream out;
  out << p;
  return out.str();
}

class CorrelatedRouting : public RoutingSource {
 public:
  CorrelatedRouting(const CorrelatedRoutingOptions& options, int64_t num_layers,
                    int64_t num_experts, int64_t top_k, uint64_t seed)
      : num_layers_(num_layers),
        num_experts_(num_experts),
        top_k_(top_k),
        seed_(seed),
        locality_(options.locality),
        layer_correlation_(options.layer_correlation),
        origin_(options.popularity_origin.empty() ? "popularity table" : options.popularity_origin),
        uniform_(options.popularity.empty()),
        choice_seed_(SaltedSeed(kChoiceSalt, seed)),
        fresh_seed_(SaltedSeed(kFreshSalt, seed)),
        locality_threshold_(Threshold(options.locality)),
        layer_threshold_(Threshold(options.layer_correlation)) {
    options.Validate();
    if (num_layers < 1) {
      throw base::Error("correlated routing: num_layers must be >= 1, got " +
                        std::to_string(num_layers));
    }
    if (num_experts < 1 || num_experts > std::numeric_limits<int32_t>::max()) {
      throw base::Error("correlated routing: num_experts must be in [1, 2147483647], got " +
                        std::to_string(num_experts));
    }
    if (top_k < 1 || top_k > num_experts || top_k > kMaxTopK) {
      throw base::Error("correlated routing: top_k must be in [1, min(num_experts = " +
                        std::to_string(num_experts) + ", 64)], got " + std::to_string(top_k));
    }
    BuildWeights(options.popularity);
    BuildLayerMaps();
    memo_.resize(static_cast<size_t>(num_layers_));
    for (int64_t k = 0; k < top_k_; ++k)
      remaining_experts_.emplace_back(static_cast<uint64_t>(num_experts_ - k));
  }

  std::string Describe() const override {
    return "correlated routing (" + Shape(num_layers_, num_experts_, top_k_) + "; locality " +
           FormatProbability(locality_) + ", layer correlation " +
           FormatProbability(layer_correlation_) + ", fresh draws " +
           (uniform_ ? std::string("uniform") : "from " + origin_) + "), seed " +
           std::to_string(seed_);
  }

  void Route(int64_t step, int64_t layer, int64_t tokens,
             std::vector<std::vector<int32_t>>& out) override {
    if (step < 0)
      throw base::Error("correlated routing: step must be >= 0, got " + std::to_string(step));
    if (layer < 0 || layer >= num_layers_) {
      throw base::Error("correlated routing: layer " + std::to_string(layer) +
                        " is out of range, the model has " + std::to_string(num_layers_) +
                        " MoE layers");
    }
    if (tokens < 0) {
      throw base::Error("correlated routing: tokens must be >= 0, got " + std::to_string(tokens));
    }
    // The memo is one caller's at a time; a concurrent call walks the chains without it (same
    // result, only slower), so Route stays safe to call from several threads.
    const bool owns_memo = !memo_busy_.exchange(true, std::memory_order_acquire);
    std::vector<int32_t> unshared;
    std::vector<int32_t>& slots = owns_memo ? memo_scratch_ : unshared;
    slots.resize(static_cast<size_t>(tokens * top_k_));
    const LayerMemo* previous_step =
        owns_memo && step > 0 && memo_[static_cast<size_t>(layer)].step == step - 1
            ? &memo_[static_cast<size_t>(layer)]
            : nullptr;
    const LayerMemo* previous_layer =
        owns_memo && layer > 0 && memo_[static_cast<size_t>(layer - 1)].step == step
            ? &memo_[static_cast<size_t>(layer - 1)]
            : nullptr;
    const int32_t* map = layer > 0 ? layer_map_[static_cast<size_t>(layer)].data() : nullptr;
    // TupleHashFrom(seed, step, layer, token) = SplitMix64(prefix ^ token): the (step, layer)
    // prefix is shared by every token of the call.
    // Their step parts are kept for the step's next layers by the memo's owner.
    uint64_t choice_step, fresh_step;
    if (owns_memo && step_hashes_.step == step) {
      choice_step = step_hashes_.choice;
      fresh_step = step_hashes_.fresh;
    } else {
      choice_step = TupleStep(choice_seed_, step);
      fresh_step = TupleStep(fresh_seed_, step);
      if (owns_memo) step_hashes_ = {step, choice_step, fresh_step};
    }
    const uint64_t choice_prefix = TuplePrefixFrom(choice_step, layer);
    const uint64_t fresh_prefix = TuplePrefixFrom(fresh_step, layer);

    out.resize(static_cast<size_t>(tokens));
    const NodeView view{step,           layer, tokens,        slots.data(), previous_step,
                        previous_layer, map,   choice_prefix, fresh_prefix};
    // Top-2 (Mixtral, the presets' most common routing) with the slot loops unrolled; the
    // generic loop otherwise. The same hashes, draws and values in the same order.
    if (top_k_ == 2 && uniform_ && EveryHopInMemo(view)) {
      RouteTop2UniformFromMemo(view, out);
    } else if (top_k_ == 2) {
      RouteTokens<2>(view, out);
    } else {
      RouteTokens<0>(view, out);
    }
    if (owns_memo) {
      LayerMemo& memo = memo_[static_cast<size_t>(layer)];
      memo.step = step;
      memo.tokens = tokens;
      memo.slots.swap(memo_scratch_);
      memo_busy_.store(false, std::memory_order_release);
    }
  }

 private:
  void BuildWeights(const model::PopularityTable& table) {
    weights_.assign(static_cast<size_t>(num_layers_), {});
    totals_.assign(static_cast<size_t>(num_layers_), 0);
    if (uniform_) {
      for (int64_t layer = 0; layer < num_layers_; ++layer) {
        weights_[layer].assign(static_cast<size_t>(num_experts_), 1);
        totals_[layer] = static_cast<uint64_t>(num_experts_);
      }
      return;
    }
    if (table.size() != static_cast<size_t>(num_layers_) ||
        std::any_of(table.begin(), table.end(), [&](const auto& row) {
          return row.size() != static_cast<size_t>(num_experts_);
        })) {
      throw base::Error(origin_ + ": the popularity table has " + std::to_string(table.size()) +
                        " layers x " + std::to_string(table.empty() ? 0 : table[0].size()) +
                        " experts, but the model has " + std::to_string(num_layers_) +
                        " MoE layers x " + std::to_string(num_experts_) + " experts");
    }
    FixedPointPopularity fixed = ToFixedPointPopularity(table, num_experts_, top_k_, origin_);
    weights_ = std::move(fixed.weights);
    totals_ = std::move(fixed.totals);
  }

  // pi_l maps layer l-1's r-th most popular expert to layer l's r-th most popular (ties in a
  // fixed pseudo-random order), so following the previous layer keeps each layer's popularity
  // profile. The maps do not depend on the seed: like a real model's router weights they are a
  // property of the (synthetic) model, so a calibration sample with another seed learns them.
  void BuildLayerMaps() {
    std::vector<std::vector<int32_t>> order(static_cast<size_t>(num_layers_));
    for (int64_t layer = 0; layer < num_layers_; ++layer) {
      std::vector<std::pair<uint64_t, int32_t>> keyed;
      for (int64_t expert = 0; expert < num_experts_; ++expert) {
        const uint64_t tie = TupleHash(kOrderSalt, 0, 0, layer, expert);
        keyed.push_back({tie, static_cast<int32_t>(expert)});
      }
      const std::vector<uint64_t>& w = weights_[layer];
      std::sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
        if (w[a.second] != w[b.second]) return w[a.second] > w[b.second];
        if (a.first != b.first) return a.first < b.first;
        return a.second < b.second;
      });
      for (const auto& entry : keyed) order[layer].push_back(entry.second);
    }
    layer_map_.assign(static_cast<size_t>(num_layers_),
                      std::vector<int32_t>(static_cast<size_t>(num_experts_), 0));
    for (int64_t layer = 1; layer < num_layers_; ++layer) {
      for (int64_t rank = 0; rank < num_experts_; ++rank) {
        layer_map_[layer][order[layer - 1][rank]] = order[layer][rank];
      }
    }
  }

  // The first `count` experts of the fresh successive draw of node (step, layer, token): every
  // ordered tuple equally likely (sparse partial Fisher-Yates, O(count^2)) for uniform weights,
  // else successive sampling proportional to the layer's weights (O(count x E)).
  void FreshDraw(int64_t step, int64_t layer, int64_t token, int64_t count, int32_t* out) const {
    FreshDrawFrom(internal::TuplePrefix(fresh_seed_, step, layer), token, layer, count, out);
  }
  // The same from the node's stream state (TupleHashFrom(fresh_seed_, step, layer, token)).
  // (Out of line, the token's hash inside: inlined, GCC computed the hash for every token.)
  [[gnu::noinline]] void FreshDrawFrom(uint64_t prefix, int64_t token, int64_t layer, int64_t count,
                                       int32_t* out) const {
    base::SplitMix64Stream random(base::SplitMix64(prefix ^ static_cast<uint64_t>(token)));
    if (uniform_ && count >= 1 && count <= 2) {
      // The permutation below for its first two places, written out: the first pick j0 swaps
      // with place 0, so a second pick landing on place j0 takes the 0 moved there.
      const auto j0 = static_cast<int32_t>(Below(random, remaining_experts_[0]));
      out[0] = j0;
      if (count == 2) {
        const auto j1 = static_cast<int32_t>(1 + Below(random, remaining_experts_[1]));
        out[1] = j1 == j0 ? 0 : j1;
      }
      return;
    }
    if (uniform_) {
      // out[0..k) holds the picks; position p of the virtual permutation holds p unless some
      // earlier swap moved another value there (tracked in `moved`).
      int64_t moved_at[64], moved_value[64];
      int64_t moved = 0;
      auto value_at = [&](int64_t position) {
        for (int64_t i = 0; i < moved; ++i) {
          if (moved_at[i] == position) return moved_value[i];
        }
        return position;
      };
      for (int64_t k = 0; k < count; ++k) {
        const int64_t j = k + static_cast<int64_t>(Below(random, remaining_experts_[k]));
        const int64_t picked = value_at(j), displaced = value_at(k);
        out[k] = static_cast<int32_t>(picked);
        bool found = false;
        for (int64_t i = 0; i < moved; ++i) {
          if (moved_at[i] == j) {
            moved_value[i] = displaced;
            found = true;
          }
        }
        if (!found) {
          moved_at[moved] = j;
          moved_value[moved] = displaced;
          ++moved;
        }
      }
      return;
    }
    const std::vector<uint64_t>& w = weights_[static_cast<size_t>(layer)];
    uint64_t remaining = totals_[static_cast<size_t>(layer)];
    for (int64_t k = 0; k < count; ++k) {
      uint64_t r = random.Below(remaining);
      int32_t picked = 0;
      for (size_t expert = 0; expert < w.size(); ++expert) {
        if (w[expert] == 0 || std::find(out, out + k, static_cast<int32_t>(expert)) != out + k) {
          continue;
        }
        if (r < w[expert]) {
          picked = static_cast<int32_t>(expert);
          break;
        }
        r -= w[expert];
      }
      out[k] = picked;
      remaining -= w[static_cast<size_t>(picked)];
    }
  }

  // The (pre-deduplication) expert of slot k of node (step, layer, token): follow the "copied
  // from" links to a fresh draw, then map it up through the layers crossed. The first `k + 1`
  // experts of a node's fresh draw do not depend on how many are drawn, so the chain's end takes
  // slot k of that node's own fresh draw. Route calls this only for nodes its memo lacks.
  [[gnu::noinline]] int32_t SlotValue(int64_t step, int64_t layer, int64_t token, int64_t k) const {
    const int64_t top_layer = layer;
    const uint64_t rank_offset = base::kSplitMix64Golden * static_cast<uint64_t>(2 * k + 1);
    int32_t value = 0;
    for (;;) {
      const uint64_t base = TupleHashFrom(choice_seed_, step, layer, token);
      const bool has_previous = step > 0 || token > 0;
      if (has_previous && (base::Mix64(base + rank_offset) >> 11) < locality_threshold_) {
        if (step > 0) {
          --step;
        } else {
          --token;
        }
        continue;
      }
      if (layer > 0 &&
          (base::Mix64(base + rank_offset + base::kSplitMix64Golden) >> 11) < layer_threshold_) {
        --layer;
        continue;
      }
      int32_t drawn[kMaxTopK];
      FreshDraw(step, layer, token, k + 1, drawn);
      value = drawn[k];
      break;
    }
    for (int64_t l = layer + 1; l <= top_layer; ++l) value = layer_map_[l][value];
    return value;
  }

  // Pre-deduplication slot values of the last node routed at a layer, [token * K + k]: a slot
  // that copies the previous token or the previous layer reads the copied slot here instead of
  // walking its chain back to a fresh draw (the simulator routes step by step, layer by layer, so
  // every hop lands in the memo). Values are exact, so the memo changes speed, never results.
  struct LayerMemo {
    int64_t step = -1;  // -1: empty
    int64_t tokens = 0;
    std::vector<int32_t> slots;
  };

  // What RouteTokens reads: the call's node, its memo neighbours and hash prefixes.
  struct NodeView {
    int64_t step, layer, tokens;
    int32_t* slots;  // the node's pre-deduplication slot values, [token * K + k]
    const LayerMemo* previous_step;
    const LayerMemo* previous_layer;
    const int32_t* map;  // layer_map_[layer] (null at layer 0)
    uint64_t choice_prefix, fresh_prefix;
  };

  // Route's token loop; kTopK = top_k_ when it is fixed at compile time (its loops unroll), 0
  // for any top_k_.
  template <int kTopK>
  void RouteTokens(const NodeView& v, std::vector<std::vector<int32_t>>& out) const {
    const int64_t top_k = kTopK > 0 ? kTopK : top_k_;
    for (int64_t token = 0; token < v.tokens; ++token) {
      std::vector<int32_t>& ranked_vector = out[static_cast<size_t>(token)];
      ranked_vector.resize(static_cast<size_t>(top_k));
      int32_t* const ranked = ranked_vector.data();
      int32_t* node = &v.slots[static_cast<size_t>(token * top_k)];
      // The node's own fresh draw, made only when a slot ends here or two slots collide.
      int32_t fresh[kMaxTopK];
      bool drawn = false;
      const auto own_fresh = [&]() -> const int32_t* {
        if (!drawn) {
          FreshDrawFrom(v.fresh_prefix, token, v.layer, top_k, fresh);
          drawn = true;
        }
        return fresh;
      };
      const uint64_t base = base::SplitMix64(v.choice_prefix ^ static_cast<uint64_t>(token));
      const bool has_previous = v.step > 0 || token > 0;
      for (int64_t k = 0; k < top_k; ++k) {
        // One hop of SlotValue's chain; the node it lands on is usually known (the memo, or the
        // previous prompt position of this very call), else its chain is walked.
        const uint64_t rank_offset = base::kSplitMix64Golden * static_cast<uint64_t>(2 * k + 1);
        int32_t value;
        if (has_previous && (base::Mix64(base + rank_offset) >> 11) < locality_threshold_) {
          if (v.step == 0) {
            value = node[k - top_k];  // token - 1 of this step, routed just before
          } else if (v.previous_step && token < v.previous_step->tokens) {
            value = v.previous_step->slots[static_cast<size_t>(token * top_k + k)];
          } else {
            value = SlotValue(v.step - 1, v.layer, token, k);
          }
        } else if (v.layer > 0 && (base::Mix64(base + rank_offset + base::kSplitMix64Golden) >>
                                   11) < layer_threshold_) {
          const int32_t below =
              v.previous_layer && token < v.previous_layer->tokens
                  ? v.previous_layer->slots[static_cast<size_t>(token * top_k + k)]
                  : SlotValue(v.step, v.layer - 1, token, k);
          value = v.map[below];
        } else {
          value = own_fresh()[k];
        }
        node[k] = value;
        const auto taken = [&](int32_t expert) {  // a plain loop: k < K is tiny
          for (int64_t j = 0; j < k; ++j) {
            if (ranked[j] == expert) return true;
          }
          return false;
        };
        if (taken(value)) {
          // K fresh experts are distinct and at most K-1 are taken: one is always free.
          own_fresh();
          for (int64_t c = 0; c < top_k; ++c) {
            if (!taken(fresh[c])) {
              value = fresh[c];
              break;
            }
          }
        }
        ranked[k] = value;
      }
    }
  }

  // Every hop of the call's slots lands in the memo: a decode step after one at least as wide,
  // at a layer whose previous layer this step is routed (or layer 0, which follows none).
  static bool EveryHopInMemo(const NodeView& v) {
    return v.step > 0 && v.previous_step && v.tokens <= v.previous_step->tokens &&
           (v.layer == 0 || (v.previous_layer && v.tokens <= v.previous_layer->tokens));
  }
  void RouteTop2UniformFromMemo(const NodeView& v, std::vector<std::vector<int32_t>>& out) const {
    if (v.layer > 0) {
      RouteTop2UniformFromMemo<true>(v, out);
    } else {
      RouteTop2UniformFromMemo<false>(v, out);
    }
  }
  // `when ? a : b` by masks: GCC turns the conditional expression back into a branch.
  static int32_t Select(bool when, int32_t a, int32_t b) {
    const int32_t mask = -static_cast<int32_t>(when);
    return (a & mask) | (b & ~mask);
  }
  // RouteTokens<2> for uniform fresh draws when EveryHopInMemo, without a branch on the draws:
  // each slot's three candidates (the previous step's slot, the previous layer's mapped, the
  // node's fresh draw) are all computed and one is selected. The slot's choice is a coin the CPU
  // cannot guess, so RouteTokens' branches on it mispredicted about once a slot (perf: most of
  // the generator's time at batch 16); the fresh draw they skipped costs less. The same hashes
  // and draws, so the same values.
  template <bool kFollowsLayer>
  void RouteTop2UniformFromMemo(const NodeView& v, std::vector<std::vector<int32_t>>& out) const {
    const uint64_t offset[2] = {base::kSplitMix64Golden, base::kSplitMix64Golden * 3};
    const int32_t* const from_step = v.previous_step->slots.data();
    const int32_t* const from_layer = kFollowsLayer ? v.previous_layer->slots.data() : nullptr;
    const FixedModulus& first_range = remaining_experts_[0];
    const FixedModulus& second_range = remaining_experts_[1];
    for (int64_t token = 0; token < v.tokens; ++token) {
      const size_t at = static_cast<size_t>(token) * 2;
      // The node's fresh draw, as FreshDrawFrom's top-2 uniform case.
      base::SplitMix64Stream random(
          base::SplitMix64(v.fresh_prefix ^ static_cast<uint64_t>(token)));
      const auto j0 = static_cast<int32_t>(Below(random, first_range));
      const auto j1 = static_cast<int32_t>(1 + Below(random, second_range));
      const int32_t fresh[2] = {j0, j1 == j0 ? 0 : j1};
      const uint64_t base = base::SplitMix64(v.choice_prefix ^ static_cast<uint64_t>(token));
      int32_t value[2];
      for (size_t k = 0; k < 2; ++k) {
        const bool copies_step = (base::Mix64(base + offset[k]) >> 11) < locality_threshold_;
        int32_t candidate = fresh[k];
        if constexpr (kFollowsLayer) {
          const bool copies_layer =
              (base::Mix64(base + offset[k] + base::kSplitMix64Golden) >> 11) < layer_threshold_;
          candidate = Select(copies_layer, v.map[from_layer[at + k]], candidate);
        }
        value[k] = Select(copies_step, from_step[at + k], candidate);
        v.slots[at + k] = value[k];
      }
      // A second slot equal to the first takes the first fresh expert not taken (two fresh
      // experts are distinct, so one is free).
      const int32_t spare = Select(fresh[0] != value[0], fresh[0], fresh[1]);
      std::vector<int32_t>& ranked = out[static_cast<size_t>(token)];
      ranked.resize(2);
      ranked[0] = value[0];
      ranked[1] = Select(value[1] != value[0], value[1], spare);
    }
  }

  int64_t num_layers_, num_experts_, top_k_;
  uint64_t seed_;
  double locality_, layer_correlation_;
  std::string origin_;
  bool uniform_;
  uint64_t choice_seed_, fresh_seed_;  // SaltedSeed of the two streams
  uint64_t locality_threshold_, layer_threshold_;
  std::vector<std::vector<uint64_t>> weights_;   // [layer][expert], fixed point
  std::vector<uint64_t> totals_;                 // [layer]
  std::vector<std::vector<int32_t>> layer_map_;  // [layer][expert of layer-1] -> expert
  std::vector<FixedModulus> remaining_experts_;  // [k]: E - k, the uniform draw's k-th range
  std::vector<LayerMemo> memo_;                  // [layer]
  std::vector<int32_t> memo_scratch_;            // the node being routed, swapped into memo_
  struct StepHashes {
    int64_t step = -1;  // -1: none yet
    uint64_t choice = 0, fresh = 0;
  };
  StepHashes step_hashes_;  // TupleStep of the two streams at the memo owner's last step
  std::atomic<bool> memo_busy_{false};
};

}  // namespace

void CorrelatedRoutingOptions::Validate() const {
  if (!(locality >= 0 && locality <= kMaxLocality)) {
    throw base::Error("correlated routing: 'locality' must be in [0, 0.99], got " +
                      FormatProbability(locality));
  }
  if (!(layer_correlation >= 0 && layer_correlation <= 1)) {
    throw base::Error("correlated routing: 'layer' must be in [0, 1], got " +
                      FormatProbability(layer_correlation));
  }
}

std::unique_ptr<RoutingSource> MakeCorrelatedRouting(const CorrelatedRoutingOptions& options,
                                                     int64_t num_layers, int64_t num_experts,
                                                     int64_t top_k, uint64_t seed) {
  return std::make_unique<CorrelatedRouting>(options, num_layers, num_experts, top_k, seed);
}

CorrelatedRoutingOptions CorrelatedOptionsOf(const RoutingSpec& spec) {
  CorrelatedRoutingOptions options;
  options.locality = spec.locality;
  options.layer_correlation = spec.layer_correlation;
  if (!spec.popularity_file.empty()) {
    options.popularity = model::LoadPopularityTable(spec.popularity_file);
    options.popularity_origin = spec.popularity_file;
  }
  options.Validate();
  return options;
}

CorrelatedRoutingOptions ParseCorrelatedRoutingOptions(const std::string& text) {
  return CorrelatedOptionsOf(ParseRoutingSpec("correlated:" + text));
}

}  // namespace moelab::routing
