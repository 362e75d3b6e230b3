#include "executor/weights.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>

#include "base/error.h"
#include "base/hash.h"
#include "base/system_memory.h"
#include "report/format.h"

namespace moelab::executor {
namespace {

// Uniform in [-1, 1) from (seed, tensor, index).
inline float HashUniform(uint64_t seed, uint64_t tensor, uint64_t index) {
  const uint64_t bits = base::SplitMix64(seed ^ base::SplitMix64(tensor ^ base::SplitMix64(index)));
  return static_cast<float>(static_cast<double>(bits >> 40) * (2.0 / 16777216.0) - 1.0);
}

class SyntheticFiller {
 public:
  SyntheticFiller(uint64_t seed, kernels::ThreadPool& pool) : seed_(seed), pool_(pool) {}

  // Fills row-major bf16 values with standard deviation `stddev`.
  void Fill(std::vector<kernels::Bf16>& values, double stddev) {
    kernels::Bf16* data = values.data();
    const int64_t count = static_cast<int64_t>(values.size());
    const uint64_t tensor = next_tensor_++;
    const float amplitude = static_cast<float>(stddev * std::sqrt(3.0));
    constexpr int64_t kChunk = 1 << 16;
    const int64_t chunks = (count + kChunk - 1) / kChunk;
    pool_.Run(chunks, [&](int64_t chunk, int) {
      const int64_t end = std::min(count, (chunk + 1) * kChunk);
      for (int64_t i = chunk * kChunk; i < end; ++i) {
        data[i] =
            kernels::FloatToBf16(amplitude * HashUniform(seed_, tensor, static_cast<uint64_t>(i)));
      }
    });
  }
  // Element (r, c) takes the bf16 value of row-major index r * cols + c: the same weights as a
  // row-major fill, then packed or quantized (Matrix: PackedBf16Matrix or WeightMatrix). Tasks of
  // whole 16-row groups (about 64K elements), so no two write one vector or quantization group.
  template <typename Matrix>
  void Fill(Matrix& m, double stddev) {
    const uint64_t tensor = next_tensor_++;
    const float amplitude = static_cast<float>(stddev * std::sqrt(3.0));
    const int64_t cols = m.cols();
    const int64_t task_rows = kernels::PackedBf16Matrix::kGroupRows *
                              std::max<int64_t>(1, (int64_t{1} << 12) / std::max<int64_t>(1, cols));
    const int64_t tasks = (m.rows() + task_rows - 1) / task_rows;
    pool_.Run(tasks, [&](int64_t task, int) {
      const int64_t begin = task * task_rows, end = std::min(m.rows(), (task + 1) * task_rows);
      thread_local std::vector<kernels::Bf16> rows;
      rows.resize(static_cast<size_t>((end - begin) * cols));
      for (int64_t r = begin; r < end; ++r) {
        for (int64_t c = 0; c < cols; ++c) {
          rows[(r - begin) * cols + c] = kernels::FloatToBf16(
              amplitude * HashUniform(seed_, tensor, static_cast<uint64_t>(r * cols + c)));
        }
      }
      m.PackRows(begin, end - begin, rows.data());
    });
  }
  // Tensors another call fills (an offloaded expert already in the store): the next tensor's
  // values do not change.
  void Skip(uint64_t tensors) { next_tensor_ += tensors; }
  void FillSmall(std::vector<float>& data, double center, double spread) {
    const uint64_t tensor = next_tensor_++;
    for (size_t i = 0; i < data.size(); ++i) {
      data[i] = static_cast<float>(center + spread * HashUniform(seed_, tensor, i));
    }
  }

