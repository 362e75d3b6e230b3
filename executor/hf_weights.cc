#include "executor/hf_weights.h"

#include <functional>
#include <type_traits>

#include "base/error.h"
#include "weights/safetensors.h"

namespace moelab::executor {
namespace {

enum class Layout { kMixtral, kQwenMoe, kDense };

Layout LayoutOf(const ExecutorConfig& c) {
  if (c.family == "mixtral") return Layout::kMixtral;
  if (c.family == "qwen2_moe" || c.family == "qwen3_moe") return Layout::kQwenMoe;
  if (c.family == "llama" || c.family == "qwen2") {
    if (c.is_moe())
      throw base::Error("family '" + c.family + "' is dense but the shape has experts");
    return Layout::kDense;
  }
  throw base::Error("no safetensors tensor names for family '" + c.family +
                    "' (supported: mixtral, qwen2_moe, qwen3_moe, llama, qwen2)");
}

// Visits every tensor: (name, shape, and where it lives: rows [row_begin, row_begin + shape[0]) of
// a packed matrix, row-major bf16 data, or fp32 data). One list for load and save, so the two can
// never disagree about names or shapes.
struct TensorRef {
  std::string name;
  std::vector<int64_t> shape;
  kernels::PackedBf16Matrix* packed = nullptr;  // router, shared gate, LM head (bf16)
  kernels::WeightMatrix* weight =
      nullptr;  // attention and FFNs, in the config's format (quantized at load)
  int64_t row_begin = 0;
  kernels::Bf16* bf16 = nullptr;
  float* f32 = nullptr;
};

std::vector<TensorRef> Tensors(ModelWeights& w) {
  const ExecutorConfig& c = w.config;
  const Layout layout = LayoutOf(c);
  const int64_t d = c.hidden_size;
  std::vector<TensorRef> refs;
  auto matrix = [&](std::string name, int64_t rows, auto& m, int64_t row_begin) {
    TensorRef ref{std::move(name), {rows, m.cols()}};
    if constexpr (std::is_same_v<std::decay_t<decltype(m)>, kernels::WeightMatrix>) {
      ref.weight = &m;
    } else {
      ref.packed = &m;
    }
    ref.row_begin = row_begin;
    refs.push_back(std::move(ref));
  };
  auto vector = [&](std::string name, std::vector<float>& data) {
    refs.push_back({std::move(name),
                    {static_cast<int64_t>(data.size())},
                    nullptr,
                    nullptr,
                    0,
                    nullptr,
                    data.data()});
  };
  // One FFN block: gate, up ([width][hidden] each, the fused gate_up block) and down
  // ([hidden][width]).
  auto ffn = [&](const std::string& prefix, FfnWeights& f, const char* gate, const char* up,
                 const char* down) {
    matrix(prefix + gate + ".weight", f.width, f.gate_up, 0);
    matrix(prefix + up + ".weight", f.width, f.gate_up, f.width);
    matrix(prefix + down + ".weight", d, f.down, 0);
  };
  refs.push_back({"model.embed_tokens.weight",
                  {c.vocab_size, d},
                  nullptr,
                  nullptr,
                  0,
                  w.embedding.data(),
                  nullptr});
  if (!c.tied_embeddings) matrix("lm_head.weight", c.vocab_size, w.lm_head, 0);
  vector("model.norm.weight", w.final_norm);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    LayerWeights& lw = w.layers[l];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    vector(p + "input_layernorm.weight", lw.attention_norm);
    vector(p + "post_attention_layernorm.weight", lw.ffn_norm);
    matrix(p + "self_attn.q_proj.weight", c.q_width(), lw.qkv, 0);
    matrix(p + "self_attn.k_proj.weight", c.kv_width(), lw.qkv, c.q_width());
    matrix(p + "self_attn.v_proj.weight", c.kv_width(), lw.qkv, c.q_width() + c.kv_width());
    if (!lw.qkv_bias.empty()) {
      float* bias = lw.qkv_bias.data();
      refs.push_back(
          {p + "self_attn.q_proj.bias", {c.q_width()}, nullptr, nullptr, 0, nullptr, bias});
      refs.push_back({p + "self_attn.k_proj.bias",
                      {c.kv_width()},
                      nullptr,
                      nullptr,
                      0,
                      nullptr,
                      bias + c.q_width()});
      refs.push_back({p + "self_attn.v_proj.bias",
                      {c.kv_width()},
                      nullptr,
                      nullptr,
                      0,
                      nullptr,
                      bias + c.q_width() + c.kv_width()});
    }
    if (!lw.q_norm.empty()) {
      vector(p + "self_attn.q_norm.weight", lw.q_norm);
      vector(p + "self_attn.k_norm.weight", lw.k_norm);
    }
    matrix(p + "self_attn.o_proj.weight", d, lw.output, 0);
    if (!c.IsMoeLayer(l)) {
      ffn(p + "mlp.", lw.dense, "gate_proj", "up_proj", "down_proj");
      continue;
    }
    const std::string moe = layout == Layout::kMixtral ? p + "block_sparse_moe." : p + "mlp.";
    matrix(moe + "gate.weight", c.num_experts, lw.router, 0);
    for (int64_t e = 0; e < c.num_experts; ++e) {
      const std::string ep = moe + "experts." + std::to_string(e) + ".";
      FfnWeights& f = lw.experts[e];
      if (layout == Layout::kMixtral) {
        ffn(ep, f, "w1", "w3", "w2");
      } else {
        ffn(ep, f, "gate_proj", "up_proj", "down_proj");
      }
    }
    if (lw.shared.width > 0) {
      if (layout != Layout::kQwenMoe || c.num_shared_experts != 1) {
        throw base::Error(
            "safetensors names for shared experts exist for Qwen-MoE's single shared expert only");
      }
      ffn(p + "mlp.shared_expert.", lw.shared, "gate_proj", "up_proj", "down_proj");
      if (!lw.shared_gate.empty())
        matrix(p + "mlp.shared_expert_gate.weight", 1, lw.shared_gate, 0);
    }
  }
  return refs;
}

}  // namespace

