#include "model/forward_cost.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "model/moe_math.h"
#include "model/parameter_count.h"

namespace moelab::model {
namespace {

// Adds operators' roofline times on one target to a ForwardCost.
class CostAccumulator {
 public:
  CostAccumulator(const RooflineTarget& target, const CostParameters& params)
      : target_(target), params_(params) {
    cost_.operators.reserve(kOperatorCount);  // one allocation (the simulator prices every pass)
  }

  // Adds `repeats` identical operators (e.g. one per layer) of `flops` and `bytes` each.
  void Add(Operator op, double flops, double bytes, double repeats, double launches_each = 1) {
    if (repeats <= 0) return;
    const double time_s = RooflineSeconds(target_, params_, flops, bytes, launches_each);
    cost_.Add(op, flops * repeats, bytes * repeats, time_s * repeats);
  }

  void AddTime(Operator op, double bytes, double time_s) { cost_.Add(op, 0, bytes, time_s); }
  // An operator's entry, to add operators (repeats 1) whose roofline time is known: adding
  // flops, bytes and Seconds(flops, bytes) to it sums the same as Add(op, flops, bytes, 1).
  OperatorCost& Entry(Operator op) { return cost_.Entry(op); }
  double Seconds(double flops, double bytes) const {
    return RooflineSeconds(target_, params_, flops, bytes, 1);
  }

  ForwardCost Finish() {
    cost_.Total();
    cost_.device = target_.name;
    cost_.compute_dtype = target_.dtype_used;
    return cost_;
  }

