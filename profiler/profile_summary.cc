#include "profiler/profile_summary.h"

#include <algorithm>
#include <map>
#include <sstream>
#include <vector>

#include "report/format.h"

namespace moelab::profiler {

using report::FormatBytes;
using report::FormatSeconds;
using report::Table;

std::string ProfileSummaryText(const nlohmann::json& profile, const std::string& out) {
  std::ostringstream text;
  const nlohmann::json& m = profile["machine"];
  text << "moelab profile: " << profile["model"]["name"].get<std::string>() << " on "
       << m["cpu"].get<std::string>() << " (" << m["isa"].get<std::string>() << " x "
       << m["threads"] << " threads), " << profile["samples"].size() << " samples in "
       << FormatSeconds(profile["wall_time_s"].get<double>())
       << (profile["quick"].get<bool>() ? " (quick)" : "") << "\n";
  struct Range {
    bool set = false;
    double low = 0, high = 0;
    void Add(double v) {
      low = set ? std::min(low, v) : v;
      high = set ? std::max(high, v) : v;
      set = true;
    }
    std::string Text(bool bytes) const {
      if (bytes) return FormatBytes(low) + ".." + FormatBytes(high);
      return std::to_string(static_cast<int64_t>(low)) + ".." +
             std::to_string(static_cast<int64_t>(high));
    }
  };
  struct Row {
    int points = 0;
    Range tokens, context, queries, bytes, median;
  };
  std::vector<std::string> order;
  std::map<std::string, Row> rows;
  for (const auto& s : profile["samples"]) {
    const std::string key = s["operator"].get<std::string>() + " " + s["device"].get<std::string>();
    if (rows.count(key) == 0) order.push_back(key);
    Row& r = rows[key];
    ++r.points;
    r.tokens.Add(s["tokens"].get<double>());
    if (s["shape"].contains("context")) r.context.Add(s["shape"]["context"].get<double>());
    if (s["shape"].contains("queries_per_sequence"))
      r.queries.Add(s["shape"]["queries_per_sequence"].get<double>());
    if (s["shape"].contains("bytes")) r.bytes.Add(s["shape"]["bytes"].get<double>());
    r.median.Add(s["median_s"].get<double>());
  }
  Table table({"operator", "points", "x-axis", "fastest median", "slowest median"});
  for (const std::string& key : order) {
    const Row& r = rows[key];
    std::string axis = "tokens " + r.tokens.Text(false);
    if (r.context.set)
      axis = "batch " + r.tokens.Text(false) + ", context " + r.context.Text(false);
    if (r.queries.set) axis += ", queries " + r.queries.Text(false);
    if (r.bytes.set) axis = r.bytes.Text(true);
    table.AddRow({key, std::to_string(r.points), axis, FormatSeconds(r.median.low),
                  FormatSeconds(r.median.high)});
  }
  text << table.Render();
  for (const auto& note : profile["notes"]) {
    text << "note: " << note.get<std::string>() << "\n";
  }
  text << "wrote " << out << "\n";
  return text.str();
}

}  // namespace moelab::profiler