ModelWeights LoadHuggingFaceWeights(const ExecutorConfig& config,
                                    const std::filesystem::path& file_or_folder) {
  LayoutOf(config);  // refuses an unsupported family before any I/O
  const weights::SafetensorsModel model =
      weights::SafetensorsModel::Open(file_or_folder);  // checks every header
  ModelWeights w = AllocateWeights(config);
  w.source = file_or_folder.string();
  std::vector<TensorRef> tensors = Tensors(w);
  std::vector<kernels::Bf16> rows;  // one matrix, row-major as the file holds it, before packing
  for (TensorRef& ref : tensors) {
    if (ref.f32 != nullptr) {
      model.ReadF32(ref.name, ref.shape, ref.f32);
    } else if (ref.packed != nullptr || ref.weight != nullptr) {
      rows.resize(static_cast<size_t>(ref.shape[0] * ref.shape[1]));
      model.ReadBf16(ref.name, ref.shape, rows.data());
      if (ref.packed != nullptr) {
        ref.packed->PackRows(ref.row_begin, ref.shape[0], rows.data());
      } else {
        ref.weight->PackRows(ref.row_begin, ref.shape[0],
                             rows.data());  // q8_0 / q4_0: quantized here
      }
    } else {
      model.ReadBf16(ref.name, ref.shape, ref.bf16);
    }
  }
  TieLmHead(w);
  return w;
}

void SaveHuggingFaceWeights(const ModelWeights& weights, const std::filesystem::path& file) {
  // Tensors() serves loading too, so it hands out mutable pointers; saving only reads them.
  ModelWeights& w = const_cast<ModelWeights&>(weights);
  weights::SafetensorsWriter writer;
  std::vector<kernels::Bf16> rows;  // Add copies, so one buffer serves every packed matrix
  for (const TensorRef& ref : Tensors(w)) {
    if (ref.f32 != nullptr) {
      writer.Add(ref.name, weights::TensorDtype::kF32, ref.shape, ref.f32);
    } else if (ref.packed != nullptr || ref.weight != nullptr) {
      rows.resize(static_cast<size_t>(ref.shape[0] * ref.shape[1]));
      if (ref.packed != nullptr) {
        ref.packed->UnpackRows(ref.row_begin, ref.shape[0], rows.data());
      } else {
        ref.weight->UnpackRows(ref.row_begin, ref.shape[0], rows.data());
      }
      writer.Add(ref.name, weights::TensorDtype::kBf16, ref.shape, rows.data());
    } else {
      writer.Add(ref.name, weights::TensorDtype::kBf16, ref.shape, ref.bf16);
    }
  }
  writer.SetMetadata("format", "pt");
  writer.SetMetadata("producer", "moelab");
  writer.Write(file);
}

}  // namespace moelab::executor
