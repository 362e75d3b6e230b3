#include "sweep/engine.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <ostream>
#include <sstream>
#include <system_error>
#include <thread>

#include "base/error.h"
#include "base/message_text.h"
#include "report/provenance.h"
#include "sweep/command_csv.h"

namespace moelab::sweep {
namespace {

using nlohmann::ordered_json;

void AppendInt(std::string& bytes, int64_t value) {
  bytes.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

void AppendText(std::string& bytes, const std::string& text) {
  AppendInt(bytes, static_cast<int64_t>(text.size()));
  bytes += text;
}

class Reader {
 public:
  Reader(const std::string& bytes, const std::string& origin) : bytes_(bytes), origin_(origin) {}
  bool AtEnd() const { return offset_ == bytes_.size(); }
  int64_t Int() {
    int64_t value = 0;
    Need(sizeof(value));
    std::memcpy(&value, bytes_.data() + offset_, sizeof(value));
    offset_ += sizeof(value);
    return value;
  }
  std::string Text() {
    const int64_t size = Int();
    if (size < 0) Truncated();
    Need(static_cast<size_t>(size));
    std::string text = bytes_.substr(offset_, static_cast<size_t>(size));
    offset_ += static_cast<size_t>(size);
    return text;
  }

 private:
  void Need(size_t size) {
    if (bytes_.size() - offset_ < size) Truncated();
  }
  [[noreturn]] void Truncated() const {
    throw base::Error(origin_ + ": point results truncated or corrupt");
  }
  const std::string& bytes_;
  const std::string& origin_;
  size_t offset_ = 0;
};

// Whether a row's keys ("point", "grid.NAME" per grid option, the command's columns) are all
// distinct: then the row's compact JSON is its members' texts joined, the bytes an ordered_json
// object of them dumps (built per row, that object was the sweep's largest cost after the command
// itself); otherwise a repeated key keeps its first place with its last value, as the object does.
bool DistinctKeys(const SweepSpec& spec, const CommandCsv& csv) {
  std::vector<std::string> keys = {"point"};
  for (const auto& entry : spec.grid) keys.push_back("grid." + entry.first);
  keys.insert(keys.end(), csv.columns.begin(), csv.columns.end());
  std::sort(keys.begin(), keys.end());
  return std::adjacent_find(keys.begin(), keys.end()) == keys.end();
}

// The point's CSV rows as the sweep's rows: JSON objects (with `formats.json`) and prefixed CSV
// lines (with `formats.csv`).
void FormatRows(const SweepSpec& spec, const CommandCsv& csv, RowFormats formats,
                PointOutcome& outcome) {
  const ordered_json values = spec.PointValues(outcome.point);
  outcome.header = csv.header_line;
  if (formats.csv) {
    std::string prefix = std::to_string(outcome.point);
    for (const auto& [name, value] : values.items()) prefix += "," + CsvText(OptionText(value));
    for (const std::string& line : csv.row_lines) outcome.csv_rows += prefix + "," + line + "\n";
  }
  if (!formats.json) return;
  if (!DistinctKeys(spec, csv)) {
    for (size_t r = 0; r < csv.rows.size(); ++r) {
      ordered_json row = ordered_json::object();
      row["point"] = outcome.point;
      for (const auto& [name, value] : values.items()) row["grid." + name] = value;
      for (size_t c = 0; c < csv.columns.size(); ++c)
        row[csv.columns[c]] = CellJson(csv.rows[r][c]);
      outcome.json_rows += row.dump() + "\n";
    }
    return;
  }
  std::string leading = "{\"point\":" + std::to_string(outcome.point);
  for (const auto& [name, value] : values.items())
    leading += "," + ordered_json("grid." + name).dump() + ":" + value.dump();
  std::vector<std::string> column_keys;
  column_keys.reserve(csv.columns.size());
  for (const std::string& column : csv.columns) column_keys.push_back(ordered_json(column).dump());
  for (const std::vector<std::string>& fields : csv.rows) {
    outcome.json_rows += leading;
    for (size_t c = 0; c < column_keys.size(); ++c) {
      outcome.json_rows += ',';
      outcome.json_rows += column_keys[c];
      outcome.json_rows += ':';
      outcome.json_rows += CellJson(fields[c]).dump();
    }
    outcome.json_rows += "}\n";
  }
}

ordered_json SweepProvenance() {
  nlohmann::json provenance = report::Provenance();
  // Differ between runs of the same spec (mpirun vs one process, merged shards): left out so the
  // output is the same bytes; spec_hash ties the output to its spec.
  for (const char* key : {"command", "host", "time_utc"}) provenance.erase(key);
  return ordered_json::parse(provenance.dump());
}

// The CSV's columns: the command's, in the order first met; a point whose header differs from
// that union is re-laid out field by field.
void WriteCsv(const SweepSpec& spec, const std::vector<PointOutcome>& outcomes, std::ostream& out) {
  std::vector<std::string> columns;
  for (const PointOutcome& outcome : outcomes) {
    for (const std::string& column : SplitCsvHeader(outcome.header)) {
      if (std::find(columns.begin(), columns.end(), column) == columns.end())
        columns.push_back(column);
    }
  }
  std::string union_header;
  for (const std::string& column : columns)
    union_header += (union_header.empty() ? "" : ",") + CsvText(column);
  std::string header = "point";
  for (const auto& entry : spec.grid) header += "," + CsvText("grid." + entry.first);
  // Rows under another header are laid out again before the first byte is written: a shard's
  // rows that cannot be read back fail the merge with nothing printed.
  std::map<size_t, std::string> relaid;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    if (outcomes[i].header != union_header)
      relaid[i] = Relayout(outcomes[i].csv_rows, spec.grid.size() + 1, outcomes[i].header, columns);
  }
  out << header << "," << union_header << "\n";
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const auto other = relaid.find(i);
    const std::string& rows = other == relaid.end() ? outcomes[i].csv_rows : other->second;
    out.write(rows.data(), static_cast<std::streamsize>(rows.size()));
  }
}

// Each grid option's `"name":value` texts, by value index: a point's entry in "points" is
// assembled from them, the bytes ordered_json's compact dump of {"point", "grid"} gives (an
// ordered_json built and dumped per point was most of the serial part of a 100,000-point sweep).
std::vector<std::vector<std::string>> GridMemberTexts(const SweepSpec& spec) {
  std::vector<std::vector<std::string>> texts;
  for (const auto& [name, values] : spec.grid) {
    const std::string key = ordered_json(name).dump() + ":";
    std::vector<std::string>& option = texts.emplace_back();
    for (const ordered_json& value : values) option.push_back(key + value.dump());
  }
  return texts;
}

// Written piece by piece, never held whole: a 100,000-point sweep's output is 50 MB, and a string
// of it was one more copy (and, on a virtual machine, 12,000 more page faults) in the serial part.
void WriteJson(const SweepSpec& spec, const std::vector<PointOutcome>& outcomes,
               std::ostream& out) {
  out << "{\n  \"schema\": \"moelab.sweep/1\",\n  \"command\": "
      << ordered_json(spec.command).dump() << ",\n  \"spec_hash\": \"" << spec.hash
      << "\",\n  \"spec\": " << spec.document.dump() << ",\n  \"points\": [";
  const std::vector<std::vector<std::string>> members = GridMemberTexts(spec);
  std::string entry;
  for (size_t i = 0; i < outcomes.size(); ++i) {
    entry = i ? ",\n    " : "\n    ";
    entry += "{\"point\":";
    entry += std::to_string(outcomes[i].point);
    entry += ",\"grid\":{";
    const std::vector<size_t> indices = spec.ValueIndices(outcomes[i].point);
    for (size_t g = 0; g < members.size(); ++g) {
      if (g) entry += ',';
      entry += members[g][indices[g]];
    }
    entry += "}}";
    out.write(entry.data(), static_cast<std::streamsize>(entry.size()));
  }
  out << "\n  ],\n  \"rows\": [";
  bool first = true;
  for (const PointOutcome& outcome : outcomes) {
    size_t start = 0;
    while (start < outcome.json_rows.size()) {
      // A last row without its newline ends the text (npos + 1 would start over at 0).
      size_t end = outcome.json_rows.find('\n', start);
      if (end == std::string::npos) end = outcome.json_rows.size();
      out << (first ? "\n    " : ",\n    ");
      out.write(outcome.json_rows.data() + start, static_cast<std::streamsize>(end - start));
      first = false;
      start = end + 1;
    }
  }
  out << "\n  ],\n  \"provenance\": " << SweepProvenance().dump() << "\n}\n";
}

}  // namespace

