#include "plan/serve_sim.h"

#include <algorithm>
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
#include "plan/offload_sweep.h"
#include "plan/sd_sweep.h"
#include "policies/memory_plan.h"
#include "policies/registry.h"
#include "sim/serving_iteration_cost.h"
#include "sim/serving_offload_cost.h"
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
    target.profiled_draft = sources.Fit().draft_name;
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
    throw base::Error("--kv-memory-fraction " + report::ShortestText(kv_memory_fraction) +
                      ": expected a fraction in (0, 1]");
  }
  base::CheckSeconds(iteration_overhead_s, "--iteration-overhead-s");
  if (gamma < 0 || gamma + 1 > scheduler::kMaxDecodeTokensPerStep) {
    throw base::Error("--gamma " + std::to_string(gamma) + ": expected 0 (no SD) to " +
                      std::to_string(scheduler::kMaxDecodeTokensPerStep - 1));
  }
  if (gamma > 0) scheduler::SpeculativeAcceptance{alpha, acceptance_seed}.Validate();
  if (offload) {
    policies::DefaultPolicyRegistry().Find(offload->policy, "--offload");  // lists the valid ones
    if (offload->hardware.empty()) {
      throw base::Error(
          "--offload: needs --hardware H, the machine whose memory tiers, link and "
          "storage hold the experts (--profile may still price the computation)");
    }
    if (routing.kind == routing::RoutingSpec::Kind::kTrace) {
      throw base::Error(
          "--routing trace: with --offload each iteration's tokens are routed by a generated "
          "source (a trace's steps have their own token counts); use uniform, popularity:FILE "
          "or correlated:...");
    }
    if (offload->accelerator_bytes && offload->expert_memory_bytes) {
      throw base::Error(
          "--accelerator-memory and --expert-memory: give one (the accelerator's whole memory, "
          "or the expert cache's as moelab serve --expert-memory takes it)");
    }
    if (offload->expert_memory_bytes &&
        !(*offload->expert_memory_bytes > 0 && std::isfinite(*offload->expert_memory_bytes))) {
      throw base::Error("--expert-memory must be a positive size");
    }
    if (offload->accelerator_bytes &&
        !(*offload->accelerator_bytes > 0 && std::isfinite(*offload->accelerator_bytes))) {
      throw base::Error("--accelerator-memory must be a positive size");
    }
  }
  sim::ServingSimOptions resolved = options;
  if (resolved.scheduler.kv_blocks == 0) resolved.scheduler.kv_blocks = 1;  // checked once known
  resolved.Validate();
}

int64_t ResolveMaxSequenceTokens(const scheduler::SchedulerConfig& config,
                                 const model::MoeModelSpec& model) {
  const int64_t positions = model.max_position_embeddings;
  if (config.max_sequence_tokens > 0) {
    if (positions > 0 && config.max_sequence_tokens > positions) {
      throw base::Error("--max-sequence-tokens " + std::to_string(config.max_sequence_tokens) +
                        " exceeds model '" + model.name + "''s max_position_embeddings " +
                        std::to_string(positions) + ": give --max-sequence-tokens at most that");
    }
    config.CheckSequenceFitsBudget();
    return config.max_sequence_tokens;
  }
  const int64_t kv_tokens = config.kv_blocks * config.kv_block_tokens;
  return positions > 0 ? std::min(kv_tokens, positions) : kv_tokens;
}

int64_t OffloadKvBlocks(const scheduler::SchedulerConfig& config,
                        const std::vector<serving::RequestSpec>& requests,
                        std::string& explanation) {
  double tokens = 0;
  for (const serving::RequestSpec& request : requests)
    tokens += static_cast<double>(request.prompt_tokens + request.output_tokens);
  const double mean_tokens = requests.empty() ? 1 : tokens / static_cast<double>(requests.size());
  const double blocks = std::ceil(static_cast<double>(config.max_running_sequences) * mean_tokens /
                                  static_cast<double>(config.kv_block_tokens));
  explanation = "with --offload: --max-running " + std::to_string(config.max_running_sequences) +
                " sequences of the requests' mean " + report::FormatNumber(mean_tokens, 1) +
                " prompt + output tokens (the memory plan gives the rest to the expert cache)";
  return std::max<int64_t>(
      1, static_cast<int64_t>(std::min(blocks, static_cast<double>(scheduler::kMaxKvBlocks))));
}

