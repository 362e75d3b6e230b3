#include "cli/command.h"

#include <filesystem>
#include <iostream>

#include "base/atomic_file.h"
#include "report/row_set.h"

namespace moelab::cli {

const std::vector<Command>& AllCommands() {
  // clang-format off
  static const std::vector<Command> commands{
      {{"model", "show"}, "a model's spec and derived quantities", ModelShow},
      {{"model", "list"}, "the model presets", ModelList},
      {{"hw", "list"}, "the hardware presets", HardwareList},
      {{"hw", "show"}, "one hardware preset or file", HardwareShow},
      {{"hw", "from-profile"}, "this machine for sim offload: the CPU computes, experts on storage", HardwareFromProfile},
      {{"plan", "sd"}, "speculative-decoding speedup per batch and gamma (analytic)", PlanSd},
      {{"plan", "hardware"}, "the smallest listed hardware that meets a TPOT/TTFT target", PlanHardware},
      {{"run"}, "run a workload on the executor (CPU, or a CUDA GPU) and measure it", Run},
      {{"profile"}, "measure this machine's operator speeds for a model (moelab.profile/1)", Profile},
      {{"fit", "calibrate"}, "fit the analytic roofline's efficiencies to a profile (the calibrated-roofline cost source)", FitCalibrateCommand},
      {{"fit", "latency"}, "fit per-operator latency curves to a profile (roofline, linear, constant)", FitLatencyCommand},
      {{"fit", "sd"}, "fit the MoESD speedup model to measured SD speedups", FitSdCommand},
      {{"fit", "predict"}, "speedup predicted by an sd fit", FitPredictCommand},
      {{"sim", "sd"}, "speculative-decoding sweep over batch x gamma x alpha", SimSd},
      {{"sim", "offload"}, "discrete-event simulation of expert offloading policies (TTFT, TPOT, hit rate, timeline)", SimOffload},
      {{"sim", "serve"}, "discrete-event serving simulation: continuous batching under an arrival process (TTFT, TPOT, throughput in moelab.serving/1)", SimServe},
      {{"plan", "capacity"}, "per hardware the fewest replicas and the settings meeting p99 TTFT and TPOT objectives at a rate, cheapest first", PlanCapacity},
      {{"sim", "ep"}, "a MoE step laid out EP x TP on a node, with and without EPS-MoE's expert pipeline", SimEp},
      {{"plan", "offload"}, "each offload policy's TPOT across accelerator memory sizes", PlanOffload},
      {{"validate"}, "profile, fit, predict held-out cases, run them, and report the errors", Validate},
      {{"serve"}, "serve the executor behind an OpenAI-compatible HTTP API (continuous batching)", Serve},
      {{"sweep"}, "a grid over one prediction command's options, one row per point; across MPI ranks or as Slurm array shards", Sweep},
      {{"sweep", "merge"}, "the shard files of a sweep (--shard I/N) into its one output", SweepMerge},
      {{"devices"}, "the GPUs this machine has (CUDA builds)", Devices},
      {{"loadgen"}, "open-loop load against an OpenAI-compatible server: TTFT, TPOT, ITL, E2E, throughput, goodput (moelab.serving/1)", Loadgen},
  };
  // clang-format on
  return commands;
}

int EmitPrinted(const std::optional<Printed>& printed) {
  if (!printed) return 0;
  std::vector<std::pair<std::filesystem::path, std::string>> files;
  for (const auto& [path, text] : printed->files) files.emplace_back(path, text);
  if (!printed->out.empty()) files.emplace_back(printed->out, printed->text);
  base::WriteFilesAtomically(files);
  if (printed->out.empty()) std::cout << printed->text;
  return 0;
}

}  // namespace moelab::cli
