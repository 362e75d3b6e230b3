#include "validate/served_engine_view.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "base/stats.h"

namespace moelab::validate {
namespace {

bool DecodeOnly(const scheduler::IterationPlan& plan) {
  return std::none_of(plan.batch.begin(), plan.batch.end(),
                      [](const scheduler::BatchEntry& entry) { return entry.prefill; });
}

// The plan runs a sequence that was already running before it: a decode, or a prefill chunk
// after the prompt's first.
bool ContinuesASequence(const scheduler::IterationPlan& plan) {
  return std::any_of(plan.batch.begin(), plan.batch.end(), [](const scheduler::BatchEntry& entry) {
    return !entry.prefill || entry.context_tokens > 0;
  });
}

double MedianOrZero(const std::vector<double>& values) {
  return values.empty() ? 0 : base::Median(values);
}

// Summed engine time (wall and hand-off) and composed price of a set of iterations.
struct EngineTime {
  double engine_s = 0, composed_s = 0;
  void Add(const ServedEngineView::Iteration& row) {
    engine_s += row.wall_s + row.handoff_s;
    composed_s += row.composed_s;
  }
  double RatioOrZero() const { return composed_s > 0 ? engine_s / composed_s : 0; }
};

}  // namespace

size_t ServedEngineView::DecodeBatchBucket(int64_t decodes) {
  size_t bucket = 0;
  while (decodes > kDecodeBatchUpTo[bucket]) ++bucket;
  return bucket;
}

size_t ServedEngineView::PrefillTokensBucket(int64_t prefill_tokens) {
  size_t bucket = 0;
  while (prefill_tokens > kPrefillTokensUpTo[bucket]) ++bucket;
  return bucket;
}

ServedEngineView ViewServedEngine(const executor::EngineRecording& recording,
                                  sim::IterationPricer& composed) {
  ServedEngineView view;
  std::vector<serving::RequestOutcome> outcomes;
  for (const executor::EngineRecording::Request& request : recording.requests) {
    if (!request.finished || request.token_times_s.empty()) continue;
    serving::RequestOutcome outcome;
    outcome.id = request.id;
    outcome.arrival_s = request.arrival_s;
    outcome.first_token_s = request.token_times_s.front();
    outcome.finish_s = request.token_times_s.back();
    outcome.prompt_tokens = request.prompt_tokens;
    outcome.output_tokens = static_cast<int64_t>(request.token_times_s.size());
    outcome.token_times_s = request.token_times_s;
    outcomes.push_back(std::move(outcome));
  }
  view.engine_side = serving::Summarize(outcomes, {});
  std::vector<double> decode_only, with_prefill, between;
  std::array<std::vector<double>, 5> by_batch;
  EngineTime decode_only_time, with_prefill_time, lone_prefill_time, mixed_prefill_time;
  std::array<EngineTime, 5> by_batch_time;
  std::array<EngineTime, 2> by_prefill_tokens_time;
  // The end of the last iteration that ran a batch when it left no work, while unknown: -1.
  double idle_since_s = -1;
  bool first = true;
  for (size_t i = 0; i < recording.iterations.size(); ++i) {
    const executor::EngineRecording::Iteration& iteration = recording.iterations[i];
    if (iteration.plan.batch.empty()) continue;
    const double wall_s = iteration.end_s - iteration.start_s;
    view.busy_s += wall_s;
    ++view.iterations;
    ServedEngineView::Iteration row{iteration.start_s, wall_s, composed.Seconds(iteration.plan)};
    if (first) {
      row.idle_before_s = -1;
      first = false;
    } else if (idle_since_s >= 0) {
      row.idle_before_s = std::max(0.0, iteration.start_s - idle_since_s);
    }
    idle_since_s = -1;
    double context_sum = 0;
    for (const scheduler::BatchEntry& entry : iteration.plan.batch) {
      if (entry.prefill) {
        ++row.prefill_chunks;
        row.prefill_tokens += entry.tokens;
        if (entry.context_tokens > 0) {
          ++row.prefill_continuing_chunks;
          row.prefill_continuing_tokens += entry.tokens;
        }
      } else {
        ++row.decodes;
        context_sum += static_cast<double>(entry.context_tokens);
      }
    }
    if (row.decodes > 0) row.decode_context_mean = context_sum / static_cast<double>(row.decodes);
    // Work remained when requests were left waiting, or when the next iteration continues a
    // sequence (a decode, or a prompt's later chunk) that was running across the gap. Not the
    // plan's KV blocks: they are counted before the iteration frees a finished sequence's, so
    // the idle time to the next arrival after the last token counted as engine time (11-13 s of
    // a 30 %-load run's 38 s of decode iterations).
    // The next iteration that ran a batch (a step with nothing to run is part of the gap).
    size_t next = i + 1;
    while (next < recording.iterations.size() && recording.iterations[next].plan.batch.empty())
      ++next;
    const bool more_work =
        next < recording.iterations.size() &&
        (iteration.plan.waiting > 0 || ContinuesASequence(recording.iterations[next].plan));
    if (more_work) {
      row.handoff_s = recording.iterations[next].start_s - iteration.end_s;
      between.push_back(row.handoff_s);
    } else {
      idle_since_s = iteration.end_s;
    }
    view.rows.push_back(row);
    const double ratio = wall_s / row.composed_s;
    if (DecodeOnly(iteration.plan)) {
      ++view.decode_only_iterations;
      decode_only.push_back(ratio);
      decode_only_time.Add(row);
      const size_t bucket = ServedEngineView::DecodeBatchBucket(row.decodes);
      by_batch[bucket].push_back(ratio);
      by_batch_time[bucket].Add(row);
    } else {
      with_prefill.push_back(ratio);
      with_prefill_time.Add(row);
      const size_t bucket = ServedEngineView::PrefillTokensBucket(row.prefill_tokens);
      by_prefill_tokens_time[bucket].Add(row);
      ++view.prefill_iterations_by_tokens[bucket];
      if (row.decodes == 0) {
        ++view.lone_prefill_iterations;
        lone_prefill_time.Add(row);
      } else {
        mixed_prefill_time.Add(row);
      }
    }
  }
  view.decode_only_scale = decode_only_time.RatioOrZero();
  view.with_prefill_scale = with_prefill_time.RatioOrZero();
  view.lone_prefill_scale = lone_prefill_time.RatioOrZero();
  view.mixed_prefill_scale = mixed_prefill_time.RatioOrZero();
  view.decode_only_median_scale = MedianOrZero(decode_only);
  view.with_prefill_median_scale = MedianOrZero(with_prefill);
  view.between_iterations_s = MedianOrZero(between);
  for (size_t b = 0; b < by_prefill_tokens_time.size(); ++b) {
    view.prefill_scale_by_tokens[b] = by_prefill_tokens_time[b].RatioOrZero();
    view.prefill_engine_s_by_tokens[b] = by_prefill_tokens_time[b].engine_s;
  }
  for (size_t b = 0; b < by_batch.size(); ++b) {
    view.decode_scale_by_batch[b] = by_batch_time[b].RatioOrZero();
    view.decode_engine_s_by_batch[b] = by_batch_time[b].engine_s;
    view.decode_median_scale_by_batch[b] = MedianOrZero(by_batch[b]);
    view.decode_iterations_by_batch[b] = static_cast<int64_t>(by_batch[b].size());
  }
  return view;
}

std::string ServedIterationsCsvHeader() {
  return "run,start_s,wall_s,composed_s,decodes,decode_context_mean,prefill_chunks,"
         "prefill_tokens,prefill_continuing_chunks,prefill_continuing_tokens,handoff_s,"
         "idle_before_s\n";
}

std::string ServedIterationsCsvRows(const ServedEngineView& view, const std::string& key) {
  std::string csv;
  char line[256];
  for (const ServedEngineView::Iteration& row : view.rows) {
    std::snprintf(
        line, sizeof line, ",%.6f,%.6f,%.6f,%lld,%.1f,%lld,%lld,%lld,%lld,%.6f,%.6f\n", row.start_s,
        row.wall_s, row.composed_s, static_cast<long long>(row.decodes), row.decode_context_mean,
        static_cast<long long>(row.prefill_chunks), static_cast<long long>(row.prefill_tokens),
        static_cast<long long>(row.prefill_continuing_chunks),
        static_cast<long long>(row.prefill_continuing_tokens), row.handoff_s, row.idle_before_s);
    csv += key + line;
  }
  return csv;
}

nlohmann::json ServedEngineView::ToJson() const {
  // A bucket's upper bound; the last has none (null).
  const auto up_to = [](int64_t bound) {
    return bound == INT64_MAX ? nlohmann::json(nullptr) : nlohmann::json(bound);
  };
  nlohmann::json by_batch = nlohmann::json::array();
  for (size_t b = 0; b < kDecodeBatchUpTo.size(); ++b) {
    by_batch.push_back({{"up_to_sequences", up_to(kDecodeBatchUpTo[b])},
                        {"scale", decode_scale_by_batch[b]},
                        {"median_scale", decode_median_scale_by_batch[b]},
                        {"iterations", decode_iterations_by_batch[b]},
                        {"engine_s", decode_engine_s_by_batch[b]}});
  }
  nlohmann::json by_tokens = nlohmann::json::array();
  for (size_t b = 0; b < kPrefillTokensUpTo.size(); ++b) {
    by_tokens.push_back({{"up_to_tokens", up_to(kPrefillTokensUpTo[b])},
                         {"scale", prefill_scale_by_tokens[b]},
                         {"iterations", prefill_iterations_by_tokens[b]},
                         {"engine_s", prefill_engine_s_by_tokens[b]}});
  }
  return {{"engine_side", serving::ServingSummaryToJson(engine_side)},
          {"prefill_scale_by_tokens", by_tokens},
          {"iterations", iterations},
          {"decode_only_iterations", decode_only_iterations},
          {"decode_only_scale", decode_only_scale},
          {"with_prefill_scale", with_prefill_scale},
          {"lone_prefill_scale", lone_prefill_scale},
          {"lone_prefill_iterations", lone_prefill_iterations},
          {"mixed_prefill_scale", mixed_prefill_scale},
          {"decode_only_median_scale", decode_only_median_scale},
          {"with_prefill_median_scale", with_prefill_median_scale},
          {"between_iterations_s", between_iterations_s},
          {"busy_s", busy_s},
          {"decode_scale_by_batch", by_batch}};
}

}  // namespace moelab::validate
