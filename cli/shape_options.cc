#include "cli/shape_options.h"

#include "base/error.h"
#include "base/limits.h"

namespace moelab::cli {

void AddShapeOptions(po::options_description& options, const std::string& prefix,
                     const model::ShapeOverrides& defaults) {
  auto add = [&](const char* name, const std::optional<int64_t>& value, const char* what) {
    const std::string full = prefix + name;
    const std::string help =
        std::string(what) +
        (value ? " (default " + std::to_string(*value) + ")" : " (default: the preset's)");
    options.add_options()(full.c_str(), po::value<int64_t>(), help.c_str());
  };
  add("layers", defaults.layers, "transformer layers");
  add("hidden", defaults.hidden, "hidden size");
  add("intermediate", defaults.intermediate,
      "expert FFN width (dense FFN width for a dense model)");
  add("dense-intermediate", defaults.dense_intermediate, "dense-layer FFN width");
  add("experts", defaults.experts, "routed experts per layer");
  add("top-k", defaults.top_k, "experts per token");
  add("heads", defaults.heads, "attention heads");
  add("kv-heads", defaults.kv_heads, "KV heads");
  add("head-dim", defaults.head_dim, "head dimension");
  add("vocab", defaults.vocab,
      prefix.empty() ? "vocabulary size" : "vocabulary size (default: the target's)");
  add("shared-experts", defaults.shared_experts, "shared experts");
  add("shared-intermediate", defaults.shared_intermediate, "shared expert width");
  add("max-positions", defaults.max_positions, "KV cache and rotary table length");
}

model::ShapeOverrides ShapeFrom(const po::variables_map& values, const std::string& prefix,
                                model::ShapeOverrides shape) {
  auto take = [&](const char* name, std::optional<int64_t>& field) {
    const std::string full = prefix + name;
    if (values.count(full)) {
      const int64_t value = values[full].as<int64_t>();
      if (value < 1)
        throw base::Error("--" + full + " must be at least 1, got " + std::to_string(value));
      // The bound a model file's num_layers has (docs/limits.md), named as the user gave it.
      if (&field == &shape.layers)
        base::CheckCount(value, 1, base::kMaxLayers, "--" + full,
                         "the deepest released models have about 130 layers; the simulator and "
                         "planners keep per-layer state");
      field = value;
    }
  };
  take("layers", shape.layers);
  take("hidden", shape.hidden);
  take("intermediate", shape.intermediate);
  take("dense-intermediate", shape.dense_intermediate);
  take("experts", shape.experts);
  take("top-k", shape.top_k);
  take("heads", shape.heads);
  take("kv-heads", shape.kv_heads);
  take("head-dim", shape.head_dim);
  take("vocab", shape.vocab);
  take("shared-experts", shape.shared_experts);
  take("shared-intermediate", shape.shared_intermediate);
  take("max-positions", shape.max_positions);
  return shape;
}

}  // namespace moelab::cli
