#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "executor/executor_config.h"
#include "executor/kv_cache.h"
#include "routing/routing_source.h"
#include "routing/routing_trace.h"

namespace moelab::executor {

class ExpertProvider;

// New tokens of one sequence for a forward pass: they take positions cache->length() onwards.
struct SequenceInput {
  KvCache* cache = nullptr;
  std::vector<int32_t> tokens;
  // LogitRows::kLastOrEvery: logits for every new token of this sequence (an SD verify in a
  // serving batch), not only its last.
  bool every_logit = false;
};

// Wall time per operator class, accumulated over forward passes.
struct OperatorTimes {
  double attention_s = 0;  // QKV and output projections, rotary, attention over the KV cache
  double router_s = 0;     // gate matmul, softmax, top-K (GPU: and the experts' row gather and
                           // weighted combine, the dispatch, once per layer)
  double experts_s = 0;    // routed experts, shared experts, dense FFNs
  double lm_head_s = 0;    // final norm and LM head
  double other_s = 0;      // embedding, norms, residual adds
  double total() const { return attention_s + router_s + experts_s + lm_head_s + other_s; }
  OperatorTimes& operator+=(const OperatorTimes& other);
  // What was spent between two readings of a model's cumulative times (this one the later).
  OperatorTimes Since(const OperatorTimes& earlier) const;
};

// kLastOrEvery: each sequence's last token, or each of its tokens where `every_logit` is set (a
// serving iteration's prefill chunks beside SD verifies).
enum class LogitRows { kAll, kLastPerSequence, kLastOrEvery };

struct ForwardOptions {
  LogitRows logits = LogitRows::kAll;
  routing::RoutingSource* routing = nullptr;  // forced routing; nullptr: the model's own gate
  routing::RoutingTrace* record = nullptr;    // when set, this pass's routing is appended as a step
  std::string step_kind = "decode";
  // Routed experts' weights come from here (the offload runtime) instead of ModelWeights; it may
  // ask for the gate's mean probabilities and the speculative gate (layer l+1's router applied to
  // layer l's normalized hidden state), which `record` then records too.
  ExpertProvider* experts = nullptr;
};

// One forward pass of a model on one device: the CPU Transformer (transformer.h) or the GPU
// backend (executor/gpu/). The workloads (generation.h) run on either unchanged; each device keeps
// its sequences' keys and values where its attention reads them (NewCache).
class ForwardModel {
 public:
  virtual ~ForwardModel() = default;
  virtual const ExecutorConfig& config() const = 0;
  // Appends every sequence's tokens to its cache and writes logits [rows][vocab] to `logits`.
  // Rows: every new token in batch order (kAll) or the last token of each sequence.
  virtual void Forward(std::vector<SequenceInput>& batch, const ForwardOptions& options,
                       std::vector<float>& logits) = 0;
  virtual OperatorTimes& times() = 0;
  // Sizes the scratch a pass of up to `tokens` new tokens uses, and makes it resident, before any
  // timing, as an engine sizes its compute buffers at start-up (llama.cpp reserves its graph for
  // n_batch): otherwise the first pass of a new size takes the allocations and the OS's
  // first-touch page faults inside its time (on the Xeon, layer 0 of a 256-token prefill ran 2-6
  // ms over the other layers, 4-5 % of the pass, which no profiled operator sees). Later passes of
  // up to `tokens` tokens do not allocate (beyond a few small per-layer lists).
  virtual void ReservePass(int64_t tokens) = 0;
  // Forward passes run so far; forced routing uses it as the step index.
  virtual int64_t passes() const = 0;
  // An empty KV cache of `capacity` positions in this device's memory.
  virtual KvCache NewCache(int64_t capacity) const = 0;
  // "cpu", or "gpu" for the CUDA backend.
  virtual std::string device() const = 0;
};

// Checks a pass's sequences (a cache with room, at least one token, ids inside the vocabulary);
// returns the pass's tokens.
int64_t CheckForwardBatch(const ExecutorConfig& config, const std::vector<SequenceInput>& batch);

// The routing trace step a pass starts (its kind, tokens and, when it is recorded, each
// sequence's token count).
routing::RoutingStep NewRoutingStep(const ForwardOptions& options,
                                    const std::vector<SequenceInput>& batch, int64_t tokens);

// The pass's rows that get logits: every token (kAll) or each sequence's last, in batch order.
std::vector<int64_t> LogitRowIndices(const std::vector<SequenceInput>& batch, LogitRows rows,
                                     int64_t tokens);

// Top-K of a router's probabilities: the K largest (lower index first on ties), in rank order.
void TopK(const float* probabilities, int64_t count, int64_t k, int32_t* indices);

// Each token's experts and their weights from the router's softmax probabilities
// [tokens][num_experts]: the top-K, or `forced` (a routing source's choice) when given; weights are
// the chosen probabilities, renormalized to sum 1 when the family does. Both devices route with it.
void ChooseExperts(const ExecutorConfig& config, const float* probabilities, int64_t tokens,
                   const std::vector<std::vector<int32_t>>* forced,
                   std::vector<std::vector<int32_t>>& experts,
                   std::vector<std::vector<float>>& weights);

// A MoE layer's routing from its router's softmax probabilities [tokens][num_experts]: forced by
// options.routing (pass `pass`) or ChooseExperts' top-K, recorded into `record` when given. Both
// devices route with it, so they make the same choice on the same probabilities.
void RouteLayer(const ExecutorConfig& config, const float* probabilities, int64_t tokens,
                const ForwardOptions& options, int64_t pass, int64_t moe_layer,
                routing::RoutingStep* record, std::vector<std::vector<int32_t>>& experts,
                std::vector<std::vector<float>>& weights);

}  // namespace moelab::executor
