// ServedEngineView's engine iteration scales on a hand-made engine record: every expected value
// worked out by hand.
#include "validate/served_engine_view.h"

#include <gtest/gtest.h>

#include "validate/iteration_scales.h"

namespace moelab::validate {
namespace {

// Prices an iteration at 10 ms per batch entry.
class TenMsAnEntry : public sim::IterationPricer {
 public:
  double Seconds(const scheduler::IterationPlan& plan) override {
    return 0.010 * static_cast<double>(plan.batch.size());
  }
};

// kv_blocks_used: whether the plan still counted KV blocks (a finishing sequence's included).
executor::EngineRecording::Iteration Iteration(double start_s, double wall_s, int64_t decodes,
                                               bool prefill, bool kv_blocks_used) {
  executor::EngineRecording::Iteration iteration;
  iteration.start_s = start_s;
  iteration.end_s = start_s + wall_s;
  for (int64_t i = 0; i < decodes; ++i) iteration.plan.batch.push_back({i, false, 1, 10, true});
  if (prefill) iteration.plan.batch.push_back({decodes, true, 32, 0, true});
  iteration.plan.kv_blocks_used = kv_blocks_used ? 1 : 0;
  return iteration;
}

TEST(ServedEngineView, ScalesSumTheEngineTimeTheMedianLeavesOut) {
  // Four decode-only iterations of 2 sequences (priced 20 ms each) taking 20, 20, 20 and 60 ms,
  // each followed 1 ms later by the next iteration, which continues their sequences (4 hand-offs
  // of 1 ms), then one with a prefill chunk beside 1 decode (priced 20 ms) taking 30 ms, the last.
  executor::EngineRecording recording;
  double t = 0;
  for (double wall_s : {0.020, 0.020, 0.020, 0.060}) {
    recording.iterations.push_back(Iteration(t, wall_s, 2, false, true));
    t += wall_s + 0.001;
  }
  recording.iterations.push_back(Iteration(t, 0.030, 1, true, false));
  TenMsAnEntry pricer;
  const ServedEngineView view = ViewServedEngine(recording, pricer);
  ASSERT_EQ(view.iterations, 5);
  ASSERT_EQ(view.decode_only_iterations, 4);
  // Decode-only: (20 + 20 + 20 + 60 ms of wall + 4 hand-offs of 1 ms) / (4 x 20 ms) = 1.55; the
  // median of the ratios 1, 1, 1, 3 is 1 and leaves out the slow iteration's time.
  EXPECT_NEAR(view.decode_only_scale, 0.124 / 0.080, 1e-12);
  EXPECT_NEAR(view.decode_only_median_scale, 1.0, 1e-12);
  // Their bucket (up to 8 sequences) the same; the others have none.
  EXPECT_NEAR(view.decode_scale_by_batch[0], 0.124 / 0.080, 1e-12);
  EXPECT_EQ(view.decode_iterations_by_batch[0], 4);
  EXPECT_EQ(view.decode_scale_by_batch[1], 0);
  // With a prefill chunk: 30 ms over 20 ms, no hand-off (no work was left).
  EXPECT_NEAR(view.with_prefill_scale, 1.5, 1e-12);
  EXPECT_NEAR(view.with_prefill_median_scale, 1.5, 1e-12);
  EXPECT_NEAR(view.rows[3].handoff_s, 0.001, 1e-12);
  EXPECT_EQ(view.rows[4].handoff_s, 0);
  EXPECT_NEAR(view.between_iterations_s, 0.001, 1e-12);
  // That one carried a decode: a prefill beside decodes, none lone.
  EXPECT_NEAR(view.mixed_prefill_scale, 1.5, 1e-12);
  EXPECT_EQ(view.lone_prefill_iterations, 0);
  EXPECT_EQ(view.lone_prefill_scale, 0);
}

TEST(ServedEngineView, LonePrefillsAreScaledApartFromPrefillsBesideDecodes) {
  // A lone prefill (priced 10 ms) taking 15 ms, then 1 ms later a prefill beside 1 decode (priced
  // 20 ms) taking 22 ms, then 2 ms later (idle: the next is a new prompt) a lone prefill taking
  // 16 ms with nothing after it.
  executor::EngineRecording recording;
  recording.iterations.push_back(Iteration(0.000, 0.015, 0, true, true));
  recording.iterations.push_back(Iteration(0.016, 0.022, 1, true, true));
  recording.iterations.push_back(Iteration(0.040, 0.016, 0, true, false));
  TenMsAnEntry pricer;
  const ServedEngineView view = ViewServedEngine(recording, pricer);
  EXPECT_EQ(view.decode_only_iterations, 0);
  EXPECT_EQ(view.lone_prefill_iterations, 2);
  // Lone: (15 + 1 + 16 ms) / 20 ms; beside decodes: 22 ms / 20 ms (the 2 ms before a new prompt
  // are idle, not the engine's); all three: 54 / 40 ms.
  EXPECT_NEAR(view.lone_prefill_scale, 0.032 / 0.020, 1e-12);
  EXPECT_NEAR(view.mixed_prefill_scale, 0.022 / 0.020, 1e-12);
  EXPECT_NEAR(view.with_prefill_scale, 0.054 / 0.040, 1e-12);
}

TEST(ServedEngineView, IdleTimeBeforeANewPromptIsNotEngineTime) {
  // A decode of 1 sequence (priced 10 ms) taking 10 ms, its last token: the engine idles 500 ms
  // until the next prompt arrives, though the plan still counted the sequence's KV blocks; then
  // that lone prefill (priced 10 ms) taking 10 ms, then 1 ms later its first decode (10 ms).
  executor::EngineRecording recording;
  recording.iterations.push_back(Iteration(0.000, 0.010, 1, false, true));
  recording.iterations.push_back(Iteration(0.510, 0.010, 0, true, true));
  recording.iterations.push_back(Iteration(0.521, 0.010, 1, false, false));
  TenMsAnEntry pricer;
  const ServedEngineView view = ViewServedEngine(recording, pricer);
  EXPECT_EQ(view.rows[0].handoff_s, 0);
  EXPECT_NEAR(view.rows[1].handoff_s, 0.001, 1e-12);
  EXPECT_NEAR(view.decode_only_scale, 1.0, 1e-12);
  EXPECT_NEAR(view.lone_prefill_scale, 1.1, 1e-12);
  // The prefill woke an engine idle for 500 ms; the record's first iteration's idle time is not
  // known; its decode followed work.
  EXPECT_EQ(view.rows[0].idle_before_s, -1);
  EXPECT_NEAR(view.rows[1].idle_before_s, 0.5, 1e-12);
  EXPECT_EQ(view.rows[2].idle_before_s, 0);
  // Requests left waiting: the gap is the engine's, whatever runs next.
  recording.iterations[0].plan.waiting = 1;
  const ServedEngineView waiting = ViewServedEngine(recording, pricer);
  EXPECT_NEAR(waiting.rows[0].handoff_s, 0.5, 1e-12);
  EXPECT_EQ(waiting.rows[1].idle_before_s, 0);
}

TEST(ServedEngineView, AHandOffReachesPastEmptyStepsToAPromptsLaterChunk) {
  // A lone prefill chunk of a prompt (priced 10 ms) taking 10 ms; a step with nothing to run;
  // then 3 ms after the first one's end, the prompt's next chunk (context 32: a sequence running
  // across the gap) taking 10 ms.
  executor::EngineRecording recording;
  recording.iterations.push_back(Iteration(0.000, 0.010, 0, true, true));
  recording.iterations.push_back(Iteration(0.011, 0.001, 0, false, true));  // empty batch
  executor::EngineRecording::Iteration later = Iteration(0.013, 0.010, 0, true, false);
  later.plan.batch[0].context_tokens = 32;
  recording.iterations.push_back(later);
  TenMsAnEntry pricer;
  const ServedEngineView view = ViewServedEngine(recording, pricer);
  ASSERT_EQ(view.iterations, 2);
  EXPECT_NEAR(view.rows[0].handoff_s, 0.003, 1e-12);
  EXPECT_EQ(view.rows[1].idle_before_s, 0);
  EXPECT_NEAR(view.lone_prefill_scale, 0.023 / 0.020, 1e-12);
}

TEST(ServedEngineView, PrefillIterationsAreScaledByTheirPrefillTokens) {
  // A lone prefill of 32 tokens (priced 10 ms) taking 15 ms; 10 ms later a lone prefill of 1,000
  // tokens (priced 10 ms) taking 9 ms; 1 ms later a prefill of 32 tokens beside 1 decode (priced
  // 20 ms) taking 25 ms, the last.
  executor::EngineRecording recording;
  recording.iterations.push_back(Iteration(0.000, 0.015, 0, true, false));
  executor::EngineRecording::Iteration large = Iteration(0.025, 0.009, 0, true, true);
  large.plan.batch[0].tokens = 1000;
  recording.iterations.push_back(large);
  executor::EngineRecording::Iteration mixed = Iteration(0.035, 0.025, 1, true, false);
  mixed.plan.batch[0].context_tokens = 1000;  // the decode continues the large prompt
  recording.iterations.push_back(mixed);
  TenMsAnEntry pricer;
  const ServedEngineView view = ViewServedEngine(recording, pricer);
  // Up to 256 tokens: (15 + 25 ms) / (10 + 20 ms); more: (9 + 1 ms hand-off) / 10 ms.
  EXPECT_EQ(view.prefill_iterations_by_tokens[0], 2);
  EXPECT_EQ(view.prefill_iterations_by_tokens[1], 1);
  EXPECT_NEAR(view.prefill_scale_by_tokens[0], 0.040 / 0.030, 1e-12);
  EXPECT_NEAR(view.prefill_scale_by_tokens[1], 0.010 / 0.010, 1e-12);
  EXPECT_EQ(ServedEngineView::PrefillTokensBucket(256), 0u);
  EXPECT_EQ(ServedEngineView::PrefillTokensBucket(257), 1u);
}

// Prices a decode at 10 ms and a prefill chunk at 0.5 ms a token.
class HalfMsAPrefillToken : public sim::IterationPricer {
 public:
  double Seconds(const scheduler::IterationPlan& plan) override {
    double seconds = 0;
    for (const scheduler::BatchEntry& entry : plan.batch)
      seconds += entry.prefill ? 0.0005 * static_cast<double>(entry.tokens) : 0.010;
    return seconds;
  }
};

TEST(IterationScales, ABucketWithEnoughEngineTimeKeepsItsOwnRatioWhateverItsCount) {
  // Five 32-token chunks beside a decode (priced 10 + 16 = 26 ms) taking 39 ms each, 1 ms apart,
  // then `large` lone chunks of 1,000 tokens (priced 500 ms) taking 550 ms each, 1 ms apart, one
  // prompt's (each after the first continues it, so the gaps between them are hand-offs).
  const auto record = [](int large) {
    executor::EngineRecording recording;
    double t = 0;
    for (int i = 0; i < 5; ++i) {
      recording.iterations.push_back(Iteration(t, 0.039, 1, true, true));
      t += 0.040;
    }
    for (int i = 0; i < large; ++i) {
      executor::EngineRecording::Iteration chunk = Iteration(t, 0.550, 0, true, i + 1 < large);
      chunk.plan.batch[0].tokens = 1000;
      chunk.plan.batch[0].context_tokens = 1000 * i;  // one prompt's chunks
      recording.iterations.push_back(chunk);
      t += 0.551;
    }
    return recording;
  };
  HalfMsAPrefillToken pricer;
  // Two large chunks: 2 iterations, 1.101 s of engine time (two walls and the hand-off between
  // them) over 1 s of price; enough time for their own ratio, 1.101.
  const ServedEngineView two = ViewServedEngine(record(2), pricer);
  ASSERT_EQ(two.prefill_iterations_by_tokens[1], 2);
  EXPECT_NEAR(two.prefill_engine_s_by_tokens[1], 1.101, 1e-12);
  // The small chunks: 5 x 39 ms and 4 hand-offs of 1 ms (the gap after the fifth is idle: nothing
  // waited and the first large chunk continues no sequence) over 5 x 26 ms.
  EXPECT_NEAR(two.prefill_scale_by_tokens[0], (5 * 0.039 + 4 * 0.001) / (5 * 0.026), 1e-12);
  const IterationScales from_two = ScalesOf(two);
  EXPECT_NEAR(from_two.prefill_by_tokens[1], 1.101, 1e-12);
  EXPECT_NEAR(from_two.prefill_by_tokens[0], two.prefill_scale_by_tokens[0], 1e-12);
  // One large chunk: 0.55 s, under kMinBucketEngineS and kMinBucketIterations: it takes the
  // small chunks' ratio, as before.
  const ServedEngineView one = ViewServedEngine(record(1), pricer);
  ASSERT_EQ(one.prefill_iterations_by_tokens[1], 1);
  EXPECT_LT(one.prefill_engine_s_by_tokens[1], kMinBucketEngineS);
  EXPECT_NEAR(ScalesOf(one).prefill_by_tokens[1], one.prefill_scale_by_tokens[0], 1e-12);
}

TEST(IterationScales, ADecodeBucketTakesItsNearestByCountAlone) {
  // Four decodes of 2 sequences (bucket 0) at their price, then one decode of 20 sequences
  // (bucket 2) taking 1.5 s on a 200 ms price: a stall, however long, is one iteration.
  executor::EngineRecording recording;
  double t = 0;
  for (int i = 0; i < 4; ++i) {
    recording.iterations.push_back(Iteration(t, 0.020, 2, false, true));
    t += 0.020;
  }
  recording.iterations.push_back(Iteration(t, 1.5, 20, false, false));
  TenMsAnEntry pricer;
  const ServedEngineView view = ViewServedEngine(recording, pricer);
  ASSERT_EQ(view.decode_iterations_by_batch[2], 1);
  EXPECT_GE(view.decode_engine_s_by_batch[2], 1.0);
  const IterationScales scales = ScalesOf(view);
  for (size_t b = 0; b < scales.decode_by_batch.size(); ++b)
    EXPECT_NEAR(scales.decode_by_batch[b], view.decode_scale_by_batch[0], 1e-12) << b;
}

TEST(ServedEngineView, NoIterationOfAKindGivesZero) {
  executor::EngineRecording recording;
  recording.iterations.push_back(Iteration(0, 0.015, 1, false, false));
  TenMsAnEntry pricer;
  const ServedEngineView view = ViewServedEngine(recording, pricer);
  EXPECT_NEAR(view.decode_only_scale, 1.5, 1e-12);
  EXPECT_EQ(view.with_prefill_scale, 0);
  EXPECT_EQ(view.with_prefill_median_scale, 0);
}

}  // namespace
}  // namespace moelab::validate
