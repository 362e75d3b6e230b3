#include "kernels/elementwise.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/attention.h"
#include "kernels/cpu_features.h"
#include "base/error.h"

namespace moelab::kernels {
namespace {

TEST(RmsNorm, MatchesDefinition) {
  const std::vector<float> x = {1, -2, 3, 0.5f, 4, -1};
  const std::vector<float> weight = {1, 2, 0.5f};
  std::vector<float> out(6);
  RmsNorm(x.data(), 2, 3, weight.data(), 1e-6f, out.data());
  for (int r = 0; r < 2; ++r) {
    double ms = 0;
    for (int i = 0; i < 3; ++i) ms += x[r * 3 + i] * x[r * 3 + i] / 3.0;
    for (int i = 0; i < 3; ++i)
      EXPECT_NEAR(out[r * 3 + i], x[r * 3 + i] / std::sqrt(ms + 1e-6) * weight[i], 1e-6);
  }
}

TEST(Softmax, NormalizesAndIsShiftInvariant) {
  std::vector<float> a = {1, 2, 3, 1000};
  Softmax(a.data(), 4);
  EXPECT_NEAR(a[3], 1.0, 1e-6);
  std::vector<float> b = {0.125f, 0.25f, 0.375f};
  std::vector<float> c = {96.125f, 96.25f, 96.375f};  // exactly shifted
  Softmax(b.data(), 3);
  Softmax(c.data(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(b[i], c[i], 1e-6);
  std::vector<float> logp(3);
  const std::vector<float> logits = {0.125f, 0.25f, 0.375f};
  LogSoftmax(logits.data(), 3, logp.data());
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(std::exp(logp[i]), b[i], 1e-6);
}

// Over a vocabulary-sized row (not a multiple of the chunk or of four lanes) with logits far below
// the maximum, against log-softmax in double; in place gives the same bits.
TEST(LogSoftmax, MatchesDoublePrecisionOverAVocabularyAndWorksInPlace) {
  const int64_t n = 32003;
  std::vector<float> logits(n);
  for (int64_t i = 0; i < n; ++i)
    logits[i] = static_cast<float>((i * 7919 % 2003) - 1001) * 0.02f - (i % 97 == 0 ? 120.0f : 0);
  double max_value = logits[0], sum = 0;
  for (float v : logits) max_value = std::max(max_value, static_cast<double>(v));
  for (float v : logits) sum += std::exp(static_cast<double>(v) - max_value);
  std::vector<float> out(n);
  LogSoftmax(logits.data(), n, out.data());
  for (int64_t i = 0; i < n; ++i) {
    const double exact = static_cast<double>(logits[i]) - max_value - std::log(sum);
    ASSERT_NEAR(out[i], exact, 1e-5 * std::max(1.0, std::abs(exact))) << i;
  }
  std::vector<float> in_place = logits;
  LogSoftmax(in_place.data(), n, in_place.data());
  EXPECT_EQ(in_place, out);
}

// LogSoftmax's out[i] is logits[i] - LogSumExp to the bit (beam search reads a few that way), and
// the maximum is found wherever it sits among the running lanes and the tail.
TEST(LogSumExp, IsWhatLogSoftmaxSubtracts) {
  for (const int64_t n : {1, 7, 9, 32003}) {
    for (const int64_t peak : {int64_t{0}, n / 2, n - 1}) {
      std::vector<float> logits(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) logits[i] = static_cast<float>((i * 37) % 101) * 0.01f;
      logits[peak] = 50.0f;
      std::vector<float> out(logits.size());
      LogSoftmax(logits.data(), n, out.data());
      const float log_sum = LogSumExp(logits.data(), n);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[i], logits[i] - log_sum) << n << " " << i;
      EXPECT_NEAR(out[peak], 0.0f, 1e-6) << n << " " << peak;  // the peak holds nearly all mass
    }
  }
}

TEST(ArgMax, FirstOnTies) {
  const std::vector<float> v = {1, 5, 5, 2};
  EXPECT_EQ(ArgMax(v.data(), 4), 1);
}

// The vectorized passes give what the plain loop gives, NaNs, signed zeros, ties across vector
// lanes and tails of every length included.
TEST(ArgMax, MatchesThePlainLoopOnEveryLengthAndSpecialValue) {
  const auto reference = [](const float* v, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i) {
      if (v[i] > v[best]) best = i;
    }
    return best;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(7);
  for (int64_t n = 1; n <= 70; ++n) {
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> v(static_cast<size_t>(n));
      for (float& x : v) {
        const int pick = static_cast<int>(rng() % 13);
        x = pick == 0   ? nan
            : pick == 1 ? -0.0f
            : pick == 2 ? 0.0f
            : pick == 3 ? -inf
            : pick == 4 ? inf
                        : static_cast<float>(rng() % 5);
      }
      EXPECT_EQ(ArgMax(v.data(), n), reference(v.data(), n)) << "n " << n << " trial " << trial;
    }
  }
  std::vector<float> v(32000, -1.0f);
  v[31999] = 3.0f;
  v[17] = 3.0f;
  EXPECT_EQ(ArgMax(v.data(), 32000), 17);
  v[0] = nan;  // the loop never moves off a NaN in front
  EXPECT_EQ(ArgMax(v.data(), 32000), 0);
}

TEST(Rope, RotatesPairsAndPreservesNorm) {
  const RopeTable table(8, 64, 10000.0);
  std::vector<float> v = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> original = v;
  table.Apply(v.data(), 1, 0);
  EXPECT_EQ(v, original);  // position 0: identity
  table.Apply(v.data(), 1, 17);
  double before = 0, after = 0;
  for (int i = 0; i < 8; ++i) {
    before += original[i] * original[i];
    after += v[i] * v[i];
  }
  EXPECT_NEAR(before, after, 1e-4);
  // Pair (0, 4) rotates by angle 17 * theta^0 = 17 rad.
  EXPECT_NEAR(v[0], original[0] * std::cos(17.0) - original[4] * std::sin(17.0), 1e-5);
  EXPECT_NEAR(v[4], original[4] * std::cos(17.0) + original[0] * std::sin(17.0), 1e-5);
  EXPECT_THROW(table.Apply(v.data(), 1, 64), base::Error);
  EXPECT_THROW(RopeTable(7, 4, 10000.0), base::Error);
}

TEST(Attention, MatchesReferenceWithWindow) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  const int64_t head_dim = 16, kv_heads = 2, positions = 23;
  std::vector<float> q(head_dim), keys(positions * kv_heads * head_dim), values(keys.size());
  for (float& v : q) v = normal(rng);
  for (float& v : keys) v = normal(rng);
  for (float& v : values) v = normal(rng);
  const float scale = 0.25f;
  for (int64_t first : {0, 5}) {
    std::vector<float> scores(positions), out(head_dim);
    // Head group 1: offset head_dim into each position.
    AttendOneHead(q.data(), keys.data() + head_dim, values.data() + head_dim, kv_heads * head_dim,
                  head_dim, first, positions - 1, scale, scores.data(), out.data());
    std::vector<double> weights;
    double max_logit = -1e300;
    for (int64_t p = first; p < positions; ++p) {
      double dot = 0;
      for (int64_t i = 0; i < head_dim; ++i) dot += q[i] * keys[(p * kv_heads + 1) * head_dim + i];
      weights.push_back(dot * scale);
      max_logit = std::max(max_logit, dot * scale);
    }
    double sum = 0;
    for (double& w : weights) sum += (w = std::exp(w - max_logit));
    for (int64_t i = 0; i < head_dim; ++i) {
      double expected = 0;
      for (int64_t p = first; p < positions; ++p) {
        expected += weights[p - first] / sum * values[(p * kv_heads + 1) * head_dim + i];
      }
      EXPECT_NEAR(out[i], expected, 1e-5);
    }
  }
}

// The query heads of one KV head attended together read each cached row once; every head's
// output has AttendOneHead's bits (head_dim 64 and 72 and 7: whole lane blocks, a remainder, a
// remainder only), within and beyond a 16-head pass, with a sliding window.
TEST(Attention, HeadGroupHasEachHeadsBits) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (int64_t head_dim : {64, 72, 7}) {
    for (int64_t heads : {1, 4, 18}) {
      const int64_t kv_heads = 3, positions = 41, kv_head = 2;
      std::vector<float> q(heads * head_dim), keys(positions * kv_heads * head_dim),
          values(keys.size());
      for (float& v : q) v = normal(rng);
      for (float& v : keys) v = normal(rng);
      for (float& v : values) v = normal(rng);
      const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
      for (int64_t first : {0, 9}) {
        std::vector<float> scores(heads * positions), group_out(heads * head_dim);
        AttendHeadGroup(q.data(), heads, keys.data() + kv_head * head_dim,
                        values.data() + kv_head * head_dim, kv_heads * head_dim, head_dim, first,
                        positions - 1, scale, scores.data(), group_out.data());
        for (int64_t h = 0; h < heads; ++h) {
          std::vector<float> one_scores(positions), one_out(head_dim);
          AttendOneHead(q.data() + h * head_dim, keys.data() + kv_head * head_dim,
                        values.data() + kv_head * head_dim, kv_heads * head_dim, head_dim, first,
                        positions - 1, scale, one_scores.data(), one_out.data());
          EXPECT_EQ(0, std::memcmp(one_out.data(), group_out.data() + h * head_dim,
                                   head_dim * sizeof(float)))
              << "head_dim " << head_dim << ", head " << h << " of " << heads;
        }
      }
    }
  }
}

