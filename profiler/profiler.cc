#include "profiler/profiler.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "device/gpu_devices.h"
#include "executor/executor_config.h"
#include "kernels/thread_pool.h"
#include "kernels/weight_matrix.h"
#include "model/profiled_model.h"
#include "base/error.h"
#include "base/stats.h"
#include "base/limits.h"
#include "profiler/bench_round.h"
#include "profiler/collective_bench.h"
#include "profiler/machine_info.h"
#include "profiler/machine_limits.h"
#include "profiler/operator_bench.h"
#include "profiler/run_collector.h"
#include "report/format.h"

namespace moelab::profiler {
namespace {

constexpr int64_t kAssumedL3Bytes = int64_t{32} << 20;
constexpr int64_t kMinCacheBytesOption = int64_t{1} << 20;
constexpr int64_t kMaxCacheBytesOption = int64_t{64} << 30;

std::mutex& ProfileMutex() {
  static std::mutex mutex;
  return mutex;
}

// Google Benchmark reads its flags (and BENCHMARK_* environment variables) here; our benchmarks
// set repetitions, minimum time and timing mode themselves.
void InitializeBenchmarkOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    static char name[] = "moelab-profile";
    static char* argv[] = {name, nullptr};
    int argc = 1;
    benchmark::Initialize(&argc, argv);
  });
}

// What the profile measures of `c` (the profile's "model" or "draft"): its name, shape and the
// weight formats the operators run on, with their stored bits per weight (scales included): what
// a fit of this profile prices (model/profiled_model.h).
model::ProfiledModel MeasuredModelOf(const executor::ExecutorConfig& c) {
  model::ProfiledModel m;
  m.name = c.name;
  m.family = c.family;
  model::ShapeOverrides& shape = m.shape;
  shape.layers = c.num_layers;
  shape.hidden = c.hidden_size;
  shape.heads = c.num_heads;
  shape.kv_heads = c.num_kv_heads;
  shape.head_dim = c.head_dim;
  shape.vocab = c.vocab_size;
  shape.max_positions = c.max_positions;
  if (c.is_moe()) {
    shape.experts = c.num_experts;
    shape.top_k = c.top_k;
    shape.intermediate = c.expert_intermediate_size;
    shape.shared_experts = c.num_shared_experts;
    if (c.num_shared_experts > 0) shape.shared_intermediate = c.shared_expert_intermediate_size;
    if (c.first_dense_layers > 0) shape.dense_intermediate = c.dense_intermediate_size;
  } else {
    shape.intermediate = c.dense_intermediate_size;
  }
  if (c.sliding_window > 0) m.sliding_window = c.sliding_window;
  m.expert_format = ToString(c.expert_format);
  m.expert_stored_bits = kernels::StoredBitsPerWeight(c.expert_format);
  m.attention_format = ToString(c.attention_format);
  m.attention_stored_bits = kernels::StoredBitsPerWeight(c.attention_format);
  return m;
}

int FamilyRank(OperatorFamily family) {
  const auto& all = AllOperatorFamilies();
  return static_cast<int>(std::find(all.begin(), all.end(), family) - all.begin());
}

struct Measured {
  GridPoint point;
  nlohmann::json sample;
};

// Runs groups of points through Google Benchmark and turns their timings into samples.
class ProfileRunner {
 public:
  ProfileRunner(const GridSpec& spec, const executor::ExecutorConfig& target,
                const executor::ExecutorConfig& draft, std::ostream* progress, int total)
      : spec_(spec),
        target_(target),
        draft_(draft),
        progress_(progress),
        total_(total),
        collector_() {}

  // One family's points on one device, measured across rounds (Prepare, then RunRound once per
  // round, then Finish).
  using Group = RoundPoints;

