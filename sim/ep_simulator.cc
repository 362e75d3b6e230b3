#include "sim/ep_simulator.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "base/error.h"
#include "base/stats.h"
#include "model/expert_activation.h"
#include "model/forward_cost.h"
#include "model/moe_math.h"
#include "model/rank_imbalance.h"

namespace moelab::sim {
namespace {

constexpr double kActivationBytes = 2.0;  // bf16 hidden states for the tensor-parallel collectives

// What one device does per layer whatever the chunk count, and the routing that feeds the chunks.
struct LayerPlan {
  int64_t devices_per_machine = 1;
  double tokens_total = 0;       // new tokens per replica per step
  double tokens_per_device = 0;  // hidden states each device holds when the dispatch starts
  int64_t local_experts = 0, active_experts = 0, tokens_per_expert = 0;
  // How many of the busiest device's local experts a layer activates, a = 1 .. local_experts:
  // busiest_probability[a], the largest of the ep ranks' counts (each local expert active with the
  // uniform probability, independently; given at least one), since a layer ends when its slowest
  // rank has combined; and expert_tokens[a] their tokens: the spread of uniform routing's
  // per-expert counts (its quantiles), not every expert at the mean, in the order the chunks take
  // the experts. A decode of 8 sequences activates 3 of Mixtral's 4 local experts on a rank as
  // often as 4, and N = 4 chunks then split one expert's rows (its weights read twice): priced at
  // the rounded mean (4) every N cost the same, and validate --cases ep measured N = 4 slower;
  // priced at one rank's mean (3.6) decode came out 19-41 % low, the busier of 2 ranks runs 3.9.
  std::vector<double> busiest_probability;
  std::vector<double> rank_probability;  // the same for any one rank: the mean rank's count
  std::vector<std::vector<int64_t>> expert_tokens;
  double copy_scale = 1;  // device-limited routing's cut of the remote copies
  // The busiest rank's rows (token copies its local experts receive) beyond a rank's mean: each
  // rank's count is a sum over the layer's tokens, so the ranks differ, and the layer waits for
  // the one with the most. N-independent: a rank may run a chunk ahead of another (its dispatch
  // waits only for the other's start of the chunk before), so only the combines at the layer's
  // end wait, for the largest total. On 2 ranks x 4 of Mixtral's 8 experts a prefill of 192
  // tokens gives the busier rank 7.2 rows above the mean 192: at a compute-bound 0.1 ms a row, the
  // 0.7-0.9 ms a layer the lighter rank waited in validate --cases ep, which the busiest rank's
  // expected active-expert count (all 4 in prefill) did not carry.
  double busiest_excess_rows = 0;
  double copy_s_per_row = 0;  // one pass over one row of hidden values (EpConfig::copy_bytes_per_s)
  double pack_combine_s = 0;  // packing the device's rows to send and combining them back
  double attention_s = 0, moe_collectives_s = 0, shared_s = 0, dense_layer_s = 0, once_s = 0;
  bool communicates = false;  // ep > 1 or tp > 1: the dispatch and combine move bytes
};

// 1 - C(X - g, k) / C(X, k): the chance that a token's k experts (of X) hit a given group of g.
double GroupHitProbability(int64_t experts, int64_t top_k, double group) {
  double miss = 1.0;
  for (int64_t j = 0; j < top_k; ++j) {
    const double left = static_cast<double>(experts - j) - group;
    miss *= std::max(0.0, left) / static_cast<double>(experts - j);
  }
  return 1.0 - miss;
}

double ScopeCount(const model::MoeModelSpec& spec, model::OperatorScope scope) {
  switch (scope) {
    case model::OperatorScope::kEveryLayer:
      return static_cast<double>(spec.num_layers);
    case model::OperatorScope::kMoeLayers:
      return static_cast<double>(spec.num_moe_layers());
    case model::OperatorScope::kDenseLayers:
      return static_cast<double>(spec.num_dense_layers());
    case model::OperatorScope::kOncePerPass:
      return 1.0;
  }
  return 1.0;
}

// The per-layer compute of one device from the cost source's forward pass of the sequences its
// attention group holds, split over the devices that share each operator.
void PriceLayers(const EpConfig& config, const model::CostSource& compute,
                 const model::CollectiveCost& collectives, LayerPlan& plan) {
  const bool data_parallel = config.attention == EpAttention::kDataParallel;
  const int64_t attention_devices = data_parallel ? config.tp : config.devices();
  model::ForwardShape shape;
  shape.batch = data_parallel ? config.batch / config.ep : config.batch;
  const bool prefill = config.workload == EpWorkload::kPrefill;
  shape.tokens_per_sequence = prefill ? config.tokens : 1;
  shape.context_length = prefill ? 0 : config.tokens;
  shape.logits_for_all_positions = false;
  const model::ForwardCost forward = compute.Forward(config.model, shape);
  double every = 0, moe = 0, shared = 0, dense = 0, once = 0;
  for (const model::OperatorCost& op : forward.operators) {
    if (op.op == model::Operator::kRoutedExperts || op.op == model::Operator::kCommunication)
      continue;  // priced by the expert GEMM model and the collective model instead
    const model::OperatorScope scope = model::ScopeOf(op.op);
    const double per_layer = op.time_s / ScopeCount(config.model, scope);
    if (op.op == model::Operator::kSharedExperts)
      shared += per_layer;
    else if (scope == model::OperatorScope::kEveryLayer)
      every += per_layer;
    else if (scope == model::OperatorScope::kMoeLayers)
      moe += per_layer;
    else if (scope == model::OperatorScope::kDenseLayers)
      dense += per_layer;
    else
      once += per_layer;
  }
  const double share = 1.0 / static_cast<double>(attention_devices);
  plan.attention_s = (every + moe) * share;
  plan.shared_s = shared * share;
  plan.once_s = once * share;
  // The tensor-parallel group's hidden states: reduce-scattered before the dispatch and gathered
  // after the combine (EPS-MoE's TP+EP), all-reduced twice in a dense layer.
  const double group_tokens =
      data_parallel ? plan.tokens_total / static_cast<double>(config.ep) : plan.tokens_total;
  const double hidden_bytes =
      group_tokens * static_cast<double>(config.model.hidden_size) * kActivationBytes;
  const model::CollectiveGroup group{attention_devices,
                                     std::min(attention_devices, plan.devices_per_machine)};
  plan.moe_collectives_s = collectives.ReduceScatterSeconds(hidden_bytes, group) +
                           collectives.AllGatherSeconds(hidden_bytes, group);
  plan.dense_layer_s =
      (every + dense) * share + 2 * collectives.AllReduceSeconds(hidden_bytes, group);
}

// `experts` token counts standing for the experts a layer activates: the quantiles (p + 1/2) /
// experts of `load`'s counts among the active experts. A kernel's time is not linear in its tokens
// (a tile computes 16 tokens whether 1 or 16 of them are real: 49 tokens cost what 64 do), so the
// experts priced at the mean count missed the ones above it: the AVX512-BF16 executor's experts
// at 26-68 tokens (mean 48) cost 23-25 ms a layer where 4 x f(48) said 18.3 (validate --cases ep,
// prefill). Zig-zag order (lowest, highest, next lowest, ...), so that contiguous groups of them,
// the chunks, carry like loads as the executor's, whose experts' counts do not follow their ids.
std::vector<int64_t> SpreadOfLoad(const model::ExpertLoad& load, int64_t experts) {
  double active = 0;
  for (double count : load.experts) active += count;
  std::vector<int64_t> sorted;
  double below = 0;
  size_t i = 0;
  for (int64_t p = 0; p < experts; ++p) {
    const double quantile = (static_cast<double>(p) + 0.5) / static_cast<double>(experts) * active;
    while (i + 1 < load.experts.size() && below + load.experts[i] < quantile)
      below += load.experts[i++];
    sorted.push_back(load.first_tokens + static_cast<int64_t>(i));
  }
  std::vector<int64_t> zigzag;
  for (size_t low = 0, high = sorted.size(); low < high;) {
    zigzag.push_back(sorted[low++]);
    if (low < high) zigzag.push_back(sorted[--high]);
  }
  return zigzag;
}

// P(a of `local` experts active | at least one), each active with probability `active`
// independently: [a] for a = 0 .. local (0 at a = 0).
std::vector<double> ActiveCountProbabilities(int64_t local, double active) {
  std::vector<double> probability(static_cast<size_t>(local + 1), 0.0);
  if (active >= 1.0) {
    probability.back() = 1.0;
    return probability;
  }
  double total = 0;
  for (int64_t a = 1; a <= local; ++a) {
    const double log_term = base::LogGamma(static_cast<double>(local) + 1) -
                            base::LogGamma(static_cast<double>(a) + 1) -
                            base::LogGamma(static_cast<double>(local - a) + 1) +
                            static_cast<double>(a) * std::log(active) +
                            static_cast<double>(local - a) * std::log1p(-active);
    probability[static_cast<size_t>(a)] = std::exp(log_term);
    total += probability[static_cast<size_t>(a)];
  }
  for (double& p : probability) p /= total;
  return probability;
}

// The distribution of the largest of `ranks` independent draws from `probability` (over
// 0 .. n): P(max = a) = F(a)^ranks - F(a - 1)^ranks.
std::vector<double> BusiestOfRanks(const std::vector<double>& probability, int64_t ranks) {
  std::vector<double> busiest(probability.size(), 0.0);
  double below = 0, cumulative = 0;
  for (size_t a = 0; a < probability.size(); ++a) {
    cumulative += probability[a];
    const double at_most = std::pow(std::min(1.0, cumulative), static_cast<double>(ranks));
    busiest[a] = std::max(0.0, at_most - below);
    below = at_most;
  }
  return busiest;
}

// EpConfig::copy_bytes_per_s, or the computing accelerator's memory bandwidth; 0: not priced.
double CopyBandwidth(const EpConfig& config) {
  if (config.copy_bytes_per_s > 0) return config.copy_bytes_per_s;
  if (config.compute_on_node && config.node.accelerator)
    return config.node.accelerator->memory_bandwidth_bytes_per_s;
  return 0.0;
}

std::string CopyBandwidthSource(const EpConfig& config) {
  if (config.copy_bytes_per_s > 0) return "--copy-bandwidth";
  if (CopyBandwidth(config) > 0) return "the accelerator's memory bandwidth";
  return "not priced (no --copy-bandwidth, and the node does not compute)";
}

LayerPlan PlanLayer(const EpConfig& config, const model::CostSource& compute,
                    const model::CollectiveCost& collectives) {
  LayerPlan plan;
  const model::MoeSpec& moe = *config.model.moe;
  plan.devices_per_machine = config.node.AcceleratorsPerMachine();
  const bool prefill = config.workload == EpWorkload::kPrefill;
  plan.tokens_total = static_cast<double>(config.batch * (prefill ? config.tokens : 1));
  plan.tokens_per_device = plan.tokens_total / static_cast<double>(config.devices());
  plan.local_experts = moe.num_experts / config.ep;
  // Uniform routing: each expert is active with probability P(t) and then sees t K / (E P) tokens.
  const double active =
      model::ExpertActivationProbability(plan.tokens_total, moe.num_experts, moe.top_k);
  plan.active_experts = std::clamp<int64_t>(
      std::llround(static_cast<double>(plan.local_experts) * active), 1, plan.local_experts);
  plan.tokens_per_expert =
      std::max<int64_t>(1, std::llround(plan.tokens_total * static_cast<double>(moe.top_k) /
                                        (static_cast<double>(moe.num_experts) * active)));
  const model::ExpertLoad load =
      model::UniformExpertActivation(moe.num_experts, moe.top_k)
          .Load(config.batch, prefill ? config.tokens : 1,
                prefill ? model::PassKind::kPrefill : model::PassKind::kDecode);
  plan.rank_probability = ActiveCountProbabilities(plan.local_experts, active);
  plan.busiest_probability = BusiestOfRanks(plan.rank_probability, config.ep);
  plan.expert_tokens.resize(static_cast<size_t>(plan.local_experts + 1));
  for (int64_t a = 1; a <= plan.local_experts; ++a)
    plan.expert_tokens[static_cast<size_t>(a)] = SpreadOfLoad(load, a);
  const double ranks_reached =
      static_cast<double>(config.ep) *
      GroupHitProbability(moe.num_experts, moe.top_k, static_cast<double>(plan.local_experts));
  if (config.device_limit > 0 && ranks_reached > static_cast<double>(config.device_limit))
    plan.copy_scale = static_cast<double>(config.device_limit) / ranks_reached;
  plan.communicates = config.ep > 1 || config.tp > 1;
  const double copy_bytes_per_s = CopyBandwidth(config);
  if (copy_bytes_per_s > 0) {
    plan.copy_s_per_row =
        static_cast<double>(config.model.hidden_size) * config.comm_bits / 8.0 / copy_bytes_per_s;
    // Every token's K rows, packed before the first dispatch and combined after the last.
    plan.pack_combine_s =
        2.0 * plan.tokens_per_device * static_cast<double>(moe.top_k) * plan.copy_s_per_row;
  }
  plan.busiest_excess_rows = model::BusiestRankExcessRows(plan.tokens_total, moe.num_experts,
                                                          moe.top_k, plan.local_experts, config.ep);
  PriceLayers(config, compute, collectives, plan);
  return plan;
}

// The chunk counts the sweep tries: every split of the active experts into groups (1 .. a), then
// multiples of a splitting each expert's rows, while a chunk keeps a token per expert.
std::vector<int64_t> CandidateChunks(const LayerPlan& plan, int64_t max_chunks) {
  std::vector<int64_t> candidates;
  for (int64_t n = 1; n <= std::min(plan.active_experts, max_chunks); ++n) candidates.push_back(n);
  for (int64_t j = 2; plan.active_experts * j <= max_chunks && j <= plan.tokens_per_expert; ++j)
    candidates.push_back(plan.active_experts * j);
  return candidates;
}

struct ChunkPlan {
  std::vector<ChunkWork> work;  // compute_s includes busiest_excess_s
  std::vector<double> busiest_excess_s;
  std::vector<double> gather_scatter_s;  // of compute_s: the chunk's rows in and out of its GEMMs
  double mean_rank_compute_s = 0;  // the chunks' compute on a rank of mean load (no excess rows)
  std::vector<model::ExpertGemmKind> kinds;
};

class ChunkPricer {
 public:
  ChunkPricer(const EpConfig& config, const LayerPlan& plan, const ExpertGemmModel& gemm,
              const model::CollectiveCost& collectives)
      : config_(config), plan_(plan), gemm_(gemm), collectives_(collectives) {}