 private:
  uint64_t seed_;
  kernels::ThreadPool& pool_;
  uint64_t next_tensor_ = 1;
};

void FillFfn(SyntheticFiller& filler, FfnWeights& ffn, double down_scale) {
  if (ffn.width == 0) return;
  filler.Fill(ffn.gate_up, 1.0 / std::sqrt(static_cast<double>(ffn.hidden)));
  filler.Fill(ffn.down, down_scale / std::sqrt(static_cast<double>(ffn.width)));
}

}  // namespace

void FfnWeights::Allocate(int64_t hidden_size, int64_t ffn_width, kernels::WeightFormat format) {
  hidden = hidden_size;
  width = ffn_width;
  gate_up = kernels::WeightMatrix(format, 2 * ffn_width, hidden_size);
  down = kernels::WeightMatrix(format, hidden_size, ffn_width);
}

double WeightBytesFor(const ExecutorConfig& c) {
  // In double and per kind of layer, not per layer: an estimate checked against memory before any
  // allocation must neither wrap (int64 products of huge shapes) nor loop over --layers 9e18.
  // Every term is an integer or a multiple of 1/32, so for real shapes the sum is exact.
  const double d = static_cast<double>(c.hidden_size);
  const double q = static_cast<double>(c.num_heads) * static_cast<double>(c.head_dim);
  const double kv = static_cast<double>(c.num_kv_heads) * static_cast<double>(c.head_dim);
  const double experts = static_cast<double>(c.num_experts);
  const double layers = static_cast<double>(c.num_layers);
  const double moe_layers =
      c.is_moe() ? static_cast<double>(c.num_layers - c.first_dense_layers) : 0.0;
  // Matrices in bf16-equivalent elements: a quantized matrix counts its stored bits / 16.
  const double attention_scale = kernels::StoredBitsPerWeight(c.attention_format) / 16.0;
  const double expert_scale = kernels::StoredBitsPerWeight(c.expert_format) / 16.0;
  double matrices = static_cast<double>(c.vocab_size) * d * (c.tied_embeddings ? 1 : 2);
  double vectors = d;
  matrices += layers * (attention_scale * ((q + 2 * kv) * d + d * q));
  vectors += layers * (2.0 * d + (c.qkv_bias ? q + 2 * kv : 0.0) +
                       (c.qk_norm ? 2.0 * static_cast<double>(c.head_dim) : 0.0));
  matrices += moe_layers * (experts * d +
                            expert_scale * 3.0 *
                                (experts * d * static_cast<double>(c.expert_intermediate_size)) +
                            3.0 * (d * static_cast<double>(c.num_shared_experts) *
                                   static_cast<double>(c.shared_expert_intermediate_size)) +
                            (c.shared_expert_gate ? d : 0.0));
  matrices += (layers - moe_layers) * (3.0 * (d * static_cast<double>(c.dense_intermediate_size)));
  return 2.0 * matrices + 4.0 * vectors;
}

ModelWeights AllocateWeights(const ExecutorConfig& c) { return AllocateWeights(c, true); }

ModelWeights AllocateWeights(const ExecutorConfig& c, bool with_experts) {
  c.Validate();
  ExecutorConfig counted = c;
  if (!with_experts) counted.expert_intermediate_size = 0;
  const double needed = WeightBytesFor(counted);
  const double available = base::MemAvailableBytes();
  if (available > 0 && needed > 0.9 * available) {
    throw base::Error("model '" + c.name + "' needs " + report::FormatWholeGigabytes(needed) +
                      " of weights but this machine has " +
                      report::FormatWholeGigabytes(available) +
                      " available; scale it with --layers/--hidden/--intermediate/--experts");
  }
  ModelWeights w;
  w.config = c;
  const int64_t d = c.hidden_size;
  w.embedding.assign(static_cast<size_t>(c.vocab_size * d), 0);
  w.lm_head = kernels::PackedBf16Matrix(c.vocab_size, d);
  w.final_norm.assign(static_cast<size_t>(d), 1.0f);
  w.layers.resize(static_cast<size_t>(c.num_layers));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    LayerWeights& layer = w.layers[l];
    layer.attention_norm.assign(d, 1.0f);
    layer.ffn_norm.assign(d, 1.0f);
    const int64_t qkv_rows = c.q_width() + 2 * c.kv_width();
    layer.qkv = kernels::WeightMatrix(c.attention_format, qkv_rows, d);
    if (c.qkv_bias) layer.qkv_bias.assign(qkv_rows, 0.0f);
    if (c.qk_norm) {
      layer.q_norm.assign(c.head_dim, 1.0f);
      layer.k_norm.assign(c.head_dim, 1.0f);
    }
    layer.output = kernels::WeightMatrix(c.attention_format, d, c.q_width());
    if (c.IsMoeLayer(l)) {
      layer.router = kernels::PackedBf16Matrix(c.num_experts, d);
      if (with_experts) layer.experts.resize(c.num_experts);
      for (FfnWeights& expert : layer.experts)
        expert.Allocate(d, c.expert_intermediate_size, c.expert_format);
      if (c.num_shared_experts > 0) {
        layer.shared.Allocate(d, c.num_shared_experts * c.shared_expert_intermediate_size,
                              kernels::WeightFormat::kBf16);
        if (c.shared_expert_gate) layer.shared_gate = kernels::PackedBf16Matrix(1, d);
      }
    } else {
      layer.dense.Allocate(d, c.dense_intermediate_size, kernels::WeightFormat::kBf16);
    }
  }
  return w;
}

void TieLmHead(ModelWeights& w) {
  if (w.config.tied_embeddings)
    w.lm_head = kernels::PackedBf16Matrix::Pack(w.embedding.data(), w.config.vocab_size,
                                                w.config.hidden_size);
}

