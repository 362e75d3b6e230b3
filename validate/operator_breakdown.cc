#include "validate/operator_breakdown.h"

#include <utility>

#include "model/roofline.h"
#include "validate/validation_metrics.h"

namespace moelab::validate {
namespace {

const char* CategoryOf(model::Operator op) {
  switch (op) {
    case model::Operator::kAttentionProjections:
    case model::Operator::kAttentionCore:
    case model::Operator::kAttention:
      return "attention";
    case model::Operator::kRouter:
      return "router";
    case model::Operator::kRoutedExperts:
    case model::Operator::kSharedExperts:
    case model::Operator::kDenseFfn:
      return "experts";
    case model::Operator::kLmHead:
      return "lm_head";
    case model::Operator::kNormsResidual:
    case model::Operator::kEmbedding:
    case model::Operator::kCommunication:
    case model::Operator::kBeamSelection:
      break;
  }
  return "other";
}

}  // namespace

OperatorSeconds OperatorSecondsOf(const executor::OperatorTimes& times) {
  return {{"attention", times.attention_s},
          {"router", times.router_s},
          {"experts", times.experts_s},
          {"lm_head", times.lm_head_s},
          {"other", times.other_s}};
}

OperatorSeconds OperatorSecondsOf(const model::ForwardCost& cost) {
  OperatorSeconds seconds = {
      {"attention", 0.0}, {"router", 0.0}, {"experts", 0.0}, {"lm_head", 0.0}, {"other", 0.0}};
  for (const model::OperatorCost& op : cost.operators) seconds[CategoryOf(op.op)] += op.time_s;
  return seconds;
}

OperatorSeconds MedianOperatorSeconds(const std::vector<OperatorSeconds>& runs) {
  OperatorSeconds medians;
  if (runs.empty()) return medians;
  for (const auto& [category, unused] : runs.front()) {
    std::vector<double> values;
    for (const OperatorSeconds& run : runs) values.push_back(run.at(category));
    medians[category] = Quantile(std::move(values), 0.5);
  }
  return medians;
}

OperatorSeconds Scaled(OperatorSeconds seconds, double factor) {
  for (auto& [category, value] : seconds) value *= factor;
  return seconds;
}

}  // namespace moelab::validate
