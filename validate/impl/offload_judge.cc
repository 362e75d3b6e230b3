#include "validate/impl/offload_judge.h"

#include <cctype>
#include <filesystem>
#include <map>
#include <utility>

#include "base/atomic_file.h"
#include "base/error.h"
#include "executor/transformer.h"
#include "kernels/cpu_features.h"
#include "sim/offload_simulator.h"
#include "validate/impl/cost_sources.h"
#include "validate/offload_neighbour_reads.h"

namespace moelab::validate::impl {
namespace {

// Beside the probes: the bandwidth the disk delivered to the reads of the cases run next to each
// case, under the same workload, in the same rounds (the runs' own measurement: a read's blocks
// over the time one was in flight). Reported, not used for the prediction: over six
// validations it priced prefill better than the plain probe in all six (median abs error
// 2.1-5.2 % against 5.3-9.9 %: reads beside a prefill's GEMMs, which share the two cores with
// the reader's checksum and copy, got 9-20 % less than the idle probe) and decode worse in four
// (a case priced by its neighbours' pattern misses its own): the term that led to is the
// reads' rate beside computation (StorageRates), which a single bandwidth cannot carry.
struct NeighbourReads {
  std::vector<std::vector<std::vector<RunReads>>> reads;  // [case][round]: its runs' reads
  std::vector<int> workload;                              // [case]: its workload's group
};

NeighbourReads NeighbourReadsOf(const OffloadState& st) {
  NeighbourReads n;
  n.reads.resize(st.cases.size());
  for (size_t j = 0; j < st.cases.size(); ++j) {
    const size_t per_round = static_cast<size_t>(RunsPerRound(st.cases[j].kind));
    for (size_t k = 0; k < st.runs[j].size(); ++k) {
      const executor::offload::OffloadStats& stats = st.runs[j][k].stats;
      if (n.reads[j].size() <= k / per_round) n.reads[j].resize(k / per_round + 1);
      if (!stats.copy_busy_s) continue;
      n.reads[j][k / per_round].push_back(
          {static_cast<double>(stats.copies_done) * stats.copy_block_bytes, *stats.copy_busy_s});
    }
  }
  n.workload.resize(st.cases.size());
  std::map<std::string, int> workloads;
  for (size_t j = 0; j < st.cases.size(); ++j)
    n.workload[j] =
        workloads.emplace(WorkloadLabel(st.cases[j]), static_cast<int>(workloads.size()))
            .first->second;
  return n;
}

// --timelines: the case's last executor run and its simulation (priced with the probes), named
// after the case ("offload-on-demand-24-experts-B-1.executor.json", ".sim.json"; a workload's
// all-in-RAM baseline "baseline-offload-static-split-32-experts-B-1...").
std::filesystem::path TimelinesDir(const OffloadState& st) {
  return st.request.work_dir / "timelines";
}

void WriteTimelines(const OffloadState& st, int threads, const ValidationCase& c,
                    const std::vector<OffloadRun>& runs, const sim::SimResult& simulated,
                    const std::string& prefix) {
  std::string name = c.Label();
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '-';
  }
  name = prefix + name;
  const std::shared_ptr<executor::ExecutionTimeline>& executed = runs.back().timeline;
  if (!executed) throw base::Error("validate --timelines: " + name + " has no timeline (a bug)");
  base::WriteFileAtomically(
      TimelinesDir(st) / (name + ".executor.json"),
      executed->TraceJson(kernels::CpuModelName() + " (" + std::to_string(threads) + " threads)"));
  base::WriteFileAtomically(TimelinesDir(st) / (name + ".sim.json"), simulated.TimelineJson());
}

// Where a case's run went, predicted and measured: the whole run's reads and time, the
// simulator's busy resources, the runs' stalls, and a decode's steps.
CaseResult::OffloadDetail OffloadDetailOf(const sim::SimResult& simulated,
                                          const std::vector<OffloadRun>& runs, bool prefill) {
  std::vector<double> totals, stalls;
  for (const OffloadRun& run : runs) {
    totals.push_back(run.total_s);
    stalls.push_back(run.stats.stall_s);
  }
  CaseResult::OffloadDetail detail;
  detail.predicted_reads = simulated.demand_fetches + simulated.transient_fetches +
                           simulated.prefetches + simulated.cpu_runs;
  detail.measured_reads = runs.front().stats.reads;
  detail.predicted_total_s = simulated.total_s;
  detail.measured_total_s = Median(totals);
  detail.predicted_compute_busy_s =
      simulated.busy_s[static_cast<int>(sim::Resource::kAcceleratorCompute)];
  detail.predicted_storage_busy_s = simulated.busy_s[static_cast<int>(sim::Resource::kStorageRead)];
  detail.predicted_link_busy_s = simulated.busy_s[static_cast<int>(sim::Resource::kHostToDevice)];
  detail.measured_stall_s = Median(stalls);
  if (!prefill) {
    std::vector<std::vector<double>> steps_per_run;
    for (const OffloadRun& run : runs) steps_per_run.push_back(run.decode_steps_s);
    if (const std::optional<std::vector<double>> medians = StepMedians(steps_per_run)) {
      detail.measured_decode_steps_s = *medians;
      for (size_t p = 1; p < simulated.pass_end_s.size(); ++p)
        detail.predicted_decode_steps_s.push_back(simulated.pass_end_s[p] -
                                                  simulated.pass_end_s[p - 1]);
    }
  }
  return detail;
}

// One case judged: its result priced with the reader's probes, and how far the alternatives'
// predictions land from the same measurement.
struct CaseJudgement {
  CaseResult result;
  std::optional<double> neighbour_read_bytes_per_s;
  std::optional<double> neighbour_error;  // priced at the neighbours' bandwidth
  double plain_error = 0;                 // at the plain probe's bandwidth
  std::optional<double> uncoupled_error;  // the computation at its full rate beside reads
  double profile_error = 0;               // reads priced from the profile alone
};

CaseJudgement JudgeCase(const OffloadState& st, size_t i, const fit::Profile& profile,
                        const OffloadPricing& pricing, const NeighbourReads& neighbour_reads) {
  const ValidationCase& c = st.cases[i];
  Recorded replay = st.recorded.at(WorkloadLabel(c));
  replay.signals = st.signals[i];
  const bool prefill = c.kind == CaseKind::kOffloadPrefill;
  // The case priced at `storage` (its quantity), the simulator otherwise as judged.
  const auto predict_at = [&](const StorageRates& storage) {
    return PredictedQuantity(
        Simulate(pricing.bench, c, replay, profile, storage, pricing.costs, pricing.threads),
        prefill);
  };
  CaseJudgement j;
  CaseResult& r = j.result;
  r.spec = c;
  r.cost_source = pricing.costs->name();
  r.routing = "trace:" + replay.file;
  const sim::SimResult simulated = Simulate(pricing.bench, c, replay, profile, pricing.storage,
                                            pricing.costs, pricing.threads, st.request.timelines);
  if (st.request.timelines) WriteTimelines(st, pricing.threads, c, st.runs[i], simulated, "");
  r.predicted = PredictedQuantity(simulated, prefill);
  j.neighbour_read_bytes_per_s =
      NeighbourReadBytesPerS(neighbour_reads.reads, neighbour_reads.workload, i, kNeighbourReach);
  std::optional<double> predicted_with_neighbours;
  if (j.neighbour_read_bytes_per_s)
    predicted_with_neighbours = predict_at({*j.neighbour_read_bytes_per_s, 0});
  const Measured measured = MeasuredOf(c, st.runs[i]);
  j.plain_error = AbsError(predict_at({pricing.plain_probe_bytes_per_s, 0}), measured.value);
  if (pricing.storage.measured_compute_rate > 0) {
    j.uncoupled_error = AbsError(predict_at({pricing.storage.alone_bytes_per_s,
                                             pricing.storage.beside_compute_bytes_per_s, 0}),
                                 measured.value);
  }
  const double predicted_from_profile = predict_at({});
  j.profile_error = AbsError(predicted_from_profile, measured.value);
  r.measured = measured.value;
  r.measured_min = measured.min;
  r.measured_max = measured.max;
  for (const OffloadRun& run : st.runs[i]) r.measured_runs.push_back(run.value);
  r.repeats = measured.runs;
  r.offload = OffloadDetailOf(simulated, st.runs[i], prefill);
  r.offload->neighbour_read_bytes_per_s = j.neighbour_read_bytes_per_s;
  r.offload->predicted_with_neighbours = predicted_with_neighbours;
  r.offload->predicted_from_profile = predicted_from_profile;
  r.abs_error = AbsError(r.predicted, r.measured);
  if (predicted_with_neighbours)
    j.neighbour_error = AbsError(*predicted_with_neighbours, r.measured);
  return j;
}

}  // namespace

