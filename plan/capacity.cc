#include "plan/capacity.h"

#include <algorithm>
#include <memory>
#include <sstream>

#include "base/error.h"
#include "base/limits.h"
#include "base/number_lists.h"
#include "plan/serve_sim.h"
#include "policies/registry.h"
#include "report/format.h"
#include "report/provenance.h"
#include "sim/serving_iteration_cost.h"
#include "sim/serving_speculative_cost.h"

namespace moelab::plan {
namespace {

struct Evaluation {
  bool meets = false;
  serving::ServingSummary summary;
};

// One hardware's candidates: the target priced once, every settings' replica search on it.
class HardwareCandidates {
 public:
  HardwareCandidates(const CapacityRequest& request, ServingTarget target,
                     const std::vector<serving::RequestSpec>& requests)
      : request_(request),
        target_(std::move(target)),
        requests_(requests),
        pricer_(target_.source, target_.model, 0) {}

  // `config.decode_tokens_per_step` - 1 is the candidate's gamma, row.policy its placement.
  CapacityRow Search(scheduler::SchedulerConfig config, CapacityRow row,
                     const model::PresetStore& store);

 private:
  Evaluation Evaluate(const scheduler::SchedulerConfig& config, int64_t replicas,
                      const std::string& policy, const model::PresetStore& store);
  sim::IterationPricer& PricerFor(int64_t gamma, const model::PresetStore& store);
  // An offloading candidate's pricer: fresh for every simulation (its caches start as the
  // policy places them).
  std::unique_ptr<sim::IterationPricer> OffloadPricer(const scheduler::SchedulerConfig& config,
                                                      const std::string& policy,
                                                      const model::PresetStore& store);

