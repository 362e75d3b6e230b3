// The profile file: its schema (ValidateProfile) and writing it (WriteProfile), apart from
// measuring it (profiler.cc).
#include "profiler/profiler.h"

#include <filesystem>
#include <set>
#include <string>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/limits.h"
#include "model/collective_cost.h"
#include "profiler/profile_grid.h"

namespace moelab::profiler {

namespace {

void RequireField(bool ok, const std::string& field, const std::string& what) {
  if (!ok) throw base::Error("profile: " + field + ": " + what);
}

double NumberField(const nlohmann::json& object, const std::string& key, const std::string& where) {
  RequireField(object.contains(key) && object[key].is_number(), where + key, "expected a number");
  return object[key].get<double>();
}

// machine: what the profile says it measured on (the ValidateProfile schema).
void ValidateMachine(const nlohmann::json& p) {
  const nlohmann::json& m = p["machine"];
  RequireField(m.contains("cpu") && m["cpu"].is_string(), "machine.cpu", "expected a string");
  RequireField(m.contains("flags") && m["flags"].is_array(), "machine.flags", "expected an array");
  RequireField(m.contains("isa") && m["isa"].is_string(), "machine.isa", "expected a string");
  RequireField(m.contains("gpu") && (m["gpu"].is_null() || m["gpu"].is_object()), "machine.gpu",
               "expected null or an object");
  RequireField(m.contains("libraries") && m["libraries"].is_object(), "machine.libraries",
               "expected an object");
  for (const char* key : {"cores", "threads", "l3_bytes"}) {
    RequireField(m.contains(key) && m[key].is_number_integer() && m[key].get<int64_t>() >= 1,
                 std::string("machine.") + key, "expected an integer >= 1");
  }
  RequireField(NumberField(m, "memory_bytes", "machine.") > 0, "machine.memory_bytes",
               "expected > 0");
  if (m.contains("limits")) {
    const nlohmann::json& limits = m["limits"];
    RequireField(limits.is_object(), "machine.limits", "expected an object");
    RequireField(NumberField(limits, "dram_read_bytes_per_s", "machine.limits.") > 0,
                 "machine.limits.dram_read_bytes_per_s", "expected > 0");
    RequireField(limits.contains("peak_flops") && limits["peak_flops"].is_object(),
                 "machine.limits.peak_flops", "expected an object of FLOP/s by data type");
    for (const auto& [dtype, value] : limits["peak_flops"].items()) {
      RequireField(value.is_number() && value.get<double>() > 0,
                   "machine.limits.peak_flops." + dtype, "expected a number > 0");
    }
  }
}

// A collective's sample: over the MPI ranks, its size in shape.bytes (collective_bench.h).
void ValidateCollectiveSample(const nlohmann::json& s, const std::string& where) {
  RequireField(s["device"] == "mpi", where + "device", "a collective runs on device \"mpi\"");
  RequireField(s["tokens"] == 1, where + "tokens", "collectives have tokens = 1");
  const nlohmann::json& shape = s["shape"];
  RequireField(shape.contains("ranks") && shape["ranks"].is_number_integer() &&
                   shape["ranks"].get<int64_t>() >= 2,
               where + "shape.ranks", "a collective needs the ranks it ran on, an integer >= 2");
  RequireField(shape.contains("bytes") && shape["bytes"].is_number_integer() &&
                   shape["bytes"].get<double>() == s["bytes"].get<double>(),
               where + "shape.bytes", "a collective's size must be in shape.bytes and equal bytes");
}

// samples[i]: one measured point (the ValidateProfile schema); `families` are the operator names.
void ValidateSample(const nlohmann::json& s, size_t i, const std::set<std::string>& families) {
  const std::string where = "samples[" + std::to_string(i) + "].";
  RequireField(s.is_object(), where, "expected an object");
  RequireField(s.contains("operator") && s["operator"].is_string() &&
                   families.count(s["operator"].get<std::string>()) > 0,
               where + "operator", "expected one of the operator names in profiler/README.md");
  RequireField(s.contains("device") && s["device"].is_string(), where + "device",
               "expected a string");
  RequireField(s.contains("shape") && s["shape"].is_object(), where + "shape",
               "expected an object");
  RequireField(
      s.contains("tokens") && s["tokens"].is_number_integer() && s["tokens"].get<int64_t>() >= 1,
      where + "tokens", "expected an integer >= 1");
  RequireField(s.contains("repetitions") && s["repetitions"].is_number_integer() &&
                   s["repetitions"].get<int64_t>() >= 1,
               where + "repetitions", "expected an integer >= 1");
  const double median = NumberField(s, "median_s", where);
  const double min = NumberField(s, "min_s", where);
  const double max = NumberField(s, "max_s", where);
  RequireField(min > 0 && min <= median * (1 + 1e-9) && median <= max * (1 + 1e-9),
               where + "median_s", "expected 0 < min_s <= median_s <= max_s");
  RequireField(max <= base::kMaxSeconds, where + "max_s",
               "expected at most 1e+06 s (docs/limits.md)");
  RequireField(NumberField(s, "stddev_s", where) >= 0, where + "stddev_s", "expected >= 0");
  RequireField(NumberField(s, "bytes", where) >= 0, where + "bytes", "expected >= 0");
  RequireField(NumberField(s, "flops", where) >= 0, where + "flops", "expected >= 0");
  const OperatorFamily family = [&] {
    for (OperatorFamily f : AllOperatorFamilies()) {
      if (ToString(f) == s["operator"]) return f;
    }
    return OperatorFamily::kExpertFfn;
  }();
  if (model::IsCollectiveOperator(s["operator"].get<std::string>())) {
    ValidateCollectiveSample(s, where);
    return;
  }
  if (IsTransfer(family)) {
    RequireField(s["tokens"] == 1, where + "tokens", "transfers have tokens = 1");
    RequireField(s["shape"].contains("bytes") && s["shape"]["bytes"].is_number_integer() &&
                     s["shape"]["bytes"].get<double>() == s["bytes"].get<double>(),
                 where + "shape.bytes", "a transfer's size must be in shape.bytes and equal bytes");
  }
  if (family == OperatorFamily::kAttentionDecode || family == OperatorFamily::kAttentionVerify ||
      IsDraftPass(family)) {
    RequireField(s["shape"].contains("context") && s["shape"]["context"].is_number_integer(),
                 where + "shape.context",
                 s["operator"].get<std::string>() + " needs the context length");
  }
  if (family == OperatorFamily::kExpertReader) {
    const nlohmann::json& shape = s["shape"];
    RequireField(shape.contains("reads_in_flight") &&
                     shape["reads_in_flight"].is_number_integer() &&
                     shape["reads_in_flight"].get<int64_t>() >= 1,
                 where + "shape.reads_in_flight", "expert_reader needs an integer >= 1");
    RequireField(shape.contains("beside_compute") && shape["beside_compute"].is_boolean(),
                 where + "shape.beside_compute", "expert_reader needs true or false");
  }
  if (family == OperatorFamily::kAttentionVerify) {
    RequireField(s["shape"].contains("queries_per_sequence") &&
                     s["shape"]["queries_per_sequence"].is_number_integer() &&
                     s["shape"]["queries_per_sequence"].get<int64_t>() >= 2,
                 where + "shape.queries_per_sequence",
                 "attention_verify needs the new tokens per sequence, an integer >= 2");
  }
}

}  // namespace

void ValidateProfile(const nlohmann::json& p) {
  RequireField(p.is_object(), "(document)", "expected a JSON object");
  RequireField(p.contains("schema") && p["schema"] == kProfileSchema, "schema",
               std::string("expected \"") + kProfileSchema + "\"");
  RequireField(p.contains("machine") && p["machine"].is_object(), "machine", "expected an object");
  ValidateMachine(p);
  RequireField(p.contains("model") && p["model"].is_object() && p["model"].contains("name") &&
                   p["model"]["name"].is_string() && p["model"].contains("shape") &&
                   p["model"]["shape"].is_object(),
               "model", "expected {\"name\", \"shape\"}");
  RequireField(p.contains("quick") && p["quick"].is_boolean(), "quick", "expected true or false");
  RequireField(p.contains("notes") && p["notes"].is_array(), "notes",
               "expected an array of strings");
  for (const auto& note : p["notes"])
    RequireField(note.is_string(), "notes", "expected an array of strings");
  RequireField(p.contains("samples") && p["samples"].is_array(), "samples", "expected an array");
  std::set<std::string> families;
  for (OperatorFamily f : AllOperatorFamilies()) families.insert(ToString(f));
  for (const std::string& name : model::CollectiveOperatorNames()) families.insert(name);
  for (size_t i = 0; i < p["samples"].size(); ++i) ValidateSample(p["samples"][i], i, families);
}

void RequireOutputFolder(const std::filesystem::path& out) {
  if (out.empty()) throw base::Error("profile: --out is required (the profile JSON file to write)");
  std::error_code error;
  if (std::filesystem::is_directory(out, error))
    throw base::Error("--out " + out.string() + ": is a folder, expected a file name");
  const std::filesystem::path folder =
      out.parent_path().empty() ? std::filesystem::path(".") : out.parent_path();
  if (!std::filesystem::is_directory(folder, error)) {
    throw base::Error("--out " + out.string() + ": folder " + folder.string() + " does not exist");
  }
}

void WriteProfile(const nlohmann::json& profile, const std::filesystem::path& out) {
  ValidateProfile(profile);
  RequireOutputFolder(out);
  base::WriteFileAtomically(out, profile.dump(2) + "\n");
}

}  // namespace moelab::profiler