OffloadPricing PricingOf(const OffloadState& st, const fit::LatencyFit& fit) {
  OffloadPricing pricing;
  pricing.bench = st.MakeBench();
  pricing.costs = FittedCostSource(fit, executor::SpecFromExecutorConfig(st.target), "cpu");
  pricing.threads = static_cast<int>(st.pool.size());
  // The executor's reader, alone and beside computation (the pairs of ProbeReaderPass): the
  // simulator's read bandwidth while the host computes and while it does not.
  if (st.reader_alone.empty()) throw base::Error("validate offload: no reader probe ran (a bug)");
  const double measured_compute_rate =
      st.compute_rate_beside_reads.empty() ? 0.0 : Median(st.compute_rate_beside_reads);
  pricing.storage = {Median(st.reader_alone), Median(st.reader_beside_compute),
                     measured_compute_rate};
  pricing.plain_probe_bytes_per_s = Median(st.probes);
  return pricing;
}

JudgedCases JudgeCases(const OffloadState& st, const fit::Profile& profile,
                       const OffloadPricing& pricing) {
  const NeighbourReads neighbour_reads = NeighbourReadsOf(st);
  if (st.request.timelines) std::filesystem::create_directories(TimelinesDir(st));
  JudgedCases judged;
  AlternativeErrors& e = judged.errors;
  for (size_t i = 0; i < st.cases.size(); ++i) {
    const CaseJudgement j = JudgeCase(st, i, profile, pricing, neighbour_reads);
    const bool prefill = st.cases[i].kind == CaseKind::kOffloadPrefill;
    if (j.neighbour_read_bytes_per_s) e.neighbour_rates.push_back(*j.neighbour_read_bytes_per_s);
    e.plain[prefill].push_back(j.plain_error);
    if (j.uncoupled_error) e.uncoupled[prefill].push_back(*j.uncoupled_error);
    e.profile[prefill].push_back(j.profile_error);
    e.probe[prefill].push_back(j.result.abs_error);
    if (j.neighbour_error) e.neighbour[prefill].push_back(*j.neighbour_error);
    judged.results.push_back(j.result);
  }
  return judged;
}

JudgedBaseline JudgeBaseline(const OffloadState& st, size_t index, const fit::Profile& profile,
                             const OffloadPricing& pricing) {
  const ValidationCase& c = st.baselines[index];
  const sim::SimResult simulated =
      Simulate(pricing.bench, c, st.recorded.at(WorkloadLabel(c)), profile, pricing.storage,
               pricing.costs, pricing.threads, st.request.timelines);
  if (st.request.timelines)
    WriteTimelines(st, pricing.threads, c, st.baseline_runs[index], simulated, "baseline-");
  return {PredictedQuantity(simulated, c.kind == CaseKind::kOffloadPrefill),
          MeasuredOf(c, st.baseline_runs[index])};
}

}  // namespace moelab::validate::impl
