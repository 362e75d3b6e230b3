#include "executor/run_report.h"

#include <sstream>

#include "report/format.h"

namespace moelab::executor {

using report::FormatBytes;
using report::FormatNumber;
using report::FormatSeconds;
using report::Table;

std::string RunReportText(const nlohmann::json& r) {
  std::ostringstream text;
  const auto seconds = [&](const char* key) {
    return r.contains(key) && r[key].is_number() ? FormatSeconds(r[key].get<double>())
                                                 : std::string("-");
  };
  text << "moelab run: " << r["workload"].get<std::string>() << " on "
       << r["model"]["name"].get<std::string>() << " ("
       << FormatBytes(r["model"]["weight_bytes"].get<double>()) << " of weights, "
       << r["model"]["weights_source"].get<std::string>() << "), batch " << r["batch"]
       << ", prompt " << r["prompt_tokens"] << ", " << r["output_tokens"] << " output tokens, "
       << r["machine"]["isa"].get<std::string>() << " x " << r["machine"]["threads"]
       << " threads\n";
  Table table({"metric", "value"});
  table.AddRow({"TTFT", seconds("ttft_s")});
  table.AddRow({"TPOT", seconds("tpot_s")});
  if (r["tokens_per_s"].is_number())
    table.AddRow({"tokens/s", FormatNumber(r["tokens_per_s"].get<double>(), 2)});
  table.AddRow({"weight bytes per token", FormatBytes(r["weight_bytes_per_token"].get<double>())});
  if (r.contains("decode_weight_bandwidth_bytes_per_s")) {
    table.AddRow({"decode weight bandwidth",
                  FormatBytes(r["decode_weight_bandwidth_bytes_per_s"].get<double>()) + "/s"});
  }
  for (const auto& [name, value] : r["operator_times_s"].items())
    table.AddRow({"time in " + name, FormatSeconds(value.get<double>())});
  if (r.contains("sd")) {
    const auto& sd = r["sd"];
    table.AddRow(
        {"SD speedup (vs plain decode, same run)", FormatNumber(sd["speedup"].get<double>(), 3)});
    table.AddRow({"SD sigma", FormatNumber(sd["sigma"].get<double>(), 3)});
    table.AddRow({"SD target efficiency", FormatNumber(sd["target_efficiency"].get<double>(), 3)});
    table.AddRow({"SD rounds", std::to_string(sd["rounds"].get<int64_t>())});
  }
  text << table.Render() << "(--json for per-step times, expert token counts and outputs)\n";
  return text.str();
}

}  // namespace moelab::executor
