// GenerateRequests (load_spec.h): arrival times and token counts drawn from three independent
// SplitMix64 streams of the seed (arrivals, prompt lengths, output lengths), so a load generator
// and a serving simulation given the same LoadSpec see the same requests.
#include <cmath>
#include <map>

#include "base/error.h"
#include "base/hash.h"
#include "base/limits.h"
#include "serving/load_spec.h"
#include "serving/samplers.h"

namespace moelab::serving {
namespace {

// Each stream's state: the seed mixed with the stream's tag, so the streams never overlap in
// practice and changing one distribution leaves the other streams' draws unchanged.
enum StreamTag : uint64_t { kArrivalStream = 1, kPromptStream = 2, kOutputStream = 3 };

base::SplitMix64Stream StreamFor(uint64_t seed, StreamTag tag) {
  return base::SplitMix64Stream(base::Mix64(seed + base::Mix64(tag)));
}

std::string CountText(int64_t value) { return std::to_string(value); }

// Which requests to draw: exactly one of --requests / --duration (a trace may give neither: all
// its rows).
void CheckCountOrDuration(const LoadSpec& spec) {
  const bool trace = spec.arrivals.kind == ArrivalProcess::Kind::kTrace;
  if (spec.requests && spec.duration_s) {
    throw base::Error("--requests and --duration: give one of them, not both");
  }
  if (!trace && !spec.requests && !spec.duration_s) {
    throw base::Error("--requests N or --duration S is required (how many requests to send)");
  }
  if (spec.requests) {
    base::CheckCount(*spec.requests, 1, kMaxRequests, "--requests", "requests in one run");
  }
  if (spec.duration_s) {
    base::CheckSeconds(*spec.duration_s, "--duration");
    if (*spec.duration_s <= 0) throw base::Error("--duration must be above 0 s");
  }
}

// Arrival times: the first request at 0, then one gap per request from the process.
std::vector<double> DrawArrivals(const LoadSpec& spec) {
  const ArrivalProcess& process = spec.arrivals;
  base::SplitMix64Stream stream = StreamFor(spec.seed, kArrivalStream);
  const double gamma_shape = 1 / (process.cv * process.cv);
  const double gamma_scale = process.cv * process.cv / process.rate_per_s;
  std::vector<double> arrivals;
  double now_s = 0;
  for (int64_t i = 0;; ++i) {
    if (spec.requests && i >= *spec.requests) break;
    if (spec.duration_s && now_s >= *spec.duration_s) break;
    if (i >= kMaxRequests) {
      throw base::Error("--duration " + std::to_string(*spec.duration_s) + " at " +
                        Describe(process) + " draws more than " + CountText(kMaxRequests) +
                        " requests (the limit on requests in one run; docs/limits.md)");
    }
    arrivals.push_back(now_s);
    switch (process.kind) {
      case ArrivalProcess::Kind::kPoisson:
        now_s += ExponentialDraw(stream, process.rate_per_s);
        break;
      case ArrivalProcess::Kind::kGamma:
        now_s += GammaDraw(stream, gamma_shape) * gamma_scale;
        break;
      case ArrivalProcess::Kind::kConstant:
        now_s = static_cast<double>(i + 1) / process.rate_per_s;  // no drift from summed gaps
        break;
      case ArrivalProcess::Kind::kTrace:
        throw base::Error("internal: a trace's arrivals are read, not drawn");
    }
  }
  return arrivals;
}

// One length per request from `lengths`; `column` names it in messages ("prompt_tokens"). A CSV's
// rows are drawn by index from `row_stream` (shared by prompt and output when both name one file,
// so a conversation's prompt and output lengths stay paired).
class LengthDrawer {
 public:
  LengthDrawer(const LengthDistribution& lengths, std::string column,
               std::map<std::string, LengthTable>& tables)
      : lengths_(lengths), column_(std::move(column)) {
    if (lengths.kind != LengthDistribution::Kind::kCsv) return;
    auto found = tables.find(lengths.csv_file);
    if (found == tables.end())
      found = tables.emplace(lengths.csv_file, ReadLengthTable(lengths.csv_file, false)).first;
    const LengthTable& table = found->second;
    const bool prompt = column_ == "prompt_tokens";
    if (!(prompt ? table.has_prompt_tokens : table.has_output_tokens)) {
      throw base::Error(lengths.csv_file + ": no " + column_ + " column (its header names the " +
                        "columns; csv:FILE for " + column_ + " reads that one)");
    }
    column_values_ = prompt ? &table.prompt_tokens : &table.output_tokens;
  }

  int64_t Draw(base::SplitMix64Stream& stream, base::SplitMix64Stream& row_stream,
               int64_t request) const {
    switch (lengths_.kind) {
      case LengthDistribution::Kind::kFixed:
        return lengths_.fixed;
      case LengthDistribution::Kind::kUniform:
        return lengths_.low + static_cast<int64_t>(stream.Below(
                                  static_cast<uint64_t>(lengths_.high - lengths_.low + 1)));
      case LengthDistribution::Kind::kLognormal:
        return LognormalTokens(stream, request);
      case LengthDistribution::Kind::kCsv:
        return (*column_values_)[row_stream.Below(column_values_->size())];
    }
    return 0;
  }