std::unique_ptr<sim::IterationPricer> MakeServingPricer(
    const ServeSimRequest& request, const ServingTarget& target,
    const std::optional<model::MoeModelSpec>& draft,
    const std::shared_ptr<const model::ExpertActivation>& routing,
    const model::PresetStore& store) {
  auto target_pricer = std::make_unique<sim::CostSourceIterationPricer>(
      target.source, target.model, request.iteration_overhead_s);
  target_pricer->RouteBy(routing.get());
  std::unique_ptr<sim::IterationPricer> compute;
  if (request.gamma == 0) {
    compute = std::move(target_pricer);
  } else {
    compute = std::make_unique<sim::SpeculativeIterationPricer>(
        std::move(target_pricer),
        std::make_unique<sim::CostSourceIterationPricer>(target.source, draft.value(), 0.0));
  }
  if (!request.offload) return compute;
  const ServeOffload& offload = *request.offload;
  sim::SimConfig config;
  config.model = target.model;
  config.hardware = store.LoadHardware(offload.hardware);
  config.policy = offload.policy;
  config.policy_options = offload.policy_options;
  config.routing = request.routing;
  config.seed = request.routing_seed;
  config.accelerator_bytes = offload.accelerator_bytes;
  fit::CostSourceOptions cost = request.cost;
  cost.hardware = offload.hardware;
  fit::CostSources sources(cost, store);
  ApplyCostSources(sources, config);
  const scheduler::SchedulerConfig& scheduler = request.options.scheduler;
  if (offload.expert_memory_bytes) {
    const policies::ModelMemory memory = policies::ModelMemoryOf(
        config.model, config.kv_bits, scheduler.kv_blocks * scheduler.kv_block_tokens);
    double dense_bytes = 0;
    for (const double bytes : memory.dense_layer_bytes) dense_bytes += bytes;
    config.accelerator_bytes = memory.fixed_bytes + dense_bytes + *offload.expert_memory_bytes;
  }
  return std::make_unique<sim::OffloadIterationPricer>(
      std::move(compute), std::move(config), scheduler.max_running_sequences,
      scheduler.kv_blocks * scheduler.kv_block_tokens);
}

namespace {

// Where the simulated time went, from the pricer's parts.
nlohmann::json Breakdown(sim::IterationPricer& pricer) {
  if (auto* offload = dynamic_cast<sim::OffloadIterationPricer*>(&pricer)) {
    nlohmann::json json = Breakdown(offload->compute());
    json["offload_s"] = offload->Summary()["offload_s"];
    return json;
  }
  if (auto* speculative = dynamic_cast<sim::SpeculativeIterationPricer*>(&pricer))
    return speculative->Breakdown();
  if (auto* composed = dynamic_cast<sim::CostSourceIterationPricer*>(&pricer))
    return composed->Breakdown();
  return nlohmann::json::object();
}

}  // namespace