ModelWeights MakeSyntheticWeights(const ExecutorConfig& c, uint64_t seed,
                                  kernels::ThreadPool& pool) {
  return MakeSyntheticWeights(c, seed, pool, nullptr);
}

ModelWeights MakeSyntheticWeights(const ExecutorConfig& c, uint64_t seed, kernels::ThreadPool& pool,
                                  const ExpertSink* sink) {
  ModelWeights w = AllocateWeights(c, sink == nullptr);
  FfnWeights scratch;
  if (sink && *sink) scratch.Allocate(c.hidden_size, c.expert_intermediate_size, c.expert_format);
  w.source = "synthetic seed " + std::to_string(seed);
  SyntheticFiller filler(seed, pool);
  const double d = static_cast<double>(c.hidden_size);
  const double residual_scale = 1.0 / std::sqrt(2.0 * static_cast<double>(c.num_layers));
  filler.Fill(w.embedding, 1.0);
  if (!c.tied_embeddings) filler.Fill(w.lm_head, 1.0 / std::sqrt(d));
  filler.FillSmall(w.final_norm, 1.0, 0.1);
  for (size_t l = 0; l < w.layers.size(); ++l) {
    LayerWeights& layer = w.layers[l];
    filler.FillSmall(layer.attention_norm, 1.0, 0.1);
    filler.FillSmall(layer.ffn_norm, 1.0, 0.1);
    filler.Fill(layer.qkv, 1.0 / std::sqrt(d));
    if (!layer.qkv_bias.empty()) filler.FillSmall(layer.qkv_bias, 0.0, 0.1);
    if (!layer.q_norm.empty()) {
      filler.FillSmall(layer.q_norm, 1.0, 0.1);
      filler.FillSmall(layer.k_norm, 1.0, 0.1);
    }
    filler.Fill(layer.output, residual_scale / std::sqrt(static_cast<double>(c.q_width())));
    // Router logits of unit scale spread tokens over many experts.
    if (!layer.router.empty()) filler.Fill(layer.router, 1.0 / std::sqrt(d));
    for (FfnWeights& expert : layer.experts) FillFfn(filler, expert, residual_scale);
    if (sink && c.IsMoeLayer(static_cast<int64_t>(l))) {
      // Offloaded: one expert at a time to the sink (the same values), or skipped.
      for (int64_t e = 0; e < c.num_experts; ++e) {
        if (*sink) {
          FillFfn(filler, scratch, residual_scale);
          (*sink)(static_cast<int64_t>(l) - c.first_dense_layers, e, scratch);
        } else if (c.expert_intermediate_size > 0) {
          filler.Skip(2);
        }
      }
    }
    FillFfn(filler, layer.shared, residual_scale);
    if (!layer.shared_gate.empty()) filler.Fill(layer.shared_gate, 1.0 / std::sqrt(d));
    FillFfn(filler, layer.dense, residual_scale);
  }
  TieLmHead(w);
  return w;
}

namespace {

// Bytes of one layer's weights, counting `experts_counted` of its routed experts.
double LayerBytes(const LayerWeights& l, double experts_counted) {
  double bytes = 4.0 * static_cast<double>(l.attention_norm.size() + l.ffn_norm.size() +
                                           l.qkv_bias.size() + l.q_norm.size() + l.k_norm.size());
  bytes += l.qkv.StoredBytes() + l.output.StoredBytes() + l.shared.StoredBytes() +
           l.dense.StoredBytes() +
           2.0 * static_cast<double>(l.router.elements() + l.shared_gate.elements());
  if (!l.experts.empty()) bytes += experts_counted * l.experts[0].StoredBytes();
  return bytes;
}

}  // namespace

double ModelWeights::TotalBytes() const {
  const double lm_head_elements =
      config.tied_embeddings ? 0.0 : static_cast<double>(lm_head.elements());
  double bytes = 2.0 * (static_cast<double>(embedding.size()) + lm_head_elements) +
                 4.0 * static_cast<double>(final_norm.size());
  for (const LayerWeights& l : layers)
    bytes += LayerBytes(l, static_cast<double>(l.experts.size()));
  return bytes;
}

double ModelWeights::BytesPerToken() const {
  const ExecutorConfig& c = config;
  // One embedding row, the whole LM head (tied or not), the final norm, and top_k experts per MoE
  // layer.
  double bytes = 2.0 * static_cast<double>(c.hidden_size) +
                 2.0 * static_cast<double>(c.vocab_size * c.hidden_size) +
                 4.0 * static_cast<double>(final_norm.size());
  for (const LayerWeights& l : layers) bytes += LayerBytes(l, static_cast<double>(c.top_k));
  return bytes;
}

}  // namespace moelab::executor
