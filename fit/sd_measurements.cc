#include "fit/sd_measurements.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "base/csv_fields.h"
#include "base/error.h"
#include "base/limits.h"
#include "model/moe_math.h"
#include "base/input_file.h"
#include "base/json_reader.h"
#include "base/message_text.h"

namespace moelab::fit {
namespace {

constexpr int64_t kMaxPointCount = kMaxSdPointCount;  // in a CSV and a JSON alike

[[noreturn]] void FailField(const std::string& where, const std::string& field,
                            const std::string& expected, const std::string& got) {
  throw base::Error(where + ": field '" + field + "': expected " + expected + ", got '" +
                    base::EscapeForMessage(got) + "'");
}

double ParseCsvNumber(const std::string& text, const std::string& where, const std::string& field) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size()) FailField(where, field, "a number", text);
  return value;
}

// Checks one point's values; `where` names it. E has the model files' bound (kMaxExperts), in a
// CSV and a JSON alike.
void CheckPoint(const SdMeasurement& m, const std::string& where) {
  if (m.point.num_experts > base::kMaxExperts) {
    FailField(where, "E",
              "at most " + std::to_string(base::kMaxExperts) + " experts (docs/limits.md)",
              std::to_string(m.point.num_experts));
  }
  if (m.point.top_k > m.point.num_experts) {
    throw base::Error(where + ": K = " + std::to_string(m.point.top_k) +
                      " exceeds E = " + std::to_string(m.point.num_experts) +
                      " (experts per token cannot exceed experts)");
  }
  if (!(std::isfinite(m.point.sigma) && m.point.sigma > 0 && m.point.sigma <= 1)) {
    std::ostringstream got;
    got << m.point.sigma;
    FailField(where, "sigma", "a number in (0, 1] (accepted fraction of gamma + 1 tokens)",
              got.str());
  }
  if (!model::SigmaYieldsAToken(m.point.sigma, m.point.gamma)) {
    std::ostringstream got;
    got << m.point.sigma << " at gamma " << m.point.gamma;
    FailField(where, "sigma", "at least 1 / (gamma + 1): every round yields the target's own token",
              got.str());
  }
  if (!(std::isfinite(m.speedup) && m.speedup > 0)) {
    std::ostringstream got;
    got << m.speedup;
    FailField(where, "speedup", "a finite number > 0", got.str());
  }
}

int64_t WholeAtLeastOne(double value, const std::string& text, const std::string& where,
                        const std::string& field) {
  if (!std::isfinite(value) || value != std::floor(value) || value < 1 || value > kMaxPointCount) {
    FailField(where, field, "a whole number from 1 to 1e15", text);
  }
  return static_cast<int64_t>(value);
}

