#include "sim/workload.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "model/moe_math.h"

namespace moelab::sim {
namespace {

TEST(Workload, DecodeIsAPrefillThenOneTokenPerStep) {
  Workload w;
  w.prompt_tokens = 10;
  w.output_tokens = 4;
  const std::vector<Iteration> passes = BuildIterations(w);
  ASSERT_EQ(passes.size(), 4u);
  EXPECT_EQ(passes[0].kind, "prefill");
  EXPECT_EQ(passes[0].tokens(), 10);
  EXPECT_FALSE(passes[0].logits_for_all_positions);
  for (size_t i = 1; i < passes.size(); ++i) {
    EXPECT_EQ(passes[i].tokens(), 1);
    EXPECT_EQ(passes[i].context_length, 10 + static_cast<int64_t>(i) - 1);
  }
}

TEST(Workload, BeamBatchAndPrefillShapes) {
  Workload beam;
  beam.kind = WorkloadKind::kBeam;
  beam.beam_width = 6;
  beam.output_tokens = 3;
  EXPECT_EQ(BuildIterations(beam)[1].tokens(), 6);
  EXPECT_EQ(beam.KvTokens(), 6 * (beam.prompt_tokens + 3));
  Workload batch;
  batch.kind = WorkloadKind::kBatch;
  batch.batch = 8;
  batch.prompt_tokens = 5;
  EXPECT_EQ(BuildIterations(batch)[0].tokens(), 40);
  EXPECT_EQ(BuildIterations(batch)[1].requests.size(), 8u);
  Workload prefill;
  prefill.kind = WorkloadKind::kPrefill;
  EXPECT_EQ(BuildIterations(prefill).size(), 1u);
}

TEST(Workload, VerifyPassesCoverTheTokensAtSigmaGammaPlusOnePerRound) {
  Workload w;
  w.kind = WorkloadKind::kVerify;
  w.gamma = 3;
  w.alpha = 0.6;
  w.output_tokens = 41;
  const std::vector<Iteration> passes = BuildIterations(w);
  const double per_round = model::AcceptedLengthFraction(0.6, 3) * 4;
  EXPECT_EQ(static_cast<int64_t>(passes.size()) - 1,
            static_cast<int64_t>(std::ceil(40 / per_round)));
  EXPECT_EQ(passes[1].tokens_per_sequence, 4);
  EXPECT_EQ(passes[1].kind, "verify");
}

TEST(Workload, ErrorsNameTheOption) {
  Workload w;
  w.batch = 2;
  EXPECT_THROW(w.Validate(), base::Error);
  try {
    w.Validate();
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--batch 2: --workload decode serves one request"),
              std::string::npos);
  }
  try {
    WorkloadKindFromString("stream");
  } catch (const base::Error& e) {
    EXPECT_NE(std::string(e.what()).find("valid: decode, prefill, beam, batch, verify"),
              std::string::npos);
  }
  w = {};
  w.prompt_tokens = 0;
  EXPECT_THROW(w.Validate(), base::Error);
}

}  // namespace
}  // namespace moelab::sim
