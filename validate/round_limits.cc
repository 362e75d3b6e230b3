#include "validate/round_limits.h"

#include <algorithm>

#include "report/format.h"
#include "validate/validation_metrics.h"

namespace moelab::validate {
namespace {

// The probe's limits by name: "DRAM read bandwidth" and "<dtype> peak", each in its unit.
struct Limit {
  std::string name;
  double value;
  double per_unit;  // the unit in the probe's (bytes/s, FLOP/s)
  const char* unit;
  int decimals;
  std::string Text(double v) const {
    return report::FormatNumber(v / per_unit, decimals) + " " + unit;
  }
};

std::vector<Limit> LimitsOf(const nlohmann::json& limits) {
  std::vector<Limit> out;
  if (const auto it = limits.find("dram_read_bytes_per_s"); it != limits.end() && it->is_number()) {
    out.push_back({"DRAM read bandwidth", it->get<double>(), 1e9, "GB/s", 1});
  }
  if (const auto peaks = limits.find("peak_flops"); peaks != limits.end() && peaks->is_object()) {
    for (const auto& [dtype, value] : peaks->items()) {
      if (!value.is_number()) continue;
      out.push_back({dtype + " peak", value.get<double>(), 1e9, "GFLOP/s", 0});
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> SlowRoundNotes(const std::vector<nlohmann::json>& round_limits,
                                        double fraction) {
  std::vector<std::string> notes;
  if (round_limits.size() < 3) return notes;
  std::vector<std::vector<Limit>> rounds;
  for (const nlohmann::json& limits : round_limits) rounds.push_back(LimitsOf(limits));
  for (const Limit& first : rounds.front()) {
    std::vector<double> values;
    for (const std::vector<Limit>& round : rounds) {
      for (const Limit& limit : round) {
        if (limit.name == first.name) values.push_back(limit.value);
      }
    }
    if (values.size() != rounds.size()) continue;  // not probed in every round
    const double median = Median(values);
    if (!(median > 0)) continue;
    for (size_t r = 0; r < rounds.size(); ++r) {
      for (const Limit& limit : rounds[r]) {
        if (limit.name != first.name || !(limit.value < fraction * median)) continue;
        notes.push_back("round " + std::to_string(r + 1) + "'s " + limit.name + " probe read " +
                        limit.Text(limit.value) + ", " +
                        report::FormatNumber(limit.value / median, 2) + " of the rounds' median (" +
                        limit.Text(median) +
                        "): its cases ran on a slower machine than the others'");
      }
    }
  }
  return notes;
}

}  // namespace moelab::validate