  // Names `points` and fixes each one's iteration count where the bench sets it (points that
  // flush caches between passes, draft_decode_warm's among them); Google Benchmark's
  // MinTime picks the others in every round.
  Group Prepare(OperatorBench& bench, const std::vector<GridPoint>& points) {
    Group group{points, {}, std::vector<int64_t>(points.size(), 0)};
    for (size_t i = 0; i < points.size(); ++i) {
      char prefix[16];
      std::snprintf(prefix, sizeof(prefix), "p%04d ", next_index_++);
      const std::string name = prefix + points[i].Label();
      group.names.push_back(name);
      labels_[name] = points[i].Label();
      try {
        group.iterations[i] = bench.Iterations(points[i]);
      } catch (const std::exception&) {
        // The point's own run fails the same way and is left out with a note.
      }
    }
    return group;
  }

  // One repetition of every point of `group` (RunBenchRound: after an untimed warm-up run).
  void RunRound(OperatorBench& bench, const Group& group) {
    RunBenchRound(bench, group, spec_.min_time_s, collector_);
    RoundDone(group);
  }

  // The samples of `group` from all its rounds (`bench`: the group's bench, for its time scale
  // and annotations).
  std::vector<Measured> Finish(OperatorBench& bench, const Group& group) {
    scale_ = bench.time_scale();
    for (const std::string& name : group.names) OnDone(name, collector_.Get(name));
    std::vector<Measured> measured;
    for (size_t i = 0; i < group.points.size(); ++i) {
      const GridPoint& p = group.points[i];
      const Timing t = collector_.Get(group.names[i]);
      if (t.failed) {
        notes_.push_back(p.Label() + ": failed, left out: " + t.error);
        continue;
      }
      const PointWork work = WorkOf(p, target_, draft_);
      nlohmann::json repetition_s = nlohmann::json::array();
      for (double s : t.repetition_s) repetition_s.push_back(s * scale_);
      nlohmann::json sample = {{"operator", ToString(p.family)},
                               {"device", p.device},
                               {"shape", ShapeOf(p, target_, draft_)},
                               {"tokens", p.tokens},
                               {"repetitions", t.repetitions},
                               {"iterations", t.iterations},
                               {"median_s", t.median_s * scale_},
                               {"mean_s", t.mean_s * scale_},
                               {"min_s", t.min_s * scale_},
                               {"max_s", t.max_s * scale_},
                               {"stddev_s", t.stddev_s * scale_},
                               {"repetition_s", repetition_s},
                               {"bytes", std::llround(work.bytes)},
                               {"flops", std::llround(work.flops)}};
      // A bench's own per-repetition quantities (state.counters): their median over the
      // repetitions of every round, and how many there were.
      for (const auto& [counter, values] : t.counters) {
        if (values.empty()) continue;
        sample[counter] = base::Median(values);
        sample[counter + "_repetitions"] = values.size();
      }
      bench.Annotate(p, sample);
      measured.push_back({p, std::move(sample)});
    }
    return measured;
  }

  // Each point's tokens and median seconds over the rounds run so far (failed points left out).
  std::vector<std::pair<int64_t, double>> TokensSecondsSoFar(const OperatorBench& bench,
                                                             const Group& group) const {
    std::vector<std::pair<int64_t, double>> curve;
    for (size_t i = 0; i < group.points.size(); ++i) {
      const Timing t = collector_.Get(group.names[i]);
      if (!t.failed) curve.push_back({group.points[i].tokens, t.median_s * bench.time_scale()});
    }
    return curve;
  }

  // A group that could not be prepared: its points count as done for the progress line.
  void Skip(const std::vector<GridPoint>& points, const std::string& why) {
    SkipCount(static_cast<int>(points.size()),
              ToString(points.front().family) + " " + points.front().device, "skipped: " + why);
  }
  // `count` points of the progress total that will not be measured (`what`: their family and
  // device), and why.
  void SkipCount(int count, const std::string& what, const std::string& why) {
    done_ += count;
    notes_.push_back(what + ": " + why);
    if (progress_)
      *progress_ << "[" << done_ << "/" << total_ << "] " << what << ": " << why << std::endl;
  }

  std::vector<std::string>& notes() { return notes_; }