ServeSimResult RunServeSim(const ServeSimRequest& request, const model::PresetStore& store) {
  request.Validate();
  ServeSimResult result;
  result.request = request;
  result.target = ResolveServingTarget(request.model, request.cost, store);
  result.requests = serving::GenerateRequests(request.load);
  const serving::TraceLengthColumns columns = serving::LengthColumnsOfTrace(request.load);
  result.prompt_tokens_from = columns.prompt_tokens ? "the trace's prompt_tokens column"
                                                    : serving::Describe(request.load.prompt_tokens);
  result.output_tokens_from = columns.output_tokens ? "the trace's output_tokens column"
                                                    : serving::Describe(request.load.output_tokens);
  scheduler::SchedulerConfig& config = result.request.options.scheduler;
  if (config.kv_blocks != 0) {
    result.kv_budget_from = "--kv-blocks";
  } else if (request.offload) {
    config.kv_blocks = OffloadKvBlocks(config, result.requests, result.kv_budget_from);
  } else {
    config.kv_blocks = KvBlocksFromMemory(result.target, config.kv_block_tokens,
                                          request.kv_memory_fraction, result.kv_budget_from);
  }
  config.max_sequence_tokens = ResolveMaxSequenceTokens(config, result.target.model);
  sim::ServingSimOptions& options = result.request.options;
  options.slo = request.slo;
  const std::shared_ptr<const model::ExpertActivation> routing =
      request.routing.kind == routing::RoutingSpec::Kind::kUniform
          ? nullptr
          : TargetRouting(request.routing, result.target.model, request.routing_seed);
  result.routing = model::DescribeActivation(routing.get());
  if (request.gamma > 0) {
    result.draft = store.LoadModel(request.draft);
    if (result.target.hardware.rfind("profile:", 0) == 0) {
      fit::CostSources::RequireDraft(result.target.profiled_draft, result.target.hardware.substr(8),
                                     *result.draft);
      result.draft = model::ExecutorDraftShape(*result.draft, result.target.model);
    }
    options.scheduler.decode_tokens_per_step = request.gamma + 1;
    options.acceptance = scheduler::SpeculativeAcceptance{request.alpha, request.acceptance_seed};
  }
  const std::unique_ptr<sim::IterationPricer> pricer =
      MakeServingPricer(result.request, result.target, result.draft, routing, store);
  result.sim = sim::SimulateServing(result.requests, options, *pricer);
  result.time_breakdown_s = Breakdown(*pricer);
  if (auto* offload = dynamic_cast<sim::OffloadIterationPricer*>(pricer.get()))
    result.offload = offload->Summary();
  return result;
}

nlohmann::json ServeSimResult::ToJson() const {
  nlohmann::json json = serving::ServingSummaryToJson(sim.summary);
  json["source"] = "moelab sim serve";
  json["load"] = {{"arrivals", serving::Describe(request.load.arrivals)},
                  {"prompt_tokens", prompt_tokens_from},
                  {"output_tokens", output_tokens_from},
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
  json["offload"] = offload;
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
  out << "load: " << serving::Describe(request.load.arrivals) << ", prompt " << prompt_tokens_from
      << ", output " << output_tokens_from << ", seed " << request.load.seed << ", "
      << requests.size() << " requests\n";
  out << "KV budget: " << request.options.scheduler.kv_blocks << " blocks of "
      << request.options.scheduler.kv_block_tokens << " tokens (" << kv_budget_from << ")\n";
  out << "scheduler: " << request.options.scheduler.ToJson().dump() << "\n";
  auto line = [&](const char* name, const serving::Percentiles& p) {
    if (p.count == 0) {  // no sample: not a latency of 0 s
      out << "  " << name << "  n/a (no sample)\n";
      return;
    }
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
  if (!offload.is_null()) {
    out << "offload: " << offload["policy"].get<std::string>() << ", hit rate "
        << report::FormatNumber(offload["hit_rate"].get<double>(), 3) << ", "
        << offload["experts"]["demand_fetches"].get<int64_t>() << " demand fetches, "
        << report::FormatBytes(offload["bytes"]["storage_to_host"].get<double>())
        << " read from storage; offloading added "
        << report::FormatSeconds(offload["offload_s"].get<double>()) << " over "
        << offload["iterations"].get<int64_t>() << " iterations\n";
    // As sim offload says it: a hit rate of 1 there is the ideal bound, not this memory's.
    if (offload["memory"]["fits_accelerator"] == false)
      out << "(resident is the ideal: the experts do not actually fit in accelerator memory)\n";
  }
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
