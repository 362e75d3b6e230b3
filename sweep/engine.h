#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "report/row_set.h"
#include "sweep/spec.h"

namespace moelab::sweep {

// One point's work: the command's arguments in, the command's CSV (header line, then its rows) out,
// as `moelab <command> ARGS --csv` prints it. Throws base::Error for bad options or values.
using PointRunner = std::function<std::string(const std::vector<std::string>& args)>;
// Called after each point a rank finishes: (points done by this rank, points this rank has).
using Progress = std::function<void(int64_t done, int64_t total)>;

// What one point gave, already formatted by the rank that ran it so that gathering ranks only
// concatenates: `header` the command's CSV header, `json_rows` its rows as compact JSON objects
// one per line (with "point" and the grid values), `csv_rows` its CSV rows prefixed with the point
// and the grid values. On failure `ok` is false and `error` says which point and why.
struct PointOutcome {
  int64_t point = 0;
  bool ok = true;
  std::string error;
  std::string header;
  std::string json_rows;
  std::string csv_rows;
};

// The points part `part` of `parts` takes: interleaved (part, part + parts, ...), so that a grid
// whose cost grows along its fastest option is shared evenly. Refused: part outside [0, parts).
std::vector<int64_t> InterleavedPoints(int64_t count, int64_t part, int64_t parts);

// Which of an outcome's row texts to make: both for a shard file (merge chooses the format),
// only the output's own otherwise.
struct RowFormats {
  bool json = true, csv = true;
  static RowFormats For(report::Format format) {
    return {format != report::Format::kCsv, format == report::Format::kCsv};
  }
};

// Runs `points` in order through `run`, stopping at the first that fails (its outcome says why:
// the spec's file, the point and its grid values, the command's message). With `threads` > 1 the
// points run on that many threads (the caller's among them), each taking the next point not yet
// taken; the outcomes are the same, in the same order, ending at the same failing point, so
// `run` must be safe to call from several threads at once (the prediction commands are: each
// builds its own state, and the presets' cache locks). `progress` is called under a lock.
std::vector<PointOutcome> RunPoints(const SweepSpec& spec, const std::vector<int64_t>& points,
                                    const PointRunner& run, const Progress& progress,
                                    RowFormats formats = {}, int threads = 1);

// The columns a command's CSV rows may carry that hold the process rather than the point
// (`sim offload --csv` prints its provenance per row): the process's command line, host and
// time, which the sweep's own provenance leaves out. RunPoints drops them from every point's rows
// (kept, two runs of one spec differed in every row), and a shard file that holds them is
// refused.
const std::vector<std::string>& RunDependentColumns();

// Outcomes to bytes and back (for the gather and the shard files).
std::string EncodeOutcomes(const std::vector<PointOutcome>& outcomes);
std::vector<PointOutcome> DecodeOutcomes(const std::string& bytes, const std::string& origin);

// Every part's outcomes into grid order. A failed point throws base::Error with the lowest failed
// point's message (the one a one-process run stops at); a point missing or given twice is an
// error naming it. The outcomes are moved out of `parts` (100,000 points' rows copied were a
// tenth of a sweep's serial part).
std::vector<PointOutcome> CollectInGridOrder(const SweepSpec& spec,
                                             std::vector<std::vector<PointOutcome>> parts);

// The sweep's output from all its points in grid order: JSON `moelab.sweep/1` (schema, command,
// spec_hash, spec, points, columns, rows, provenance) or CSV (point, grid.<option>..., the
// command's columns). The provenance leaves out the command line, host and time so that one spec
// gives the same bytes however it was run (one process, MPI ranks, merged shards).
void WriteSweep(const SweepSpec& spec, const std::vector<PointOutcome>& outcomes,
                report::Format format, std::ostream& out);
// The same as one string.
std::string RenderSweep(const SweepSpec& spec, const std::vector<PointOutcome>& outcomes,
                        report::Format format);

}  // namespace moelab::sweep