 private:
  // A point's line comes only once all its group's rounds ran (minutes for a full grid's large
  // points), so each round says where the profile is and about how long the rest takes: the
  // seconds per point and round so far, times the point rounds left.
  void RoundDone(const Group& group) {
    point_rounds_done_ += static_cast<int64_t>(group.points.size());
    if (!progress_ || group.points.empty()) return;
    const double elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const int64_t planned = static_cast<int64_t>(total_) * spec_.repetitions;
    const double left_s = elapsed_s / static_cast<double>(point_rounds_done_) *
                          static_cast<double>(std::max<int64_t>(0, planned - point_rounds_done_));
    *progress_ << "[" << done_ << "/" << total_ << "] " << ToString(group.points.front().family)
               << " " << group.points.front().device << ": a round of " << group.points.size()
               << " points done, " << std::llround(elapsed_s) << " s so far, about "
               << std::llround(left_s) << " s left" << std::endl;
  }

  void OnDone(const std::string& name, const Timing& timing) {
    ++done_;
    if (!progress_) return;
    *progress_ << "[" << done_ << "/" << total_ << "] " << labels_[name] << ": ";
    if (timing.failed) {
      *progress_ << "failed: " << timing.error;
    } else {
      *progress_ << "median " << report::FormatSeconds(timing.median_s * scale_) << " ("
                 << timing.repetitions << " repetitions)";
    }
    *progress_ << std::endl;
  }

  const GridSpec& spec_;
  const executor::ExecutorConfig& target_;
  const executor::ExecutorConfig& draft_;
  std::ostream* progress_;
  int total_;
  int done_ = 0;
  int64_t point_rounds_done_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  int next_index_ = 0;
  double scale_ = 1.0;  // the running bench's time_scale()
  std::map<std::string, std::string> labels_;
  std::vector<std::string> notes_;
  CollectingReporter collector_;
};

}  // namespace

void CheckCacheBytesOption(int64_t cache_bytes) {
  if (cache_bytes < kMinCacheBytesOption || cache_bytes > kMaxCacheBytesOption) {
    throw base::Error(
        "--cache-bytes must be between 1 MiB and 64 GiB (the last-level cache "
        "weights are cycled past), got " +
        std::to_string(cache_bytes));
  }
}

void ProfileRequest::Validate() const {
  if (model.empty()) throw base::Error("profile: --model must name a preset or a file");
  if (threads < 0)
    throw base::Error("profile: --threads must be >= 1 (or 0 for the default), got " +
                      std::to_string(threads));
  base::CheckCount(threads, 0, base::kMaxThreads, "--threads",
                   "the pool starts one OS thread each, as moelab run's");
  if (grid) grid->Validate();
  if (cache_bytes) CheckCacheBytesOption(*cache_bytes);
  kernels::WeightFormatFromBits(expert_bits, "--expert-bits");
  kernels::WeightFormatFromBits(attention_bits, "--attention-bits");
}

