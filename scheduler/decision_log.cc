#include "scheduler/decision_log.h"

#include "base/error.h"
#include "base/json_reader.h"

namespace moelab::scheduler {

namespace {

bool Recorded(const IterationPlan& plan) {
  return !plan.batch.empty() || !plan.preempted.empty() || !plan.admitted.empty() ||
         !plan.swapped_out.empty() || !plan.swapped_in.empty();
}

std::string Describe(const BatchEntry& entry) {
  return "request " + std::to_string(entry.request_id) +
         (entry.prefill ? " prefill " : " decode ") + std::to_string(entry.tokens) + " tokens at " +
         std::to_string(entry.context_tokens) + (entry.emits_token ? " emitting" : "");
}

std::string DescribeIds(const std::vector<int64_t>& ids) {
  std::string text = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) text += ' ';
    text += std::to_string(ids[i]);
  }
  text += ']';
  return text;
}

std::vector<int64_t> ReadIds(const base::JsonReader& reader, const char* key) {
  const nlohmann::json& ids = reader.json().at(key);
  if (!ids.is_array()) reader.Fail(key, "an array of request ids");
  std::vector<int64_t> out;
  for (const nlohmann::json& id : ids) {
    if (!id.is_number_integer()) reader.Fail(key, "an array of integer request ids");
    out.push_back(id.get<int64_t>());
  }
  return out;
}

}  // namespace

nlohmann::json DecisionLogToJson(const SchedulerConfig& config,
                                 const std::vector<IterationPlan>& plans) {
  nlohmann::json iterations = nlohmann::json::array();
  for (const IterationPlan& plan : plans) {
    if (!Recorded(plan)) continue;
    nlohmann::json batch = nlohmann::json::array();
    for (const BatchEntry& entry : plan.batch) {
      batch.push_back({{"id", entry.request_id},
                       {"phase", entry.prefill ? "prefill" : "decode"},
                       {"tokens", entry.tokens},
                       {"context_tokens", entry.context_tokens},
                       {"emits_token", entry.emits_token}});
    }
    iterations.push_back({{"iteration", plan.iteration},
                          {"batch", batch},
                          {"preempted", plan.preempted},
                          {"admitted", plan.admitted},
                          {"swapped_out", plan.swapped_out},
                          {"swapped_in", plan.swapped_in},
                          {"kv_blocks_used", plan.kv_blocks_used},
                          {"waiting", plan.waiting}});
  }
  return {{"schema", kDecisionsSchema}, {"scheduler", config.ToJson()}, {"iterations", iterations}};
}

std::vector<IterationPlan> DecisionLogFromJson(const nlohmann::json& log,
                                               const std::string& origin) {
  base::JsonReader root(log, origin);
  if (root.String("schema") != kDecisionsSchema) {
    root.Fail("schema", std::string("\"") + kDecisionsSchema + "\"");
  }
  const nlohmann::json& iterations = log.at("iterations");
  if (!iterations.is_array()) root.Fail("iterations", "an array");
  std::vector<IterationPlan> plans;
  for (size_t i = 0; i < iterations.size(); ++i) {
    base::JsonReader item(iterations[i], origin, "iterations[" + std::to_string(i) + "]");
    IterationPlan plan;
    plan.iteration = item.Int("iteration", 0);
    plan.kv_blocks_used = item.Int("kv_blocks_used", 0);
    plan.waiting = item.Int("waiting", 0);
    plan.preempted = ReadIds(item, "preempted");
    plan.admitted = ReadIds(item, "admitted");
    plan.swapped_out = ReadIds(item, "swapped_out");
    plan.swapped_in = ReadIds(item, "swapped_in");
    const nlohmann::json& batch = item.json().at("batch");
    if (!batch.is_array()) item.Fail("batch", "an array");
    for (size_t j = 0; j < batch.size(); ++j) {
      base::JsonReader entry(batch[j], origin,
                             item.FieldName("batch") + "[" + std::to_string(j) + "]");
      const std::string phase = entry.String("phase");
      if (phase != "prefill" && phase != "decode") entry.Fail("phase", "\"prefill\" or \"decode\"");
      plan.batch.push_back({entry.Int("id", INT64_MIN), phase == "prefill", entry.Int("tokens", 1),
                            entry.Int("context_tokens", 0), entry.Bool("emits_token")});
    }
    plans.push_back(std::move(plan));
  }
  return plans;
}

std::string FirstDifference(const std::vector<IterationPlan>& a,
                            const std::vector<IterationPlan>& b) {
  std::vector<const IterationPlan*> left, right;
  for (const IterationPlan& plan : a)
    if (Recorded(plan)) left.push_back(&plan);
  for (const IterationPlan& plan : b)
    if (Recorded(plan)) right.push_back(&plan);
  for (size_t i = 0; i < std::min(left.size(), right.size()); ++i) {
    const IterationPlan& x = *left[i];
    const IterationPlan& y = *right[i];
    const std::string where = "recorded iteration " + std::to_string(i) +
                              " (a: " + std::to_string(x.iteration) +
                              ", b: " + std::to_string(y.iteration) + "): ";
    for (size_t j = 0; j < std::max(x.batch.size(), y.batch.size()); ++j) {
      const std::string left_entry = j < x.batch.size() ? Describe(x.batch[j]) : "nothing";
      const std::string right_entry = j < y.batch.size() ? Describe(y.batch[j]) : "nothing";
      if (left_entry != right_entry) {
        return where + "batch entry " + std::to_string(j) + ": a: " + left_entry +
               "; b: " + right_entry;
      }
    }
    if (x.preempted != y.preempted) {
      return where + "preempted a: " + DescribeIds(x.preempted) +
             "; b: " + DescribeIds(y.preempted);
    }
    if (x.admitted != y.admitted) {
      return where + "admitted a: " + DescribeIds(x.admitted) + "; b: " + DescribeIds(y.admitted);
    }
    if (x.swapped_out != y.swapped_out || x.swapped_in != y.swapped_in) {
      return where + "swaps differ";
    }
    if (x.kv_blocks_used != y.kv_blocks_used) {
      return where + "kv_blocks_used a: " + std::to_string(x.kv_blocks_used) +
             "; b: " + std::to_string(y.kv_blocks_used);
    }
  }
  if (left.size() != right.size()) {
    return "a has " + std::to_string(left.size()) + " recorded iterations, b " +
           std::to_string(right.size());
  }
  return "";
}

}  // namespace moelab::scheduler
