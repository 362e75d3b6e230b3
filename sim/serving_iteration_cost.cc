#include "sim/serving_iteration_cost.h"

#include <cmath>
#include <utility>

#include "base/hash.h"

namespace moelab::sim {
namespace {

bool ContextDependent(model::Operator op) {
  return op == model::Operator::kAttentionCore || op == model::Operator::kAttention;
}

}  // namespace

CostSourceIterationPricer::CostSourceIterationPricer(
    std::shared_ptr<const model::CostSource> source, model::MoeModelSpec model,
    double iteration_overhead_s)
    : source_(std::move(source)),
      model_(std::move(model)),
      iteration_overhead_s_(iteration_overhead_s) {}

double CostSourceIterationPricer::WeightStreamingSeconds(int64_t tokens) {
  auto found = weight_streaming_s_.find(tokens);
  if (found != weight_streaming_s_.end()) return found->second;
  model::ForwardShape shape;
  shape.batch = tokens;
  shape.activation = routing_;
  const model::ForwardCost cost = source_->Forward(model_, shape);
  double seconds = 0;
  for (const model::OperatorCost& op : cost.operators) {
    if (!ContextDependent(op.op) && op.op != model::Operator::kLmHead) seconds += op.time_s;
  }
  weight_streaming_s_.emplace(tokens, seconds);
  return seconds;
}

double CostSourceIterationPricer::LmHeadSeconds(int64_t rows) {
  if (rows == 0) return 0;
  auto found = lm_head_s_.find(rows);
  if (found != lm_head_s_.end()) return found->second;
  model::ForwardShape shape;
  shape.batch = rows;
  const double seconds = source_->Forward(model_, shape).OperatorTime(model::Operator::kLmHead);
  lm_head_s_.emplace(rows, seconds);
  return seconds;
}

double CostSourceIterationPricer::AttentionSeconds(int64_t batch, int64_t tokens, int64_t context,
                                                   bool decode) {
  const uint64_t key = base::SplitMix64(base::SplitMix64(base::SplitMix64(batch) ^ tokens) ^
                                        static_cast<uint64_t>(context)) ^
                       (decode ? 1 : 0);
  auto found = attention_s_.find(key);
  if (found != attention_s_.end()) return found->second;
  model::ForwardShape shape;
  shape.batch = batch;
  shape.tokens_per_sequence = tokens;
  shape.context_length = context;
  shape.logits_for_all_positions = decode;
  const model::ForwardCost cost = source_->Forward(model_, shape);
  double seconds = 0;
  for (const model::OperatorCost& op : cost.operators) {
    if (ContextDependent(op.op)) seconds += op.time_s;
  }
  attention_s_.emplace(key, seconds);
  return seconds;
}

double CostSourceIterationPricer::Seconds(const scheduler::IterationPlan& plan) {
  int64_t tokens = 0, rows = 0, decodes = 0, decode_tokens = 0, decode_context = 0;
  double attention_s = 0;
  for (const scheduler::BatchEntry& entry : plan.batch) {
    tokens += entry.tokens;
    // Logits for a prefill's last position when it ends the prefill; for every verified position
    // of a decode (1, or gamma + 1 with SD).
    if (entry.emits_token) rows += entry.prefill ? 1 : entry.tokens;
    if (entry.prefill) {
      attention_s += AttentionSeconds(1, entry.tokens, entry.context_tokens, false);
    } else {
      ++decodes;
      decode_tokens += entry.tokens;
      decode_context += entry.context_tokens;
    }
  }
  if (decodes > 0) {
    auto mean = [decodes](int64_t sum) {
      return static_cast<int64_t>(std::llround(static_cast<double>(sum) / decodes));
    };
    attention_s += AttentionSeconds(decodes, mean(decode_tokens), mean(decode_context), true);
  }
  const double weight_s = WeightStreamingSeconds(tokens);
  const double lm_head_s = LmHeadSeconds(rows);
  total_weight_s_ += weight_s;
  total_lm_head_s_ += lm_head_s;
  total_attention_s_ += attention_s;
  total_overhead_s_ += iteration_overhead_s_;
  return weight_s + lm_head_s + attention_s + iteration_overhead_s_;
}

nlohmann::json CostSourceIterationPricer::Breakdown() const {
  return {{"weight_streaming_s", total_weight_s_},
          {"lm_head_s", total_lm_head_s_},
          {"attention_s", total_attention_s_},
          {"overhead_s", total_overhead_s_}};
}

}  // namespace moelab::sim
