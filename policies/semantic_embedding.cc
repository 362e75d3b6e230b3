#include "policies/semantic_embedding.h"

#include "base/hash.h"

namespace moelab::policies {
namespace {

constexpr uint64_t kSemanticSalt = 0x73656d616e746963ULL;  // "semantic"

}  // namespace

std::vector<float> SemanticEmbedding(uint64_t seed, int64_t request, int64_t dimension) {
  std::vector<float> embedding(static_cast<size_t>(dimension));
  uint64_t state =
      base::SplitMix64(base::SplitMix64(seed ^ kSemanticSalt) ^ static_cast<uint64_t>(request));
  for (float& value : embedding) {
    state = base::SplitMix64(state);
    value = static_cast<float>(static_cast<double>(state >> 11) * 0x1.0p-52 - 1.0);
  }
  return embedding;
}

}  // namespace moelab::policies
