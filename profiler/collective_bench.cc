#include "profiler/collective_bench.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <memory>
#include <utility>

#include "base/error.h"
#include "base/stats.h"
#include "profiler/run_collector.h"

namespace moelab::profiler {
namespace {

using Clock = std::chrono::steady_clock;

// A run of calls must stay short even for the smallest messages (a few microseconds each).
constexpr double kMaxCallsPerRepetition = 100000;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The buffers one point's calls move, allocated once per point and round.
struct CollectiveBuffers {
  std::vector<char> send, recv;
  std::vector<int64_t> send_bytes, send_offsets, recv_bytes, recv_offsets;
  std::vector<double> reduce;
};

CollectiveBuffers BuffersFor(const CollectivePoint& point, int rank, int ranks) {
  CollectiveBuffers b;
  if (point.op == "all_reduce") {
    b.reduce.assign(static_cast<size_t>(point.bytes / 8), 0.0);
    return b;
  }
  const int64_t per_peer = point.bytes / (ranks - 1);
  b.send.assign(static_cast<size_t>(point.bytes), static_cast<char>(rank + 1));
  b.recv.assign(static_cast<size_t>(point.bytes), 0);
  int64_t at = 0;
  for (int r = 0; r < ranks; ++r) {
    const int64_t bytes = r == rank ? 0 : per_peer;  // a rank keeps its own rows
    b.send_bytes.push_back(bytes);
    b.recv_bytes.push_back(bytes);
    b.send_offsets.push_back(at);
    b.recv_offsets.push_back(at);
    at += bytes;
  }
  return b;
}

void CallOnce(parallel::Communicator& communicator, const CollectivePoint& point,
              CollectiveBuffers& b) {
  if (point.op == "all_reduce") {
    // Zeros: summed call after call they stay zero (no overflow, no denormals), so no refill is
    // timed with the reduction.
    communicator.AllReduceSum(b.reduce.data(), static_cast<int64_t>(b.reduce.size()));
    return;
  }
  communicator
      .StartAllToAllV(b.send.data(), b.send_bytes, b.send_offsets, b.recv.data(), b.recv_bytes,
                      b.recv_offsets)
      ->Wait();
}

// Seconds per call of `calls` calls after a barrier, the slowest rank's.
double TimeCalls(parallel::Communicator& communicator, const CollectivePoint& point,
                 CollectiveBuffers& buffers, int64_t calls) {
  communicator.Barrier();
  const Clock::time_point start = Clock::now();
  for (int64_t i = 0; i < calls; ++i) CallOnce(communicator, point, buffers);
  double seconds = SecondsSince(start) / static_cast<double>(calls);
  communicator.AllReduceMax(&seconds, 1);
  return seconds;
}

nlohmann::json SampleOf(const CollectivePoint& point, int ranks, int64_t calls,
                        const std::vector<double>& repetition_s) {
  return {{"operator", point.op},
          {"device", "mpi"},
          {"shape", {{"ranks", ranks}, {"bytes", point.bytes}}},
          {"tokens", 1},
          {"repetitions", static_cast<int64_t>(repetition_s.size())},
          {"iterations", calls},
          {"median_s", base::Median(repetition_s)},
          {"mean_s", Mean(repetition_s)},
          {"min_s", *std::min_element(repetition_s.begin(), repetition_s.end())},
          {"max_s", *std::max_element(repetition_s.begin(), repetition_s.end())},
          {"stddev_s", SampleStddev(repetition_s)},
          {"repetition_s", repetition_s},
          {"bytes", point.bytes},
          {"flops", 0},
          {"collective",
           {{"message", point.message},
            {"tokens_per_rank", point.tokens_per_rank},
            {"rows_per_peer", point.rows_per_peer}}}};
}

}  // namespace

CollectiveGridSpec CollectiveGridSpec::Quick() {
  CollectiveGridSpec spec;
  spec.tokens_per_rank = {1, 4, 16, 64, 256, 1024, 4096};
  spec.repetitions = 5;
  spec.min_time_s = 0.02;
  return spec;
}

CollectiveGridSpec CollectiveGridSpec::Full() {
  CollectiveGridSpec spec;
  for (int64_t t = 1; t <= 4096; t *= 2) spec.tokens_per_rank.push_back(t);
  spec.repetitions = 9;
  spec.min_time_s = 0.1;
  return spec;
}

void CollectiveGridSpec::Validate() const {
  if (tokens_per_rank.empty())
    throw base::Error("collective grid: tokens_per_rank must list at least one count");
  for (int64_t t : tokens_per_rank) {
    if (t < 1 || t > (int64_t{1} << 24))
      throw base::Error("collective grid: tokens_per_rank " + std::to_string(t) +
                        ": expected 1..16777216");
  }
  if (repetitions < 1 || repetitions > 1000)
    throw base::Error("collective grid: repetitions must be 1..1000");
  if (!(min_time_s > 0 && min_time_s <= 60))
    throw base::Error("collective grid: min_time_s must be in (0, 60] seconds");
}

std::vector<CollectivePoint> MakeCollectiveGrid(int64_t hidden, int64_t top_k, int ranks,
                                                const CollectiveGridSpec& spec) {
  spec.Validate();
  if (ranks < 2)
    throw base::Error("profile --collectives: " + std::to_string(ranks) +
                      " rank(s); collectives need at least 2 (mpirun -n 2 or more)");
  if (hidden < 1 || top_k < 1)
    throw base::Error("collective grid: the model's hidden size and top_k must be >= 1");
  const int64_t fp32 = 4;
  std::vector<CollectivePoint> points;
  for (const int64_t tokens : spec.tokens_per_rank) {
    const int64_t rows = (tokens * top_k + ranks - 1) / ranks;
    using Message = std::pair<const char*, int64_t>;  // name, fp32 values per row
    for (const auto& [message, row_values] :
         {Message{"dispatch", hidden + 1}, Message{"combine", hidden}}) {
      const int64_t per_peer = rows * row_values * fp32;
      if (per_peer > INT_MAX)
        throw base::Error("profile --collectives: a " + std::string(message) + " of " +
                          std::to_string(per_peer) +
                          " bytes per peer exceeds MPI's int counts (2^31 - 1)");
      points.push_back({"all_to_all", message, tokens, rows, per_peer * (ranks - 1)});
    }
    // Reduced as doubles (Communicator::AllReduceSum): the rows' bytes rounded up to 8.
    points.push_back({"all_reduce", "rows", tokens, 0, (tokens * hidden * fp32 + 7) / 8 * 8});
  }
  return points;
}

nlohmann::json MeasureCollectives(parallel::Communicator& communicator,
                                  const std::vector<CollectivePoint>& points,
                                  const CollectiveGridSpec& spec, std::ostream* progress) {
  spec.Validate();
  const int rank = communicator.rank();
  const int ranks = communicator.size();
  // Calls per repetition, agreed from a warm-up call (which also brings MPI's connections up).
  std::vector<int64_t> calls(points.size(), 1);
  for (size_t i = 0; i < points.size(); ++i) {
    CollectiveBuffers buffers = BuffersFor(points[i], rank, ranks);
    const double warm_s = TimeCalls(communicator, points[i], buffers, 1);
    const double wanted = std::ceil(spec.min_time_s / std::max(warm_s, 1e-9));
    calls[i] = static_cast<int64_t>(std::clamp(wanted, 1.0, kMaxCallsPerRepetition));
  }
  std::vector<std::vector<double>> seconds(points.size());
  for (int round = 0; round < spec.repetitions; ++round) {
    for (size_t i = 0; i < points.size(); ++i) {
      CollectiveBuffers buffers = BuffersFor(points[i], rank, ranks);
      seconds[i].push_back(TimeCalls(communicator, points[i], buffers, calls[i]));
    }
  }
  nlohmann::json samples = nlohmann::json::array();
  for (size_t i = 0; i < points.size(); ++i) {
    samples.push_back(SampleOf(points[i], ranks, calls[i], seconds[i]));
    if (progress != nullptr && rank == 0) {
      char line[160];
      std::snprintf(
          line, sizeof(line), "[%zu/%zu] %s mpi ranks=%d bytes=%lld (%s): median %.1f us\n", i + 1,
          points.size(), points[i].op.c_str(), ranks, static_cast<long long>(points[i].bytes),
          points[i].message.c_str(), samples.back()["median_s"].get<double>() * 1e6);
      *progress << line;
    }
  }
  return samples;
}

}  // namespace moelab::profiler
