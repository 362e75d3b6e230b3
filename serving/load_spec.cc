// The text forms of arrival processes and length distributions (load_spec.h): parsed strictly,
// every error naming the option and the expected form, and described back in the same form.
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "base/error.h"
#include "base/message_text.h"
#include "serving/load_spec.h"

namespace moelab::serving {
namespace {

constexpr const char* kArrivalForms =
    "poisson:RATE, gamma:RATE,CV, constant:RATE or trace:FILE (RATE in requests/s)";
constexpr const char* kLengthForms = "N, uniform:A,B, lognormal:MEAN,SIGMA or csv:FILE (tokens)";

// "OPTION 'TEXT': WHY (expected FORMS)".
[[noreturn]] void Fail(const std::string& option, const std::string& text, const std::string& why,
                       const char* forms) {
  throw base::Error(option + " '" + base::EscapeForMessage(text) + "': " + why + " (expected " +
                    forms + ")");
}

std::string Shortest(double value) {
  std::ostringstream text;
  text.precision(10);
  text << value;
  return text.str();
}

// The parts of "a,b": exactly `count` of them, none empty.
std::vector<std::string> Parts(const std::string& text, size_t count) {
  std::vector<std::string> parts;
  std::string part;
  std::stringstream stream(text);
  while (std::getline(stream, part, ',')) parts.push_back(part);
  if (!text.empty() && text.back() == ',') parts.push_back("");
  if (parts.size() != count) return {};
  for (const std::string& each : parts)
    if (each.empty()) return {};
  return parts;
}

// A finite number, the whole word; else nullopt.
std::optional<double> Number(const std::string& word) {
  if (word.empty() || std::isspace(static_cast<unsigned char>(word.front()))) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(word.c_str(), &end);
  if (end != word.c_str() + word.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

// A whole number of tokens in [1, kMaxTokensPerRequest], for a length's N, A or B.
int64_t TokenCount(const std::string& word, const std::string& what, const std::string& option,
                   const std::string& text) {
  const std::optional<double> value = Number(word);
  if (!value || *value != std::floor(*value))
    Fail(option, text, what + " '" + base::EscapeForMessage(word) + "' is not a whole number",
         kLengthForms);
  if (*value < 1) Fail(option, text, what + " must be at least 1 token", kLengthForms);
  if (*value > static_cast<double>(kMaxTokensPerRequest)) {
    Fail(option, text,
         what + " above the limit of " + std::to_string(kMaxTokensPerRequest) +
             " tokens per request (docs/limits.md)",
         kLengthForms);
  }
  return static_cast<int64_t>(*value);
}

double Rate(const std::string& word, const std::string& option, const std::string& text) {
  const std::optional<double> rate = Number(word);
  if (!rate)
    Fail(option, text, "RATE '" + base::EscapeForMessage(word) + "' is not a number",
         kArrivalForms);
  if (*rate <= 0) Fail(option, text, "RATE must be above 0 requests/s", kArrivalForms);
  if (*rate > kMaxArrivalRatePerS) {
    Fail(
        option, text,
        "RATE above the limit of " + Shortest(kMaxArrivalRatePerS) + " requests/s (docs/limits.md)",
        kArrivalForms);
  }
  return *rate;
}

// "KIND:REST" split at the first colon; an empty REST refused.
std::pair<std::string, std::string> KindAndRest(const std::string& text, const std::string& option,
                                                const char* forms) {
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return {text, ""};
  std::pair<std::string, std::string> split{text.substr(0, colon), text.substr(colon + 1)};
  if (split.second.empty()) Fail(option, text, "nothing after '" + split.first + ":'", forms);
  return split;
}

}  // namespace

ArrivalProcess ParseArrivals(const std::string& text, const std::string& option) {
  const auto [kind, rest] = KindAndRest(text, option, kArrivalForms);
  ArrivalProcess arrivals;
  if (kind == "poisson" || kind == "constant") {
    if (rest.empty() || rest.find(',') != std::string::npos)
      Fail(option, text, kind + " takes one RATE", kArrivalForms);
    arrivals.kind =
        kind == "poisson" ? ArrivalProcess::Kind::kPoisson : ArrivalProcess::Kind::kConstant;
    arrivals.rate_per_s = Rate(rest, option, text);
  } else if (kind == "gamma") {
    const std::vector<std::string> parts = Parts(rest, 2);
    if (parts.empty()) Fail(option, text, "gamma takes RATE,CV", kArrivalForms);
    arrivals.kind = ArrivalProcess::Kind::kGamma;
    arrivals.rate_per_s = Rate(parts[0], option, text);
    const std::optional<double> cv = Number(parts[1]);
    if (!cv || *cv <= 0 || *cv > kMaxArrivalCv) {
      Fail(option, text,
           "CV must be a number in (0, " + Shortest(kMaxArrivalCv) +
               "] (the gaps' coefficient of variation; 1 is Poisson; docs/limits.md)",
           kArrivalForms);
    }
    arrivals.cv = *cv;
  } else if (kind == "trace") {
    if (rest.empty()) Fail(option, text, "trace takes a FILE", kArrivalForms);
    arrivals.kind = ArrivalProcess::Kind::kTrace;
    arrivals.trace_file = rest;
  } else {
    Fail(option, text, "unknown arrival process '" + base::EscapeForMessage(kind) + "'",
         kArrivalForms);
  }
  return arrivals;
}

LengthDistribution ParseLengths(const std::string& text, const std::string& option) {
  const auto [kind, rest] = KindAndRest(text, option, kLengthForms);
  LengthDistribution lengths;
  if (text.find(':') == std::string::npos) {
    lengths.kind = LengthDistribution::Kind::kFixed;
    lengths.fixed = TokenCount(text, "N", option, text);
  } else if (kind == "uniform") {
    const std::vector<std::string> parts = Parts(rest, 2);
    if (parts.empty()) Fail(option, text, "uniform takes A,B", kLengthForms);
    lengths.kind = LengthDistribution::Kind::kUniform;
    lengths.low = TokenCount(parts[0], "A", option, text);
    lengths.high = TokenCount(parts[1], "B", option, text);
    if (lengths.high < lengths.low) Fail(option, text, "B is below A", kLengthForms);
  } else if (kind == "lognormal") {
    const std::vector<std::string> parts = Parts(rest, 2);
    if (parts.empty()) Fail(option, text, "lognormal takes MEAN,SIGMA", kLengthForms);
    lengths.kind = LengthDistribution::Kind::kLognormal;
    const std::optional<double> mean = Number(parts[0]), sigma = Number(parts[1]);
    if (!mean || *mean < 1 || *mean > static_cast<double>(kMaxTokensPerRequest)) {
      Fail(option, text,
           "MEAN must be a number of tokens from 1 to " + std::to_string(kMaxTokensPerRequest),
           kLengthForms);
    }
    if (!sigma || *sigma < 0 || *sigma > kMaxLognormalSigma) {
      Fail(option, text,
           "SIGMA must be a number in [0, " + Shortest(kMaxLognormalSigma) +
               "] (of the underlying normal; docs/limits.md)",
           kLengthForms);
    }
    lengths.mean = *mean;
    lengths.sigma = *sigma;
  } else if (kind == "csv") {
    lengths.kind = LengthDistribution::Kind::kCsv;
    lengths.csv_file = rest;
  } else {
    Fail(option, text, "unknown length distribution '" + base::EscapeForMessage(kind) + "'",
         kLengthForms);
  }
  return lengths;
}

std::string Describe(const ArrivalProcess& arrivals) {
  switch (arrivals.kind) {
    case ArrivalProcess::Kind::kPoisson:
      return "poisson:" + Shortest(arrivals.rate_per_s);
    case ArrivalProcess::Kind::kGamma:
      return "gamma:" + Shortest(arrivals.rate_per_s) + "," + Shortest(arrivals.cv);
    case ArrivalProcess::Kind::kConstant:
      return "constant:" + Shortest(arrivals.rate_per_s);
    case ArrivalProcess::Kind::kTrace:
      return "trace:" + arrivals.trace_file;
  }
  return "";
}

std::string Describe(const LengthDistribution& lengths) {
  switch (lengths.kind) {
    case LengthDistribution::Kind::kFixed:
      return std::to_string(lengths.fixed);
    case LengthDistribution::Kind::kUniform:
      return "uniform:" + std::to_string(lengths.low) + "," + std::to_string(lengths.high);
    case LengthDistribution::Kind::kLognormal:
      return "lognormal:" + Shortest(lengths.mean) + "," + Shortest(lengths.sigma);
    case LengthDistribution::Kind::kCsv:
      return "csv:" + lengths.csv_file;
  }
  return "";
}

}  // namespace moelab::serving