std::vector<int64_t> InterleavedPoints(int64_t count, int64_t part, int64_t parts) {
  if (parts < 1 || part < 0 || part >= parts) {
    throw base::Error("shard " + std::to_string(part) + "/" + std::to_string(parts) +
                      ": expected I/N with 0 <= I < N");
  }
  std::vector<int64_t> points;
  for (int64_t point = part; point < count; point += parts) points.push_back(point);
  return points;
}

namespace {

PointOutcome RunPoint(const SweepSpec& spec, int64_t point, const PointRunner& run,
                      RowFormats formats) {
  PointOutcome outcome;
  outcome.point = point;
  try {
    CommandCsv csv = ParseCommandCsv(run(spec.PointArguments(point)));
    DropColumns(csv, RunDependentColumns());
    FormatRows(spec, csv, formats, outcome);
  } catch (const std::exception& e) {
    outcome.ok = false;
    outcome.error =
        spec.origin + ": " + spec.PointLabel(point) + ": " + base::OneLineMessage(e.what());
  }
  return outcome;
}

// Each thread takes the next point not yet taken. A failure at position f stops the taking of
// positions after f; those before it were all taken earlier and finish, so the outcomes up to f
// are those one thread gives.
std::vector<PointOutcome> RunPointsOnThreads(const SweepSpec& spec,
                                             const std::vector<int64_t>& points,
                                             const PointRunner& run, const Progress& progress,
                                             RowFormats formats, int threads) {
  std::vector<PointOutcome> outcomes(points.size());
  std::atomic<size_t> next{0};
  std::atomic<size_t> first_failed{points.size()};
  std::mutex mutex;  // the progress callback and an escaping exception
  int64_t done = 0;
  std::exception_ptr escaped;
  const auto work = [&] {
    try {
      for (size_t i = next++; i < points.size() && i < first_failed.load(); i = next++) {
        outcomes[i] = RunPoint(spec, points[i], run, formats);
        if (!outcomes[i].ok) {
          size_t failed = first_failed.load();
          while (i < failed && !first_failed.compare_exchange_weak(failed, i)) {
          }
        }
        std::lock_guard<std::mutex> lock(mutex);
        ++done;
        if (progress) progress(done, static_cast<int64_t>(points.size()));
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex);
      if (!escaped) escaped = std::current_exception();
      first_failed = 0;  // nothing more is taken
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no more threads to be had (a process limit): the ones running take every point
    }
  }
  work();
  for (std::thread& thread : pool) thread.join();
  if (escaped) std::rethrow_exception(escaped);
  if (first_failed < points.size()) outcomes.resize(first_failed + 1);
  return outcomes;
}

}  // namespace