  // N chunks' work, the expectation over how many local experts the busiest rank runs (a): N <= a
  // groups them (no expert's weights read twice), N > a splits expert p's rows over chunks [N p /
  // a, N (p + 1) / a), as the executor does (executor/expert_parallel.cc). The kernel names are
  // those of the likeliest a.
  ChunkPlan Price(int64_t chunks) {
    ChunkPlan out;
    out.work.assign(static_cast<size_t>(chunks), ChunkWork{});
    out.busiest_excess_s.assign(static_cast<size_t>(chunks), 0.0);
    out.gather_scatter_s.assign(static_cast<size_t>(chunks), 0.0);
    double likeliest = -1;
    for (int64_t a = 1; a <= plan_.local_experts; ++a) {
      const double probability = plan_.busiest_probability[static_cast<size_t>(a)];
      if (probability < kNegligibleProbability) continue;
      ChunkPlan given = PriceGiven(chunks, a);
      for (size_t c = 0; c < out.work.size(); ++c) {
        out.work[c].dispatch_s += probability * given.work[c].dispatch_s;
        out.work[c].compute_s += probability * given.work[c].compute_s;
        out.work[c].combine_s += probability * given.work[c].combine_s;
        out.busiest_excess_s[c] += probability * given.busiest_excess_s[c];
        out.gather_scatter_s[c] += probability * given.gather_scatter_s[c];
      }
      if (probability > likeliest) {
        likeliest = probability;
        out.kinds = std::move(given.kinds);
      }
    }
    for (int64_t a = 1; a <= plan_.local_experts; ++a) {
      const double probability = plan_.rank_probability[static_cast<size_t>(a)];
      if (probability < kNegligibleProbability) continue;
      const ChunkPlan given = PriceGiven(chunks, a);
      for (size_t c = 0; c < given.work.size(); ++c)
        out.mean_rank_compute_s +=
            probability * (given.work[c].compute_s - given.busiest_excess_s[c]);
    }
    return out;
  }

