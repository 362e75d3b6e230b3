#include "sweep/shard.h"

#include <map>
#include <utility>

#include "base/error.h"
#include "base/input_file.h"
#include "base/json_reader.h"

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
  if (!doc.contains("results") || !doc["results"].is_array())
    throw base::Error(path + ": results: expected a list");
  for (size_t i = 0; i < doc["results"].size(); ++i) {
    const ordered_json& result = doc["results"][i];
    const std::string field = path + ": results[" + std::to_string(i) + "]";
    if (!result.is_object() || !result.contains("point") || !result["point"].is_number_integer())
      throw base::Error(field + ".point: expected an integer");
    PointOutcome outcome;
    outcome.point = result["point"].get<int64_t>();
    outcome.header = ReadText(result, "header", field);
    outcome.json_rows = ReadText(result, "json_rows", field);
    outcome.csv_rows = ReadText(result, "csv_rows", field);
    shard.outcomes.push_back(std::move(outcome));
  }
  std::vector<int64_t> points;
  for (const PointOutcome& outcome : shard.outcomes) points.push_back(outcome.point);
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
