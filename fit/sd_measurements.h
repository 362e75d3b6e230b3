#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "model/moesd_speedup.h"

namespace moelab::fit {

// Measured speculative-decoding speedups, the input of the MoESD fit (formulas.md section 1).
struct SdMeasurement {
  model::SdPoint point;  // batch, gamma, K (top_k), E (num_experts), sigma
  double speedup = 0;    // measured T_AR / T_SD
  std::string origin;    // "file:line" or "file[index]", for messages
};

// The exact CSV header accepted.
inline constexpr const char* kSdMeasurementsCsvHeader = "batch,gamma,K,E,sigma,speedup";
// Batch and gamma of an SD point, measured or predicted: whole numbers from 1 to 1e15 (a CSV's
// numbers are doubles, exact to 2^53).
inline constexpr int64_t kMaxSdPointCount = 1000000000000000;

// Loads measurements from `file`, recognised by content (first non-blank character '[' or '{' is
// JSON, anything else CSV):
//  - CSV with the header exactly kSdMeasurementsCsvHeader (a trailing '\r' is tolerated), one
//    measurement per line, blank lines ignored;
//  - a JSON array whose elements are objects {batch, gamma, K, E, sigma, speedup} or executor
//    reports (below), mixed freely;
//  - one executor report, schema "moelab.run/1" with workload "sd" (`moelab run --workload sd
//    --json`): batch, sd.gamma, model.top_k, model.experts, sd.sigma, sd.speedup.
// Each point is checked: batch and gamma whole numbers from 1 to 1e15, E from 1 to
// base::kMaxExperts (4,096), K from 1 to E, sigma in (0, 1], speedup
// finite and > 0 (NaN, negative and zero are refused). Errors (moelab::Error) name the file, the
// line or element and the field; a missing file or a wrong CSV header says so (the latter quoting
// the expected header).
std::vector<SdMeasurement> LoadSdMeasurements(const std::filesystem::path& file);

// Refuses a set the 10-parameter model cannot be fitted to: fewer points than parameters (the
// paper: at least 10), or every point at one batch size (the batch dependence, the model's
// point, is then undetermined). `origin` names the input in the message.
void ValidateSdMeasurementSet(const std::vector<SdMeasurement>& measurements,
                              const std::string& origin);

// The measurements of several files (`--measurements` repeated), in file order, with an origin
// naming them all ("a.csv + b.csv"); each file loaded as LoadSdMeasurements, the set unvalidated.
struct SdMeasurementSet {
  std::vector<SdMeasurement> measurements;
  std::string origin;
};
SdMeasurementSet LoadSdMeasurementFiles(const std::vector<std::string>& files);

}  // namespace moelab::fit
