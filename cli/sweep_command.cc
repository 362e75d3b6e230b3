// moelab sweep and moelab sweep merge: a grid over one prediction command's options (sweep/), in
// one process, across MPI ranks (mpirun), or as one shard of a Slurm job array.
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>

#include "base/error.h"
#include "base/limits.h"
#include "base/message_text.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "kernels/thread_pool.h"
#include "model/preset_cache.h"
#include "parallel/communicator.h"
#include "sweep/ranks.h"
#include "sweep/shard.h"

namespace moelab::cli {
namespace {

using PrintedCommand = std::optional<Printed> (*)(const std::vector<std::string>&);

// The prediction commands whose --csv prints rows, each run per point in-process.
const std::map<std::string, PrintedCommand>& SweepableCommands() {
  static const std::map<std::string, PrintedCommand> commands{
      {"plan sd", PlanSdPrinted},
      {"plan hardware", PlanHardwarePrinted},
      {"plan offload", PlanOffloadPrinted},
      {"plan capacity", PlanCapacityPrinted},
      {"sim sd", SimSdPrinted},
      {"sim offload", SimOffloadPrinted},
      {"sim ep", SimEpPrinted},
      {"sim serve", SimServePrinted},
      {"fit predict", FitPredictPrinted}};
  return commands;
}

std::vector<std::string> SweepableNames() {
  std::vector<std::string> names;
  for (const auto& entry : SweepableCommands()) names.push_back(entry.first);
  return names;
}

// Options a spec may not set: the sweep picks the format and writes the one output; a file per
// point would be overwritten by every point.
const std::vector<std::string>& ReservedOptions() {
  static const std::vector<std::string> reserved{
      "json",      "csv",           "out",      "help",         "h",
      "trace-out", "decisions-out", "timeline", "timeline-out", "plot-out"};
  return reserved;
}

sweep::PointRunner RunnerFor(const std::string& command) {
  const PrintedCommand printed = SweepableCommands().at(command);
  return [printed](const std::vector<std::string>& args) {
    std::vector<std::string> with_csv = args;
    with_csv.push_back("--csv");
    const std::optional<Printed> result = printed(with_csv);
    if (!result) throw base::Error("--help is not a sweep option");
    return result->text;
  };
}

// A progress line on stderr when it is a terminal, redrawn at most 4 times a second.
sweep::Progress ProgressLine(int64_t points, int ranks) {
  if (!isatty(STDERR_FILENO)) return nullptr;
  auto last = std::make_shared<std::chrono::steady_clock::time_point>();
  return [points, ranks, last](int64_t done, int64_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - *last < std::chrono::milliseconds(250)) return;
    *last = now;
    std::fprintf(stderr,
                 "\rmoelab sweep: %lld/%lld points of this rank's share (%d ranks, %lld points)%s",
                 static_cast<long long>(done), static_cast<long long>(total), ranks,
                 static_cast<long long>(points), done == total ? "\n" : "");
  };
}

// --shard I/N: two whole numbers, 0 <= I < N.
std::pair<int64_t, int64_t> ParseShard(const std::string& text) {
  const size_t slash = text.find('/');
  int64_t index = -1, count = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  const bool read = slash != std::string::npos &&
                    std::from_chars(begin, begin + slash, index).ptr == begin + slash &&
                    std::from_chars(begin + slash + 1, end, count).ptr == end && slash > 0 &&
                    slash + 1 < text.size();
  if (!read || index < 0 || count < 1)
    throw base::Error("--shard " + text + ": expected I/N, whole numbers with N >= 1");
  if (index >= count)
    throw base::Error("--shard " + text + ": I must be below N (I counts from 0)");
  return {index, count};
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "" : ", ") + name;
  return text;
}

sweep::SweepSpec LoadSpec(const std::string& path) {
  return sweep::LoadSweepSpec(path, SweepableNames(), ReservedOptions());
}

report::Format SweepFormat(const OutputRequest& output) {
  return output.format == Format::kCsv ? Format::kCsv : Format::kJson;
}

int SweepOnRanks(const std::string& spec_path, const OutputRequest& output, int threads) {
  const std::unique_ptr<parallel::Communicator> communicator = parallel::MakeWorldCommunicator(
      "moelab sweep under mpirun", sweep::kSweepGatherTimeoutS, parallel::Traffic::kLight);
  const int rank = communicator->rank();
  try {
    const sweep::SweepSpec spec = LoadSpec(spec_path);
    const sweep::Progress progress =
        rank == 0 ? ProgressLine(spec.PointCount(), communicator->size()) : nullptr;
    const std::vector<sweep::PointOutcome> outcomes =
        sweep::RunOnRanks(spec, RunnerFor(spec.command), *communicator, progress,
                          sweep::RowFormats::For(SweepFormat(output)), threads);
    double failed = 0;
    if (rank == 0) {
      try {
        report::EmitWith(
            [&](std::ostream& out) { sweep::WriteSweep(spec, outcomes, SweepFormat(output), out); },
            output.out);
      } catch (const std::exception&) {
        failed = 1;
        communicator->AllReduceMax(&failed, 1);
        throw;
      }
    }
    communicator->AllReduceMax(&failed, 1);  // rank 0's write failed: every rank exits 1
    return failed > 0 ? 1 : 0;
  } catch (const base::Error&) {
    // An agreed error (a bad point, ranks that read different specs) or a bad spec, which every
    // rank reads alike before any collective: said once, by rank 0; every rank exits 1.
    if (rank == 0) throw;
    return 1;
  }
}

}  // namespace

