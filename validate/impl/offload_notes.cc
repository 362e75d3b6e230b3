#include "validate/impl/offload_notes.h"

#include <cstdint>

#include "executor/offload/offload_runtime.h"
#include "executor/transformer.h"
#include "fit/storage_tier_hardware.h"
#include "model/hardware_spec.h"
#include "model/parameter_count.h"
#include "profiler/expert_store_probes.h"
#include "report/format.h"
#include "validate/validation_metrics.h"

namespace moelab::validate::impl {
namespace {

// The executor's reader alone and beside computation, pair by pair: the bandwidths priced.
std::string ReaderNote(const OffloadState& st, const StorageRates& storage) {
  std::vector<double> ratios;
  for (size_t k = 0; k < st.reader_alone.size(); ++k)
    ratios.push_back(st.reader_beside_compute[k] / st.reader_alone[k]);
  const auto mb = [](double bytes_per_s) {
    return std::to_string(static_cast<int64_t>(bytes_per_s / 1e6));
  };
  return "offload: storage read bandwidth, the executor's reader (" +
         std::to_string(executor::offload::OffloadOptions{}.reader_threads) +
         " reads in flight sharing it; O_DIRECT, checksum and copy) over one pass of the store, "
         "alone and beside the LM head's matrix-vector product, in " +
         std::to_string(st.reader_alone.size()) +
         " interleaved pairs (after every case, before every round): alone " +
         mb(storage.alone_bytes_per_s) + " MB/s (quartiles " + mb(Quantile(st.reader_alone, 0.25)) +
         "-" + mb(Quantile(st.reader_alone, 0.75)) + "), beside computation " +
         mb(storage.beside_compute_bytes_per_s) + " MB/s (" +
         mb(Quantile(st.reader_beside_compute, 0.25)) + "-" +
         mb(Quantile(st.reader_beside_compute, 0.75)) + "), x" +
         report::FormatNumber(Median(ratios), 3) + " pair by pair (quartiles " +
         report::FormatNumber(Quantile(ratios, 0.25), 3) + "-" +
         report::FormatNumber(Quantile(ratios, 0.75), 3) +
         "); the simulator reads at the second while the host computes, at the first otherwise";
}

// The computation's rate beside the reader, and the simulator's rate from it.
std::string ComputeRateNote(const OffloadState& st, const fit::Profile& profile,
                            const StorageRates& storage) {
  const double measured_compute_rate = storage.measured_compute_rate;
  if (!(measured_compute_rate > 0)) {
    return "offload: the computation's rate beside the reader was not measured (every probe pass "
           "ended before two of its steps did); the simulator's computation does not slow while "
           "reads are in flight";
  }
  const model::HardwareSpec hardware = fit::StorageTierHardwareFromProfile(
      profile, 1.0, storage.alone_bytes_per_s, executor::offload::OffloadOptions{}.reader_threads);
  const double bytes =
      static_cast<double>(model::ExpertBytes(executor::SpecFromExecutorConfig(st.target)));
  const double link_bytes_per_s = hardware.host_link->host_to_device_bandwidth_bytes_per_s;
  const double copy_s = bytes / link_bytes_per_s;
  const double read_s = bytes / storage.beside_compute_bytes_per_s;
  return "offload: the computation beside the reader (the LM head's matrix-vector product during "
         "the probes' passes beside computation, against the same steps alone right after): x" +
         report::FormatNumber(measured_compute_rate, 3) + " of its rate alone (quartiles " +
         report::FormatNumber(Quantile(st.compute_rate_beside_reads, 0.25), 3) + "-" +
         report::FormatNumber(Quantile(st.compute_rate_beside_reads, 0.75), 3) + ", " +
         std::to_string(st.compute_rate_beside_reads.size()) +
         " passes); past the checksum and copy the simulator charges to the cores (" +
         report::FormatNumber(copy_s * 1e3, 2) + " ms a read, one read every " +
         report::FormatNumber(read_s * 1e3, 2) + " ms), the simulator computes at x" +
         report::FormatNumber(CoupledComputeRate(storage, bytes, link_bytes_per_s), 3) +
         " of its rate alone while reads are in flight (host.compute_rate_while_storage_reads)";
}

// The plain probe (profiler::ProbeStorageReadBandwidth): reported, not used.
std::string PlainProbeNote(const OffloadState& st, const OffloadPricing& pricing) {
  const StorageRates& storage = pricing.storage;
  const double plain_probe_bytes_per_s = pricing.plain_probe_bytes_per_s;
  std::string rounds;
  for (double probe : st.probes)
    rounds += (rounds.empty() ? "" : ", ") + std::to_string(static_cast<int64_t>(probe / 1e6));
  return "offload: plain probe (two threads each calling ExpertStore::Read in a loop: O_DIRECT, "
         "checksum and copy; at least " +
         report::ShortestText(profiler::kStoreReadProbeSeconds) +
         " s before and after every round, median of " + std::to_string(st.probes.size()) +
         "): " + std::to_string(static_cast<int64_t>(plain_probe_bytes_per_s / 1e6)) +
         " MB/s (in order: " + rounds + " MB/s), x" +
         report::FormatNumber(storage.alone_bytes_per_s / plain_probe_bytes_per_s, 3) +
         " for the reader alone; reported, not used";
}

// The bare disk by reads in flight (profiler::ProbeBarePreads): reported.
std::string BarePreadNote(const OffloadState& st) {
  const double one = Median(st.bare_one), two = Median(st.bare_two);
  return "offload: the disk by reads in flight (bare O_DIRECT preads of expert blocks, no checksum "
         "or copy, " +
         report::ShortestText(profiler::kBarePreadSeconds) +
         " s each before every round, median of " + std::to_string(st.bare_one.size()) +
         "): 1 in flight " + std::to_string(static_cast<int64_t>(one / 1e6)) +
         " MB/s, 2 in flight " + std::to_string(static_cast<int64_t>(two / 1e6)) + " MB/s (x" +
         report::FormatNumber(two / one, 3) +
         "); the simulator shares the reader's bandwidth between the reads in flight (x1)";
}

// The median of `errors` as a percentage, "-" when there is none.
std::string MedianPercent(const std::vector<double>& errors) {
  return errors.empty() ? std::string("-") : report::FormatNumber(100 * Median(errors), 1) + " %";
}

// Priced from the profile alone.
std::string ProfilePricingNote(const AlternativeErrors& errors, const fit::Profile& profile) {
  // What a user who profiles and then runs `moelab hw from-profile` + `sim offload` gets: reads
  // priced from the profile alone, no probe of this validation's.
  const model::HardwareSpec profiled = fit::StorageTierHardwareFromProfile(
      profile, 1.0, 0, executor::offload::OffloadOptions{}.reader_threads);
  const model::HostSpec& host = *profiled.host;
  const std::string rates =
      host.storage_read_bandwidth_beside_compute_bytes_per_s > 0
          ? "the executor's reader as the profile's expert_reader samples timed it: " +
                std::to_string(
                    static_cast<int64_t>(host.storage_read_bandwidth_bytes_per_s / 1e6)) +
                " MB/s alone, " +
                std::to_string(static_cast<int64_t>(
                    host.storage_read_bandwidth_beside_compute_bytes_per_s / 1e6)) +
                " MB/s beside computation"
          : std::to_string(static_cast<int64_t>(host.storage_read_bandwidth_bytes_per_s / 1e6)) +
                " MB/s (" + ReadPricingSource(profiled) + ")";
  return "offload: priced from the profile alone (" + rates +
         "; offload_run.predicted_from_profile), the median abs error is " +
         MedianPercent(errors.profile[0]) + " for decode and " + MedianPercent(errors.profile[1]) +
         " for prefill";
}

}  // namespace

std::vector<std::string> ProbeNotes(const OffloadState& st, const fit::Profile& profile,
                                    const OffloadPricing& pricing) {
  return {ReaderNote(st, pricing.storage), ComputeRateNote(st, profile, pricing.storage),
          PlainProbeNote(st, pricing), BarePreadNote(st)};
}

std::vector<std::string> AlternativePricingNotes(const AlternativeErrors& errors,
                                                 const fit::Profile& profile) {
  std::vector<std::string> notes;
  if (!errors.neighbour_rates.empty()) {
    notes.push_back(
        "offload: the reads of the " + std::to_string(kNeighbourReach) +
        " cases of the same workload before and after each case got " +
        std::to_string(static_cast<int64_t>(Quantile(errors.neighbour_rates, 0.0) / 1e6)) + "-" +
        std::to_string(static_cast<int64_t>(Quantile(errors.neighbour_rates, 1.0) / 1e6)) +
        " MB/s in the same rounds (their blocks over the time a read was in flight; the median "
        "over rounds; offload_run.neighbour_read_bytes_per_s); priced with that instead of the "
        "reader's probes, the median abs error would be " +
        MedianPercent(errors.neighbour[0]) + " for decode (" + MedianPercent(errors.probe[0]) +
        " with the probes) and " + MedianPercent(errors.neighbour[1]) + " for prefill (" +
        MedianPercent(errors.probe[1]) + ")");
  }
  if (!errors.uncoupled[0].empty() || !errors.uncoupled[1].empty()) {
    notes.push_back(
        "offload: with the computation at its full rate while reads are in flight (as before "
        "2026-12-01), the median abs error would be " +
        MedianPercent(errors.uncoupled[0]) + " for decode (" + MedianPercent(errors.probe[0]) +
        ") and " + MedianPercent(errors.uncoupled[1]) + " for prefill (" +
        MedianPercent(errors.probe[1]) + ")");
  }
  notes.push_back(
      "offload: priced as before 2026-11-29 (the plain probe's bandwidth, whatever the host "
      "does), the median abs error would be " +
      MedianPercent(errors.plain[0]) + " for decode and " + MedianPercent(errors.plain[1]) +
      " for prefill");
  notes.push_back(ProfilePricingNote(errors, profile));
  return notes;
}

std::string BaselineNote(const ValidationCase& c, const JudgedBaseline& judged) {
  const double predicted = judged.predicted;
  const Measured& measured = judged.measured;
  return "offload baseline, " + WorkloadLabel(c) + ": every routed expert in RAM (" +
         std::to_string(c.expert_slots) + ", static-split, no read) " + QuantityOf(c.kind) +
         " measured " + report::FormatNumber(measured.value, 5) + " s (" +
         report::FormatNumber(measured.min, 5) + ".." + report::FormatNumber(measured.max, 5) +
         ", " + std::to_string(measured.runs) + (measured.runs == 1 ? " run" : " runs") +
         "), predicted " + report::FormatNumber(predicted, 5) + " s, signed error " +
         report::FormatNumber(100 * (predicted / measured.value - 1), 1) +
         " %: the computation the cases of this workload add their reads to";
}

}  // namespace moelab::validate::impl