  int64_t ComputeSms(bool overlapped) const {
    const int64_t total = gemm_.params().sm_count;
    return overlapped && total > 0 ? total - config_.comm_sms : total;
  }

 private:
  model::ExpertGemmKind Choose(int64_t experts, int64_t tokens, int64_t sms) {
    if (config_.gemm == GemmChoice::kGroup) return model::ExpertGemmKind::kGroupGemm;
    if (config_.gemm == GemmChoice::kDense) return model::ExpertGemmKind::kDenseGemm;
    std::optional<int64_t> crossover = config_.gemm_crossover_tokens;
    if (!crossover) {
      const auto key = std::make_pair(experts, sms);
      auto it = crossovers_.find(key);
      if (it == crossovers_.end())
        it = crossovers_.emplace(key, gemm_.CrossoverTokens(experts, sms)).first;
      crossover = it->second;
    }
    // EPS-MoE's load-aware choice: DenseGemm from the crossover load on, GroupGemm below it.
    return crossover && tokens >= *crossover ? model::ExpertGemmKind::kDenseGemm
                                             : model::ExpertGemmKind::kGroupGemm;
  }

  // One all-to-all of a chunk holding `fraction` of the active experts, its rows split `splits`
  // ways: a token goes once to every remote rank where one of its experts is in the chunk.
  double CommSeconds(double fraction, int64_t splits, bool overlapped) const {
    if (!plan_.communicates) return 0.0;
    const model::MoeSpec& moe = *config_.model.moe;
    const double group_experts = fraction * static_cast<double>(plan_.local_experts);
    // Ranks (this one included) holding one of a token's experts in the chunk.
    const double ranks = static_cast<double>(config_.ep) *
                         GroupHitProbability(moe.num_experts, moe.top_k, group_experts) *
                         plan_.copy_scale / static_cast<double>(splits);
    const double bytes_per_copy = plan_.tokens_per_device *
                                  static_cast<double>(config_.model.hidden_size) *
                                  config_.comm_bits / 8.0;
    const double remote =
        ranks * static_cast<double>(config_.ep - 1) / static_cast<double>(config_.ep);
    const int64_t slice_per_machine = std::max<int64_t>(1, plan_.devices_per_machine / config_.tp);
    double seconds =
        collectives_.AllToAllSeconds(remote * bytes_per_copy, {config_.ep, slice_per_machine});
    if (config_.tp > 1) {
      // Expert tensor parallelism: the rank's devices gather the chunk's tokens each received
      // (and reduce-scatter the partial outputs before the combine: the same bytes).
      const model::CollectiveGroup rank{config_.tp,
                                        std::min(config_.tp, plan_.devices_per_machine)};
      seconds += collectives_.AllGatherSeconds(
          ranks * bytes_per_copy * static_cast<double>(config_.tp), rank);
    }
    // Overlapped, the all-to-all runs on comm_sms SMs: slower below the SMs that saturate it.
    if (overlapped && gemm_.params().sm_count > 0 && config_.comm_sms < config_.comm_saturation_sms)
      seconds *=
          static_cast<double>(config_.comm_saturation_sms) / static_cast<double>(config_.comm_sms);
    return seconds;
  }

