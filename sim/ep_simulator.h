#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/collective_cost.h"
#include "model/cost_source.h"
#include "model/eps_moe.h"
#include "model/hardware_spec.h"
#include "model/model_spec.h"
#include "report/row_set.h"
#include "sim/ep_gemm.h"
#include "sim/ep_pipeline.h"

namespace moelab::sim {

// `moelab sim ep`: one forward step of an MoE model laid out EP x TP (x DP replicas) on a node,
// with and without EPS-MoE's expert pipeline (seed 001; sim/README.md "Expert parallelism").
//
// Layout: a replica is ep x tp devices; device (e, t) is e * tp + t. The routed experts are split
// over the ep ranks (contiguously), each expert's FFN over the tp devices of its rank (expert
// tensor parallelism). Attention is data-parallel over the ep ranks and tensor-parallel over tp
// within a rank (`kDataParallel`, EPS-MoE's DP+EP), or tensor-parallel over all ep x tp devices
// (`kTensorParallel`, EPS-MoE's TP+EP: reduce-scatter before the dispatch, all-gather after the
// combine, instead of an all-reduce). The node holds floor(devices / (ep x tp)) replicas, each
// with its own batch; throughput counts them all.
enum class EpWorkload { kPrefill, kDecode };
enum class EpAttention { kDataParallel, kTensorParallel };
EpWorkload EpWorkloadFromString(const std::string& text);    // prefill | decode
EpAttention EpAttentionFromString(const std::string& text);  // data-parallel | tensor-parallel
std::string ToString(EpWorkload workload);
std::string ToString(EpAttention attention);

struct EpConfig {
  model::MoeModelSpec model;
  model::HardwareSpec node;
  int64_t ep = 1;
  int64_t tp = 1;
  EpAttention attention = EpAttention::kDataParallel;
  EpWorkload workload = EpWorkload::kPrefill;
  int64_t batch = 1;   // sequences per replica
  int64_t tokens = 1;  // prefill: prompt tokens per sequence; decode: tokens already cached
  std::optional<int64_t> chunks;  // --ep-chunks N; unset: auto (the sweep's optimum)
  int64_t max_chunks = 64;        // the sweep's bound
  int64_t comm_sms = 16;          // SMs kept for the all-to-alls while the pipeline overlaps them
  // SMs from which an all-to-all runs at the link's full speed (EPS-MoE Figure 7: 10-20 suffice).
  int64_t comm_saturation_sms = 16;
  double comm_bits = 16;     // bits per hidden value on the wire (8: EPS-MoE's FP8 communication)
  int64_t device_limit = 0;  // devices a token may reach (DeepSeek-V2's M = 3); 0: no limit
  GemmChoice gemm = GemmChoice::kAuto;
  std::optional<int64_t> gemm_crossover_tokens;  // overrides the crossover the GEMM model finds
  double kernel_launch_s = 4e-6;                 // the cost parameters' launch cost
  double group_efficiency = 4.299 / 4.837;
  // false: another machine computes (a --profile's fitted curves), so the node's SMs neither
  // tile the GEMMs nor are shared with communication.
  bool compute_on_node = true;
  // The MoE block's row copies (packing the rows to send, gathering each expert's rows for its
  // GEMM, scattering its outputs back, the weighted combine), comm_bits a value: their bandwidth.
  // 0: the node accelerator's memory bandwidth when it computes (compute_on_node), else the copies
  // are not priced (EpResult::row_copies_from says which).
  double copy_bytes_per_s = 0;
  // false: the ranks' exchanges progress only on the cores that compute (CPU ranks, every core a
  // compute thread: MPI moves a non-blocking all-to-all's data inside its calls, between GEMMs), so
  // a chunk's exchange runs between the GEMMs, not beside them (SchedulePipeline's
  // lanes_share_cores). On 2 vCPUs the run's exposed communication with the wait for the busiest
  // rank grew with N (decode 594, 743, 810 us a layer at N = 1, 2, 4) where its price, the
  // overlapping pipeline's, fell (447, 443, 102).
  bool communication_overlaps_compute = true;