namespace {

// The target and its draft as the executor runs them: the target in the weight formats asked for,
// the draft on the target's vocabulary unless its shape says otherwise.
struct ProfiledConfigs {
  executor::ExecutorConfig target, draft;
};

ProfiledConfigs ConfigsOf(const ProfileRequest& request, const model::PresetStore& presets) {
  ProfiledConfigs configs;
  executor::ExecutorConfig& target = configs.target;
  target = executor::ExecutorConfigFromSpec(presets.LoadModel(request.model), request.shape);
  target.expert_format = kernels::WeightFormatFromBits(request.expert_bits, "--expert-bits");
  target.attention_format =
      kernels::WeightFormatFromBits(request.attention_bits, "--attention-bits");
  model::ShapeOverrides draft_shape = request.draft_shape;
  if (!draft_shape.vocab) draft_shape.vocab = target.vocab_size;
  configs.draft = executor::ExecutorConfigFromSpec(presets.LoadModel(request.draft), draft_shape);
  return configs;
}

// What the grid needs of this machine -- its cache and the GPU to measure -- with the notes they
// call for, in the profile's order.
struct MachineSetup {
  int64_t l3_bytes = 0;     // reported (kAssumedL3Bytes when unknown)
  int64_t cache_bytes = 0;  // EffectiveCacheBytes(l3_bytes): what weights are cycled against
  // The DRAM bandwidth probe's buffer: 4 x the cache the request names, else 4 x the reported L3,
  // at least 256 MiB.
  int64_t dram_probe_bytes = 0;
  device::GpuInventory gpus;
  int gpu_index = -1;  // the GPU measured; -1: none
  std::vector<std::string> notes;
};

MachineSetup SetUpMachine(const ProfileRequest& request, const executor::ExecutorConfig& target) {
  MachineSetup m;
  m.l3_bytes = L3CacheBytes();
  if (m.l3_bytes <= 0) {
    m.l3_bytes = kAssumedL3Bytes;
    m.notes.push_back("L3 size unknown (no sysfs cache entry, no sysconf): " +
                      std::to_string(m.l3_bytes) + " bytes assumed");
  }
  m.cache_bytes = request.cache_bytes ? *request.cache_bytes : EffectiveCacheBytes(m.l3_bytes);
  m.dram_probe_bytes = std::max<int64_t>(
      4 * (request.cache_bytes ? *request.cache_bytes : m.l3_bytes), int64_t{256} << 20);
  if (request.cache_bytes) {
    m.notes.push_back("weights cycled and caches flushed against a " +
                      std::to_string(m.cache_bytes) +
                      "-byte cache (--cache-bytes), not the "
                      "reported L3 of " +
                      std::to_string(m.l3_bytes) + " bytes");
  } else if (m.cache_bytes > m.l3_bytes) {
    m.notes.push_back(
        "weights cycled and caches flushed against a " + std::to_string(m.cache_bytes) +
        "-byte cache, not the reported L3 of " + std::to_string(m.l3_bytes) +
        " bytes: a virtual machine's host cache can be larger than the L3 it reports");
  }
  m.gpus = device::DetectGpus();
  m.gpu_index = request.use_gpu && !m.gpus.devices.empty() ? m.gpus.devices.front().index : -1;
  if (!request.operators) {
    // No operator at all (profile --collectives --no-operators): nothing to say about the GPU's.
  } else if (m.gpus.devices.empty()) {
    m.notes.push_back("GPU operators not measured: " + m.gpus.why_none);
  } else if (!request.use_gpu) {
    m.notes.push_back("GPU operators not measured: disabled by the request");
  }
  if (!request.cpu_operators) {
    if (m.gpu_index < 0) {
      throw base::Error(
          "profile: only the GPU's operators were asked for, but none can be measured: " +
          (m.gpus.devices.empty() ? m.gpus.why_none : std::string("GPUs disabled")));
    }
    m.notes.push_back("CPU operators not measured: only the GPU's were asked for");
  }
  if (!target.is_moe())
    m.notes.push_back("the target '" + target.name +
                      "' is dense: expert_ffn and router not measured");
  return m;
}

// The grid's points split into families: runs of consecutive points of one operator and device.
std::vector<std::vector<GridPoint>> FamiliesOf(const std::vector<GridPoint>& grid) {
  std::vector<std::vector<GridPoint>> families;
  for (size_t begin = 0; begin < grid.size();) {
    size_t end = begin;
    while (end < grid.size() && grid[end].family == grid[begin].family &&
           grid[end].device == grid[begin].device)
      ++end;
    families.emplace_back(grid.begin() + static_cast<long>(begin),
                          grid.begin() + static_cast<long>(end));
    begin = end;
  }
  return families;
}

// The samples of every family's rounds, and which families were left out whole.
struct RoundsMeasured {
  std::vector<Measured> measured;
  std::vector<bool> skipped;       // by family
  nlohmann::json ridge = nullptr;  // the profile's grid.ridge
};

bool IsCpuExperts(const std::vector<GridPoint>& family) {
  return family.front().family == OperatorFamily::kExpertFfn && family.front().device == "cpu";
}

// The ridge point of this machine's CPU expert FFN and the points around it: placed from the
// expert family's first round, then measured in every round right after that family, on a bench
// built each round as the grid's are. Measured after the grid, back to back on one bench, they
// read 1.1-1.9x their grid neighbours (README.md, "Ridge points").
class RidgeRounds {
 public:
  RidgeRounds(const BenchEnvironment& env, int point_count, ProfileRunner& runner)
      : env_(env), point_count_(point_count), runner_(runner) {}

