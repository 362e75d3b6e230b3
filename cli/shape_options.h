#pragma once

#include <string>

#include "cli/options.h"
#include "model/executor_shape.h"

namespace moelab::cli {

// The model-shape options every command that builds an executor shape takes (--layers, --hidden,
// --intermediate, --dense-intermediate, --experts, --top-k, --heads, --kv-heads, --head-dim,
// --vocab, --shared-experts, --shared-intermediate, --max-positions), each prefixed with `prefix`
// ("draft-" for a draft model). Help shows `defaults`.
void AddShapeOptions(po::options_description& options, const std::string& prefix,
                     const model::ShapeOverrides& defaults);

// `shape` with every given option applied; a value below 1, or --layers above base::kMaxLayers, is
// an error naming the option as given.
model::ShapeOverrides ShapeFrom(const po::variables_map& values, const std::string& prefix,
                                model::ShapeOverrides shape);

}  // namespace moelab::cli
