#include "plan/serve_sim.h"

#include <cmath>
#include <memory>
#include <utility>
#include <sstream>

#include "base/error.h"
#include "base/limits.h"
#include "report/chrome_trace.h"
#include "report/format.h"
#include "report/provenance.h"
#include "scheduler/decision_log.h"
#include "model/executor_shape.h"
#include "plan/sd_sweep.h"
#include "sim/serving_iteration_cost.h"
#include "sim/serving_speculative_cost.h"

namespace moelab::plan {

ServingTarget ResolveServingTarget(const std::string& model, const fit::CostSourceOptions& cost,
                                   const model::PresetStore& store) {
  cost.Validate();
  ServingTarget target;
  target.model = store.LoadModel(model);
  fit::CostSources sources(cost, store);
  if (sources.fitted()) {
    target.model = sources.ProfiledTarget(target.model);
    target.source = sources.Fitted(target.model);
    target.hardware = "profile:" + *cost.fitted_profile;
  } else {
    const model::HardwareSpec hardware = store.LoadHardware(cost.hardware);
    target.source = sources.ForHardware(hardware);
    target.hardware = hardware.name;
    if (!sources.calibrations().empty()) target.calibration = sources.calibrations().front();
  }
  return target;
}

int64_t KvBlocksFromMemory(const ServingTarget& target, int64_t block_tokens,
                           double memory_fraction, std::string& explanation) {
  // KV bytes grow linearly in tokens: the slope over a million tokens is the bytes per token.
  constexpr double kProbeTokens = 1e6;
  const model::MemoryFootprint empty = target.source->Memory(target.model, 0);
  const model::MemoryFootprint probe = target.source->Memory(target.model, kProbeTokens);
  const double kv_bytes_per_token = probe.kv_bytes_per_device / kProbeTokens;
  const double usable = empty.capacity_bytes_per_device * memory_fraction;
  const double room = usable - empty.weight_bytes_per_device;
  const double blocks = std::floor(room / (kv_bytes_per_token * static_cast<double>(block_tokens)));
  if (!(kv_bytes_per_token > 0) || !(blocks >= 1)) {
    throw base::Error("the weights of " + target.model.name + " (" +
                      report::FormatBytes(empty.weight_bytes_per_device) + " per device) leave " +
                      "no room for a KV block in " + report::FormatNumber(memory_fraction, 2) +
                      " x " + report::FormatBytes(empty.capacity_bytes_per_device) + " on " +
                      target.hardware + " (--kv-memory-fraction); give --kv-blocks");
  }
  const int64_t count = static_cast<int64_t>(std::min(blocks, double(scheduler::kMaxKvBlocks)));
  explanation = "from the cost source's memory: (" + report::FormatNumber(memory_fraction, 2) +
                " x " + report::FormatBytes(empty.capacity_bytes_per_device) + " - weights " +
                report::FormatBytes(empty.weight_bytes_per_device) + ") / (" +
                report::FormatBytes(kv_bytes_per_token) + " per token x " +
                std::to_string(block_tokens) + " tokens) per device";
  return count;
}

void ServeSimRequest::Validate() const {
  if (!(kv_memory_fraction > 0 && kv_memory_fraction <= 1)) {
    throw base::Error("--kv-memory-fraction " + report::FormatNumber(kv_memory_fraction, 3) +
                      ": expected a fraction in (0, 1]");
  }
  base::CheckSeconds(iteration_overhead_s, "--iteration-overhead-s");
  if (gamma < 0 || gamma + 1 > scheduler::kMaxDecodeTokensPerStep) {
    throw base::Error("--gamma " + std::to_string(gamma) + ": expected 0 (no SD) to " +
                      std::to_string(scheduler::kMaxDecodeTokensPerStep - 1));
  }
  if (gamma > 0) scheduler::SpeculativeAcceptance{alpha, acceptance_seed}.Validate();
  sim::ServingSimOptions resolved = options;
  if (resolved.scheduler.kv_blocks == 0) resolved.scheduler.kv_blocks = 1;  // checked once known
  resolved.Validate();
}

ServeSimResult RunServeSim(const ServeSimRequest& request, const model::PresetStore& store) {
  request.Validate();
  ServeSimResult result;
  result.request = request;
  result.target = ResolveServingTarget(request.model, request.cost, store);
  scheduler::SchedulerConfig& config = result.request.options.scheduler;
  if (config.kv_blocks == 0) {
    config.kv_blocks = KvBlocksFromMemory(result.target, config.kv_block_tokens,
                                          request.kv_memory_fraction, result.kv_budget_from);
  } else {
    result.kv_budget_from = "--kv-blocks";
  }
  result.request.options.slo = request.slo;
  result.requests = serving::GenerateRequests(request.load);
  const std::shared_ptr<const model::ExpertActivation> routing =
      request.routing.kind == routing::RoutingSpec::Kind::kUniform
          ? nullptr
          : TargetRouting(request.routing, result.target.model, request.routing_seed);
  result.routing = model::DescribeActivation(routing.get());
  auto target_pricer = std::make_unique<sim::CostSourceIterationPricer>(
      result.target.source, result.target.model, request.iteration_overhead_s);
  target_pricer->RouteBy(routing.get());
  if (request.gamma == 0) {
    result.sim = sim::SimulateServing(result.requests, result.request.options, *target_pricer);
    result.time_breakdown_s = target_pricer->Breakdown();
    return result;
  }
  result.draft = store.LoadModel(request.draft);
  if (result.target.hardware.rfind("profile:", 0) == 0)
    result.draft = model::ExecutorDraftShape(*result.draft, result.target.model);
  sim::ServingSimOptions& options = result.request.options;
  options.scheduler.decode_tokens_per_step = request.gamma + 1;
  options.acceptance = scheduler::SpeculativeAcceptance{request.alpha, request.acceptance_seed};
  sim::SpeculativeIterationPricer pricer(
      std::move(target_pricer),
      std::make_unique<sim::CostSourceIterationPricer>(result.target.source, *result.draft, 0.0));
  result.sim = sim::SimulateServing(result.requests, options, pricer);
  result.time_breakdown_s = pricer.Breakdown();
  return result;
}

nlohmann::json ServeSimResult::ToJson() const {
  nlohmann::json json = serving::ServingSummaryToJson(sim.summary);
  json["source"] = "moelab sim serve";
  json["load"] = {{"arrivals", serving::Describe(request.load.arrivals)},
                  {"prompt_tokens", serving::Describe(request.load.prompt_tokens)},
                  {"output_tokens", serving::Describe(request.load.output_tokens)},
                  {"seed", request.load.seed},
                  {"requests", static_cast<int64_t>(requests.size())}};
  if (request.load.duration_s) json["load"]["duration_s"] = *request.load.duration_s;
  json["slo"] = nlohmann::json::object();
  if (request.slo.ttft_s) json["slo"]["ttft_s"] = *request.slo.ttft_s;
  if (request.slo.tpot_s) json["slo"]["tpot_s"] = *request.slo.tpot_s;
  json["scheduler"] = request.options.scheduler.ToJson();
  json["kv_budget"] = {{"blocks", request.options.scheduler.kv_blocks},
                       {"from", kv_budget_from},
                       {"kv_memory_fraction", request.kv_memory_fraction}};
  json["cost_source"] = target.source->Describe();
  json["model"] = target.model.name;
  json["hardware"] = target.hardware;
  json["replicas"] = request.options.replicas;
  json["router"] = sim::RouterName(request.options.router);
  json["requests_per_replica"] = sim.requests_per_replica;
  json["iterations"] = sim.iterations;
  json["mean_batch_sequences"] = sim.mean_batch_sequences;
  json["mean_batched_tokens"] = sim.mean_batched_tokens;
  json["preemptions"] = sim.preemptions;
  json["refused"] = sim.refused;
  json["iteration_overhead_s"] = request.iteration_overhead_s;
  json["time_breakdown_s"] = time_breakdown_s;
  json["routing"] = routing;
  json["speculative"] = nullptr;
  if (draft) {
    json["speculative"] = {{"gamma", request.gamma},
                           {"alpha", request.alpha},
                           {"acceptance_seed", request.acceptance_seed},
                           {"draft", draft->name}};
  }
  return json;
}

std::string ServeSimResult::Text() const {
  const serving::ServingSummary& s = sim.summary;
  std::ostringstream out;
  out << "sim serve: " << target.model.name << " on " << target.hardware << " ("
      << target.source->name() << "), " << request.options.replicas << " replica(s), router "
      << sim::RouterName(request.options.router) << "\n";
  out << "load: " << serving::Describe(request.load.arrivals) << ", prompt "
      << serving::Describe(request.load.prompt_tokens) << ", output "
      << serving::Describe(request.load.output_tokens) << ", seed " << request.load.seed << ", "
      << requests.size() << " requests\n";
  out << "KV budget: " << request.options.scheduler.kv_blocks << " blocks of "
      << request.options.scheduler.kv_block_tokens << " tokens (" << kv_budget_from << ")\n";
  out << "scheduler: " << request.options.scheduler.ToJson().dump() << "\n";
  auto line = [&](const char* name, const serving::Percentiles& p) {
    out << "  " << name << "  p50 " << report::FormatSeconds(p.p50) << "  p90 "
        << report::FormatSeconds(p.p90) << "  p99 " << report::FormatSeconds(p.p99) << "  mean "
        << report::FormatSeconds(p.mean) << "\n";
  };
  line("TTFT", s.ttft_s);
  line("TPOT", s.tpot_s);
  line("ITL ", s.itl_s);
  line("E2E ", s.e2e_s);
  out << "completed " << s.completed << ", failed " << s.failed << ", "
      << report::FormatNumber(s.throughput_tokens_per_s, 1) << " tokens/s, "
      << report::FormatNumber(s.requests_per_s, 3) << " requests/s, goodput "
      << report::FormatNumber(s.goodput_requests_per_s, 3) << " requests/s\n";
  out << sim.iterations << " iterations, mean batch "
      << report::FormatNumber(sim.mean_batch_sequences, 2) << " sequences / "
      << report::FormatNumber(sim.mean_batched_tokens, 1) << " tokens, " << sim.preemptions
      << " preemptions\n";
  return out.str();
}

std::string ServeSimResult::Csv() const { return serving::ServingSummaryCsv(sim.summary); }

std::string ServeSimResult::TraceJson() const {
  report::ChromeTrace trace;
  for (int64_t replica = 0; replica < request.options.replicas; ++replica) {
    const int pid = static_cast<int>(replica) + 1;
    trace.ProcessName(pid, "replica " + std::to_string(replica));
    trace.ThreadName(pid, 0, "iterations");
  }
  for (const sim::IterationRecord& record : sim.iteration_records) {
    const int pid = static_cast<int>(record.replica) + 1;
    std::string name = std::to_string(record.decodes) + " decodes";
    if (record.prefill_chunks > 0) {
      name += " + " + std::to_string(record.prefill_chunks) + " prefill chunks (" +
              std::to_string(record.prefill_tokens) + " tokens)";
    }
    trace.Complete(name, "iteration", record.start_s, record.duration_s, pid, 0, record.iteration);
    trace.Counter("queue", record.start_s, pid,
                  {{"waiting", static_cast<double>(record.waiting)},
                   {"running", static_cast<double>(record.running)}});
    trace.Counter("kv_blocks_used", record.start_s, pid,
                  {{"blocks", static_cast<double>(record.kv_blocks_used)}});
  }
  return trace.Finish();
}

nlohmann::json ServeSimResult::DecisionsJson() const {
  if (sim.plans.size() != 1) {
    throw base::Error("--decisions-out: needs --replicas 1 (a decision log is one scheduler's)");
  }
  return scheduler::DecisionLogToJson(request.options.scheduler, sim.plans.front());
}

std::string Render(const ServeSimResult& result, report::Format format) {
  switch (format) {
    case report::Format::kJson: {
      nlohmann::json json = result.ToJson();
      json["provenance"] = report::Provenance();
      return json.dump(2) + "\n";
    }
    case report::Format::kCsv:
      return result.Csv();
    case report::Format::kTable:
      return result.Text();
  }
  return "";
}

}  // namespace moelab::plan
