#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "scheduler/scheduler.h"
#include "scheduler/speculative_acceptance.h"
#include "serving/load_spec.h"
#include "serving/serving_metrics.h"

namespace moelab::sim {

// What one serving iteration costs: the time of the mixed batch a scheduler plan runs
// (serving_iteration_cost.h prices it with a CostSource; tests use fixed times to check queues
// against closed forms).
class IterationPricer {
 public:
  virtual ~IterationPricer() = default;
  // Seconds the iteration of `plan` takes on one replica (> 0).
  virtual double Seconds(const scheduler::IterationPlan& plan) = 0;
  // The same for replica `replica`'s iteration starting at `start_s` (what the simulator calls):
  // a pricer with state per replica (an expert cache: serving_offload_cost.h) overrides it; the
  // stateless ones price the plan alone.
  virtual double SecondsOn(int64_t /*replica*/, double /*start_s*/,
                           const scheduler::IterationPlan& plan) {
    return Seconds(plan);
  }
};

// A fixed time per iteration plus a time per batched token: the D/D/1 and closed-form checks, and
// what a user pins down to compare schedulers apart from any cost model.
class FixedIterationPricer : public IterationPricer {
 public:
  FixedIterationPricer(double seconds_per_iteration, double seconds_per_token = 0);
  double Seconds(const scheduler::IterationPlan& plan) override;

 private:
  double seconds_per_iteration_, seconds_per_token_;
};

// How arrivals are spread over replicas: in turn, or to the replica with the fewest requests
// submitted and not finished (ties: the lowest index).
enum class Router { kRoundRobin, kLeastOutstanding };
std::string RouterName(Router router);
Router ParseRouter(const std::string& text);  // error names --router

struct ServingSimOptions {
  scheduler::SchedulerConfig scheduler;
  int64_t replicas = 1;  // each with its own scheduler and KV budget
  Router router = Router::kRoundRobin;
  serving::ServiceLevelObjectives slo;
  // SD (scheduler.decode_tokens_per_step = gamma + 1): each decode emits the drafts these seeded
  // coins accept + 1, the draws `moelab serve --alpha` makes (scheduler/speculative_acceptance.h),
  // keyed by the request's id.
  std::optional<scheduler::SpeculativeAcceptance> acceptance;
  bool keep_plans = false;       // ServingSimResult::plans (--decisions-out)
  bool keep_iterations = false;  // ServingSimResult::iterations (--trace-out)

  void Validate() const;  // errors name --replicas and the scheduler's options
};

// One iteration as it ran: for the timeline.
struct IterationRecord {
  int64_t replica = 0;
  int64_t iteration = 0;
  double start_s = 0, duration_s = 0;
  int64_t decodes = 0, prefill_chunks = 0, prefill_tokens = 0;
  int64_t waiting = 0, running = 0, kv_blocks_used = 0;  // after the plan's decisions
};

struct ServingSimResult {
  std::vector<serving::RequestOutcome> outcomes;  // by request id
  serving::ServingSummary summary;
  int64_t iterations = 0;
  double mean_batch_sequences = 0;  // over iterations
  double mean_batched_tokens = 0;
  double busy_s = 0;  // iteration time summed over replicas
  int64_t preemptions = 0;
  int64_t refused = 0;
  std::vector<int64_t> requests_per_replica;
  std::vector<std::vector<scheduler::IterationPlan>> plans;  // per replica, with keep_plans
  std::vector<IterationRecord> iteration_records;            // with keep_iterations
};

// The discrete-event serving simulation: requests arrive at their times (open loop), the router
// hands each to a replica, whose scheduler plans iteration after iteration while it has work; an
// iteration lasts what `pricer` says, and the tokens it emits arrive at its end (TTFT = the end of
// the iteration that emitted the first token - arrival). Arrivals at or before an iteration's end
// are submitted before the next plan. A refused request (too long, queue full) is a failed outcome
// carrying the scheduler's reason. Deterministic: no clock, no randomness beyond the requests.
ServingSimResult SimulateServing(const std::vector<serving::RequestSpec>& requests,
                                 const ServingSimOptions& options, IterationPricer& pricer);

// A request for ReplayByIteration: submitted just before the scheduler's `before_iteration`-th
// plan (an engine's iteration count when the request reached it).
struct IterationArrival {
  int64_t before_iteration = 0;
  scheduler::ScheduledRequest request;
};

// The scheduler's plans for arrivals given by iteration instead of time, every request running to
// its max_output_tokens: the simulator's side of the engine-vs-simulator same-decisions check
// (the engine records when each request reached it as an iteration count). While the scheduler
// is idle no plan is made, as an engine idles: the next request is submitted at once. Arrivals
// must be in non-decreasing `before_iteration` (Error otherwise); refused requests leave no plan.
// With `acceptance` (SD at a fixed rate: decode_tokens_per_step = gamma + 1), each decode emits
// what the seeded coins accept + 1, as the engine's --alpha does.
std::vector<scheduler::IterationPlan> ReplayByIteration(
    const scheduler::SchedulerConfig& config, const std::vector<IterationArrival>& arrivals,
    const std::optional<scheduler::SpeculativeAcceptance>& acceptance = std::nullopt);

}  // namespace moelab::sim
