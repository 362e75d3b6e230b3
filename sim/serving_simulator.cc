#include "sim/serving_simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "base/error.h"
#include "base/limits.h"

namespace moelab::sim {
namespace {

// Replicas a simulation runs: far beyond any planning question, and each keeps a scheduler.
constexpr int64_t kMaxReplicas = 4096;

struct Replica {
  explicit Replica(const scheduler::SchedulerConfig& config) : scheduler(config) {}
  scheduler::Scheduler scheduler;
  bool busy = false;
  double end_s = 0;
  scheduler::IterationPlan plan;
  int64_t outstanding = 0;
};

// SD at a fixed rate: what each decode of `plan` emits (accepted drafts + 1), from the coins at
// the request's output positions; empty without SD (every decode emits its tokens).
std::vector<std::pair<int64_t, int64_t>> EmittedByDecodes(
    const scheduler::Scheduler& scheduler, const scheduler::IterationPlan& plan,
    const std::optional<scheduler::SpeculativeAcceptance>& acceptance,
    const std::vector<serving::RequestSpec>* requests = nullptr) {
  std::vector<std::pair<int64_t, int64_t>> emitted;
  if (!acceptance) return emitted;
  for (const scheduler::BatchEntry& entry : plan.batch) {
    if (entry.prefill) continue;
    const int64_t generated = scheduler.GeneratedTokens(entry.request_id).value_or(0);
    // The simulator's scheduler knows a request by its position; the coins by its id.
    const int64_t key = requests ? (*requests)[entry.request_id].id : entry.request_id;
    emitted.emplace_back(entry.request_id,
                         acceptance->Accepted(key, generated, entry.tokens - 1) + 1);
  }
  return emitted;
}

// The simulation's state and its two events: an arrival, and the end of a replica's iteration.
class ServingRun {
 public:
  ServingRun(const std::vector<serving::RequestSpec>& requests, const ServingSimOptions& options,
             IterationPricer& pricer)
      : requests_(requests), options_(options), pricer_(pricer) {
    replicas_.reserve(options.replicas);
    for (int64_t i = 0; i < options.replicas; ++i) replicas_.emplace_back(options.scheduler);
    result_.outcomes.resize(requests.size());
    result_.requests_per_replica.assign(options.replicas, 0);
    if (options.keep_plans) result_.plans.resize(options.replicas);
  }

  ServingSimResult Run();

 private:
  void Arrive(size_t index, double now_s);
  void StartIteration(int64_t replica_index, double now_s);
  void EndIteration(int64_t replica_index);
  int64_t Route();

