#include "executor/serving_replay.h"

#include <algorithm>
#include <string>

#include "base/error.h"

namespace moelab::executor {

ReplayResult ReplayByIteration(ForwardModel& model, const scheduler::SchedulerConfig& config,
                               const std::vector<ReplayArrival>& arrivals, int64_t max_iterations,
                               ServingSpeculation speculation, routing::RoutingSource* routing) {
  std::vector<ReplayArrival> due = arrivals;
  std::stable_sort(due.begin(), due.end(), [](const ReplayArrival& a, const ReplayArrival& b) {
    return a.submit_before_iteration < b.submit_before_iteration;
  });
  ServingCore core(model, config, speculation);
  core.RouteBy(routing);
  ReplayResult result;
  size_t next = 0;
  for (int64_t iteration = 0; next < due.size() || !core.Idle(); ++iteration) {
    if (iteration >= max_iterations) {
      throw base::Error("serving replay: not drained after " + std::to_string(max_iterations) +
                        " iterations");
    }
    for (; next < due.size() && due[next].submit_before_iteration <= iteration; ++next) {
      const ServingRequest& request = due[next].request;
      scheduler::AdmitResult admit = core.Submit(request);
      if (admit.refusal != scheduler::Refusal::kNone)
        result.refusals.emplace(request.id, std::move(admit));
      else
        result.tokens[request.id];  // present even if it never runs
    }
    IterationOutcome outcome = core.Step();
    for (const EmittedToken& emitted : outcome.emitted)
      result.tokens[emitted.request_id].push_back(emitted.token);
    result.plans.push_back(std::move(outcome.plan));
  }
  return result;
}

}  // namespace moelab::executor
