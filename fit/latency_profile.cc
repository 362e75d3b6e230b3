#include "fit/latency_profile.h"

#include "base/error.h"
#include "base/limits.h"
#include "base/units.h"
#include "base/json_reader.h"
#include "fit/latency_fit.h"

namespace moelab::fit {

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
    s.tokens = sample.Int("tokens", 0);
    s.median_s = sample.Number("median_s", 0.0);
    // Every time a profile carries is bounded as a hardware file's (docs/limits.md): a fit of
    // 1e305 s times overflowed its residuals, and a storage tier built from them printed them on.
    if (s.median_s > base::kMaxSeconds)
      sample.Fail("median_s", "a time of at most 1e+06 seconds (docs/limits.md)");
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