  // Below this an active-expert count is left out of the expectation (prefill's counts other
  // than all experts: (1 - K / E)^tokens).
  static constexpr double kNegligibleProbability = 1e-12;

  // A chunk's share of the busiest rank's excess rows (LayerPlan::busiest_excess_rows), in
  // proportion to its rows, at the chunk's own cost of a row: the secant from its rows to twice
  // them (`doubled_minus_once_s`), as a compute-bound prefill pays for every row and a
  // weight-bound decode hardly any.
  double ExcessSeconds(double doubled_minus_once_s, int64_t a) const {
    const std::vector<int64_t>& spread = plan_.expert_tokens[static_cast<size_t>(a)];
    double rows = 0;
    for (int64_t p = 0; p < a; ++p) rows += static_cast<double>(spread[static_cast<size_t>(p)]);
    return rows > 0 ? std::max(0.0, doubled_minus_once_s) * plan_.busiest_excess_rows / rows : 0.0;
  }

  // The chunks' work when `a` experts are active, `chunks` entries.
  ChunkPlan PriceGiven(int64_t chunks, int64_t a) {
    ChunkPlan out;
    // Without overlap (--comm-overlap none) the exchanges run between the GEMMs: no SMs are lent
    // to them and they run at the link's full speed.
    const bool overlapped =
        chunks > 1 && plan_.communicates && config_.communication_overlaps_compute;
    const int64_t sms = ComputeSms(overlapped);
    const std::vector<int64_t>& spread = plan_.expert_tokens[static_cast<size_t>(a)];
    const double ad = static_cast<double>(a);
    if (chunks <= a) {
      size_t first = 0;
      for (int64_t g = 0; g < chunks; ++g) {
        const int64_t experts = a / chunks + (g < a % chunks ? 1 : 0);
        const std::vector<int64_t> load(
            spread.begin() + static_cast<std::ptrdiff_t>(first),
            spread.begin() + static_cast<std::ptrdiff_t>(first + static_cast<size_t>(experts)));
        first += static_cast<size_t>(experts);
        const model::ExpertGemmKind kind = Choose(experts, plan_.tokens_per_expert, sms);
        const double comm_s = CommSeconds(static_cast<double>(experts) / ad, 1, overlapped);
        const double compute_s = gemm_.Seconds(kind, load, sms);
        std::vector<int64_t> doubled(load);
        for (int64_t& tokens : doubled) tokens *= 2;
        const double excess_s = ExcessSeconds(gemm_.Seconds(kind, doubled, sms) - compute_s, a);
        double rows = 0;
        for (int64_t tokens : load) rows += static_cast<double>(tokens);
        const double copies_s = 2.0 * rows * plan_.copy_s_per_row;
        out.work.push_back({comm_s, compute_s + excess_s + copies_s, comm_s});
        out.busiest_excess_s.push_back(excess_s);
        out.gather_scatter_s.push_back(copies_s);
        out.kinds.push_back(kind);
      }
      return out;
    }
    for (int64_t p = 0; p < a; ++p) {
      const int64_t span = chunks * (p + 1) / a - chunks * p / a;
      const int64_t tokens =
          std::max<int64_t>(1, std::llround(static_cast<double>(spread[static_cast<size_t>(p)]) /
                                            static_cast<double>(span)));
      const int64_t mean_tokens = std::max<int64_t>(
          1,
          std::llround(static_cast<double>(plan_.tokens_per_expert) / static_cast<double>(span)));
      const model::ExpertGemmKind kind = Choose(1, mean_tokens, sms);
      const double compute_s = gemm_.Seconds(kind, {tokens}, sms);
      const double excess_s = ExcessSeconds(gemm_.Seconds(kind, {2 * tokens}, sms) - compute_s, a);
      const double comm_s = CommSeconds(1.0 / ad, span, overlapped);
      const double copies_s = 2.0 * static_cast<double>(tokens) * plan_.copy_s_per_row;
      for (int64_t s = 0; s < span; ++s) {
        out.work.push_back({comm_s, compute_s + excess_s + copies_s, comm_s});
        out.busiest_excess_s.push_back(excess_s);
        out.gather_scatter_s.push_back(copies_s);
        out.kinds.push_back(kind);
      }
    }
    return out;
  }