  const CapacityRequest& request_;
  ServingTarget target_;
  const std::vector<serving::RequestSpec>& requests_;
  sim::CostSourceIterationPricer pricer_;
  // One per gamma (their memos are per shape, so every replica count reuses them).
  std::map<int64_t, std::unique_ptr<sim::SpeculativeIterationPricer>> speculative_;
  sim::IterationPricer* current_ = nullptr;
};

sim::IterationPricer& HardwareCandidates::PricerFor(int64_t gamma,
                                                    const model::PresetStore& store) {
  if (gamma == 0) return pricer_;
  auto& pricer = speculative_[gamma];
  if (!pricer) {
    pricer = std::make_unique<sim::SpeculativeIterationPricer>(
        std::make_unique<sim::CostSourceIterationPricer>(target_.source, target_.model, 0.0),
        std::make_unique<sim::CostSourceIterationPricer>(target_.source,
                                                         store.LoadModel(request_.draft), 0.0));
  }
  return *pricer;
}

std::unique_ptr<sim::IterationPricer> HardwareCandidates::OffloadPricer(
    const scheduler::SchedulerConfig& config, const std::string& policy,
    const model::PresetStore& store) {
  ServeSimRequest serving;
  serving.model = request_.model;
  serving.cost = request_.cost;
  serving.cost.hardware = target_.hardware;
  serving.options.scheduler = config;
  serving.gamma = config.decode_tokens_per_step - 1;
  serving.alpha = request_.alpha;
  serving.acceptance_seed = request_.seed;
  serving.offload = ServeOffload{policy, {}, target_.hardware, std::nullopt, std::nullopt};
  std::optional<model::MoeModelSpec> draft;
  if (serving.gamma > 0) draft = store.LoadModel(request_.draft);
  return MakeServingPricer(serving, target_, draft, nullptr, store);
}

Evaluation HardwareCandidates::Evaluate(const scheduler::SchedulerConfig& config, int64_t replicas,
                                        const std::string& policy,
                                        const model::PresetStore& store) {
  std::unique_ptr<sim::IterationPricer> offload;
  if (policy != "resident") {
    offload = OffloadPricer(config, policy, store);
    current_ = offload.get();
  }
  sim::ServingSimOptions options;
  options.scheduler = config;
  options.replicas = replicas;
  options.router = request_.router;
  if (config.decode_tokens_per_step > 1)
    options.acceptance = scheduler::SpeculativeAcceptance{request_.alpha, request_.seed};
  const sim::ServingSimResult result = sim::SimulateServing(requests_, options, *current_);
  Evaluation evaluation;
  evaluation.summary = result.summary;
  evaluation.meets = result.summary.failed == 0 &&
                     result.summary.ttft_s.p99 <= request_.slo_ttft_p99_s &&
                     result.summary.tpot_s.p99 <= request_.slo_tpot_p99_s;
  return evaluation;
}

CapacityRow HardwareCandidates::Search(scheduler::SchedulerConfig config, CapacityRow row,
                                       const model::PresetStore& store) {
  current_ = &PricerFor(config.decode_tokens_per_step - 1, store);
  int64_t failing = 0, replicas = 1;
  Evaluation evaluation = Evaluate(config, replicas, row.policy, store);
  while (!evaluation.meets && replicas < request_.max_replicas) {
    failing = replicas;
    replicas = std::min(2 * replicas, request_.max_replicas);
    evaluation = Evaluate(config, replicas, row.policy, store);
  }
  if (evaluation.meets) {
    while (replicas - failing > 1) {  // the first count meeting both objectives
      const int64_t middle = failing + (replicas - failing) / 2;
      Evaluation tried = Evaluate(config, middle, row.policy, store);
      if (tried.meets) {
        replicas = middle;
        evaluation = std::move(tried);
      } else {
        failing = middle;
      }
    }
  }
  const serving::ServingSummary& summary = evaluation.summary;
  row.replicas = replicas;
  row.meets_slo = evaluation.meets;
  row.ttft_p99_s = summary.ttft_s.p99;
  row.tpot_p99_s = summary.tpot_s.p99;
  row.throughput_tokens_per_s_per_replica =
      summary.throughput_tokens_per_s / static_cast<double>(replicas);
  if (!row.meets_slo) {
    row.why_not = summary.failed > 0
                      ? std::to_string(summary.failed) + " requests refused"
                      : "p99 TTFT " + report::FormatSeconds(summary.ttft_s.p99) + ", p99 TPOT " +
                            report::FormatSeconds(summary.tpot_s.p99);
    row.why_not += " at " + std::to_string(replicas) + " replicas (--max-replicas)";
  }
  return row;
}

void MarkPareto(std::vector<CapacityRow>& rows) {
  for (CapacityRow& row : rows) {
    if (!row.meets_slo) continue;
    row.pareto = std::none_of(rows.begin(), rows.end(), [&](const CapacityRow& other) {
      return other.meets_slo &&
             other.throughput_tokens_per_s_per_replica >= row.throughput_tokens_per_s_per_replica &&
             other.ttft_p99_s <= row.ttft_p99_s &&
             (other.throughput_tokens_per_s_per_replica > row.throughput_tokens_per_s_per_replica ||
              other.ttft_p99_s < row.ttft_p99_s);
    });
  }
}

// Cheapest first: meeting rows before the rest (simulated ones before those that could not run),
// a known cost before an unknown one, then fewer replicas, then more throughput per replica.
bool Cheaper(const CapacityRow& a, const CapacityRow& b) {
  if (a.meets_slo != b.meets_slo) return a.meets_slo;
  // A candidate simulated (which missed) before one that could not run at all.
  if ((a.replicas > 0) != (b.replicas > 0)) return a.replicas > 0;
  if (a.cost_usd_per_hour.has_value() != b.cost_usd_per_hour.has_value())
    return a.cost_usd_per_hour.has_value();
  if (a.cost_usd_per_hour && *a.cost_usd_per_hour != *b.cost_usd_per_hour)
    return *a.cost_usd_per_hour < *b.cost_usd_per_hour;
  if (a.replicas != b.replicas) return a.replicas < b.replicas;
  return a.throughput_tokens_per_s_per_replica > b.throughput_tokens_per_s_per_replica;
}

}  // namespace

void CapacityRequest::Validate() const {
  if (hardware.empty()) throw base::Error("--hardware: at least one preset expected");
  // A preset or policy twice gave its rows twice, read as two candidates.
  for (const auto& [option, names] :
       {std::pair{"--hardware", &hardware}, {"--policy", &policies}}) {
    for (size_t i = 0; i < names->size(); ++i) {
      if (std::find(names->begin(), names->begin() + static_cast<std::ptrdiff_t>(i), (*names)[i]) !=
          names->begin() + static_cast<std::ptrdiff_t>(i))
        throw base::Error(std::string(option) + " " + (*names)[i] + ": listed twice");
    }
  }
  if (!(kv_memory_fraction > 0 && kv_memory_fraction <= 1)) {
    throw base::Error("--kv-memory-fraction " + report::ShortestText(kv_memory_fraction) +
                      ": expected a fraction in (0, 1]");
  }
  if (!(rate_per_s > 0) || rate_per_s > 1e6) {
    throw base::Error("--rate " + report::ShortestText(rate_per_s) +
                      ": expected requests per second in (0, 1e6]");
  }
  if (!(slo_ttft_p99_s > 0)) throw base::Error("--slo-ttft-p99: expected seconds > 0");
  if (!(slo_tpot_p99_s > 0)) throw base::Error("--slo-tpot-p99: expected seconds > 0");
  base::CheckSeconds(slo_ttft_p99_s, "--slo-ttft-p99");
  base::CheckSeconds(slo_tpot_p99_s, "--slo-tpot-p99");
  if (cost.fitted_profile) {
    throw base::Error(
        "--profile: plan capacity compares hardware presets; a fitted profile prices "
        "only its own machine (use sim serve --profile)");
  }
  base::CheckCount(max_replicas, 1, 4096, "--max-replicas", "each replica keeps a scheduler");
  base::CheckCount(requests, 1, 1000000, "--requests", "simulated per candidate and replica count");
  for (const int64_t g : gamma) {
    if (g < 0 || g + 1 > scheduler::kMaxDecodeTokensPerStep) {
      throw base::Error("--gamma " + std::to_string(g) + ": expected 0 (no SD) to " +
                        std::to_string(scheduler::kMaxDecodeTokensPerStep - 1));
    }
    for (const int64_t batch : max_batch) {
      scheduler::SchedulerConfig config = scheduler;
      config.max_running_sequences = batch;
      config.decode_tokens_per_step = g + 1;
      if (config.kv_blocks == 0) config.kv_blocks = 1;
      // Names --max-batched-tokens when batch x (gamma + 1) does not fit, and this command's
      // --max-batch and --chunk (a message naming --max-running sent users to an option it has
      // not).
      config.Validate({"--max-batch", "--chunk"});
    }
  }
  scheduler::SpeculativeAcceptance{alpha, seed}.Validate();
  if (policies.empty()) throw base::Error("--policy: at least one policy expected");
  for (const std::string& policy : policies)
    policies::DefaultPolicyRegistry().Find(policy);  // lists the valid ones
  for (const int64_t tokens : chunk) {
    base::CheckCount(tokens, 0, scheduler.max_batched_tokens, "--chunk",
                     "a chunk is part of one iteration's --max-batched-tokens");
  }
  for (const auto& [name, price] : price_usd_per_hour) {
    if (std::find(hardware.begin(), hardware.end(), name) == hardware.end()) {
      throw base::Error("--price " + name + ": not in --hardware");
    }
  }
}

std::map<std::string, double> ParsePrices(const std::string& text) {
  std::map<std::string, double> prices;
  std::stringstream items(text);
  std::string item;
  while (std::getline(items, item, ',')) {
    const size_t equals = item.find('=');
    if (equals == std::string::npos || equals == 0) {
      throw base::Error("--price " + item + ": expected HARDWARE=USD_PER_HOUR");
    }
    const double price = base::ParseNumber(item.substr(equals + 1), "price");
    if (!(price > 0)) throw base::Error("--price " + item + ": expected a price > 0");
    if (!prices.emplace(item.substr(0, equals), price).second) {
      throw base::Error("--price " + item.substr(0, equals) +
                        ": priced twice (one price per hardware)");
    }
  }
  if (!text.empty() && text.back() == ',') throw base::Error("--price " + text + ": empty item");
  return prices;
}

CapacityResult PlanCapacity(const CapacityRequest& request, const model::PresetStore& store) {
  request.Validate();
  CapacityResult result;
  result.request = request;
  serving::LoadSpec load;
  load.arrivals.kind = serving::ArrivalProcess::Kind::kPoisson;
  load.arrivals.rate_per_s = request.rate_per_s;
  load.prompt_tokens = request.prompt_tokens;
  load.output_tokens = request.output_tokens;
  load.requests = request.requests;
  load.seed = request.seed;
  const std::vector<serving::RequestSpec> requests = serving::GenerateRequests(load);
  for (const std::string& hardware : request.hardware) {
    fit::CostSourceOptions cost = request.cost;
    cost.hardware = hardware;
    ServingTarget target = ResolveServingTarget(request.model, cost, store);
    result.cost_sources.push_back(target.source->name());
    CapacityRow base_row;
    base_row.hardware = hardware;
    const model::HardwareSpec spec = store.LoadHardware(hardware);
    if (auto price = request.price_usd_per_hour.find(hardware);
        price != request.price_usd_per_hour.end()) {
      base_row.cost_usd_per_hour = price->second;
      base_row.price_source = "--price";
    } else if (spec.accelerator && spec.accelerator->price_usd_per_hour) {
      base_row.cost_usd_per_hour =
          *spec.accelerator->price_usd_per_hour * static_cast<double>(spec.accelerator_count);
      base_row.price_source = spec.accelerator->price_source;
    }
    const std::optional<double> price_per_replica = base_row.cost_usd_per_hour;
    // Every expert resident: the KV budget from what the weights leave (none: no such candidate).
    std::optional<int64_t> resident_kv_blocks;
    std::string resident_why_not;
    if (request.scheduler.kv_blocks != 0) {
      resident_kv_blocks = request.scheduler.kv_blocks;
    } else {
      try {
        std::string explanation;
        resident_kv_blocks = KvBlocksFromMemory(target, request.scheduler.kv_block_tokens,
                                                request.kv_memory_fraction, explanation);
      } catch (const base::Error& error) {
        resident_why_not = error.what();
      }
    }
    const model::MoeModelSpec target_model = target.model;
    HardwareCandidates candidates(request, std::move(target), requests);
    for (const std::string& policy : request.policies) {
      for (const int64_t gamma : request.gamma) {
        for (const int64_t batch : request.max_batch) {
          for (const int64_t chunk : request.chunk) {
            CapacityRow row = base_row;
            row.policy = policy;
            row.max_batch = batch;
            row.chunk = chunk;
            row.gamma = gamma;
            scheduler::SchedulerConfig config = request.scheduler;
            config.max_running_sequences = batch;
            config.prefill_chunk_tokens = chunk;
            config.decode_tokens_per_step = gamma + 1;
            if (policy == "resident") {
              if (!resident_kv_blocks) {
                row.why_not = resident_why_not;
                result.candidates.push_back(row);
                continue;
              }
              config.kv_blocks = *resident_kv_blocks;
            } else if (config.kv_blocks == 0) {
              std::string explanation;
              config.kv_blocks = OffloadKvBlocks(config, requests, explanation);
            }
            row.kv_blocks = config.kv_blocks;
            try {
              config.max_sequence_tokens = ResolveMaxSequenceTokens(config, target_model);
            } catch (const base::Error& error) {
              // Past the model's positions: the option is wrong for every candidate. Past this
              // candidate's KV budget: no such candidate.
              if (target_model.max_position_embeddings > 0 &&
                  config.max_sequence_tokens > target_model.max_position_embeddings)
                throw;
              row.why_not = error.what();
              result.candidates.push_back(row);
              continue;
            }
            try {
              row = candidates.Search(config, row, store);
            } catch (const base::Error& error) {
              // The policy's memory plan does not fit this hardware (its cache, staging buffers
              // and the dense part beside the KV budget): no such candidate.
              if (policy == "resident") throw;
              row.why_not = error.what();
              result.candidates.push_back(row);
              continue;
            }
            if (price_per_replica) row.cost_usd_per_hour = *price_per_replica * row.replicas;
            result.candidates.push_back(row);
          }
        }
      }
    }
  }
  MarkPareto(result.candidates);
  for (const std::string& hardware : request.hardware) {
    std::vector<CapacityRow> own;
    for (const CapacityRow& row : result.candidates) {
      if (row.hardware == hardware) own.push_back(row);
    }
    std::sort(own.begin(), own.end(), Cheaper);
    result.rows.push_back(own.front());
  }
  std::stable_sort(result.rows.begin(), result.rows.end(), Cheaper);
  return result;
}

report::RowSet CapacityResult::Rows() const {
  report::RowSet rows({{"hardware", "hardware"},
                       {"policy", "policy"},
                       {"replicas", "replicas"},
                       {"meets_slo", "meets SLO"},
                       {"max_batch", "max batch"},
                       {"chunk", "chunk"},
                       {"gamma", "gamma"},
                       {"kv_blocks", "KV blocks", nullptr, false},
                       {"ttft_p99_s", "p99 TTFT s"},
                       {"tpot_p99_s", "p99 TPOT s"},
                       {"throughput_tokens_per_s_per_replica", "tokens/s/replica"},
                       {"cost_usd_per_hour", "USD/h"},
                       {"pareto", "pareto", nullptr, false},
                       {"why_not", "why not", nullptr, false},
                       {"price_source", "price source", nullptr, false}});
  for (const CapacityRow& row : this->rows) {
    rows.Add({row.hardware, row.policy, row.replicas, row.meets_slo, row.max_batch, row.chunk,
              row.gamma, row.kv_blocks, row.ttft_p99_s, row.tpot_p99_s,
              row.throughput_tokens_per_s_per_replica,
              row.cost_usd_per_hour ? report::Cell(*row.cost_usd_per_hour) : report::Cell(),
              row.pareto, row.why_not, row.price_source});
  }
  return rows;
}

report::RowSet CapacityResult::ParetoRows() const {
  report::RowSet rows({{"hardware", "hardware"},
                       {"policy", "policy"},
                       {"max_batch", "max batch"},
                       {"chunk", "chunk"},
                       {"gamma", "gamma"},
                       {"replicas", "replicas"},
                       {"throughput_tokens_per_s_per_replica", "tokens/s/replica"},
                       {"ttft_p99_s", "p99 TTFT s"}});
  std::vector<CapacityRow> front;
  for (const CapacityRow& row : candidates) {
    if (row.pareto) front.push_back(row);
  }
  std::sort(front.begin(), front.end(), [](const CapacityRow& a, const CapacityRow& b) {
    return a.throughput_tokens_per_s_per_replica > b.throughput_tokens_per_s_per_replica;
  });
  for (const CapacityRow& row : front) {
    rows.Add({row.hardware, row.policy, row.max_batch, row.chunk, row.gamma, row.replicas,
              row.throughput_tokens_per_s_per_replica, row.ttft_p99_s});
  }
  return rows;
}

nlohmann::json CapacityResult::ToJson() const {
  report::RowSet all = Rows();
  CapacityResult every = *this;
  every.rows = candidates;
  return {{"schema", "moelab.plan_capacity/1"},
          {"model", request.model},
          {"rate_per_s", request.rate_per_s},
          {"slo", {{"ttft_p99_s", request.slo_ttft_p99_s}, {"tpot_p99_s", request.slo_tpot_p99_s}}},
          {"load",
           {{"arrivals", "poisson:" + report::FormatNumber(request.rate_per_s, 6)},
            {"prompt_tokens", serving::Describe(request.prompt_tokens)},
            {"output_tokens", serving::Describe(request.output_tokens)},
            {"requests", request.requests},
            {"seed", request.seed}}},
          {"scheduler", request.scheduler.ToJson()},
          {"router", sim::RouterName(request.router)},
          {"speculative",
           {{"gamma", request.gamma}, {"alpha", request.alpha}, {"draft", request.draft}}},
          {"policies", request.policies},
          {"cost_sources", cost_sources},
          {"rows", all.ToJson()},
          {"candidates", every.Rows().ToJson()},
          {"pareto", ParetoRows().ToJson()},
          {"provenance", report::Provenance()}};
}

std::string CapacityResult::Text() const {
  std::ostringstream out;
  out << "plan capacity: " << request.model << " at " << report::FormatNumber(request.rate_per_s, 3)
      << " requests/s, p99 TTFT <= " << report::FormatSeconds(request.slo_ttft_p99_s)
      << ", p99 TPOT <= " << report::FormatSeconds(request.slo_tpot_p99_s) << " ("
      << request.requests << " simulated requests, seed " << request.seed << ")\n\n";
  out << Rows().ToTable() << "\nPareto front (throughput per replica vs p99 TTFT):\n"
      << ParetoRows().ToTable();
  for (const CapacityRow& row : rows) {
    if (!row.meets_slo) out << row.hardware << ": " << row.why_not << "\n";
    if (!row.cost_usd_per_hour) out << row.hardware << ": no price (give --price)\n";
  }
  return out.str();
}

}  // namespace moelab::plan
