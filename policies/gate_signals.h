#pragma once

#include <vector>

namespace moelab::policies {

// What a real model's gate showed the policy, pass by pass and MoE layer by layer: the gate's
// mean probabilities (fMoE's expert maps) and the speculative gate's next-layer scores
// (Mixtral-offloading), each [pass][moe layer][expert], a row empty where none was computed. The
// executor's offload runtime records them; the simulator replays them instead of its stand-ins
// (policies/gate_standins.h), so both engines show a policy the same inputs.
struct GateSignals {
  std::vector<std::vector<std::vector<float>>> gate_probabilities;
  std::vector<std::vector<std::vector<float>>> next_layer_scores;
};

}  // namespace moelab::policies
