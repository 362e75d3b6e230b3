#include "tests/executor/reference_model.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/quantized_activations.h"

namespace moelab::testing {
namespace {

using Vector = std::vector<double>;

double RoundBf16(double v) {
  return kernels::Bf16ToFloat(kernels::FloatToBf16(static_cast<float>(v)));
}

// y = W x for W [rows][cols] bf16, x rounded to bf16 like the kernels.
// W x with W's stored values (bf16, or the exact dequantized values of a quantized format).
template <typename Matrix, typename Element>
Vector MatVecOf(const Matrix& w, const Vector& x, Element element) {
  const int64_t rows = w.rows(), cols = w.cols();
  Vector y(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += static_cast<double>(element(r, c)) * RoundBf16(x[c]);
    y[r] = sum;
  }
  return y;
}
Vector MatVec(const kernels::PackedBf16Matrix& w, const Vector& x) {
  return MatVecOf(w, x, [&](int64_t r, int64_t c) { return kernels::Bf16ToFloat(w.At(r, c)); });
}
Vector MatVec(const kernels::WeightMatrix& w, const Vector& x) {
  if (w.format() == kernels::WeightFormat::kBf16)
    return MatVecOf(w, x, [&](int64_t r, int64_t c) { return w.At(r, c); });
  // Quantized weights multiply activations quantized per block of 32
  // (kernels/quantized_activations.h).
  const std::vector<float> x_float(x.begin(), x.end());
  kernels::QuantizedActivations xq;
  kernels::ResizeQuantizedActivations(1, w.cols(), xq);
  kernels::QuantizeActivationTokensScalar(x_float.data(), w.cols(), 0, 1, xq);
  Vector y(w.rows(), 0.0);
  for (int64_t r = 0; r < w.rows(); ++r) {
    for (int64_t c = 0; c < w.cols(); ++c) y[r] += double{w.At(r, c)} * double{xq.Value(0, c)};
  }
  return y;
}

Vector RmsNorm(const Vector& x, const std::vector<float>& weight, double eps) {
  double ms = 0;
  for (double v : x) ms += v * v;
  ms /= static_cast<double>(x.size());
  Vector y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] / std::sqrt(ms + eps) * weight[i];
  return y;
}

void Rope(double* v, int64_t head_dim, int64_t position, double theta) {
  const int64_t half = head_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    // Same float angle table as the kernels (cos/sin of a double angle, stored as float).
    const double angle =
        static_cast<double>(position) *
        std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    const double c = static_cast<float>(std::cos(angle));
    const double s = static_cast<float>(std::sin(angle));
    const double a = v[i], b = v[i + half];
    v[i] = a * c - b * s;
    v[i + half] = b * c + a * s;
  }
}

Vector Ffn(const executor::FfnWeights& f, const Vector& x) {
  const Vector gate_up = MatVec(f.gate_up, x);
  Vector hidden(f.width);
  for (int64_t i = 0; i < f.width; ++i) {
    const double g = gate_up[i];
    hidden[i] = g / (1.0 + std::exp(-g)) * gate_up[f.width + i];
  }
  return MatVec(f.down, hidden);
}

}  // namespace