// Attention computes the same float operations in the same order on every instruction set (no FMA
// contraction; kernels/attention_impl.h), so its output bits do not depend on the set: a profile
// taken on one path prices the arithmetic another path runs, and tests of token streams hold on
// every machine.
TEST(Attention, EveryInstructionSetGivesTheSameBits) {
  std::mt19937 rng(8);
  std::normal_distribution<float> normal;
  const Isa active = ActiveIsa();
  for (int64_t head_dim : {64, 72, 7}) {
    for (int64_t heads : {1, 4, 18}) {
      for (int64_t positions : {3, 41, 300}) {
        const int64_t kv_heads = 2;
        std::vector<float> q(heads * head_dim), keys(positions * kv_heads * head_dim),
            values(keys.size());
        for (float& v : q) v = normal(rng);
        for (float& v : keys) v = 3.0f * normal(rng);  // scores spread over many e-folds
        for (float& v : values) v = normal(rng);
        const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        for (int64_t first : {int64_t{0}, positions / 3}) {
          std::vector<float> scalar_out;
          for (const Isa isa : SupportedIsas()) {
            SetActiveIsa(isa);
            std::vector<float> scores(heads * positions), out(heads * head_dim);
            AttendHeadGroup(q.data(), heads, keys.data() + head_dim, values.data() + head_dim,
                            kv_heads * head_dim, head_dim, first, positions - 1, scale,
                            scores.data(), out.data());
            if (isa == Isa::kScalar) {
              scalar_out = out;
              continue;
            }
            ASSERT_EQ(out.size(), scalar_out.size());
            EXPECT_EQ(0, std::memcmp(out.data(), scalar_out.data(), out.size() * sizeof(float)))
                << ToString(isa) << " against scalar: head_dim " << head_dim << ", " << heads
                << " heads, positions " << first << ".." << positions - 1;
          }
        }
      }
    }
  }
  SetActiveIsa(active);
}

}  // namespace
}  // namespace moelab::kernels

namespace moelab::kernels {
namespace {

TEST(SiluMul, MatchesDefinitionAcrossTheRange) {
  std::vector<float> gate, up, out;
  // Beyond -87 the true exp(-g) overflows float; the kernel clamps, the result is ~0 either way.
  for (float g = -87.0f; g <= 100.0f; g += 0.0371f) {
    gate.push_back(g);
    up.push_back(0.5f + g * 0.01f);
  }
  out.resize(gate.size());
  SiluMul(gate.data(), up.data(), static_cast<int64_t>(gate.size()), out.data());
  for (size_t i = 0; i < gate.size(); ++i) {
    const double g = gate[i];
    const double expected = g / (1.0 + std::exp(-g)) * up[i];
    EXPECT_NEAR(out[i], expected, 1e-6 * std::fabs(expected) + 1e-37) << "gate " << g;
  }
}

}  // namespace
}  // namespace moelab::kernels