  const std::vector<serving::RequestSpec>& requests_;
  const ServingSimOptions& options_;
  IterationPricer& pricer_;
  std::vector<Replica> replicas_;
  ServingSimResult result_;
  int64_t arrivals_ = 0;
  double batch_sequences_ = 0, batched_tokens_ = 0;
};

int64_t ServingRun::Route() {
  const int64_t count = static_cast<int64_t>(replicas_.size());
  if (options_.router == Router::kRoundRobin) return arrivals_++ % count;
  ++arrivals_;
  int64_t best = 0;
  for (int64_t i = 1; i < count; ++i) {
    if (replicas_[i].outstanding < replicas_[best].outstanding) best = i;
  }
  return best;
}

void ServingRun::Arrive(size_t index, double now_s) {
  const serving::RequestSpec& spec = requests_[index];
  serving::RequestOutcome& outcome = result_.outcomes[index];
  outcome.id = spec.id;
  outcome.arrival_s = spec.arrival_s;
  outcome.prompt_tokens = spec.prompt_tokens;
  const int64_t replica_index = Route();
  Replica& replica = replicas_[replica_index];
  // The scheduler knows requests by their position: ids need not be dense or unique upstream.
  const scheduler::AdmitResult admit = replica.scheduler.Submit(
      {static_cast<int64_t>(index), spec.arrival_s, spec.prompt_tokens, spec.output_tokens, 0});
  if (admit.refusal != scheduler::Refusal::kNone) {
    outcome.failed = true;
    outcome.error = admit.refusal == scheduler::Refusal::kQueueFull
                        ? "queue full (--max-waiting)"
                        : "too long for --max-sequence-tokens or the KV budget";
    outcome.finish_s = now_s;
    ++result_.refused;
    return;
  }
  ++replica.outstanding;
  ++result_.requests_per_replica[replica_index];
}

void ServingRun::StartIteration(int64_t replica_index, double now_s) {
  Replica& replica = replicas_[replica_index];
  replica.busy = false;
  if (replica.scheduler.Idle()) return;
  replica.plan = replica.scheduler.Plan();
  if (replica.plan.batch.empty()) {
    throw base::Error("sim serve: the scheduler planned an empty iteration with work queued");
  }
  const double duration_s = pricer_.SecondsOn(replica_index, now_s, replica.plan);
  if (!(duration_s > 0) || !std::isfinite(duration_s)) {
    throw base::Error("sim serve: an iteration priced at " + std::to_string(duration_s) +
                      " s (expected a finite time > 0)");
  }
  replica.busy = true;
  replica.end_s = now_s + duration_s;
  ++result_.iterations;
  result_.busy_s += duration_s;
  result_.preemptions += static_cast<int64_t>(replica.plan.preempted.size());
  batch_sequences_ += static_cast<double>(replica.plan.batch.size());
  batched_tokens_ += static_cast<double>(replica.plan.batched_tokens());
  if (options_.keep_plans) result_.plans[replica_index].push_back(replica.plan);
  if (options_.keep_iterations) {
    IterationRecord record;
    record.replica = replica_index;
    record.iteration = replica.plan.iteration;
    record.start_s = now_s;
    record.duration_s = duration_s;
    for (const scheduler::BatchEntry& entry : replica.plan.batch) {
      if (entry.prefill) {
        ++record.prefill_chunks;
        record.prefill_tokens += entry.tokens;
      } else {
        ++record.decodes;
      }
    }
    record.waiting = replica.plan.waiting;
    record.running = replica.scheduler.State().running;
    record.kv_blocks_used = replica.plan.kv_blocks_used;
    result_.iteration_records.push_back(record);
  }
}

// Tokens reach the client when the iteration that emitted them ends.
void ServingRun::EndIteration(int64_t replica_index) {
  Replica& replica = replicas_[replica_index];
  const double now_s = replica.end_s;
  const std::vector<std::pair<int64_t, int64_t>> emitted =
      EmittedByDecodes(replica.scheduler, replica.plan, options_.acceptance, &requests_);
  const std::vector<int64_t> finished = replica.scheduler.Complete(replica.plan, {}, emitted);
  size_t decode = 0;
  for (const scheduler::BatchEntry& entry : replica.plan.batch) {
    if (!entry.emits_token) continue;
    serving::RequestOutcome& outcome = result_.outcomes[entry.request_id];
    int64_t tokens = entry.prefill ? 1 : entry.tokens;
    if (!entry.prefill && !emitted.empty()) tokens = emitted[decode++].second;
    if (outcome.output_tokens == 0) outcome.first_token_s = now_s;
    outcome.output_tokens += tokens;
    outcome.token_times_s.insert(outcome.token_times_s.end(), tokens, now_s);
  }
  for (const int64_t id : finished) result_.outcomes[id].finish_s = now_s;
  replica.outstanding -= static_cast<int64_t>(finished.size());
  StartIteration(replica_index, now_s);
}

ServingSimResult ServingRun::Run() {
  constexpr double kNever = std::numeric_limits<double>::infinity();
  size_t next = 0;
  for (;;) {
    const double arrival_s = next < requests_.size() ? requests_[next].arrival_s : kNever;
    std::optional<int64_t> ending;
    for (int64_t i = 0; i < static_cast<int64_t>(replicas_.size()); ++i) {
      if (replicas_[i].busy && (!ending || replicas_[i].end_s < replicas_[*ending].end_s)) {
        ending = i;
      }
    }
    if (!ending && next == requests_.size()) break;
    if (!ending || arrival_s <= replicas_[*ending].end_s) {
      // Every arrival of this instant first, so they share the next plan of an idle replica.
      while (next < requests_.size() && requests_[next].arrival_s == arrival_s) {
        Arrive(next++, arrival_s);
      }
      for (int64_t i = 0; i < static_cast<int64_t>(replicas_.size()); ++i) {
        if (!replicas_[i].busy) StartIteration(i, arrival_s);
      }
    } else {
      EndIteration(*ending);
    }
  }
  if (result_.iterations > 0) {
    result_.mean_batch_sequences = batch_sequences_ / static_cast<double>(result_.iterations);
    result_.mean_batched_tokens = batched_tokens_ / static_cast<double>(result_.iterations);
  }
  result_.summary = serving::Summarize(result_.outcomes, options_.slo);
  return std::move(result_);
}

}  // namespace

FixedIterationPricer::FixedIterationPricer(double seconds_per_iteration, double seconds_per_token)
    : seconds_per_iteration_(seconds_per_iteration), seconds_per_token_(seconds_per_token) {}

double FixedIterationPricer::Seconds(const scheduler::IterationPlan& plan) {
  return seconds_per_iteration_ + seconds_per_token_ * static_cast<double>(plan.batched_tokens());
}

std::string RouterName(Router router) {
  return router == Router::kLeastOutstanding ? "least-outstanding" : "round-robin";
}

Router ParseRouter(const std::string& text) {
  if (text == "round-robin") return Router::kRoundRobin;
  if (text == "least-outstanding") return Router::kLeastOutstanding;
  throw base::Error("--router " + text + ": expected round-robin or least-outstanding");
}

void ServingSimOptions::Validate() const {
  base::CheckCount(replicas, 1, kMaxReplicas, "--replicas", "each replica keeps a scheduler");
  scheduler.Validate();
  if (acceptance) acceptance->Validate();
}

ServingSimResult SimulateServing(const std::vector<serving::RequestSpec>& requests,
                                 const ServingSimOptions& options, IterationPricer& pricer) {
  options.Validate();
  for (size_t i = 0; i < requests.size(); ++i) {
    base::CheckSeconds(requests[i].arrival_s,
                       "request " + std::to_string(requests[i].id) + ": arrival_s");
    if (i > 0 && requests[i].arrival_s < requests[i - 1].arrival_s) {
      throw base::Error(
          "sim serve: request " + std::to_string(requests[i].id) +
          " arrives before the one listed before it (arrivals must be in time order)");
    }
  }
  return ServingRun(requests, options, pricer).Run();
}

std::vector<scheduler::IterationPlan> ReplayByIteration(
    const scheduler::SchedulerConfig& config, const std::vector<IterationArrival>& arrivals,
    const std::optional<scheduler::SpeculativeAcceptance>& acceptance) {
  for (size_t i = 1; i < arrivals.size(); ++i) {
    if (arrivals[i].before_iteration < arrivals[i - 1].before_iteration) {
      throw base::Error("replay: request " + std::to_string(arrivals[i].request.id) +
                        " is listed after a later iteration's arrival");
    }
  }
  scheduler::Scheduler scheduler(config);
  std::vector<scheduler::IterationPlan> plans;
  size_t next = 0;
  int64_t planned = 0;
  while (next < arrivals.size() || !scheduler.Idle()) {
    // An idle engine makes no plans: the next request reaches it at once.
    const int64_t now =
        scheduler.Idle() ? std::max(planned, arrivals[next].before_iteration) : planned;
    while (next < arrivals.size() && arrivals[next].before_iteration <= now) {
      scheduler.Submit(arrivals[next++].request);
    }
    if (scheduler.Idle()) continue;  // every request of this instant was refused
    plans.push_back(scheduler.Plan());
    scheduler.Complete(plans.back(), {}, EmittedByDecodes(scheduler, plans.back(), acceptance));
    ++planned;
  }
  return plans;
}

}  // namespace moelab::sim