int Sweep(const std::vector<std::string>& args) {
  std::string spec_path, shard_text;
  int64_t threads = 0;  // 0: the default below
  po::options_description options("moelab sweep");
  options.add_options()("spec", po::value<std::string>(&spec_path),
                        "the sweep spec (moelab.sweep_spec/1, docs/sweep.md)")(
      "shard", po::value<std::string>(&shard_text),
      "I/N: run only shard I of N (points I, I + N, ...) and write a moelab.sweep_shard/1 file "
      "for moelab sweep merge (a Slurm job array: I = $SLURM_ARRAY_TASK_ID)")(
      "threads", po::value<int64_t>(&threads),
      "points run at once by this process (default: MOELAB_THREADS or all cores; 1 per rank "
      "under mpirun, whose ranks already fill the cores); the output is the same bytes");
  AddOutputOptions(options);
  po::positional_options_description positional;
  positional.add("spec", 1);
  po::variables_map values;
  if (!ParseOptions("usage: moelab sweep SPEC.json [--out FILE] [--json|--csv] [--shard I/N] "
                    "[--threads N]\n"
                    "       mpirun -n K moelab sweep SPEC.json --out FILE\n"
                    "sweepable commands: " +
                        JoinNames(SweepableNames()),
                    options, args, values, &positional)) {
    return 0;
  }
  if (spec_path.empty()) throw base::Error("give the sweep spec: moelab sweep SPEC.json");
  const bool on_ranks = parallel::LaunchedWorldSize() > 1;
  if (values.count("threads")) {
    base::CheckCount(threads, 1, base::kMaxThreads, "--threads",
                     "more threads than cores only adds switching");
  } else {
    threads = on_ranks ? 1 : kernels::DefaultThreadCount();
  }
  // Every point of one sweep reads the same presets: loaded once per process.
  const model::ScopedPresetCache preset_cache;
  const OutputRequest output = OutputRequestFrom(values);
  if (!shard_text.empty()) {
    if (on_ranks) throw base::Error("--shard: give either --shard I/N or mpirun, not both");
    if (output.format == Format::kCsv)
      throw base::Error("--shard writes a moelab.sweep_shard/1 JSON file; --csv applies to merge");
    const auto [index, count] = ParseShard(shard_text);
    const sweep::SweepSpec spec = LoadSpec(spec_path);
    const std::vector<int64_t> points = sweep::InterleavedPoints(spec.PointCount(), index, count);
    const std::vector<sweep::PointOutcome> outcomes =
        sweep::RunPoints(spec, points, RunnerFor(spec.command), ProgressLine(spec.PointCount(), 1),
                         {}, static_cast<int>(threads));
    if (!outcomes.empty() && !outcomes.back().ok) throw base::Error(outcomes.back().error);
    report::Emit(sweep::ShardJson(spec, index, count, outcomes), output.out);
    return 0;
  }
  if (on_ranks) return SweepOnRanks(spec_path, output, static_cast<int>(threads));
  const sweep::SweepSpec spec = LoadSpec(spec_path);
  const int64_t count = spec.PointCount();
  const std::vector<sweep::PointOutcome> outcomes = sweep::CollectInGridOrder(
      spec, {sweep::RunPoints(spec, sweep::InterleavedPoints(count, 0, 1), RunnerFor(spec.command),
                              ProgressLine(count, 1), sweep::RowFormats::For(SweepFormat(output)),
                              static_cast<int>(threads))});
  report::EmitWith(
      [&](std::ostream& out) { sweep::WriteSweep(spec, outcomes, SweepFormat(output), out); },
      output.out);
  return 0;
}

int SweepMerge(const std::vector<std::string>& args) {
  std::vector<std::string> shards;
  po::options_description options("moelab sweep merge");
  options.add_options()("shards", po::value<std::vector<std::string>>(&shards)->multitoken(),
                        "the shard files (moelab sweep SPEC.json --shard I/N --out FILE)");
  AddOutputOptions(options);
  po::positional_options_description positional;
  positional.add("shards", -1);
  po::variables_map values;
  if (!ParseOptions("usage: moelab sweep merge SHARD.json... [--out FILE] [--json|--csv]", options,
                    args, values, &positional)) {
    return 0;
  }
  const OutputRequest output = OutputRequestFrom(values);
  const sweep::MergedSweep merged = sweep::MergeShards(shards, SweepableNames(), ReservedOptions());
  report::EmitWith(
      [&](std::ostream& out) {
        sweep::WriteSweep(merged.spec, merged.outcomes, SweepFormat(output), out);
      },
      output.out);
  return 0;
}

}  // namespace moelab::cli
