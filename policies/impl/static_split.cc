// static-split: llama.cpp's -ngl. The first L transformer layers live on the accelerator whole
// (dense part and every expert), the rest run on the CPU from host memory; nothing moves at run
// time except the hidden state where the two halves meet. Without --gpu-layers, L is the largest
// number of layers that fits.
#include <algorithm>

#include "policies/impl/common.h"
#include "policies/impl/factories.h"

namespace moelab::policies::impl {
namespace {

constexpr PolicyOptionSpec kGpuLayersOption{
    "gpu-layers",
    std::nullopt,
    "as many as fit",
    0,
    OptionMaximum::kModelLayers,
    "transformer layers (dense part and experts) on the accelerator"};

class StaticSplitPolicy : public OffloadPolicy {
 public:
  StaticSplitPolicy(const PolicyOptions& options, const OffloadSetup& setup) : setup_(setup) {
    if (!Fits(0)) {
      // Not even the split with every layer on the CPU: what stays on the accelerator regardless
      // (OffloadSetup::fixed_bytes) overflows it. Said here, not as a plan checker's "policy bug".
      throw base::Error("static-split: the accelerator's " +
                        report::FormatGigabytes(setup.accelerator_bytes, 2) +
                        " cannot hold what stays on it with no layer there (" +
                        report::FormatGigabytes(setup.fixed_bytes, 2) +
                        ": the embeddings and the LM head); give it more memory");
    }
    const int64_t most = MostLayersThatFit();
    if (const std::optional<int64_t> layers = kGpuLayersOption.Resolve(options, setup)) {
      gpu_layers_ = *layers;
      if (!Fits(gpu_layers_)) {
        throw base::Error(
            "--gpu-layers " + std::to_string(gpu_layers_) + ": layers 0-" +
            std::to_string(gpu_layers_ - 1) + " need " +
            report::FormatGigabytes(NeededBytes(gpu_layers_), 2) +
            " of accelerator memory (dense parts, experts, KV cache, embeddings, LM head), "
            "the accelerator has " +
            report::FormatGigabytes(setup.accelerator_bytes, 2) + "; at most " +
            std::to_string(most) + " layers fit");
      }
    } else {
      gpu_layers_ = most;
    }
  }

  std::string Name() const override { return "static-split"; }
  std::vector<std::pair<std::string, double>> ResolvedOptions() const override {
    return {{"gpu_layers", static_cast<double>(gpu_layers_)}};
  }
  Device DenseDevice(int64_t layer) const override {
    return layer < gpu_layers_ ? Device::kAccelerator : Device::kCpu;
  }
  int64_t ExpertSlots() const override {
    return MoeLayersOnAccelerator(gpu_layers_) * setup_.num_experts;
  }

  std::vector<ExpertRef> InitialPlacement() override {
    std::vector<ExpertRef> placed;
    for (int64_t layer = 0; layer < MoeLayersOnAccelerator(gpu_layers_); ++layer) {
      for (int64_t expert = 0; expert < setup_.num_experts; ++expert) {
        placed.push_back({static_cast<int32_t>(layer), static_cast<int32_t>(expert)});
      }
    }
    return placed;
  }

  void PlanLayer(const LayerDemand& demand, LayerPlan& plan) override {
    const bool on_accelerator = demand.layer < MoeLayersOnAccelerator(gpu_layers_);
    for (const ExpertDemand& d : demand.experts) {
      AddDecision(plan, d.expert, on_accelerator ? ExpertAction::kResident : ExpertAction::kCpu);
    }
  }

 private:
  int64_t MoeLayersOnAccelerator(int64_t gpu_layers) const {
    return std::max<int64_t>(0, gpu_layers - setup_.first_dense_layers);
  }
  double NeededBytes(int64_t gpu_layers) const {
    return setup_.accelerator_bytes - setup_.ExpertBudgetBytes(gpu_layers, 0) +
           static_cast<double>(MoeLayersOnAccelerator(gpu_layers) * setup_.num_experts) *
               static_cast<double>(setup_.expert_bytes);
  }
  bool Fits(int64_t gpu_layers) const {
    return NeededBytes(gpu_layers) <= setup_.accelerator_bytes;
  }
  int64_t MostLayersThatFit() const {
    int64_t most = 0;
    while (most < setup_.num_layers && Fits(most + 1)) ++most;
    return most;
  }

  OffloadSetup setup_;
  int64_t gpu_layers_ = 0;
};

}  // namespace

std::vector<PolicyOptionSpec> StaticSplitOptions() { return {kGpuLayersOption}; }

std::unique_ptr<OffloadPolicy> MakeStaticSplitPolicy(const PolicyOptions& options,
                                                     const OffloadSetup& setup) {
  return std::make_unique<StaticSplitPolicy>(options, setup);
}

}  // namespace moelab::policies::impl