const std::vector<std::string>& RunDependentColumns() {
  static const std::vector<std::string> columns{"provenance.command", "provenance.host",
                                                "provenance.time_utc"};
  return columns;
}

std::vector<PointOutcome> RunPoints(const SweepSpec& spec, const std::vector<int64_t>& points,
                                    const PointRunner& run, const Progress& progress,
                                    RowFormats formats, int threads) {
  if (threads < 1) throw base::Error("sweep: " + std::to_string(threads) + " threads");
  if (threads > 1 && points.size() > 1) {
    return RunPointsOnThreads(spec, points, run, progress, formats,
                              static_cast<int>(std::min<size_t>(threads, points.size())));
  }
  std::vector<PointOutcome> outcomes;
  outcomes.reserve(points.size());
  for (const int64_t point : points) {
    outcomes.push_back(RunPoint(spec, point, run, formats));
    const bool failed = !outcomes.back().ok;
    if (progress)
      progress(static_cast<int64_t>(outcomes.size()), static_cast<int64_t>(points.size()));
    if (failed) break;
  }
  return outcomes;
}

std::string EncodeOutcomes(const std::vector<PointOutcome>& outcomes) {
  std::string bytes;
  for (const PointOutcome& outcome : outcomes) {
    AppendInt(bytes, outcome.point);
    AppendInt(bytes, outcome.ok ? 1 : 0);
    for (const std::string* text :
         {&outcome.error, &outcome.header, &outcome.json_rows, &outcome.csv_rows}) {
      AppendText(bytes, *text);
    }
  }
  return bytes;
}

