#include "fit/latency_profile.h"

#include <algorithm>
#include <string_view>

#include "base/error.h"
#include "base/limits.h"
#include "base/units.h"
#include "base/json_reader.h"
#include "fit/latency_fit.h"

namespace moelab::fit {
namespace {

// Where the profiler measures: the host, a CUDA GPU by index, or the MPI ranks (collectives).
bool IsProfiledDevice(const std::string& device) {
  if (device == "cpu" || device == "mpi") return true;
  const std::string_view prefix = "cuda:";
  if (device.size() <= prefix.size() || device.compare(0, prefix.size(), prefix) != 0) return false;
  return device.size() - prefix.size() <= 4 &&
         std::all_of(device.begin() + static_cast<std::ptrdiff_t>(prefix.size()), device.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

// The repetitions' spread, when the sample carries it (the profiler always does): 0 < min_s <=
// median_s <= max_s and every repetition a positive time; a fit reads only the median, but a
// sample whose spread contradicts it was edited or corrupted.
void CheckSpread(const base::JsonReader& sample, double median_s) {
  // Within a relative 1e-9: the profiler's median of its own repetitions, printed and read back.
  const double slack = 1 + 1e-9;
  if (sample.Has("min_s")) {
    const double min_s = sample.Number("min_s", 0.0);
    if (min_s > median_s * slack) sample.Fail("min_s", "0 < min_s <= median_s");
  }
  if (sample.Has("max_s")) {
    const double max_s = sample.Number("max_s", 0.0);
    if (max_s * slack < median_s || max_s > base::kMaxSeconds)
      sample.Fail("max_s", "median_s <= max_s <= 1e+06 seconds");
  }
  if (sample.Has("repetition_s")) {
    const nlohmann::json& times = sample.json()["repetition_s"];
    if (!times.is_array()) sample.Fail("repetition_s", "an array of times in seconds");
    for (const nlohmann::json& time : times) {
      if (!time.is_number() || !(time.get<double>() > 0) ||
          !(time.get<double>() <= base::kMaxSeconds))
        sample.Fail("repetition_s", "an array of times in (0, 1e+06] seconds");
    }
  }
}

}  // namespace

Profile ProfileFromJson(const nlohmann::json& json, const std::string& origin) {
  const base::JsonReader reader(json, origin);
  if (reader.String("schema") != kProfileSchema) {
    reader.Fail("schema", std::string("\"") + kProfileSchema + "\"");
  }
  Profile profile;
  profile.origin = origin;
  if (auto machine = reader.OptionalObject("machine")) {
    profile.machine = machine->json();
    if (auto limits = machine->OptionalObject("limits")) {
      MachineLimits measured;
      measured.dram_read_bytes_per_s = limits->Number("dram_read_bytes_per_s", 0.0);
      measured.threads = limits->Int("threads", 1);
      const base::JsonReader peaks = limits->Object("peak_flops");
      for (const auto& [dtype, value] : peaks.json().items())
        measured.peak_flops[dtype] = peaks.Number(dtype, 0.0);
      profile.limits = measured;
    }
  }
  const std::optional<base::JsonReader> model = reader.OptionalObject("model");
  profile.model = model::ProfiledModel::FromJson(model ? model->json() : nlohmann::json::object(),
                                                 profile.machine, origin);
  if (const std::optional<base::JsonReader> draft = reader.OptionalObject("draft")) {
    if (draft->Has("name")) profile.draft_name = draft->String("name");
  }
  if (!json.contains("samples") || !json["samples"].is_array()) {
    reader.Fail("samples", "an array of samples");
  }
  const nlohmann::json& samples = json["samples"];
  if (samples.empty()) throw base::Error(origin + ": field 'samples' is empty: nothing to fit");
  for (size_t i = 0; i < samples.size(); ++i) {
    const std::string path = "samples[" + std::to_string(i) + "]";
    const base::JsonReader sample(samples[i], origin, path);
    ProfileSample s;
    s.index = static_cast<int>(i);
    s.op = sample.String("operator");
    s.device = sample.String("device");
    s.shape = sample.Object("shape").json();
    if (s.shape.contains("token_tiling")) {
      try {
        ComputedTokens(s.shape, 1);
      } catch (const base::Error&) {
        sample.Fail("shape.token_tiling",
                    "{\"exact_up_to\": an integer in [0, 2^40], \"multiple\": an integer in "
                    "[1, 65536]}");
      }
    }
    if (!IsProfiledDevice(s.device)) sample.Fail("device", "\"cpu\", \"cuda:N\" or \"mpi\"");
    // Every operator is measured on at least one token (a transfer or collective on 1).
    s.tokens = sample.Int("tokens", 1);
    s.median_s = sample.Number("median_s", 0.0);
    // Every time a profile carries is bounded as a hardware file's (docs/limits.md): a fit of
    // 1e305 s times overflowed its residuals, and a storage tier built from them printed them on.
    if (s.median_s > base::kMaxSeconds)
      sample.Fail("median_s", "a time of at most 1e+06 seconds (docs/limits.md)");
    CheckSpread(sample, s.median_s);
    if (sample.Has("repetition_s")) {
      for (const nlohmann::json& time : sample.json()["repetition_s"])
        s.repetition_s.push_back(time.get<double>());
    }
    if (sample.Has("flops")) s.flops = sample.Number("flops", 0.0, true);
    if (sample.Has("bytes")) s.bytes = sample.Number("bytes", 0.0, true);
    if (s.bytes > base::kMaxBytes) sample.Fail("bytes", "at most 2^60 bytes (docs/limits.md)");
    if (sample.Has("compute_rate")) s.compute_rate = sample.Number("compute_rate", 0.0);
    if (s.op.empty()) sample.Fail("operator", "a non-empty operator name");
    profile.samples.push_back(std::move(s));
  }
  return profile;
}

Profile LoadProfile(const std::filesystem::path& file) {
  if (!std::filesystem::exists(file)) throw base::Error(file.string() + ": profile file not found");
  return ProfileFromJson(base::JsonReader::ParseFile(file), file.string());
}

}  // namespace moelab::fit