  // After the CPU expert family's round `round` (its points: `group`; `curve`: their tokens and
  // seconds so far, read in round 0 only).
  void AfterExpertRound(int round, int rounds, const std::vector<std::pair<int64_t, double>>& curve,
                        const ProfileRunner::Group& group, RoundsMeasured& result) {
    if (point_count_ <= 0 || given_up_) return;
    if (round == 0) Place(curve, group, result);
    if (points_.empty()) return;
    std::unique_ptr<OperatorBench> bench;
    try {
      bench = MakeOperatorBench(points_, env_);
    } catch (const std::exception& e) {
      GiveUp("could not be prepared for round " + std::to_string(round + 1) + ": " + e.what(),
             result);
      return;
    }
    if (round == 0) group_ = runner_.Prepare(*bench, points_);
    runner_.RunRound(*bench, *group_);
    if (round + 1 == rounds) {
      std::vector<Measured> more = runner_.Finish(*bench, *group_);
      result.measured.insert(result.measured.end(), more.begin(), more.end());
      points_.clear();
      done_ = true;
    }
  }

  // The CPU expert family was left out (in any round): so are the ridge points not yet finished.
  void ExpertsLeftOut(RoundsMeasured& result) {
    if (point_count_ > 0 && !given_up_ && !done_)
      GiveUp("the expert_ffn cpu family was left out", result);
  }

 private:
  void Place(const std::vector<std::pair<int64_t, double>>& curve,
             const ProfileRunner::Group& group, RoundsMeasured& result) {
    try {
      std::vector<int64_t> taken;
      for (const GridPoint& p : group.points) taken.push_back(p.tokens);
      const double r = EstimateRidgeTokens(curve);
      nlohmann::json tokens = nlohmann::json::array();
      for (int64_t t : RidgeTokens(r, point_count_, taken)) {
        points_.push_back(GridPoint{OperatorFamily::kExpertFfn, "cpu", t, 0, 0});
        tokens.push_back(t);
      }
      result.ridge = {{"tokens_per_expert", r}, {"points", tokens}};
      runner_.notes().push_back(
          "expert_ffn cpu: ridge point estimated at " + std::to_string(std::lround(r)) +
          " tokens per expert (fastest time at <= 8 tokens / time per token at the largest "
          "counts, from the first round); " +
          std::to_string(points_.size()) + " points added around it, measured in every round");
    } catch (const std::exception& e) {
      points_.clear();
      GiveUp(e.what(), result);
    }
  }

  // No ridge points in the profile: none placed, or not every round of them measured. The
  // progress counts them done (its total had them).
  void GiveUp(const std::string& why, RoundsMeasured& result) {
    given_up_ = true;
    result.ridge = nullptr;
    runner_.SkipCount(point_count_, "expert_ffn cpu", "no ridge points: " + why);
    points_.clear();
  }

