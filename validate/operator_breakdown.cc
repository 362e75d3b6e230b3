#include "validate/operator_breakdown.h"

#include <algorithm>

#include "model/roofline.h"

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
      break;
  }
  return "other";
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
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
    medians[category] = Median(values);
  }
  return medians;
}

OperatorSeconds Scaled(OperatorSeconds seconds, double factor) {
  for (auto& [category, value] : seconds) value *= factor;
  return seconds;
}

}  // namespace moelab::validate
