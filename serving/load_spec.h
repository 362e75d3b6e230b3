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
  int64_t low = 1, high = 1;   // uniform
  double mean = 1, sigma = 0;  // lognormal
  std::string csv_file;
};

// What a load generator sends and a serving simulation receives: the same LoadSpec and seed give
// the same requests in both (GenerateRequests).
struct LoadSpec {
  ArrivalProcess arrivals;
  LengthDistribution prompt_tokens, output_tokens;
  std::optional<int64_t> requests;   // --requests N
  std::optional<double> duration_s;  // --duration S (arrivals before S); one of the two
  uint64_t seed = 0;
};

struct RequestSpec {
  int64_t id = 0;        // 0, 1, ... in arrival order
  double arrival_s = 0;  // from the start of the run
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

// The bounds on a load (docs/limits.md), checked where the quantity is parsed or drawn; a value
// past one is refused naming the option, file or request, never clamped. Requests in one run: a
// RequestSpec is 32 bytes and an outcome a few hundred with its token times, so 10 M requests stay
// within a few GiB; a serving benchmark sends thousands.
inline constexpr int64_t kMaxRequests = 10000000;
// Arrival rate in requests per second: far beyond what any one server or client sustains (a load
// generator's own send loop tops out around 1e4-1e5 per second).
inline constexpr double kMaxArrivalRatePerS = 1e6;
// Gamma arrivals' coefficient of variation of the gaps, in (0, kMaxArrivalCv]: CV 10 is shape 0.01,
// bursts of hundreds of requests at one instant; beyond it most gaps underflow to exactly 0.
inline constexpr double kMaxArrivalCv = 10;
// Tokens in one prompt or one output (any length distribution, trace or CSV): 2^24 = 16.8 M, above
// the longest context windows released (10 M); exact in a float, so sums and means stay exact.
inline constexpr int64_t kMaxTokensPerRequest = int64_t{1} << 24;
// Lognormal lengths' SIGMA (of the underlying normal): 4 puts the 99th percentile at e^9.3 = 11000x
// the median; wider is not a length distribution anyone has measured.
inline constexpr double kMaxLognormalSigma = 4;

// A trace or length CSV read whole (base/input_file.h's kMaxCsvFileBytes): its rows in file order.
// Columns by header name; `arrival_s` (a trace's, required when `need_arrivals`), `prompt_tokens`
// and `output_tokens` (either may be absent: has_prompt_tokens / has_output_tokens say which were
// there). Errors name the file, line and column.
struct LengthTable {
  std::vector<double> arrival_s;
  std::vector<int64_t> prompt_tokens, output_tokens;
  bool has_prompt_tokens = false, has_output_tokens = false;
  size_t rows = 0;
};
LengthTable ReadLengthTable(const std::string& file, bool need_arrivals);

// The length columns of the spec's trace (none without a trace): its requests' own lengths.
struct TraceLengthColumns {
  bool prompt_tokens = false, output_tokens = false;
};
TraceLengthColumns LengthColumnsOfTrace(const LoadSpec& spec);

// Where each length comes from, checked before a run: a trace's own prompt_tokens/output_tokens
// column is its requests' lengths, so giving that option too is refused (it would be ignored);
// a length neither the trace nor an option gives is refused (it would default) unless
// `options_have_defaults` (sim serve's 512 and 128, stated in its --help). Without a trace and
// defaults, both options are required. `prompt_option`/`output_option` name the options.
void CheckLengthSources(const LoadSpec& spec, bool prompt_given, bool output_given,
                        const std::string& prompt_option = "--prompt-tokens",
                        const std::string& output_option = "--output-tokens",
                        bool options_have_defaults = false);

}  // namespace moelab::serving
