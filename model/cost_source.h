#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "model/forward_cost.h"
#include "model/hardware_spec.h"
#include "model/model_spec.h"
#include "model/roofline.h"

namespace moelab::model {

// Where a prediction takes its operator times from: one compute device (an accelerator node, a
// host CPU on some threads, a profiled machine) priced by one source. Every prediction -- the SD
// plan and sweep, the hardware search, the offload simulator and its sweep, validate -- asks a
// CostSource, so the sources are interchangeable:
//   analytic-roofline    a hardware preset's roofline with assumed efficiencies
//   (RooflineCostSource) calibrated-roofline  the same roofline with efficiencies a profile fitted
//   (RooflineCostSource,
//                        built from fit/cost_calibration.h)
//   fitted-profile       per-operator curves fitted to a measured profile
//   (fit/profile_cost_source.h)
// ("measured-trace", the executor's own per-operator times, is the next one: validate's.)
class CostSource {
 public:
  virtual ~CostSource() = default;

  virtual std::string name() const = 0;           // "analytic-roofline", ...
  virtual std::string device() const = 0;         // what computes, for reports
  virtual std::string compute_dtype() const = 0;  // whose peak (or the profiled dtype)

  // One forward pass of `model` at `shape`, by operator (each OperatorCost's scope: ScopeOf).
  virtual ForwardCost Forward(const MoeModelSpec& model, const ForwardShape& shape) const = 0;
  // One routed expert of `model` on `tokens` tokens at one MoE layer, in a run whose passes cycle
  // through `working_set_bytes` (ForwardShape::working_set_bytes; 0: the whole model resident).
  virtual double ExpertSeconds(const MoeModelSpec& model, int64_t tokens,
                               double working_set_bytes) const = 0;
  // Speculative decoding's acceptance step over `batch` x (gamma + 1) verified positions.
  virtual double RejectSeconds(const MoeModelSpec& target, int64_t batch, int64_t gamma) const = 0;
  // Weights and a KV cache of `kv_tokens` tokens per device, and what one device holds.
  virtual MemoryFootprint Memory(const MoeModelSpec& model, double kv_tokens) const = 0;

  // What a report says about the source: {"cost_source", ...parameters, calibration or fit}.
  virtual nlohmann::json Describe() const = 0;
};

// The roofline of one compute target (model/roofline.h) with fixed parameters: the analytic source,
// or the calibrated one when a profile fitted `params` (`name` says which; `details` is merged
// into Describe(), e.g. the calibration).
class RooflineCostSource : public CostSource {
 public:
  RooflineCostSource(RooflineTarget target, CostParameters params,
                     std::string name = "analytic-roofline",
                     nlohmann::json details = nlohmann::json::object());
  // The compute target of `hardware` (its accelerators, else its host on all cores).
  static std::unique_ptr<RooflineCostSource> ForHardware(
      const HardwareSpec& hardware, const CostParameters& params,
      std::string name = "analytic-roofline", nlohmann::json details = nlohmann::json::object());

  std::string name() const override { return name_; }
  std::string device() const override { return target_.name; }
  std::string compute_dtype() const override { return target_.dtype_used; }
  ForwardCost Forward(const MoeModelSpec& model, const ForwardShape& shape) const override;
  double ExpertSeconds(const MoeModelSpec& model, int64_t tokens,
                       double working_set_bytes) const override;
  double RejectSeconds(const MoeModelSpec& target, int64_t batch, int64_t gamma) const override;
  MemoryFootprint Memory(const MoeModelSpec& model, double kv_tokens) const override;
  nlohmann::json Describe() const override;

  const RooflineTarget& target() const { return target_; }
  const CostParameters& params() const { return params_; }

 private:
  RooflineTarget target_;
  CostParameters params_;
  std::string name_;
  nlohmann::json details_;
};

}  // namespace moelab::model
