// EpConfig's options: the names they take and what each refuses.
#include "base/error.h"
#include "model/parameter_count.h"
#include "report/format.h"
#include "sim/ep_simulator.h"

#include <cmath>
#include "sim/workload.h"

namespace moelab::sim {

EpWorkload EpWorkloadFromString(const std::string& text) {
  if (text == "prefill") return EpWorkload::kPrefill;
  if (text == "decode") return EpWorkload::kDecode;
  throw base::Error("--workload " + text + ": expected prefill or decode");
}

EpAttention EpAttentionFromString(const std::string& text) {
  if (text == "data-parallel") return EpAttention::kDataParallel;
  if (text == "tensor-parallel") return EpAttention::kTensorParallel;
  throw base::Error("--attention " + text + ": expected data-parallel or tensor-parallel");
}

std::string ToString(EpWorkload workload) {
  return workload == EpWorkload::kPrefill ? "prefill" : "decode";
}

std::string ToString(EpAttention attention) {
  return attention == EpAttention::kDataParallel ? "data-parallel" : "tensor-parallel";
}

model::HardwareSpec OneAcceleratorOf(const model::HardwareSpec& node) {
  model::HardwareSpec one = node;
  one.kind = model::HardwareKind::kAccelerator;
  one.accelerator_count = node.has_accelerator() ? 1 : 0;
  one.accelerators_per_node = 0;
  one.interconnect.reset();
  one.scale_out.reset();
  // The node's own name: messages about what computes name the preset the user gave.
  return one;
}

namespace {

// The weights one device holds: its rank's routed experts (E / ep of them, each split over the TP
// group), and the rest of the model (attention, router, shared experts, dense layers, embedding
// and LM head) split over the devices that share a replica's attention: the TP group, or every
// EP x TP device with tensor-parallel attention (data-parallel attention replicates it per rank).
double WeightBytesPerDevice(const EpConfig& config) {
  const model::MoeModelSpec& m = config.model;
  const model::WeightBytes w = model::CountWeightBytes(m);
  const int64_t moe_layers = m.num_layers - m.moe->first_dense_layers;
  const double experts = w.expert * static_cast<double>(m.moe->num_experts * moe_layers);
  const double rest = w.total - experts;
  const int64_t rest_devices =
      config.attention == EpAttention::kTensorParallel ? config.ep * config.tp : config.tp;
  return experts / static_cast<double>(config.ep * config.tp) +
         rest / static_cast<double>(rest_devices);
}

}  // namespace

void EpConfig::Validate() const {
  if (!model.moe) throw base::Error("--model " + model.name + ": a dense model has no experts");
  if (!node.has_accelerator())
    throw base::Error("--hardware " + node.name + ": a node of accelerators expected, got a " +
                      model::ToString(node.kind));
  const int64_t experts = model.moe->num_experts;
  if (ep < 1 || experts % ep != 0) {
    throw base::Error("--ep " + std::to_string(ep) + ": expected a divisor of " + model.name +
                      "'s " + std::to_string(experts) + " routed experts");
  }
  if (tp < 1) throw base::Error("--tp " + std::to_string(tp) + ": expected at least 1");
  if (ep * tp > node.accelerator_count) {
    throw base::Error("--ep " + std::to_string(ep) + " x --tp " + std::to_string(tp) + " = " +
                      std::to_string(ep * tp) + " devices, but node '" + node.name + "' has " +
                      std::to_string(node.accelerator_count));
  }
  if (model.moe->expert_intermediate_size % tp != 0) {
    throw base::Error("--tp " + std::to_string(tp) + ": expected a divisor of the expert width " +
                      std::to_string(model.moe->expert_intermediate_size));
  }
  const int64_t per_machine = node.AcceleratorsPerMachine();
  if (tp > per_machine || per_machine % tp != 0) {
    throw base::Error("--tp " + std::to_string(tp) +
                      ": a tensor-parallel group is a divisor of one machine's " +
                      std::to_string(per_machine) + " accelerators (groups tile a machine; " +
                      "none spans machines)");
  }
  // The attention's heads split over the devices that share a replica's sequences: the TP group,
  // or with tensor-parallel attention every EP x TP device.
  const int64_t head_devices = attention == EpAttention::kTensorParallel ? ep * tp : tp;
  // KV heads split over the devices, or are replicated when there are fewer of them (each device
  // then holds one, as vLLM does past num_kv_heads). Latent attention (MLA) caches one latent
  // per token, not KV heads: its query heads alone split.
  const bool latent = model.attention.kind == model::AttentionKind::kMultiHeadLatent;
  const int64_t kv_heads = latent ? model.attention.num_heads : model.attention.num_kv_heads;
  const bool kv_split = kv_heads % head_devices == 0 || head_devices % kv_heads == 0;
  if (head_devices > 1 && (model.attention.num_heads % head_devices != 0 || !kv_split)) {
    throw base::Error(
        (attention == EpAttention::kTensorParallel
             ? "--attention tensor-parallel over --ep " + std::to_string(ep) + " x --tp " +
                   std::to_string(tp)
             : "--tp " + std::to_string(tp)) +
        ": " + model.name + "'s " + std::to_string(model.attention.num_heads) + " attention heads" +
        (latent ? "" : " and " + std::to_string(kv_heads) + " KV heads") + " do not split over " +
        std::to_string(head_devices) +
        " devices (query heads divide by them; KV heads divide by them or them into KV heads)");
  }
  // A layout whose weights do not fit its devices was priced as if they did (Mixtral-8x22B on
  // 2 x RTX 4090), where sim sd and sim serve refuse it.
  const double per_device = WeightBytesPerDevice(*this);
  const double capacity = node.accelerator->memory_bytes;
  if (compute_on_node && per_device > capacity) {
    throw base::Error(
        "the weights of " + model.name + " need " + report::FormatGigabytes(per_device, 1) +
        " per device laid out --ep " + std::to_string(ep) + " x --tp " + std::to_string(tp) + " (" +
        (attention == EpAttention::kTensorParallel
             ? "tensor-parallel attention"
             : "data-parallel attention: attention and dense weights on every rank") +
        "), but " + node.name + "'s accelerators have " + report::FormatGigabytes(capacity, 1) +
        "; more devices, --attention tensor-parallel, or a quantized model");
  }
  if (batch < 1 || batch > kMaxBatch) {
    throw base::Error("--batch " + std::to_string(batch) + ": expected 1.." +
                      std::to_string(kMaxBatch) + " sequences per replica");
  }
  if (tokens < 1 || tokens > kMaxSequencePositions) {
    throw base::Error("--tokens " + std::to_string(tokens) + ": expected 1.." +
                      std::to_string(kMaxSequencePositions) + " positions");
  }
  const int64_t positions = tokens + (workload == EpWorkload::kDecode ? 1 : 0);
  if (model.max_position_embeddings > 0 && positions > model.max_position_embeddings) {
    throw base::Error("--tokens " + std::to_string(tokens) + ": " + std::to_string(positions) +
                      " positions exceed " + model.name + "'s " +
                      std::to_string(model.max_position_embeddings) + " (max_position_embeddings)");
  }
  if (attention == EpAttention::kDataParallel && batch % ep != 0) {
    throw base::Error("--batch " + std::to_string(batch) +
                      ": data-parallel attention gives each of the " + std::to_string(ep) +
                      " expert-parallel ranks its own sequences; expected a "
                      "multiple of " +
                      std::to_string(ep) + " (or --attention tensor-parallel)");
  }
  if (chunks && *chunks < 1) throw base::Error("--ep-chunks must be at least 1 (or auto)");
  if (max_chunks < 1 || max_chunks > 4096) throw base::Error("--max-chunks: expected 1..4096");
  const int64_t sms = node.accelerator->sm_count;
  if (comm_sms < 1 || (sms > 0 && comm_sms >= sms)) {
    throw base::Error("--comm-sms " + std::to_string(comm_sms) + ": expected 1.." +
                      (sms > 0 ? std::to_string(sms - 1) + " (the accelerator has " +
                                     std::to_string(sms) + " SMs)"
                               : std::string("any")));
  }
  if (comm_saturation_sms < 1 || (sms > 0 && comm_saturation_sms > sms)) {
    throw base::Error(
        "--comm-saturation-sms " + std::to_string(comm_saturation_sms) + ": expected 1.." +
        (sms > 0 ? std::to_string(sms) + " (the accelerator has " + std::to_string(sms) + " SMs)"
                 : std::string("any")));
  }
  // 0: the accelerator's own memory bandwidth; otherwise a rate as a hardware file's (1 B/s to
  // 2^60 B/s, docs/limits.md): 1e-300 B/s gave an infinite step and "gain -nan".
  if (!(copy_bytes_per_s == 0 || (copy_bytes_per_s >= 1 && copy_bytes_per_s <= 0x1p60)))
    throw base::Error(
        "--copy-bandwidth: expected 0 (the accelerator's memory bandwidth) or "
        "bytes per second in [1, 2^60], got " +
        report::ShortestText(copy_bytes_per_s));  // 1e308 as 1e+308, not 309 digits
  if (!(comm_bits > 0 && comm_bits <= 32))
    throw base::Error("--comm-bits: expected bits in (0, 32]");
  if (device_limit < 0 || device_limit > ep)
    throw base::Error("--device-limit " + std::to_string(device_limit) + ": expected 0 (none) .. " +
                      std::to_string(ep));
  if (gemm_crossover_tokens && *gemm_crossover_tokens < 1)
    throw base::Error("--gemm-crossover-tokens must be at least 1");
  if (!(kernel_launch_s >= 0)) throw base::Error("kernel launch time must be >= 0");
  if (!(group_efficiency > 0 && group_efficiency <= 2))
    throw base::Error("--group-gemm-efficiency: expected a ratio in (0, 2]");
}

}  // namespace moelab::sim
