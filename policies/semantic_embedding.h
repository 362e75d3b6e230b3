#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace moelab::policies {

// The seeded semantic embedding of request `request` (values in [-1, 1]): the stand-in for a
// prompt embedding that fMoE's semantic search keys on (our requests are synthetic, they have no
// text). Shared by the simulator and the executor's offload runtime so both hand fMoE the same
// vectors.
std::vector<float> SemanticEmbedding(uint64_t seed, int64_t request, int64_t dimension);

}  // namespace moelab::policies