std::vector<PointOutcome> DecodeOutcomes(const std::string& bytes, const std::string& origin) {
  std::vector<PointOutcome> outcomes;
  Reader reader(bytes, origin);
  while (!reader.AtEnd()) {
    PointOutcome outcome;
    outcome.point = reader.Int();
    outcome.ok = reader.Int() != 0;
    outcome.error = reader.Text();
    outcome.header = reader.Text();
    outcome.json_rows = reader.Text();
    outcome.csv_rows = reader.Text();
    outcomes.push_back(std::move(outcome));
  }
  return outcomes;
}

std::vector<PointOutcome> CollectInGridOrder(const SweepSpec& spec,
                                             std::vector<std::vector<PointOutcome>> parts) {
  const int64_t count = spec.PointCount();
  const PointOutcome* failed = nullptr;
  for (const auto& part : parts) {
    for (const PointOutcome& outcome : part) {
      if (!outcome.ok && (!failed || outcome.point < failed->point)) failed = &outcome;
    }
  }
  // A part stops at its first failure, so the lowest failed point is the one a single process
  // stops at: the same message however the points were shared.
  if (failed) throw base::Error(failed->error);
  std::vector<PointOutcome> ordered(static_cast<size_t>(count));
  std::vector<bool> seen(static_cast<size_t>(count), false);
  for (auto& part : parts) {
    for (PointOutcome& outcome : part) {
      if (outcome.point < 0 || outcome.point >= count)
        throw base::Error(spec.origin + ": point " + std::to_string(outcome.point) +
                          " is outside the grid's " + std::to_string(count) + " points");
      if (seen[static_cast<size_t>(outcome.point)])
        throw base::Error(spec.origin + ": " + spec.PointLabel(outcome.point) + ": given twice");
      seen[static_cast<size_t>(outcome.point)] = true;
      ordered[static_cast<size_t>(outcome.point)] = std::move(outcome);
    }
  }
  for (int64_t point = 0; point < count; ++point) {
    if (!seen[static_cast<size_t>(point)])
      throw base::Error(spec.origin + ": " + spec.PointLabel(point) + ": no result");
  }
  return ordered;
}

void WriteSweep(const SweepSpec& spec, const std::vector<PointOutcome>& outcomes,
                report::Format format, std::ostream& out) {
  if (format == report::Format::kCsv) {
    WriteCsv(spec, outcomes, out);
  } else {
    WriteJson(spec, outcomes, out);
  }
}

std::string RenderSweep(const SweepSpec& spec, const std::vector<PointOutcome>& outcomes,
                        report::Format format) {
  std::ostringstream text;
  WriteSweep(spec, outcomes, format, text);
  return std::move(text).str();
}

}  // namespace moelab::sweep
