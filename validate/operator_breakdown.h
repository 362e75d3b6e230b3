#pragma once

#include <map>
#include <string>
#include <vector>

#include "executor/forward_model.h"
#include "model/forward_cost.h"

namespace moelab::validate {

// Seconds per operator in the executor's categories (executor/forward_model.h OperatorTimes):
// attention, router, experts, lm_head, other. A prediction's operators are summed into the same
// categories, so a case's miss names the operator it comes from.
using OperatorSeconds = std::map<std::string, double>;

OperatorSeconds OperatorSecondsOf(const executor::OperatorTimes& times);
// attention projections and core -> attention; routed and shared experts and dense FFNs ->
// experts; norms, residual adds, embedding and communication -> other.
OperatorSeconds OperatorSecondsOf(const model::ForwardCost& cost);
// Per category, the median over runs (every run has the same categories).
OperatorSeconds MedianOperatorSeconds(const std::vector<OperatorSeconds>& runs);
OperatorSeconds Scaled(OperatorSeconds seconds, double factor);

}  // namespace moelab::validate
