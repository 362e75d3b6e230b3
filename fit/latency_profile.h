#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/profiled_model.h"

namespace moelab::fit {

// A profile of operator latencies, schema "moelab.profile/1" (written by profiler/):
//   {"schema": "moelab.profile/1", "machine": {...}, "model": {...},
//    "samples": [{"operator": "expert_ffn", "device": "cpu",
//                 "shape": {"hidden": 1024, "intermediate": 3584}, "tokens": 16,
//                 "repetitions": 5, "median_s": 0.0012, "min_s": ..., "max_s": ...,
//                 "stddev_s": ..., "bytes": ..., "flops": ...}, ...]}
// fit/ reads operator, device ("cpu", "cuda:N" or "mpi"), shape (an object), tokens (whole number
// >= 1) and median_s (finite, > 0 and at most base::kMaxSeconds, 1e6 s: NaN, zero, negative and
// longer times are refused with the sample's index), and flops and bytes when present (finite,
// >= 0, bytes at most 2^60; the cost calibration needs them); min_s, max_s and repetition_s, when
// present, must agree with the median (0 < min_s <= median_s <= max_s, every repetition a positive
// time), and repetition_s is read for the median's noise (fit/latency_fit.h); the other sample
// fields are optional and kept only as the profile's business. machine and
// model are optional objects; machine.limits (the profiler's measured DRAM read bandwidth and peak
// FLOP/s) is read when present, model (with machine's kernel path) as the facts of what was
// measured (model/profiled_model.h).
struct ProfileSample {
  std::string op;  // "operator"
  std::string device;
  nlohmann::json shape;  // object
  int64_t tokens = 0;
  double median_s = 0;
  double flops = -1;  // -1: not recorded
  double bytes = -1;
  // expert_reader beside computation: the computation's rate during the reader's passes as a
  // fraction of its rate alone (0: not recorded).
  double compute_rate = 0;
  // The repetitions' seconds per iteration (repetition_s), when the profile kept them: the fit
  // reads the median's noise from them (fit/latency_fit.h).
  std::vector<double> repetition_s;
  int index = 0;  // position in "samples", for messages
};

// What the profiler measured of the machine's own limits (machine.limits), all threads together.
struct MachineLimits {
  double dram_read_bytes_per_s = 0;
  std::map<std::string, double> peak_flops;  // by data type, e.g. "bf16"
  int64_t threads = 0;
};

struct Profile {
  std::string origin;  // file path
  nlohmann::json machine = nlohmann::json::object();
  std::optional<MachineLimits> limits;
  model::ProfiledModel model;  // what was measured
  // The draft whose forward draft_decode measured (the profile's draft.name; unset in profiles
  // without one).
  std::optional<std::string> draft_name;
  std::vector<ProfileSample> samples;
};

inline constexpr const char* kProfileSchema = "moelab.profile/1";

// Throws moelab::Error naming the file and the field (samples[i].median_s, ...): missing file,
// malformed JSON, wrong schema, missing or invalid fields, no samples.
Profile LoadProfile(const std::filesystem::path& file);
Profile ProfileFromJson(const nlohmann::json& json, const std::string& origin);

}  // namespace moelab::fit
