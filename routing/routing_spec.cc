#include "routing/routing_spec.h"

#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>
#include <system_error>

#include "base/error.h"
#include "routing/correlated_routing.h"

namespace moelab::routing {
namespace {

const char* const kValidForms =
    "valid forms: \"gate\" (the model's own router), \"uniform\", \"popularity:FILE\" (a Fiddler "
    "popularity table, JSON or CSV), \"correlated:locality=P,layer=P[,popularity=FILE]\" "
    "(temporal locality and inter-layer correlation), \"trace:FILE\" or a path to a "
    "moelab.routing_trace/1 file";

bool LooksLikePath(const std::string& text) {
  if (text.ends_with(".json") || text.find('/') != std::string::npos) return true;
  std::error_code ignored;
  return std::filesystem::is_regular_file(text, ignored);
}

// The key=value list after "correlated:" (`options`), into `spec`.
void ParseCorrelated(const std::string& options, RoutingSpec& spec) {
  static const std::string kValidKeys =
      "valid keys: locality=P (0..0.99), layer=P (0..1), popularity=FILE; e.g. "
      "\"correlated:locality=0.3,layer=0.5\"";
  const std::string where = "routing 'correlated:" + options + "': ";
  std::stringstream stream(options);
  std::string item;
  std::set<std::string> seen;
  while (std::getline(stream, item, ',')) {
    if (item.empty()) continue;
    const size_t equals = item.find('=');
    if (equals == std::string::npos)
      throw base::Error(where + "'" + item + "' is not key=value; " + kValidKeys);
    const std::string key = item.substr(0, equals);
    const std::string value = item.substr(equals + 1);
    // The last of two values was taken without a word.
    if (!seen.insert(key).second) throw base::Error(where + "'" + key + "' is given twice");
    if (key == "popularity") {
      if (value.empty()) throw base::Error(where + "'popularity' needs a FILE");
      spec.popularity_file = value;
      continue;
    }
    if (key != "locality" && key != "layer")
      throw base::Error(where + "unknown key '" + key + "'; " + kValidKeys);
    double number = 0;
    size_t used = 0;
    try {
      number = std::stod(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != value.size() || !std::isfinite(number)) {
      throw base::Error(where + "'" + key + "' value '" + value + "' is not a number; " +
                        kValidKeys);
    }
    (key == "locality" ? spec.locality : spec.layer_correlation) = number;
  }
  CorrelatedRoutingOptions ranges;  // the generator's own range checks and messages
  ranges.locality = spec.locality;
  ranges.layer_correlation = spec.layer_correlation;
  ranges.Validate();
}

}  // namespace

RoutingSpec ParseRoutingSpec(const std::string& text) {
  RoutingSpec spec;
  spec.text = text;
  const auto file_after = [&](const std::string& prefix) {
    std::string file = text.substr(prefix.size());
    if (file.empty())
      throw base::Error("routing '" + text + "': missing FILE after '" + prefix + "'; " +
                        kValidForms);
    return file;
  };
  if (text == "gate") {
    spec.kind = RoutingSpec::Kind::kGate;
  } else if (text == "uniform") {
    spec.kind = RoutingSpec::Kind::kUniform;
  } else if (text.starts_with("popularity:")) {
    spec.kind = RoutingSpec::Kind::kPopularity;
    spec.file = file_after("popularity:");
  } else if (text == "correlated" || text.starts_with("correlated:")) {
    spec.kind = RoutingSpec::Kind::kCorrelated;
    ParseCorrelated(text == "correlated" ? "" : text.substr(std::string("correlated:").size()),
                    spec);
  } else if (text.starts_with("trace:")) {
    spec.kind = RoutingSpec::Kind::kTrace;
    spec.file = file_after("trace:");
  } else if (!text.empty() && LooksLikePath(text)) {
    spec.kind = RoutingSpec::Kind::kTrace;
    spec.file = text;
  } else {
    throw base::Error("routing '" + text + "' is not understood; " + kValidForms);
  }
  return spec;
}

}  // namespace moelab::routing
