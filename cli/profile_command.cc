#include <algorithm>
#include <iostream>
#include <map>

#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/shape_options.h"
#include "base/error.h"
#include "profiler/profiler.h"

namespace moelab::cli {
namespace {

// One line per operator family and device: points, the x-axis range (tokens; batch and context
// for decode attention; bytes for transfers), fastest and slowest median.
void PrintSummary(const nlohmann::json& profile, const std::string& out) {
  const nlohmann::json& m = profile["machine"];
  std::cout << "moelab profile: " << profile["model"]["name"].get<std::string>() << " on "
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
    Range tokens, context, bytes, median;
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
    if (s["shape"].contains("bytes")) r.bytes.Add(s["shape"]["bytes"].get<double>());
    r.median.Add(s["median_s"].get<double>());
  }
  Table table({"operator", "points", "x-axis", "fastest median", "slowest median"});
  for (const std::string& key : order) {
    const Row& r = rows[key];
    std::string axis = "tokens " + r.tokens.Text(false);
    if (r.context.set)
      axis = "batch " + r.tokens.Text(false) + ", context " + r.context.Text(false);
    if (r.bytes.set) axis = r.bytes.Text(true);
    table.AddRow({key, std::to_string(r.points), axis, FormatSeconds(r.median.low),
                  FormatSeconds(r.median.high)});
  }
  std::cout << table.Render();
  for (const auto& note : profile["notes"]) {
    std::cout << "note: " << note.get<std::string>() << "\n";
  }
  std::cout << "wrote " << out << "\n";
}

int Profile(const std::vector<std::string>& args) {
  po::options_description options("moelab profile");
  // clang-format off
  options.add_options()
      ("model", po::value<std::string>()->default_value("mixtral-8x7b"), "model preset or path (shape overrides below apply)")
      ("quick", po::bool_switch(), "coarse grid, 3 repetitions of >= 50 ms (under 2 minutes on 2 cores)")
      ("out", po::value<std::string>(), "write the profile (moelab.profile/1) here, atomically (required)")
      ("threads", po::value<int>()->default_value(0), "threads (default: MOELAB_THREADS or all cores)")
      ("json", po::bool_switch(), "also print the profile JSON on stdout")
      ("quiet", po::bool_switch(), "no progress lines on stderr");
  // clang-format on
  po::options_description shape(
      "shape (defaults: Mixtral-8x7B scaled to this machine, as moelab run)");
  AddShapeOptions(shape, "", DefaultTargetShape());
  options.add(shape);
  po::variables_map values;
  if (!ParseOptions("usage: moelab profile --model M [shape overrides] [--quick] --out "
                    "PROFILE.json [--threads N] "
                    "[--json] [--quiet]",
                    options, args, values)) {
    return 0;
  }
  if (!values.count("out")) throw Error("--out is required: the profile JSON file to write");
  const std::string out = values["out"].as<std::string>();
  RequireOutputFolder(out);

  ProfileRequest request;
  request.model = values["model"].as<std::string>();
  request.shape = ShapeFrom(values, "", DefaultTargetShape());
  request.quick = values["quick"].as<bool>();
  request.threads = values["threads"].as<int>();
  if (!values["quiet"].as<bool>()) request.progress = &std::cerr;
  request.Validate();

  nlohmann::json profile = RunProfile(request, PresetStore::Default());
  profile["provenance"] = Provenance();
  WriteProfile(profile, out);
  if (values["json"].as<bool>()) {
    EmitJson(profile, "");
  } else {
    PrintSummary(profile, out);
  }
  return 0;
}

}  // namespace

void RegisterProfileCommands(std::vector<Command>& commands) {
  commands.push_back({{"profile"},
                      "measure this machine's operator speeds for a model (moelab.profile/1)",
                      Profile});
}

}  // namespace moelab::cli
