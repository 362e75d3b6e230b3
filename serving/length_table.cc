// Trace and length CSVs (load_spec.h ReadLengthTable): a header naming the columns, then one row
// per request; lines starting with '#' are comments (a shipped file's source and seed).
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "base/csv_fields.h"
#include "base/error.h"
#include "base/input_file.h"
#include "base/limits.h"
#include "base/message_text.h"
#include "serving/load_spec.h"

namespace moelab::serving {
namespace {

[[noreturn]] void FailField(const std::string& where, const std::string& column,
                            const std::string& expected, const std::string& got) {
  throw base::Error(where + ": column " + column + ": expected " + expected + ", got '" +
                    base::EscapeForMessage(got) + "'");
}

double FieldNumber(const std::string& text, const std::string& where, const std::string& column,
                   const std::string& expected) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value))
    FailField(where, column, expected, text);
  return value;
}

int64_t FieldTokens(const std::string& text, const std::string& where, const std::string& column) {
  const std::string expected =
      "a whole number of tokens from 1 to " + std::to_string(kMaxTokensPerRequest);
  const double value = FieldNumber(text, where, column, expected);
  if (value != std::floor(value) || value < 1 || value > static_cast<double>(kMaxTokensPerRequest))
    FailField(where, column, expected + " (docs/limits.md)", text);
  return static_cast<int64_t>(value);
}

struct Columns {
  int arrival = -1, prompt = -1, output = -1;
  size_t count = 0;
};

Columns ReadHeader(const std::string& line, const std::string& where) {
  Columns columns;
  const std::vector<std::string> names = base::SplitCsvLine(line);
  columns.count = names.size();
  for (size_t i = 0; i < names.size(); ++i) {
    int* slot = names[i] == "arrival_s"       ? &columns.arrival
                : names[i] == "prompt_tokens" ? &columns.prompt
                : names[i] == "output_tokens" ? &columns.output
                                              : nullptr;
    if (slot == nullptr) continue;  // other columns (a trace's own) are kept out, by name
    if (*slot >= 0)
      throw base::Error(where + ": column " + names[i] + " appears twice in the header");
    *slot = static_cast<int>(i);
  }
  if (columns.arrival < 0 && columns.prompt < 0 && columns.output < 0) {
    throw base::Error(where + ": header '" + base::EscapeForMessage(line) +
                      "' names none of arrival_s, prompt_tokens, output_tokens");
  }
  return columns;
}

void ReadRow(const std::string& line, const Columns& columns, const std::string& where,
             LengthTable& table) {
  const std::vector<std::string> fields = base::SplitCsvLine(line);
  if (fields.size() != columns.count) {
    throw base::Error(where + ": expected " + std::to_string(columns.count) +
                      " comma-separated fields as in the header, got " +
                      std::to_string(fields.size()));
  }
  if (columns.arrival >= 0) {
    const std::string& text = fields[static_cast<size_t>(columns.arrival)];
    const double arrival_s = FieldNumber(text, where, "arrival_s", "seconds >= 0");
    if (arrival_s < 0 || arrival_s > base::kMaxSeconds)
      FailField(where, "arrival_s", "seconds from 0 to 1e6 (docs/limits.md)", text);
    if (!table.arrival_s.empty() && arrival_s < table.arrival_s.back()) {
      FailField(where, "arrival_s",
                "arrival times in order (at or after the previous row's " +
                    std::to_string(table.arrival_s.back()) + " s)",
                text);
    }
    table.arrival_s.push_back(arrival_s);
  }
  if (columns.prompt >= 0) {
    table.prompt_tokens.push_back(
        FieldTokens(fields[static_cast<size_t>(columns.prompt)], where, "prompt_tokens"));
  }
  if (columns.output >= 0) {
    table.output_tokens.push_back(
        FieldTokens(fields[static_cast<size_t>(columns.output)], where, "output_tokens"));
  }
  ++table.rows;
}

}  // namespace

LengthTable ReadLengthTable(const std::string& file, bool need_arrivals) {
  const std::string text = base::ReadInputFile(file, base::kMaxCsvFileBytes, "CSV file");
  std::stringstream stream(text);
  std::string line;
  int64_t line_number = 0;
  std::optional<Columns> columns;
  LengthTable table;
  while (std::getline(stream, line)) {
    ++line_number;
    const std::string trimmed = base::TrimCsvField(line);
    if (trimmed.empty() || trimmed.front() == '#') continue;
    const std::string where = file + ":" + std::to_string(line_number);
    if (!columns) {
      columns = ReadHeader(trimmed, where);
      if (need_arrivals && columns->arrival < 0)
        throw base::Error(where + ": a trace needs an arrival_s column in its header");
      continue;
    }
    if (static_cast<int64_t>(table.rows) >= kMaxRequests) {
      throw base::Error(where + ": more than " + std::to_string(kMaxRequests) +
                        " rows (the limit on requests in one run; docs/limits.md)");
    }
    ReadRow(trimmed, *columns, where, table);
  }
  if (!columns || table.rows == 0) {
    throw base::Error(file + ": no rows (expected a header such as arrival_s,prompt_tokens," +
                      "output_tokens, then one row per request)");
  }
  table.has_prompt_tokens = columns->prompt >= 0;
  table.has_output_tokens = columns->output >= 0;
  return table;
}

TraceLengthColumns LengthColumnsOfTrace(const LoadSpec& spec) {
  if (spec.arrivals.kind != ArrivalProcess::Kind::kTrace) return {};
  const LengthTable table = ReadLengthTable(spec.arrivals.trace_file, true);
  return {table.has_prompt_tokens, table.has_output_tokens};
}

void CheckLengthSources(const LoadSpec& spec, bool prompt_given, bool output_given,
                        const std::string& prompt_option, const std::string& output_option,
                        bool options_have_defaults) {
  const std::string& trace = spec.arrivals.trace_file;
  const TraceLengthColumns columns = LengthColumnsOfTrace(spec);
  const bool trace_prompts = columns.prompt_tokens, trace_outputs = columns.output_tokens;
  const struct {
    bool given, in_trace;
    const std::string& option;
    const char* column;
  } lengths[] = {{prompt_given, trace_prompts, prompt_option, "prompt_tokens"},
                 {output_given, trace_outputs, output_option, "output_tokens"}};
  for (const auto& length : lengths) {
    if (length.given && length.in_trace) {
      throw base::Error(length.option + ": the trace " + trace + " gives each request's " +
                        length.column + "; leave the option out");
    }
    if (!length.given && !length.in_trace && !options_have_defaults) {
      throw base::Error(length.option + " is required" +
                        (spec.arrivals.kind == ArrivalProcess::Kind::kTrace
                             ? " (the trace " + trace + " has no " + length.column + " column)"
                             : std::string(" (N, uniform:A,B, lognormal:MEAN,SIGMA or csv:FILE)")));
    }
  }
}

}  // namespace moelab::serving