  const EpConfig& config_;
  const LayerPlan& plan_;
  const ExpertGemmModel& gemm_;
  const model::CollectiveCost& collectives_;
  std::map<std::pair<int64_t, int64_t>, std::optional<int64_t>> crossovers_;
};

std::string KindName(const std::vector<model::ExpertGemmKind>& kinds) {
  const bool all_same = std::all_of(kinds.begin(), kinds.end(), [&](model::ExpertGemmKind kind) {
    return kind == kinds.front();
  });
  return all_same ? model::ToString(kinds.front()) : "mixed";
}

EpChunkRow RowOf(const EpConfig& config, const LayerPlan& plan, const ChunkPlan& chunk_plan,
                 const PipelineSchedule& schedule, int64_t replicas) {
  EpChunkRow row;
  row.chunks = static_cast<int64_t>(chunk_plan.work.size());
  row.gemm = KindName(chunk_plan.kinds);
  for (double excess_s : chunk_plan.busiest_excess_s) row.busiest_excess_s += excess_s;
  row.mean_rank_compute_s = chunk_plan.mean_rank_compute_s;
  for (double copies_s : chunk_plan.gather_scatter_s) row.row_gather_scatter_s += copies_s;
  row.pack_combine_s = plan.pack_combine_s;
  for (const ChunkWork& work : chunk_plan.work) {
    row.dispatch_s += work.dispatch_s;
    row.combine_s += work.combine_s;
    row.expert_compute_s += work.compute_s;
  }
  row.moe_block_s = schedule.makespan_s;
  row.exposed_comm_s = schedule.exposed_communication_s;
  const double moe_layer_s =
      plan.attention_s + plan.moe_collectives_s + row.moe_block_s + row.pack_combine_s;
  row.step_s = static_cast<double>(config.model.num_moe_layers()) * moe_layer_s +
               static_cast<double>(config.model.num_dense_layers()) * plan.dense_layer_s +
               plan.once_s;
  row.tokens_per_s = plan.tokens_total * static_cast<double>(replicas) / row.step_s;
  return row;
}

std::string ChunksMessage(int64_t chunks, int64_t active, int64_t tokens, int64_t max_chunks) {
  return "--ep-chunks " + std::to_string(chunks) + ": expected 1.." + std::to_string(active) +
         " (groups of the " + std::to_string(active) +
         " experts active on a device) or a multiple of " + std::to_string(active) + " up to " +
         std::to_string(std::min(max_chunks, active * tokens)) + " (each expert's " +
         std::to_string(tokens) + " tokens split), or auto";
}

// EPS-MoE's R(N) = k N + b, k fitted by least squares to the sweep's total work (dispatch +
// GEMMs + combine) against N, as the paper fitted it to measurements; 0 with one point.
double OverheadSlope(const std::vector<EpChunkRow>& sweep) {
  if (sweep.size() < 2) return 0.0;
  double mean_n = 0, mean_work = 0;
  for (const EpChunkRow& row : sweep) {
    mean_n += static_cast<double>(row.chunks);
    mean_work += row.dispatch_s + row.combine_s + row.expert_compute_s;
  }
  mean_n /= static_cast<double>(sweep.size());
  mean_work /= static_cast<double>(sweep.size());
  double covariance = 0, variance = 0;
  for (const EpChunkRow& row : sweep) {
    const double dn = static_cast<double>(row.chunks) - mean_n;
    covariance += dn * (row.dispatch_s + row.combine_s + row.expert_compute_s - mean_work);
    variance += dn * dn;
  }
  return covariance / variance;
}

// The optimum, the chosen row and schedule, the closed form fed with the sweep's own terms.
void FinishSweep(const EpConfig& config, const LayerPlan& plan, const ExpertGemmModel& gemm,
                 const ChunkPricer& pricer, const std::vector<PipelineSchedule>& schedules,
                 EpResult& result) {
  size_t best = 0, chosen = 0;
  // More chunks only for a gain beyond rounding (splitting the same work into the same kernels
  // sums it in another order): ties go to the fewer chunks.
  for (size_t i = 1; i < result.sweep.size(); ++i) {
    if (result.sweep[i].step_s < result.sweep[best].step_s * (1 - 1e-12)) best = i;
  }
  if (config.chunks) {
    while (result.sweep[chosen].chunks != *config.chunks) ++chosen;
  } else {
    chosen = best;
  }
  result.no_pipeline = result.sweep.front();
  result.optimum = result.sweep[best];
  result.chosen = result.sweep[chosen];
  result.chunks_chosen_by = config.chunks ? "--ep-chunks" : "auto (the sweep's optimum)";
  result.chosen_schedule = schedules[chosen];
  result.no_pipeline_schedule = schedules.front();

  EpClosedForm& closed = result.closed_form;
  const EpChunkRow& one = result.sweep.front();
  closed.communication_s = one.dispatch_s + one.combine_s;
  closed.computation_s = one.expert_compute_s + plan.shared_s;
  closed.overhead_per_chunk_s = OverheadSlope(result.sweep);
  if (closed.overhead_per_chunk_s > 0) {
    const model::ExpertPipelineModel formula{closed.communication_s, closed.computation_s,
                                             closed.overhead_per_chunk_s, 0.0};
    closed.continuous_optimum = formula.ContinuousOptimum();
    closed.optimal_chunks = formula.OptimalPipelines();
  }
  if (config.gemm_crossover_tokens) {
    result.gemm_crossover_tokens = config.gemm_crossover_tokens;
    result.gemm_crossover_from = "--gemm-crossover-tokens";
  } else if (plan.active_experts == 1) {
    // One expert per device: a GroupGemm has nothing to fuse, every chunk is a DenseGemm.
    result.gemm_crossover_from = "none: one active expert per device";
  } else {
    result.gemm_crossover_tokens = gemm.CrossoverTokens(
        plan.active_experts,
        pricer.ComputeSms(plan.communicates && config.communication_overlaps_compute));
    result.gemm_crossover_from = "model";
  }
}

}  // namespace

EpResult SimulateEp(const EpConfig& config, const model::CostSource& compute,
                    const model::CollectiveCost& collectives) {
  config.Validate();
  EpResult result;
  result.config = config;
  result.cost_source = compute.Describe();
  result.collective_cost = collectives.Describe();
  result.replicas = config.node.accelerator_count / config.devices();
  const LayerPlan plan = PlanLayer(config, compute, collectives);
  result.tokens_per_step = plan.tokens_total;
  result.local_experts = plan.local_experts;
  result.active_local_experts = plan.active_experts;
  result.tokens_per_expert = plan.tokens_per_expert;
  result.attention_s = plan.attention_s;
  result.moe_collectives_s = plan.moe_collectives_s;
  result.shared_experts_s = plan.shared_s;
  result.dense_layer_s = plan.dense_layer_s;
  result.once_per_step_s = plan.once_s;
  result.copy_bytes_per_s = CopyBandwidth(config);
  result.row_copies_from = CopyBandwidthSource(config);

  model::MoeModelSpec expert_model = config.model;
  expert_model.moe->expert_intermediate_size /= config.tp;
  ExpertGemmParameters gemm_params;
  if (config.node.accelerator && config.compute_on_node)
    gemm_params.sm_count = config.node.accelerator->sm_count;
  gemm_params.kernel_launch_s = config.kernel_launch_s;
  gemm_params.group_efficiency = config.group_efficiency;
  const ExpertGemmModel gemm(compute, expert_model, gemm_params);
  ChunkPricer pricer(config, plan, gemm, collectives);
  result.compute_sms =
      pricer.ComputeSms(plan.communicates && config.communication_overlaps_compute);

  const std::vector<int64_t> candidates = CandidateChunks(plan, config.max_chunks);
  if (config.chunks &&
      std::find(candidates.begin(), candidates.end(), *config.chunks) == candidates.end()) {
    throw base::Error(ChunksMessage(*config.chunks, plan.active_experts, plan.tokens_per_expert,
                                    config.max_chunks));
  }
  std::vector<PipelineSchedule> schedules;
  for (const int64_t n : candidates) {
    const ChunkPlan chunk_plan = pricer.Price(n);
    schedules.push_back(SchedulePipeline(chunk_plan.work, plan.shared_s, n > 1,
                                         !config.communication_overlaps_compute));
    result.sweep.push_back(RowOf(config, plan, chunk_plan, schedules.back(), result.replicas));
  }
  FinishSweep(config, plan, gemm, pricer, schedules, result);
  return result;
}

}  // namespace moelab::sim