std::vector<SdMeasurement> ParseCsv(const std::string& text, const std::string& file) {
  std::stringstream stream(text);
  std::string line;
  int line_number = 0;
  bool have_header = false;
  std::vector<SdMeasurement> result;
  while (std::getline(stream, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (base::TrimCsvField(line).empty()) continue;
    const std::string where = file + ":" + std::to_string(line_number);
    if (!have_header) {
      if (line != kSdMeasurementsCsvHeader) {
        throw base::Error(where + ": unexpected CSV header '" + base::EscapeForMessage(line) +
                          "': expected exactly '" + kSdMeasurementsCsvHeader + "'");
      }
      have_header = true;
      continue;
    }
    const std::vector<std::string> fields = base::SplitCsvLine(line);
    if (fields.size() != 6) {
      throw base::Error(where + ": expected 6 comma-separated fields (" + kSdMeasurementsCsvHeader +
                        "), got " + std::to_string(fields.size()));
    }
    static const char* kNames[6] = {"batch", "gamma", "K", "E", "sigma", "speedup"};
    double values[6];
    for (int i = 0; i < 6; ++i)
      values[i] = ParseCsvNumber(fields[static_cast<size_t>(i)], where, kNames[i]);
    SdMeasurement m;
    m.origin = where;
    m.point.batch = WholeAtLeastOne(values[0], fields[0], where, "batch");
    m.point.gamma = WholeAtLeastOne(values[1], fields[1], where, "gamma");
    m.point.top_k = WholeAtLeastOne(values[2], fields[2], where, "K");
    m.point.num_experts = WholeAtLeastOne(values[3], fields[3], where, "E");
    m.point.sigma = values[4];
    m.speedup = values[5];
    CheckPoint(m, where);
    result.push_back(m);
  }
  if (!have_header) {
    throw base::Error(file + ": empty measurements file: expected the CSV header '" +
                      std::string(kSdMeasurementsCsvHeader) + "' and rows, or JSON");
  }
  return result;
}

SdMeasurement FromJsonObject(const nlohmann::json& json, const std::string& file,
                             const std::string& path) {
  const base::JsonReader reader(json, file, path);
  SdMeasurement m;
  m.origin = file + (path.empty() ? "" : " " + path);
  if (reader.Has("schema")) {
    const std::string schema = reader.String("schema");
    if (schema != "moelab.run/1") {
      reader.Fail("schema", "\"moelab.run/1\" (an executor report) or no schema (a measurement)");
    }
    const std::string workload = reader.String("workload");
    if (workload != "sd") {
      reader.Fail("workload", "\"sd\" (a report of `moelab run --workload sd`)");
    }
    const base::JsonReader sd = reader.Object("sd");
    const base::JsonReader model = reader.Object("model");
    m.point.batch = reader.Count("batch", 1, kMaxPointCount);
    m.point.gamma = sd.Count("gamma", 1, kMaxPointCount);
    m.point.top_k = model.Int("top_k", 1);
    m.point.num_experts = model.Int("experts", 1);
    m.point.sigma = sd.Number("sigma", 0.0);
    m.speedup = sd.Number("speedup", 0.0);
  } else {
    m.point.batch = reader.Count("batch", 1, kMaxPointCount);
    m.point.gamma = reader.Count("gamma", 1, kMaxPointCount);
    m.point.top_k = reader.Int("K", 1);
    m.point.num_experts = reader.Int("E", 1);
    m.point.sigma = reader.Number("sigma", 0.0);
    m.speedup = reader.Number("speedup", 0.0);
  }
  CheckPoint(m, m.origin);
  return m;
}

std::vector<SdMeasurement> ParseJson(const std::string& text, const std::string& file) {
  const nlohmann::json json = base::ParseJsonText(text, file);
  std::vector<SdMeasurement> result;
  if (json.is_array()) {
    for (size_t i = 0; i < json.size(); ++i) {
      std::string path = std::to_string(i);  // "[i]", built without GCC 12's -Wrestrict noise
      path.insert(path.begin(), '[');
      path.push_back(']');
      result.push_back(FromJsonObject(json[i], file, path));
    }
  } else {
    result.push_back(FromJsonObject(json, file, ""));
  }
  return result;
}

}  // namespace

std::vector<SdMeasurement> LoadSdMeasurements(const std::filesystem::path& file) {
  const std::string name = file.string();
  if (!std::filesystem::exists(file)) throw base::Error(name + ": measurements file not found");
  const std::string text = base::ReadInputFile(file, base::kMaxCsvFileBytes, "measurements file");
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (text[first] == '[' || text[first] == '{')) {
    return ParseJson(text, name);
  }
  return ParseCsv(text, name);
}

void ValidateSdMeasurementSet(const std::vector<SdMeasurement>& measurements,
                              const std::string& origin) {
  const size_t needed = static_cast<size_t>(model::MoesdParams::kCount);
  if (measurements.size() < needed) {
    throw base::Error(origin + ": " + std::to_string(measurements.size()) +
                      " measurement(s), but the MoESD model has " + std::to_string(needed) +
                      " parameters: at least " + std::to_string(needed) +
                      " are needed (evenly spread over batch sizes, as the paper recommends)");
  }
  std::set<int64_t> batches;
  for (const SdMeasurement& m : measurements) batches.insert(m.point.batch);
  if (batches.size() < 2) {
    throw base::Error(origin + ": every measurement is at batch " +
                      std::to_string(*batches.begin()) +
                      ": the fit needs at least two batch sizes (spread them from small to large)");
  }
}

SdMeasurementSet LoadSdMeasurementFiles(const std::vector<std::string>& files) {
  SdMeasurementSet set;
  for (const std::string& file : files) {
    const std::vector<SdMeasurement> loaded = LoadSdMeasurements(file);
    set.measurements.insert(set.measurements.end(), loaded.begin(), loaded.end());
    set.origin += (set.origin.empty() ? "" : " + ") + file;
  }
  return set;
}

}  // namespace moelab::fit