 private:
  // MEAN is the distribution's mean: mu = ln(MEAN) - SIGMA^2 / 2. Rounded to the nearest token,
  // at least 1; a draw past the bound is refused (not clamped), naming the request.
  int64_t LognormalTokens(base::SplitMix64Stream& stream, int64_t request) const {
    const double mu = std::log(lengths_.mean) - 0.5 * lengths_.sigma * lengths_.sigma;
    const double tokens = std::round(std::exp(mu + lengths_.sigma * NormalDraw(stream)));
    if (!(tokens <= static_cast<double>(kMaxTokensPerRequest))) {
      throw base::Error(column_ + " " + Describe(lengths_) + ": request " + CountText(request) +
                        " drew " + std::to_string(tokens) + " tokens, above the limit of " +
                        CountText(kMaxTokensPerRequest) +
                        " per request (docs/limits.md; a smaller SIGMA or MEAN keeps within it)");
    }
    return std::max<int64_t>(1, static_cast<int64_t>(tokens));
  }

  const LengthDistribution& lengths_;
  std::string column_;
  const std::vector<int64_t>* column_values_ = nullptr;
};

// The trace's rows that the spec asks for: the first --requests N, or those arriving before
// --duration S, or all.
size_t TraceRowsWanted(const LoadSpec& spec, const LengthTable& trace) {
  const std::string& file = spec.arrivals.trace_file;
  if (spec.requests) {
    if (static_cast<size_t>(*spec.requests) > trace.rows) {
      throw base::Error("--requests " + CountText(*spec.requests) + ": the trace " + file +
                        " has only " + std::to_string(trace.rows) + " rows");
    }
    return static_cast<size_t>(*spec.requests);
  }
  size_t rows = trace.rows;
  if (spec.duration_s) {
    rows = 0;
    while (rows < trace.rows && trace.arrival_s[rows] < *spec.duration_s) ++rows;
    if (rows == 0)
      throw base::Error("--duration: no request of the trace " + file + " arrives before it");
  }
  return rows;
}

}  // namespace

std::vector<RequestSpec> GenerateRequests(const LoadSpec& spec) {
  CheckCountOrDuration(spec);
  std::map<std::string, LengthTable> tables;  // each CSV read once
  std::vector<double> arrivals;
  const LengthTable* trace = nullptr;
  if (spec.arrivals.kind == ArrivalProcess::Kind::kTrace) {
    trace =
        &tables.emplace(spec.arrivals.trace_file, ReadLengthTable(spec.arrivals.trace_file, true))
             .first->second;
    arrivals.assign(
        trace->arrival_s.begin(),
        trace->arrival_s.begin() + static_cast<std::ptrdiff_t>(TraceRowsWanted(spec, *trace)));
  } else {
    arrivals = DrawArrivals(spec);
  }
  // A trace's own length columns are its requests' lengths; the distributions fill the others.
  const bool trace_prompts = trace != nullptr && trace->has_prompt_tokens;
  const bool trace_outputs = trace != nullptr && trace->has_output_tokens;
  std::optional<LengthDrawer> prompt_drawer, output_drawer;
  if (!trace_prompts) prompt_drawer.emplace(spec.prompt_tokens, "prompt_tokens", tables);
  if (!trace_outputs) output_drawer.emplace(spec.output_tokens, "output_tokens", tables);
  base::SplitMix64Stream prompt_stream = StreamFor(spec.seed, kPromptStream);
  base::SplitMix64Stream output_stream = StreamFor(spec.seed, kOutputStream);
  // Both lengths from one CSV: one row per request, drawn from the prompt stream.
  const bool paired_rows = !trace_prompts && !trace_outputs &&
                           spec.prompt_tokens.kind == LengthDistribution::Kind::kCsv &&
                           spec.output_tokens.kind == LengthDistribution::Kind::kCsv &&
                           spec.prompt_tokens.csv_file == spec.output_tokens.csv_file;
  std::vector<RequestSpec> requests(arrivals.size());
  for (size_t i = 0; i < arrivals.size(); ++i) {
    RequestSpec& request = requests[i];
    request.id = static_cast<int64_t>(i);
    request.arrival_s = arrivals[i];
    base::SplitMix64Stream row_stream = prompt_stream;  // the row the prompt draws, when paired
    request.prompt_tokens = trace_prompts
                                ? trace->prompt_tokens[i]
                                : prompt_drawer->Draw(prompt_stream, prompt_stream, request.id);
    if (trace_outputs) {
      request.output_tokens = trace->output_tokens[i];
    } else if (paired_rows) {
      request.output_tokens = output_drawer->Draw(output_stream, row_stream, request.id);
    } else {
      request.output_tokens = output_drawer->Draw(output_stream, output_stream, request.id);
    }
  }
  return requests;
}

}  // namespace moelab::serving
