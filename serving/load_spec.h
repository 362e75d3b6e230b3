#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace moelab::serving {

// When requests arrive (open loop: arrival times are drawn before the run and never wait for
// responses). Text forms (ParseArrivals): "poisson:RATE", "gamma:RATE,CV", "constant:RATE",
// "trace:FILE" (a CSV with a column arrival_s, optional prompt_tokens, output_tokens).
struct ArrivalProcess {
  enum class Kind { kPoisson, kGamma, kConstant, kTrace };
  Kind kind = Kind::kPoisson;
  double rate_per_s = 1;  // requests per second (not for kTrace)
  double cv = 1;          // gamma: coefficient of variation of the gaps
  std::string trace_file;
};

// A token count per request. Text forms (ParseLengths): "N" (fixed), "uniform:A,B" (inclusive),
// "lognormal:MEAN,SIGMA" (MEAN the mean in tokens, SIGMA of the underlying normal; rounded, at
// least 1), "csv:FILE" (the file's prompt_tokens or output_tokens column, sampled with the seed).
struct LengthDistribution {
  enum class Kind { kFixed, kUniform, kLognormal, kCsv };
  Kind kind = Kind::kFixed;
  int64_t fixed = 1;
  int64_t low = 1, high = 1;  // uniform
  double mean = 1, sigma = 0;  // lognormal
  std::string csv_file;
};

// What a load generator sends and a serving simulation receives: the same LoadSpec and seed give
// the same requests in both (GenerateRequests).
struct LoadSpec {
  ArrivalProcess arrivals;
  LengthDistribution prompt_tokens, output_tokens;
  std::optional<int64_t> requests;     // --requests N
  std::optional<double> duration_s;    // --duration S (arrivals before S); one of the two
  uint64_t seed = 0;
};

struct RequestSpec {
  int64_t id = 0;          // 0, 1, ... in arrival order
  double arrival_s = 0;    // from the start of the run
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
};

// Errors name the option (`option`, e.g. "--arrivals") and the expected form.
ArrivalProcess ParseArrivals(const std::string& text, const std::string& option = "--arrivals");
LengthDistribution ParseLengths(const std::string& text, const std::string& option);
std::string Describe(const ArrivalProcess& arrivals);  // the text form back
std::string Describe(const LengthDistribution& lengths);

// The requests of `spec`, deterministic in its seed (base/hash.h's generator; arrivals, prompt and
// output lengths from independent streams, so changing one distribution leaves the others' draws
// unchanged). Bounded (base/limits.h); errors name the file and field of a trace or CSV.
std::vector<RequestSpec> GenerateRequests(const LoadSpec& spec);

}  // namespace moelab::serving
