// The engine's set-up before the first token: the policy, the memory plan (policies/memory_plan.h)
// and the initial placement, checked by policies::PlanChecker; and the op-completion dispatch.
#include <algorithm>
#include <limits>
#include <string>

#include "base/error.h"
#include "model/parameter_count.h"
#include "policies/memory_plan.h"
#include "policies/registry.h"
#include "sim/engine.h"

namespace moelab::sim {

using policies::ExpertRef;

Engine::Engine(const SimConfig& config, routing::RoutingSource& routing,
               const policies::RoutingCalibration& calibration, SimResult& result)
    : config_(config),
      routing_(routing),
      calibration_(calibration),
      result_(result),
      cost_(config.model, config.hardware,
            config.cpu_threads > 0 ? config.cpu_threads
                                   : (config.hardware.host ? config.hardware.host->cores : 1),
            config.accelerator_costs, config.host_costs),
      graph_(this),
      staging_(graph_) {
  const model::MoeModelSpec& model = config.model;
  layers_ = model.num_layers;
  first_dense_ = model.moe->first_dense_layers;
  moe_layers_ = model.num_moe_layers();
  experts_ = model.moe->num_experts;
  top_k_ = model.moe->top_k;
  expert_bytes_ = model::ExpertBytes(model);
  const model::HardwareSpec& hardware = config.hardware;
  if (hardware.compute_device_is_host && hardware.host &&
      cost_.cpu_threads() >= hardware.host->cores) {
    expert_copy_resource_ = Resource::kAcceleratorCompute;
  }
  // Reads in flight share the disk: the first of two reads issued together lands after twice its
  // time alone, not after its time alone (the executor's reader keeps two in flight).
  const bool reads_beside_compute =
      hardware.compute_device_is_host && hardware.host &&
      hardware.host->storage_read_bandwidth_beside_compute_bytes_per_s > 0;
  if (hardware.host && (hardware.host->storage_reads_in_flight > 1 || reads_beside_compute)) {
    graph_.ShareResource(Resource::kStorageRead,
                         static_cast<int>(hardware.host->storage_reads_in_flight));
  }
  // Where the host computes, its reader shares the cores and the memory with the computation:
  // while the host computes (not while it checksums and copies a read: that is the reader's own
  // work, in the bandwidth alone) the reads in flight progress at the bandwidth measured beside
  // computation. Measured inside validate (results/offload-runtime.md, 2026-11-29): 414
  // interleaved triples of one pass each, the executor's reader beside the LM head's
  // matrix-vector product read 0.82x what it read alone; decode, whose reads mostly wait for
  // nothing else, followed the bandwidth alone, prefill, whose reads run beside its GEMMs, the
  // one beside computation.
  if (reads_beside_compute) {
    if (!(hardware.host->storage_read_bandwidth_bytes_per_s > 0))
      throw base::Error("sim: a storage read bandwidth beside computation needs one alone");
    uint32_t computing = 0;
    for (const OpKind kind : {kEmbedding, kDense, kExpertCompute, kLmHead}) computing |= 1u << kind;
    graph_.SetRateWhileBusy(Resource::kStorageRead, Resource::kAcceleratorCompute, computing,
                            hardware.host->storage_read_bandwidth_beside_compute_bytes_per_s /
                                hardware.host->storage_read_bandwidth_bytes_per_s);
  }
  // And the other way: while a read is in flight the computation runs slower than alone, by
  // more than the checksum and copy charged to it (the reader's system calls and interrupts run
  // on the same cores). Measured by the reader beside computation (the computation's steps
  // during the pass against the same steps alone); in validate's prefills of 256 tokens the
  // computation that overlapped reads took 0.8-4.2 ms (median 1.4) longer per read than the
  // priced computation, where the checksum and copy came to 0.7.
  if (hardware.compute_device_is_host && hardware.host &&
      hardware.host->compute_rate_while_storage_reads < 1) {
    const double rate = hardware.host->compute_rate_while_storage_reads;
    if (!(rate > 0)) {
      throw base::Error("sim: host.compute_rate_while_storage_reads must be in (0, 1], got " +
                        std::to_string(rate));
    }
    graph_.ShareResource(Resource::kAcceleratorCompute, 1);
    graph_.SetRateWhileBusy(Resource::kAcceleratorCompute, Resource::kStorageRead, 1u << kStorage,
                            rate);
  }
  activation_bytes_per_token_ =
      static_cast<double>(model.hidden_size) * config.activation_bits / 8.0;
  serving_ = config.serving_kv_tokens.has_value();
  if (!serving_) passes_ = BuildIterations(config.workload);
  if (config.speculative_recall &&
      !(*config.speculative_recall >= 0 && *config.speculative_recall <= 1)) {
    throw base::Error("--speculative-recall must be in [0, 1], got " +
                      std::to_string(*config.speculative_recall));
  }
  if (calibration.popularity.size() != static_cast<size_t>(moe_layers_)) {
    throw base::Error("sim: the routing calibration has " +
                      std::to_string(calibration.popularity.size()) + " layers, the model " +
                      std::to_string(moe_layers_) + " MoE layers");
  }
  SetUp();
}

void Engine::SetUp() {
  const policies::ModelMemory memory =
      policies::ModelMemoryOf(config_.model, config_.kv_bits,
                              config_.serving_kv_tokens.value_or(config_.workload.KvTokens()));
  policies::OffloadSetup setup;
  setup.num_layers = layers_;
  setup.first_dense_layers = first_dense_;
  setup.num_moe_layers = moe_layers_;
  setup.num_experts = experts_;
  setup.top_k = top_k_;
  setup.expert_bytes = expert_bytes_;
  setup.accelerator_bytes =
      config_.accelerator_bytes.value_or(config_.hardware.accelerator->memory_bytes);
  setup.fixed_bytes = memory.fixed_bytes;
  setup.dense_layer_bytes = memory.dense_layer_bytes;
  setup.latency = cost_.FiddlerLatency(expert_bytes_);
  setup.popularity = calibration_.popularity;
  // Only for a policy that reads them (policies::PolicyInfo::reads_history).
  if (policies::DefaultPolicyRegistry().Find(config_.policy).reads_history)
    setup.history = calibration_.history;
  setup.seed = config_.seed;
  policy_ = policies::MakeOffloadPolicy(config_.policy, config_.policy_options, setup);
  needs_ = policy_->Needs();

  const policies::PolicyMemoryDemand demand = policies::MemoryDemandOf(*policy_, layers_);
  dense_device_ = demand.dense_device;
  // One set of cores: a layer the policy places "on the CPU" runs where every other layer does,
  // and no hidden states cross between devices.
  if (config_.hardware.compute_device_is_host)
    std::fill(dense_device_.begin(), dense_device_.end(), policies::Device::kAccelerator);
  const policies::MemoryPlan plan = policies::PlanMemory(
      setup, demand, config_.hardware.host->dram_bytes, calibration_.popularity);
  checker_.emplace(policy_->Name(), moe_layers_, experts_, plan.expert_slots, plan.staging_buffers);
  result_.fits_accelerator = plan.fits_accelerator;
  checker_->CheckMemory(plan, demand.ignores_memory_limit);
  result_.accelerator_bytes = plan.accelerator_bytes;
  result_.fixed_bytes = plan.fixed_bytes;
  result_.dense_bytes_on_accelerator = plan.dense_bytes_on_accelerator;
  result_.kv_bytes = memory.kv_bytes;
  result_.expert_slots = plan.expert_slots;
  result_.staging_buffers = plan.staging_buffers;
  result_.experts_total = plan.experts_total;
  result_.experts_on_storage = plan.experts_on_storage;
  result_.latency = setup.latency;
  staging_.Reset(plan.staging_buffers);
  // Where the host computes, its passes cycle through the RAM the plan holds: the weights a pass
  // reads beside the routed experts, the experts' slots (all the experts at most), the staging
  // buffers reads land in, and the KV cache. A small cache can stream from the CPU's cache.
  // (Both devices are those cores. Only Fiddler, which such a machine refuses, decides with the
  // latency model priced before; the one reported is priced again in the working set.)
  // The first pass finds none of it there: no earlier pass of the run brought it in, so it is
  // priced from DRAM (BeginPass moves to the working set at the second pass; engine_passes.cc).
  if (config_.hardware.compute_device_is_host) {
    const double resident_experts =
        static_cast<double>(std::min(plan.expert_slots, plan.experts_total) + plan.staging_buffers);
    result_.compute_working_set_bytes =
        model::PassWorkingSetBytes(config_.model, resident_experts, memory.kv_bytes);
    SetComputeWorkingSet(result_.compute_working_set_bytes);
    result_.latency = cost_.FiddlerLatency(expert_bytes_);
    SetComputeWorkingSet(std::numeric_limits<double>::infinity());
  }

  expert_ops_.assign(static_cast<size_t>(moe_layers_ * experts_), ExpertOps{});
  for (const model::ExpertId& id : plan.on_storage)
    expert_ops_[Flat(id.layer, id.expert)].on_storage = true;

  for (const ExpertRef& ref : policy_->InitialPlacement()) {
    checker_->PlaceInitial(ref);
    result_.bytes_initial_load += static_cast<double>(expert_bytes_);
  }
  checker_->EndInitialPlacement();
  semantic_.resize(static_cast<size_t>(config_.workload.batch));
  for (int64_t r = 0; r < config_.workload.batch; ++r) {
    semantic_[static_cast<size_t>(r)] =
        policies::SemanticEmbedding(config_.seed, r, config_.calibration.semantic_dim);
  }
}

void Engine::Run() {
  StartPass();
  graph_.Run();
  Finish();
}

Engine::ServingPass Engine::RunServingPass(const Iteration& pass, Seconds idle_s) {
  if (!serving_) throw base::Error("sim: RunServingPass on an engine built for a workload");
  passes_.push_back(pass);
  const OpHandle start = graph_.NewOp(Resource::kNone, 0, kPassStart);
  if (idle_s > 0) {
    const OpHandle idle = graph_.NewOp(Resource::kNone, idle_s, kJoin);
    graph_.AddDependency(idle, start);
    graph_.Commit(idle);
  }
  graph_.Commit(start);
  graph_.RunUntilStopped();  // EndPass stops it at the LM head's end
  return {result_.pass_end_s.back() - pass_begin_s_, pass_resident_s_};
}

void Engine::FinishServing() { Finish(); }

void Engine::OnOpDone(OpHandle handle, const Op& op) {
  if (config_.record_timeline && op.resource != Resource::kNone) {
    // From start to end: on a shared resource (reads in flight sharing the disk) an op takes longer
    // than its time alone (duration_s), and the timeline shows when it actually ran.
    result_.timeline.push_back({op.start_s, op.end_s - op.start_s, op.resource, op.kind, op.layer,
                                op.expert, op.iteration, op.priority_class == 1});
  }
  switch (op.kind) {
    case kPassStart:
      BeginPass();
      break;
    case kDense:
      if (op.layer >= first_dense_) {
        RouteLayer(op.layer);
      } else {
        outputs_.assign(1, handle);
        AfterLayer(op.layer);
      }
      break;
    case kExpertCopy: {
      ExpertOps& ops = expert_ops_[Flat(op.layer, op.expert)];
      if (ops.loading.index == handle.index && ops.loading.generation == handle.generation) {
        ops.loading = OpHandle{};
      }
      policy_->OnTransferDone({op.layer, op.expert});
      break;
    }
    case kLmHead:
      EndPass();
      break;
    default:
      break;
  }
}

}  // namespace moelab::sim