 private:
  const RooflineTarget& target_;
  const CostParameters& params_;
  ForwardCost cost_;
};

// Mean keys each new query attends to, and KV positions read per sequence, for one layer.
struct AttentionSpan {
  double mean_keys = 0;
  double kv_positions = 0;
};

AttentionSpan SpanOf(const ForwardShape& shape, int64_t window) {
  const double c = static_cast<double>(shape.context_length);
  const double s = static_cast<double>(shape.tokens_per_sequence);
  AttentionSpan span{c + (s + 1.0) / 2.0, c + s};
  if (window > 0) {
    span.mean_keys = std::min(span.mean_keys, static_cast<double>(window));
    span.kv_positions = std::min(span.kv_positions, static_cast<double>(window) + s - 1.0);
  }
  return span;
}

}  // namespace

void ForwardShape::Validate() const {
  if (batch < 1) throw base::Error("batch must be at least 1, got " + std::to_string(batch));
  if (tokens_per_sequence < 1) {
    throw base::Error("tokens per sequence must be at least 1, got " +
                      std::to_string(tokens_per_sequence));
  }
  if (context_length < 0)
    throw base::Error("context length must be >= 0, got " + std::to_string(context_length));
  if (!(working_set_bytes >= 0))
    throw base::Error("working set must be >= 0 bytes, got " + std::to_string(working_set_bytes));
  if (ranked_rows < 0 || ranked_rows > batch * tokens_per_sequence) {
    throw base::Error("ranked rows must be in [0, " + std::to_string(batch * tokens_per_sequence) +
                      "] (the pass's tokens), got " + std::to_string(ranked_rows));
  }
}

double ForwardCost::OperatorTime(Operator op) const {
  for (const OperatorCost& entry : operators) {
    if (entry.op == op) return entry.time_s;
  }
  return 0;
}

OperatorCost& ForwardCost::Entry(Operator op) {
  for (OperatorCost& existing : operators) {
    if (existing.op == op) return existing;
  }
  return operators.emplace_back(OperatorCost{op, OperatorName(op)});
}

void ForwardCost::Add(Operator op, double op_flops, double op_bytes, double op_time_s) {
  OperatorCost& entry = Entry(op);
  entry.flops += op_flops;
  entry.bytes += op_bytes;
  entry.time_s += op_time_s;
}

void ForwardCost::Total() {
  time_s = flops = bytes = 0;
  for (const OperatorCost& op : operators) {
    time_s += op.time_s;
    flops += op.flops;
    bytes += op.bytes;
  }
}

double ForwardCost::OperatorTime(const std::string& name) const {
  for (const OperatorCost& op : operators) {
    if (op.name == name) return op.time_s;
  }
  return 0;
}

ForwardCost EstimateForwardCost(const MoeModelSpec& model, const HardwareSpec& hardware,
                                const ForwardShape& shape, const CostParameters& params) {
  params.Validate();
  return EstimateForwardCost(model, ComputeTargetOf(hardware, params.compute_dtype), shape, params);
}

ForwardCost EstimateForwardCost(const MoeModelSpec& model, const RooflineTarget& target,
                                const ForwardShape& shape, const CostParameters& params) {
  params.Validate();
  shape.Validate();
  const ParameterCounts counts = CountParameters(model);
  const WeightBytes weights = CountWeightBytes(model, counts);
  const double act_bytes = params.activation_bits / 8.0;
  const double h = static_cast<double>(model.hidden_size);
  const double batch = static_cast<double>(shape.batch);
  const double tokens = batch * static_cast<double>(shape.tokens_per_sequence);
  const double layers = static_cast<double>(model.num_layers);
  const double moe_layers = static_cast<double>(model.num_moe_layers());
  const double dense_layers = static_cast<double>(model.num_dense_layers());
  const double kv_bytes_per_token_layer =
      static_cast<double>(KvCacheBytesPerToken(model, params.kv_bits)) / layers;

  CostAccumulator acc(target, params);

  // Attention projections: every token multiplies every projection weight once.
  acc.Add(Operator::kAttentionProjections,
          2.0 * tokens * static_cast<double>(counts.attention_per_layer),
          weights.attention + tokens * h * 2.0 * act_bytes, layers, 2);

  // Attention over the KV cache, per layer (windows differ between layers for gpt-oss).
  const AttentionSpec& a = model.attention;
  double flops_per_query_key = 0;
  if (a.kind == AttentionKind::kMultiHeadLatent) {
    // Absorbed MLA: scores against the cached latent + rotary key, values from the latent.
    flops_per_query_key = static_cast<double>(a.num_heads) *
                          (2.0 * static_cast<double>(a.kv_lora_rank + a.qk_rope_head_dim) +
                           2.0 * static_cast<double>(a.kv_lora_rank));
  } else {
    flops_per_query_key = 4.0 * static_cast<double>(a.num_heads * a.head_dim);
  }
  // Two kinds of layer at most (windowed or not), each priced once and added per layer in order
  // (the simulator prices every pass; the sums are the same as pricing every layer).
  struct CoreCost {
    double flops, bytes, time_s;
  };
  auto core_cost = [&](int64_t window) {
    const AttentionSpan span = SpanOf(shape, window);
    const double flops = tokens * span.mean_keys * flops_per_query_key;
    const double bytes = batch * span.kv_positions * kv_bytes_per_token_layer;
    return CoreCost{flops, bytes, acc.Seconds(flops, bytes)};
  };
  const CoreCost full = core_cost(0);
  const CoreCost windowed = a.sliding_window > 0 ? core_cost(a.sliding_window) : full;
  if (model.num_layers > 0) {
    OperatorCost& entry = acc.Entry(Operator::kAttentionCore);
    for (int64_t layer = 0; layer < model.num_layers; ++layer) {
      const bool in_window =
          a.sliding_window > 0 && (!a.sliding_window_alternate || layer % 2 == 0);
      const CoreCost& core = in_window ? windowed : full;
      entry.flops += core.flops;
      entry.bytes += core.bytes;
      entry.time_s += core.time_s;
    }
  }

  double activated_experts = 0, tokens_per_activated_expert = 0;
  if (model.moe) {
    const MoeSpec& moe = *model.moe;
    const double experts = static_cast<double>(moe.num_experts);
    const double top_k = static_cast<double>(moe.top_k);
    acc.Add(Operator::kRouter, 2.0 * tokens * h * experts, weights.router + tokens * experts * 4.0,
            moe_layers, 2);
    const double activated = ActivatedExpertsPerLayer(moe, shape);
    activated_experts = activated;
    tokens_per_activated_expert = tokens * top_k / activated;
    acc.Add(Operator::kRoutedExperts,
            2.0 * tokens * top_k * static_cast<double>(counts.params_per_expert),
            activated * weights.expert + tokens * top_k * h * 2.0 * act_bytes, moe_layers, 1);
    if (moe.num_shared_experts > 0) {
      acc.Add(Operator::kSharedExperts,
              2.0 * tokens * static_cast<double>(counts.shared_experts_per_moe_layer),
              weights.shared_experts + tokens * h * 2.0 * act_bytes, moe_layers, 1);
    }
  }
  if (dense_layers > 0) {
    acc.Add(Operator::kDenseFfn,
            2.0 * tokens * static_cast<double>(counts.dense_ffn_per_dense_layer),
            weights.dense_ffn + tokens * h * 2.0 * act_bytes, dense_layers, 1);
  }
  // Norms, residual adds, rotary: a handful of memory-bound elementwise kernels per layer.
  acc.Add(Operator::kNormsResidual, 10.0 * tokens * h, 6.0 * tokens * h * act_bytes, layers, 4);

  const double embedding_row_bytes =
      static_cast<double>(model.embedding_dim()) * model.bits.embeddings / 8.0;
  acc.Add(Operator::kEmbedding, 0, tokens * embedding_row_bytes, 1, 1);
  const double logit_tokens = shape.logits_for_all_positions ? tokens : batch;
  acc.Add(Operator::kLmHead,
          2.0 * logit_tokens * static_cast<double>(model.embedding_dim()) *
              static_cast<double>(model.vocab_size),
          weights.lm_head + logit_tokens * static_cast<double>(model.vocab_size) * 4.0, 1, 1);

  // A beam step's ranking: per ranked row, a pass over its logits for their log-sum-exp (an
  // exponential each) and a scan keeping the best candidates.
  const double ranked = static_cast<double>(shape.ranked_rows);
  const double vocab = static_cast<double>(model.vocab_size);
  acc.Add(Operator::kBeamSelection, 8.0 * ranked * vocab, 2.0 * ranked * vocab * 4.0,
          shape.ranked_rows > 0 ? 1 : 0, 1);

  if (target.devices > 1) {
    // Two ring all-reduces of the hidden states per layer (after attention and after the FFN).
    const double g = static_cast<double>(target.devices);
    const double message_bytes = tokens * h * act_bytes;
    const double per_all_reduce_s =
        2.0 * (g - 1.0) / g * message_bytes / target.interconnect_bytes_per_s +
        2.0 * (g - 1.0) * target.interconnect_latency_s;
    acc.AddTime(Operator::kCommunication, 2.0 * layers * message_bytes,
                2.0 * layers * per_all_reduce_s);
  }

  ForwardCost cost = acc.Finish();
  cost.activated_experts_per_layer = activated_experts;
  cost.tokens_per_activated_expert = tokens_per_activated_expert;
  return cost;
}

MemoryFootprint EstimateMemory(const MoeModelSpec& model, const HardwareSpec& hardware,
                               double kv_tokens, const CostParameters& params) {
  return EstimateMemory(model, ComputeTargetOf(hardware, params.compute_dtype), kv_tokens, params);
}

MemoryFootprint EstimateMemory(const MoeModelSpec& model, const RooflineTarget& target,
                               double kv_tokens, const CostParameters& params) {
  const double devices = static_cast<double>(target.devices);
  MemoryFootprint footprint;
  footprint.weight_bytes_per_device = CountWeightBytes(model).total / devices;
  footprint.kv_bytes_per_device =
      kv_tokens * static_cast<double>(KvCacheBytesPerToken(model, params.kv_bits)) / devices;
  footprint.capacity_bytes_per_device = target.memory_bytes;
  return footprint;
}

double RidgePointTokens(const HardwareSpec& hardware, const CostParameters& params,
                        double weight_bits) {
  const RooflineTarget target = ComputeTargetOf(hardware, params.compute_dtype);
  return target.peak_flops / target.bandwidth_bytes_per_s * (weight_bits / 8.0) / 2.0;
}

}  // namespace moelab::model
