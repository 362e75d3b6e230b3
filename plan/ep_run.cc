#include "plan/ep_run.h"

#include <algorithm>

#include "base/error.h"
#include "model/collective_cost.h"
#include "report/provenance.h"

namespace moelab::plan {
namespace {

// EpRunRequest::tokens when unset: kDefaultTokens, fewer when the model's context is shorter (a
// decode step needs one more position than its cached tokens).
int64_t DefaultTokens(const sim::EpConfig& config) {
  const int64_t most =
      config.model.max_position_embeddings - (config.workload == sim::EpWorkload::kDecode ? 1 : 0);
  if (config.model.max_position_embeddings <= 0 || most < 1) return EpRunRequest::kDefaultTokens;
  return std::min(EpRunRequest::kDefaultTokens, most);
}

}  // namespace

sim::EpResult RunEp(const EpRunRequest& request, const model::PresetStore& store) {
  request.cost.Validate();
  sim::EpConfig config = request.config;
  config.node = store.LoadHardware(request.hardware);
  if (config.node.kind != model::HardwareKind::kNode &&
      config.node.kind != model::HardwareKind::kAccelerator) {
    throw base::Error("--hardware " + request.hardware +
                      ": a node of accelerators expected, got a " +
                      model::ToString(config.node.kind) + " preset");
  }
  config.model = store.LoadModel(request.model);
  config.kernel_launch_s = request.cost.assumed.kernel_launch_s;
  fit::CostSources sources(request.cost, store);
  std::shared_ptr<const model::CostSource> compute;
  if (sources.fitted()) {
    config.model = sources.ProfiledTarget(config.model);
    config.compute_on_node = false;
    compute = sources.Fitted(config.model);
  } else {
    if (!config.node.has_accelerator())
      throw base::Error("--hardware " + request.hardware + ": a node of accelerators expected");
    compute = sources.ForHardware(sim::OneAcceleratorOf(config.node));
  }
  config.batch = request.batch.value_or(config.ep);
  config.tokens = request.tokens.value_or(DefaultTokens(config));
  config.Validate();
  // Measured collectives (a profile taken with --collectives) price what they measured; the
  // node's links price the rest.
  std::shared_ptr<const model::CollectiveCost> collectives = sources.MeasuredCollectives();
  if (!collectives) collectives = model::LinkCollectiveCost::ForNode(config.node);
  return sim::SimulateEp(config, *compute, *collectives);
}

std::string Render(const sim::EpResult& result, report::Format format) {
  switch (format) {
    case report::Format::kJson: {
      nlohmann::json json = result.ToJson();
      json["provenance"] = report::Provenance();
      return json.dump(2) + "\n";
    }
    case report::Format::kCsv:
      return result.SweepRows().ToCsv();
    case report::Format::kTable:
      return result.Text();
  }
  return "";
}

}  // namespace moelab::plan
