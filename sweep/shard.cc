#include "sweep/shard.h"

#include <algorithm>
#include <map>
#include <utility>

#include "base/error.h"
#include "base/input_file.h"
#include "base/json_reader.h"
#include "sweep/command_csv.h"

namespace moelab::sweep {
namespace {

using nlohmann::ordered_json;

constexpr const char* kShardSchema = "moelab.sweep_shard/1";

struct Shard {
  std::string path;
  SweepSpec spec;
  int64_t index = 0;
  int64_t count = 0;
  std::vector<PointOutcome> outcomes;
};

int64_t ReadCount(const ordered_json& object, const char* key, const std::string& origin) {
  if (!object.contains(key) || !object[key].is_number_integer())
    throw base::Error(origin + ": shard." + key + ": expected an integer");
  return object[key].get<int64_t>();
}

const std::string& ReadText(const ordered_json& object, const char* key, const std::string& field) {
  if (!object.contains(key) || !object[key].is_string())
    throw base::Error(field + "." + key + ": expected a string");
  return object[key].get_ref<const std::string&>();
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// A result's rows as the sweep wrote them (engine.cc's FormatRows), so that a damaged or edited
// shard is refused naming the field rather than merged into a broken output: each JSON row one
// line, an object of this point; each CSV row one line led by the point; the same count of both;
// the header one line.
void CheckRows(const SweepSpec& spec, const PointOutcome& outcome, const std::string& field) {
  if (outcome.header.find('\n') != std::string::npos)
    throw base::Error(field + ".header: expected one line");
  for (const auto& [name, rows] :
       {std::pair{"json_rows", &outcome.json_rows}, std::pair{"csv_rows", &outcome.csv_rows}}) {
    if (!rows->empty() && rows->back() != '\n')
      throw base::Error(field + "." + name + ": expected rows each ending in a newline");
  }
  const std::vector<std::string> json_lines = Lines(outcome.json_rows);
  const std::vector<std::string> csv_lines = Lines(outcome.csv_rows);
  if (json_lines.size() != csv_lines.size()) {
    throw base::Error(field + ": " + std::to_string(json_lines.size()) + " json_rows but " +
                      std::to_string(csv_lines.size()) + " csv_rows (one of each per row)");
  }
  const std::string lead = std::to_string(outcome.point) + ",";
  // What the sweep wrote for this point (engine.cc's FormatRows): its grid values, then the
  // command's columns. An edited row (a key added, a column renamed, a value retyped) was merged
  // and made the output differ from the one-process run's.
  const ordered_json values = spec.PointValues(outcome.point);
  std::string csv_prefix = std::to_string(outcome.point);
  for (const auto& [name, value] : values.items()) csv_prefix += "," + CsvText(OptionText(value));
  csv_prefix += ",";
  const std::vector<std::string> columns = SplitCsvHeader(outcome.header);
  for (size_t r = 0; r < json_lines.size(); ++r) {
    const std::string row_field = field + ".json_rows line " + std::to_string(r + 1);
    if (!ordered_json::accept(json_lines[r]))
      throw base::Error(row_field + ": expected one JSON object");
    const ordered_json row = ordered_json::parse(json_lines[r]);
    if (!row.is_object() || !row.contains("point") || row["point"] != outcome.point)
      throw base::Error(row_field + ": expected an object of point " +
                        lead.substr(0, lead.size() - 1));
    for (const auto& [name, value] : values.items()) {
      if (!row.contains("grid." + name) || row["grid." + name] != value)
        throw base::Error(row_field + ": grid." + name + ": expected " + value.dump() +
                          ", the spec's value at this point");
    }
    for (const auto& [key, cell] : row.items()) {
      const bool grid = key.rfind("grid.", 0) == 0 && values.contains(key.substr(5));
      if (key != "point" && !grid &&
          std::find(columns.begin(), columns.end(), key) == columns.end())
        throw base::Error(row_field + ": " + key + ": not a column of its header");
    }
    for (const std::string& column : columns) {
      if (!row.contains(column))
        throw base::Error(row_field + ": " + column + ": missing (a column of its header)");
    }
    if (csv_lines[r].rfind(lead, 0) != 0) {
      throw base::Error(field + ".csv_rows line " + std::to_string(r + 1) +
                        ": expected a row of point " + lead.substr(0, lead.size() - 1));
    }
    if (csv_lines[r].rfind(csv_prefix, 0) != 0) {
      throw base::Error(field + ".csv_rows line " + std::to_string(r + 1) +
                        ": expected the point's grid values first (" +
                        csv_prefix.substr(0, csv_prefix.size() - 1) + ")");
    }
  }
}

Shard ReadShard(const std::string& path, const std::vector<std::string>& commands,
                const std::vector<std::string>& reserved) {
  const std::string text = base::ReadInputFile(path, base::kMaxJsonFileBytes, "sweep shard");
  base::ParseJsonText(text, path, "sweep shard");
  const ordered_json doc = ordered_json::parse(text);
  if (!doc.is_object() || !doc.contains("schema") || doc["schema"] != kShardSchema)
    throw base::Error(path + ": schema: expected \"" + std::string(kShardSchema) + "\"");
  Shard shard;
  shard.path = path;
  if (!doc.contains("spec")) throw base::Error(path + ": spec: missing");
  shard.spec = ParseSweepSpec(doc["spec"].dump(), path + ": spec", commands, reserved);
  if (!doc.contains("spec_hash") || doc["spec_hash"] != shard.spec.hash)
    throw base::Error(path + ": spec_hash: does not match its spec (an edited shard file?)");
  if (!doc.contains("shard") || !doc["shard"].is_object())
    throw base::Error(path + ": shard: expected {index, count}");
  shard.index = ReadCount(doc["shard"], "index", path);
  shard.count = ReadCount(doc["shard"], "count", path);
  const std::vector<int64_t> expected = InterleavedPoints(shard.spec.PointCount(), shard.index,
                                                          shard.count);  // refuses I >= N
  for (const auto& [key, value] : doc.items()) {
    static const std::vector<std::string> kKeys = {"schema", "spec_hash", "spec",
                                                   "shard",  "points",    "results"};
    if (std::find(kKeys.begin(), kKeys.end(), key) == kKeys.end())
      throw base::Error(path + ": " + key + ": not a field of a sweep shard");
  }
  if (!doc.contains("results") || !doc["results"].is_array())
    throw base::Error(path + ": results: expected a list");
  for (size_t i = 0; i < doc["results"].size(); ++i) {
    const ordered_json& result = doc["results"][i];
    const std::string field = path + ": results[" + std::to_string(i) + "]";
    if (!result.is_object() || !result.contains("point") || !result["point"].is_number_integer())
      throw base::Error(field + ".point: expected an integer");
    for (const auto& [key, value] : result.items()) {
      if (key != "point" && key != "header" && key != "json_rows" && key != "csv_rows")
        throw base::Error(field + "." + key + ": not a field of a shard's result");
    }
    PointOutcome outcome;
    outcome.point = result["point"].get<int64_t>();
    if (outcome.point < 0 || outcome.point >= shard.spec.PointCount())
      throw base::Error(field + ".point: expected a point of the spec, 0.." +
                        std::to_string(shard.spec.PointCount() - 1));
    outcome.header = ReadText(result, "header", field);
    for (const std::string& column : SplitCsvHeader(outcome.header)) {
      const std::vector<std::string>& dropped = RunDependentColumns();
      if (std::find(dropped.begin(), dropped.end(), column) != dropped.end())
        throw base::Error(field + ".header: " + column +
                          " is the run's, not the point's (a shard written before sweeps left it "
                          "out of the rows): write the shard again");
    }
    outcome.json_rows = ReadText(result, "json_rows", field);
    outcome.csv_rows = ReadText(result, "csv_rows", field);
    CheckRows(shard.spec, outcome, field);
    shard.outcomes.push_back(std::move(outcome));
  }
  std::vector<int64_t> points;
  for (const PointOutcome& outcome : shard.outcomes) points.push_back(outcome.point);
  if (!doc.contains("points") || !doc["points"].is_array() ||
      doc["points"] != ordered_json(points)) {
    throw base::Error(path + ": points: expected the results' points in their order");
  }
  if (points != expected) {
    throw base::Error(path + ": results: not the points shard " + std::to_string(shard.index) +
                      "/" + std::to_string(shard.count) + " takes (" +
                      std::to_string(expected.size()) + " points: I, I + N, ...)");
  }
  return shard;
}

}  // namespace

std::string ShardJson(const SweepSpec& spec, int64_t index, int64_t count,
                      const std::vector<PointOutcome>& outcomes) {
  ordered_json doc = ordered_json::object();
  doc["schema"] = kShardSchema;
  doc["spec_hash"] = spec.hash;
  doc["spec"] = spec.document;
  doc["shard"] = {{"index", index}, {"count", count}};
  ordered_json points = ordered_json::array(), results = ordered_json::array();
  for (const PointOutcome& outcome : outcomes) {
    points.push_back(outcome.point);
    results.push_back({{"point", outcome.point},
                       {"header", outcome.header},
                       {"json_rows", outcome.json_rows},
                       {"csv_rows", outcome.csv_rows}});
  }
  doc["points"] = std::move(points);
  doc["results"] = std::move(results);
  return doc.dump(1) + "\n";
}

MergedSweep MergeShards(const std::vector<std::string>& paths,
                        const std::vector<std::string>& commands,
                        const std::vector<std::string>& reserved) {
  if (paths.empty()) throw base::Error("sweep merge: give the shard files");
  std::map<int64_t, std::string> seen;  // index -> file
  std::vector<std::vector<PointOutcome>> parts;
  MergedSweep merged;
  int64_t count = 0;
  for (const std::string& path : paths) {
    Shard shard = ReadShard(path, commands, reserved);
    if (parts.empty()) {
      merged.spec = shard.spec;
      count = shard.count;
    } else if (shard.spec.hash != merged.spec.hash) {
      throw base::Error(path + ": spec_hash " + shard.spec.hash + ": a different spec than " +
                        paths[0] + "'s (" + merged.spec.hash + ")");
    } else if (shard.count != count) {
      throw base::Error(path + ": shard.count " + std::to_string(shard.count) + ": " + paths[0] +
                        " has " + std::to_string(count));
    }
    const auto [at, inserted] = seen.emplace(shard.index, path);
    if (!inserted) {
      throw base::Error(path + ": shard " + std::to_string(shard.index) + "/" +
                        std::to_string(count) + " given twice (also " + at->second + ")");
    }
    parts.push_back(std::move(shard.outcomes));
  }
  for (int64_t index = 0; index < count; ++index) {
    if (!seen.count(index)) {
      throw base::Error("sweep merge: shard " + std::to_string(index) + "/" +
                        std::to_string(count) + " is missing");
    }
  }
  merged.outcomes = CollectInGridOrder(merged.spec, std::move(parts));
  return merged;
}

}  // namespace moelab::sweep
