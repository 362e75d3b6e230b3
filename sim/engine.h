#pragma once

// The offload simulator's engine (internal to sim/): it asks the policy, has policies::PlanChecker
// check and apply every plan, and turns the decisions into ops on the OpGraph. Split by
// responsibility: engine_setup.cc (memory plan, policy, initial placement), engine_passes.cc
// (passes, dense layers, routing), engine_experts.cc (expert runs, copies, prefetches),
// result_assembly.cc (the SimResult).

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "policies/offload_policy.h"
#include "policies/plan_checker.h"
#include "sim/cost_model.h"
#include "sim/offload_simulator.h"
#include "sim/op_graph.h"
#include "sim/staging_buffers.h"

namespace moelab::sim {

// Op kinds (Op::kind), named in the timeline.
enum OpKind : uint8_t {
  kPassStart,
  kEmbedding,
  kDense,
  kHidden,         // hidden states crossing between devices (static-split)
  kExpertCompute,  // on the accelerator or the CPU
  kExpertCopy,     // expert weights host -> accelerator
  kStorage,        // expert weights storage -> host
  kActivation,     // an expert's tokens crossing to the other device and back
  kLmHead,
  kJoin,
};

class Engine : public OpListener {
 public:
  Engine(const SimConfig& config, routing::RoutingSource& routing,
         const policies::RoutingCalibration& calibration, SimResult& result);

  void Run();
  void OnOpDone(OpHandle handle, const Op& op) override;

  // Serving (SimConfig::serving_kv_tokens): runs `pass` after the compute device has been idle
  // for `idle_s` (copies and reads in flight go on meanwhile), continuing from the state the last
  // pass left (cache, policy, copies in flight). Returns the pass's time from its start to its LM
  // head's end, and the same pass's computation with every expert resident on the accelerator
  // (its dense part, embedding and LM head as priced, and each routed expert's accelerator time):
  // the difference is what offloading adds to it. FinishServing fills the result's totals.
  struct ServingPass {
    Seconds duration_s = 0;
    Seconds resident_s = 0;
  };
  ServingPass RunServingPass(const Iteration& pass, Seconds idle_s);
  void FinishServing();

 private:
  // The ops an expert's accelerator copy depends on; where it lives is the checker's business.
  struct ExpertOps {
    OpHandle loading;         // the copy bringing its weights to the accelerator, while in flight
    OpHandle last_use;        // the latest computation reading its accelerator copy
    bool on_storage = false;  // its home copy is on storage, not in host RAM
  };

  size_t Flat(int64_t layer, int64_t expert) const {
    return static_cast<size_t>(layer * experts_ + expert);
  }
  static Resource ComputeOf(policies::Device device) {
    return device == policies::Device::kAccelerator ? Resource::kAcceleratorCompute
                                                    : Resource::kCpuCompute;
  }
  // An op of the current pass (inline: called for every op, from every engine file).
  OpHandle NewOp(Resource resource, Seconds duration_s, uint8_t kind, int32_t layer,
                 int32_t expert) {
    return graph_.NewOp(resource, duration_s, kind, layer, expert, pass_);
  }

  // engine_setup.cc
  void SetUp();

  // engine_passes.cc
  void StartPass();
  void BeginPass();
  bool needs_cpu_dense() const;
  void ComputeFromDram();
  void SetComputeWorkingSet(double bytes);  // both devices' (the host's cores)
  const CostModel::DenseCost& DenseOf(policies::Device device) const;
  void ScheduleDense(int64_t layer);
  void MoveHidden(policies::Device device);
  void AfterLayer(int64_t layer);
  void EndPass();
  void RouteLayer(int64_t layer);
  const std::vector<std::vector<int32_t>>& Routed(int32_t moe_layer,
                                                  std::vector<std::vector<int32_t>>& buffer);
  const std::vector<float>* Replayed(
      std::vector<std::vector<std::vector<float>>> policies::GateSignals::*signal,
      int32_t moe_layer) const;

  // engine_experts.cc
  OpHandle Execute(int32_t layer, int64_t tokens, const policies::ExpertDecision& decision,
                   policies::Device device);
  OpHandle ActivationTransfer(bool to_accelerator, int64_t tokens, int32_t layer, int32_t expert);
  OpHandle RunOnAccelerator(int32_t layer, int32_t expert, int64_t tokens, OpHandle weights_ready,
                            policies::Device device, ExpertOps* ops);
  OpHandle RunOnCpu(int32_t layer, int32_t expert, int64_t tokens, policies::Device device,
                    const ExpertOps& ops);
  OpHandle StorageRead(int32_t layer, int32_t expert);
  OpHandle Copy(int32_t layer, int32_t expert, uint8_t priority_class, double priority,
                const OpHandle slot_free[2], bool staging);
  std::pair<OpHandle, OpHandle> FreeSlotOf(const policies::PlanChecker::Effects& effects);
  void Discard(const policies::ExpertRef& ref);
  void ApplyPrefetches();
  OpHandle Join(OpHandle a, OpHandle b);

  // result_assembly.cc
  void Finish();

  const SimConfig& config_;
  routing::RoutingSource& routing_;
  const policies::RoutingCalibration& calibration_;
  SimResult& result_;
  CostModel cost_;
  OpGraph graph_;
  std::unique_ptr<policies::OffloadPolicy> policy_;
  policies::PolicyNeeds needs_;
  std::optional<policies::PlanChecker> checker_;

  int64_t layers_ = 0, first_dense_ = 0, moe_layers_ = 0, experts_ = 0, top_k_ = 0;
  int64_t expert_bytes_ = 0;
  double activation_bytes_per_token_ = 0;
  std::vector<Iteration> passes_;
  std::vector<policies::Device> dense_device_;
  std::vector<std::vector<float>> semantic_;  // [request]

  std::vector<ExpertOps> expert_ops_;
  StagingBuffers staging_;
  // Where expert copies run: the host-to-device link, or -- on a machine whose compute device is
  // the host CPU with no core to spare for the reader (cpu threads >= cores) -- the compute
  // resource, since the reader's checksum and copy take the cores the computation uses.
  Resource expert_copy_resource_ = Resource::kHostToDevice;

  bool serving_ = false;  // passes one at a time (RunServingPass)
  Seconds pass_begin_s_ = 0, pass_resident_s_ = 0;

  // The current pass.
  int64_t pass_ = 0;
  int64_t tokens_ = 0;
  model::ForwardShape shape_;
  const CostModel::DenseCost* dense_[2] = {nullptr, nullptr};
  std::vector<OpHandle> outputs_;
  OpHandle last_compute_;
  policies::LayerPlan plan_;
  std::vector<std::vector<int32_t>> routed_;
  std::vector<size_t> deferred_;  // RouteLayer: the decisions run after the layer's plain hits
  std::vector<int64_t> counts_;
  std::vector<policies::ExpertDemand> demand_;
  std::vector<float> gate_, next_scores_;
  std::vector<std::vector<int32_t>> next_routed_;  // the speculative gate's view of layer + 1
  std::vector<int64_t> next_counts_;
  std::vector<policies::ExpertDemand> next_demand_;
  // The pass and MoE layer next_counts_ and next_demand_ were counted for (none: -1).
  int64_t next_demand_pass_ = -1;
  int32_t next_demand_layer_ = -1;
};

}  // namespace moelab::sim