  const BenchEnvironment& env_;
  int point_count_;
  ProfileRunner& runner_;
  std::vector<GridPoint> points_;  // placed and not finished
  std::optional<ProfileRunner::Group> group_;
  bool given_up_ = false;
  bool done_ = false;  // every round measured
};

// Rounds across the whole grid: round r measures every family's points once, then round r + 1
// again, so a point's repetitions are spread over the whole profile. A burst of load on a shared
// machine lasts seconds to minutes; with rounds inside one family (a few seconds) it had shifted
// whole families by 15-30 % between two quick profiles of the same machine. A family's bench (its
// weights, caches, files) is built for each round and released after it, so only one family's
// memory is held at a time. Keeping the benches between rounds saves their building (the first
// touch of buffers of 2 x the cache: 2.5-3 s per GiB on a paravirtualized VM) but was measured to
// scatter the other families' samples: on 2026-12-04 two quick profiles of each kind, alternated,
// on one 2-vCPU EPYC VM: the samples' (max - min) / median at p90 1.34 and 0.88 with the benches
// kept, 0.33 and 0.44 without, expert_ffn at 1 token 2.9 and 1.2 ms against 0.45 and 0.45
// (results/ci-times.md). The ridge points (RidgeRounds) follow the CPU expert family in every
// round. `after_round` (may be empty) runs after each round.
RoundsMeasured MeasureRounds(const std::vector<std::vector<GridPoint>>& families,
                             const BenchEnvironment& env, int rounds, int ridge_point_count,
                             ProfileRunner& runner,
                             const std::function<void(int round, int rounds)>& after_round) {
  RoundsMeasured result{{}, std::vector<bool>(families.size(), false)};
  RidgeRounds ridge(env, ridge_point_count, runner);
  std::vector<std::optional<ProfileRunner::Group>> prepared(families.size());
  for (int round = 0; round < rounds; ++round) {
    for (size_t f = 0; f < families.size(); ++f) {
      if (result.skipped[f]) continue;
      std::unique_ptr<OperatorBench> bench;
      try {
        bench = MakeOperatorBench(families[f], env);
      } catch (const std::exception& e) {
        // Prepared once before, a family that fails later (memory taken meanwhile) is left out
        // whole: its earlier rounds alone would not be the profile's repetitions.
        runner.Skip(families[f], round == 0 ? std::string(e.what())
                                            : "could not be prepared again for round " +
                                                  std::to_string(round + 1) + ": " + e.what());
        result.skipped[f] = true;
        if (IsCpuExperts(families[f])) ridge.ExpertsLeftOut(result);
        continue;
      }
      if (round == 0) {
        for (const std::string& note : bench->notes()) runner.notes().push_back(note);
        prepared[f] = runner.Prepare(*bench, families[f]);
      }
      runner.RunRound(*bench, *prepared[f]);
      if (round + 1 == rounds) {
        std::vector<Measured> family_measured = runner.Finish(*bench, *prepared[f]);
        result.measured.insert(result.measured.end(), family_measured.begin(),
                               family_measured.end());
      }
      if (IsCpuExperts(families[f])) {
        const std::vector<std::pair<int64_t, double>> curve =
            round == 0 ? runner.TokensSecondsSoFar(*bench, *prepared[f])
                       : std::vector<std::pair<int64_t, double>>{};
        bench.reset();  // one family's memory at a time
        ridge.AfterExpertRound(round, rounds, curve, *prepared[f], result);
      }
    }
    if (after_round) after_round(round + 1, rounds);
  }
  return result;
}

// The samples in the profile's order: CPU first, then by device, operator family and shape.
nlohmann::json SortedSamples(std::vector<Measured> measured) {
  std::stable_sort(measured.begin(), measured.end(), [](const Measured& a, const Measured& b) {
    const auto key = [](const GridPoint& p) {
      return std::make_tuple(p.device != "cpu", p.device, FamilyRank(p.family),
                             p.queries_per_sequence, p.context, p.bytes, p.tokens);
    };
    return key(a.point) < key(b.point);
  });
  nlohmann::json samples = nlohmann::json::array();
  for (Measured& m : measured) samples.push_back(std::move(m.sample));
  return samples;
}

// The profile's machine object: the machine, its load around the profile and its own limits
// (measured now, after the operators, so the probes' buffer never shares memory with the
// profiled weights). A machine busy at the start adds a note to `notes`.
nlohmann::json MachineObject(kernels::ThreadPool& pool, const MachineSetup& setup,
                             double load_at_start, bool quick, std::vector<std::string>& notes) {
  nlohmann::json machine = MachineJson(pool.size(), setup.l3_bytes, setup.gpus);
  // Other processes on the cores inflate and scatter the times; the load says how busy it was.
  machine["load_average_1m_start"] = load_at_start;
  machine["load_average_1m_end"] = LoadAverage1m();
  machine["limits"] =
      MeasureMachineLimits(pool, static_cast<size_t>(setup.dram_probe_bytes), quick ? 3 : 5);
  const double logical_cpus = machine["logical_cpus"].get<double>();
  if (load_at_start > 0.3 * logical_cpus) {
    char text[64];
    std::snprintf(text, sizeof(text), "%.2f on %d logical CPUs", load_at_start,
                  static_cast<int>(logical_cpus));
    notes.push_back(
        std::string("the machine was busy when the profile started (1-minute load average ") +
        text +
        "): other processes competed for the cores, so times are inflated and noisy; profile an "
        "idle "
        "machine for a clean result");
  }
  return machine;
}

}  // namespace