std::vector<std::vector<double>> ReferenceLogits(const executor::ModelWeights& w,
                                                 const std::vector<int32_t>& tokens) {
  const executor::ExecutorConfig& c = w.config;
  const int64_t d = c.hidden_size, hd = c.head_dim, n = static_cast<int64_t>(tokens.size());
  std::vector<Vector> h(n, Vector(d));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < d; ++i) h[t][i] = kernels::Bf16ToFloat(w.embedding[tokens[t] * d + i]);
  }
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const executor::LayerWeights& lw = w.layers[l];
    std::vector<Vector> q(n), k(n), v(n);
    for (int64_t t = 0; t < n; ++t) {
      const Vector x = RmsNorm(h[t], lw.attention_norm, c.rms_norm_eps);
      Vector qkv = MatVec(lw.qkv, x);
      if (!lw.qkv_bias.empty()) {
        for (size_t i = 0; i < qkv.size(); ++i) qkv[i] += lw.qkv_bias[i];
      }
      q[t].assign(qkv.begin(), qkv.begin() + c.q_width());
      k[t].assign(qkv.begin() + c.q_width(), qkv.begin() + c.q_width() + c.kv_width());
      v[t].assign(qkv.begin() + c.q_width() + c.kv_width(), qkv.end());
      if (!lw.q_norm.empty()) {
        for (int64_t head = 0; head < c.num_heads; ++head) {
          Vector part(q[t].begin() + head * hd, q[t].begin() + (head + 1) * hd);
          part = RmsNorm(part, lw.q_norm, c.rms_norm_eps);
          std::copy(part.begin(), part.end(), q[t].begin() + head * hd);
        }
        for (int64_t head = 0; head < c.num_kv_heads; ++head) {
          Vector part(k[t].begin() + head * hd, k[t].begin() + (head + 1) * hd);
          part = RmsNorm(part, lw.k_norm, c.rms_norm_eps);
          std::copy(part.begin(), part.end(), k[t].begin() + head * hd);
        }
      }
      for (int64_t head = 0; head < c.num_heads; ++head)
        Rope(q[t].data() + head * hd, hd, t, c.rope_theta);
      for (int64_t head = 0; head < c.num_kv_heads; ++head)
        Rope(k[t].data() + head * hd, hd, t, c.rope_theta);
    }
    for (int64_t t = 0; t < n; ++t) {
      Vector attended(c.q_width(), 0.0);
      for (int64_t head = 0; head < c.num_heads; ++head) {
        const int64_t kv = head / (c.num_heads / c.num_kv_heads);
        const int64_t first =
            c.sliding_window > 0 ? std::max<int64_t>(0, t - c.sliding_window + 1) : 0;
        Vector scores;
        for (int64_t p = first; p <= t; ++p) {
          double dot = 0;
          for (int64_t i = 0; i < hd; ++i) dot += q[t][head * hd + i] * k[p][kv * hd + i];
          scores.push_back(dot / std::sqrt(static_cast<double>(hd)));
        }
        const double max_score = *std::max_element(scores.begin(), scores.end());
        double sum = 0;
        for (double& s : scores) sum += s = std::exp(s - max_score);
        for (int64_t p = first; p <= t; ++p) {
          for (int64_t i = 0; i < hd; ++i)
            attended[head * hd + i] += scores[p - first] / sum * v[p][kv * hd + i];
        }
      }
      const Vector out = MatVec(lw.output, attended);
      for (int64_t i = 0; i < d; ++i) h[t][i] += out[i];
    }
    for (int64_t t = 0; t < n; ++t) {
      const Vector x = RmsNorm(h[t], lw.ffn_norm, c.rms_norm_eps);
      Vector out(d, 0.0);
      if (c.IsMoeLayer(l)) {
        Vector p = MatVec(lw.router, x);
        const double max_logit = *std::max_element(p.begin(), p.end());
        double sum = 0;
        for (double& value : p) sum += value = std::exp(value - max_logit);
        for (double& value : p) value /= sum;
        std::vector<int64_t> order(c.num_experts);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int64_t a, int64_t b) { return p[a] > p[b]; });
        double chosen_sum = 0;
        for (int64_t j = 0; j < c.top_k; ++j) chosen_sum += p[order[j]];
        for (int64_t j = 0; j < c.top_k; ++j) {
          const double weight = c.norm_topk_prob ? p[order[j]] / chosen_sum : p[order[j]];
          const Vector y = Ffn(lw.experts[order[j]], x);
          for (int64_t i = 0; i < d; ++i) out[i] += weight * y[i];
        }
        if (lw.shared.width > 0) {
          double gate = 1.0;
          if (!lw.shared_gate.empty()) gate = 1.0 / (1.0 + std::exp(-MatVec(lw.shared_gate, x)[0]));
          const Vector y = Ffn(lw.shared, x);
          for (int64_t i = 0; i < d; ++i) out[i] += gate * y[i];
        }
      } else {
        out = Ffn(lw.dense, x);
      }
      for (int64_t i = 0; i < d; ++i) h[t][i] += out[i];
    }
  }
  std::vector<Vector> logits(n);
  for (int64_t t = 0; t < n; ++t) {
    logits[t] = MatVec(w.lm_head, RmsNorm(h[t], w.final_norm, c.rms_norm_eps));
  }
  return logits;
}

}  // namespace moelab::testing