  // Errors name the option: ep not dividing the experts, ep x tp above the node's accelerators,
  // tp not dividing the expert width, a data-parallel batch not divisible by ep, ...
  void Validate() const;
  int64_t devices() const { return ep * tp; }
};

// One point of the N sweep: a MoE layer and the step it makes.
struct EpChunkRow {
  int64_t chunks = 1;
  std::string gemm;  // the kernel the chunks ran: "group_gemm", "dense_gemm" or "mixed"
  double dispatch_s = 0, combine_s = 0, expert_compute_s = 0;  // per MoE layer, summed over chunks
  // Of expert_compute_s, the busiest rank's rows beyond a rank's mean (the wait of the others).
  double busiest_excess_s = 0;
  // Of expert_compute_s, gathering each expert's rows for its GEMM and scattering its outputs.
  double row_gather_scatter_s = 0;
  // Packing the rows to send before the first dispatch and the weighted combine after the last
  // combine: on the compute lane, outside the pipeline (part of step_s, not of moe_block_s).
  double pack_combine_s = 0;
  // The expert compute of a rank of mean load (its expected active experts, its mean rows): what
  // the busiest rank's expert_compute_s exceeds it by, the other ranks wait.
  double mean_rank_compute_s = 0;
  double moe_block_s = 0;     // the layer's MoE block (shared experts, dispatch, GEMMs, combine)
  double exposed_comm_s = 0;  // of the block's time, spent waiting on communication
  double step_s = 0;
  double tokens_per_s = 0;
};

// EPS-MoE's closed form (model/eps_moe.h) fed with the simulator's own terms: T_comm and T_comp
// of the unpipelined layer, k the slope of the layer's total work (dispatch + GEMMs + combine)
// over the sweep's N, fitted by least squares as EPS-MoE fitted R(N) = k N + b.
struct EpClosedForm {
  double communication_s = 0, computation_s = 0, overhead_per_chunk_s = 0;
  std::optional<int64_t> optimal_chunks;  // unset when k <= 0 (no optimum)
  std::optional<double> continuous_optimum;
};

struct EpResult {
  EpConfig config;
  nlohmann::json cost_source, collective_cost;
  int64_t replicas = 1;
  double tokens_per_step = 0;          // new tokens per replica per step
  double routed_copies_per_token = 0;  // remote ranks a token's hidden state goes to (N = 1)
  int64_t local_experts = 0, active_local_experts = 0, tokens_per_expert = 0;
  // Per layer, per device: attention (with norms and router), the collectives around the MoE
  // block, shared experts; dense layers' whole time; once-per-step ops (embedding, LM head).
  double attention_s = 0, moe_collectives_s = 0, shared_experts_s = 0, dense_layer_s = 0,
         once_per_step_s = 0;
  double copy_bytes_per_s = 0;    // what priced the row copies (0: not priced)
  std::string row_copies_from;    // "--copy-bandwidth", "the accelerator's memory", "not priced"
  std::vector<EpChunkRow> sweep;  // N = 1 first
  EpChunkRow no_pipeline, chosen, optimum;
  std::string chunks_chosen_by;  // "--ep-chunks" or "auto (sweep optimum)"
  EpClosedForm closed_form;
  std::optional<int64_t> gemm_crossover_tokens;            // tokens per expert: DenseGemm from here
  std::string gemm_crossover_from;                         // "model", "--gemm-crossover-tokens"
  int64_t compute_sms = 0;                                 // SMs the GEMMs get while overlapped
  PipelineSchedule chosen_schedule, no_pipeline_schedule;  // one MoE layer's block

  double gain_vs_no_pipeline() const { return no_pipeline.step_s / chosen.step_s; }

  nlohmann::json ToJson() const;     // schema moelab.sim_ep/1 (without provenance)
  report::RowSet SweepRows() const;  // one row per N
  std::string Text() const;          // summary and the sweep table
  std::string TimelineJson() const;  // Chrome trace: one MoE layer, pipelined and not
};

// One accelerator of `node`, alone (no interconnect, no other machine): what each device of the
// layout computes with, for the cost source that prices it.
model::HardwareSpec OneAcceleratorOf(const model::HardwareSpec& node);

// Simulates `config` with expert GEMMs and attention priced by `compute` (one accelerator of the
// node) and collectives by `collectives`.
EpResult SimulateEp(const EpConfig& config, const model::CostSource& compute,
                    const model::CollectiveCost& collectives);

}  // namespace moelab::sim