nlohmann::json RunProfile(const ProfileRequest& request, const model::PresetStore& presets) {
  const auto start = std::chrono::steady_clock::now();
  const double load_at_start = LoadAverage1m();
  request.Validate();
  const GridSpec spec =
      request.grid ? *request.grid : (request.quick ? GridSpec::Quick() : GridSpec::Full());
  spec.Validate();
  const ProfiledConfigs configs = ConfigsOf(request, presets);
  const executor::ExecutorConfig& target = configs.target;
  const executor::ExecutorConfig& draft = configs.draft;

  std::lock_guard<std::mutex> lock(ProfileMutex());
  InitializeBenchmarkOnce();
  kernels::ThreadPool pool(request.threads > 0 ? request.threads : kernels::DefaultThreadCount());
  const MachineSetup machine = SetUpMachine(request, target);
  const std::vector<GridPoint> grid =
      request.operators ? MakeProfileGrid(target, draft, spec, machine.cache_bytes,
                                          machine.gpu_index, request.cpu_operators)
                        : std::vector<GridPoint>{};
  bool has_cpu_experts = false;
  for (const GridPoint& p : grid)
    has_cpu_experts |= p.family == OperatorFamily::kExpertFfn && p.device == "cpu";
  const int total = static_cast<int>(grid.size()) + (has_cpu_experts ? spec.ridge_points : 0);

  BenchEnvironment env;
  env.target = &target;
  env.draft = &draft;
  env.pool = &pool;
  env.cache_bytes = machine.cache_bytes;
  env.spec = &spec;
  env.storage_dir = request.storage_dir;
  env.storage_direct_io = request.storage_direct_io;
  env.seed = request.seed;

  ProfileRunner runner(spec, target, draft, request.progress, total);
  const std::vector<std::vector<GridPoint>> families = FamiliesOf(grid);
  RoundsMeasured rounds = MeasureRounds(families, env, spec.repetitions, spec.ridge_points, runner,
                                        request.after_round);
  std::vector<std::string> notes = machine.notes;
  for (const std::string& note : runner.notes()) notes.push_back(note);

  nlohmann::json profile;
  profile["schema"] = kProfileSchema;
  profile["machine"] = MachineObject(pool, machine, load_at_start, request.quick, notes);
  profile["model"] = MeasuredModelOf(target).ToJson();
  profile["draft"] = MeasuredModelOf(draft).ToJson();
  profile["quick"] = request.quick;
  profile["grid"] = {
      {"repetitions", spec.repetitions},
      {"min_time_s", spec.min_time_s},
      {"points", total},
      {"ridge", std::move(rounds.ridge)},
      {"timing",
       "Google Benchmark; real time for CPU kernels and memcpy, manual time for attention "
       "(the executor's attention_s), storage_read (pread only) and GPU operators"}};
  profile["samples"] = SortedSamples(std::move(rounds.measured));
  profile["notes"] = notes;
  profile["wall_time_s"] =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return profile;
}

executor::ExecutorConfig ProfiledTargetConfig(const ProfileRequest& request,
                                              const model::PresetStore& presets) {
  request.Validate();
  return ConfigsOf(request, presets).target;
}

}  // namespace moelab::profiler
