#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <utility>

#include "model/model_spec.h"

namespace moelab::model {

// The rotary table and every thread's attention scores are sized by max_positions before a token
// runs (--max-positions 9e18 ended in "internal error"); 2^20 is above every preset's context
// window.
inline constexpr int64_t kMaxExecutorPositions = int64_t{1} << 20;

// Command-line shape overrides (--layers, --hidden, ...); unset fields keep the spec's value.
struct ShapeOverrides {
  std::optional<int64_t> layers, hidden, intermediate, dense_intermediate, experts, top_k, heads,
      kv_heads, head_dim, vocab, shared_experts, shared_intermediate, max_positions;

  using Field = std::optional<int64_t> ShapeOverrides::*;
  // Every field with its name in a profile's model.shape (and --NAME with '_' as '-').
  static const std::array<std::pair<const char*, Field>, 13>& Fields();
  // These overrides with every field `given` sets taken from it.
  ShapeOverrides OverriddenBy(const ShapeOverrides& given) const;
};

// The default executor shapes: Mixtral-8x7B scaled to this machine (8 layers, hidden 1024,
// 16 heads / 4 KV heads of 64, 8 experts top-2 of width 3584: 22 MB per expert, 1.6 GB of
// weights, so experts stream from DRAM, not caches), and a Llama-3.2-style dense draft (4
// layers, hidden 512) on the target's vocabulary.
ShapeOverrides DefaultTargetShape();
ShapeOverrides DefaultDraftShape();

// The integer shape the reference executor (executor/) runs for `spec` with `overrides`, as a
// spec with bf16 weights: a decoder-only transformer with RMSNorm, rotary embeddings,
// grouped-query attention and SwiGLU FFNs, MoE or dense, at most 4096 positions unless
// overridden. Architectures the executor does not implement (MLA, LayerNorm, ReLU/GELU FFNs, FFN
// biases, attention sinks, alternating windows) are refused by name, and so are shapes it cannot
// run (ValidateExecutorShape). The executor builds its configuration from this spec, so the
// planner, the simulator and a fitted profile count exactly what it runs.
MoeModelSpec ExecutorShape(const MoeModelSpec& spec, const ShapeOverrides& overrides);

// Throws moelab::Error "model 'NAME': FIELD: what" when the executor cannot run `shape` (1 to
// kMaxLayers layers, even head_dim, kv_heads dividing heads, 2..kMaxExecutorPositions positions,
// ...), or when one of the int64 sizes it forms (heads x head_dim, experts x hidden x
// intermediate, ...) overflows: checked before any weight bytes are estimated.
void ValidateExecutorShape(const MoeModelSpec& shape);

// `spec` scaled by `overrides` through the executor's shape (ExecutorShape), so it is exactly what
// `moelab run` with the same overrides executes; `spec` itself when no override is set.
MoeModelSpec ScaledSpec(const MoeModelSpec& spec, const ShapeOverrides& overrides);

// The executor's shape of a draft (`moelab profile`/`moelab run` defaults) beside an executor
// target: the draft shares the target's vocabulary.
MoeModelSpec ExecutorDraftShape(const MoeModelSpec& draft, const MoeModelSpec& executor_target);

}  // namespace moelab::model
