#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace moelab::cli {

// A subcommand: "model show", "plan sd", ... `run` receives the arguments after the command's
// words and returns the process exit status; it throws moelab::Error for bad input.
struct Command {
  std::vector<std::string> words;
  std::string summary;
  std::function<int(const std::vector<std::string>& args)> run;
};

// What a prediction command prints and where it writes it (--out; empty: stdout). The sweepable
// commands are each a function from arguments to this (nullopt: --help was printed), so `moelab
// sweep` runs a point through the very parser and library call the command runs.
struct Printed {
  std::string text;
  std::string out;
  // The command's other output files (--trace-out, --timeline, ...): path and content, written
  // with `out` as one group (base::WriteFilesAtomically), so a failure leaves none of them.
  std::vector<std::pair<std::string, std::string>> files;
};
// Writes a Printed (its files and `out` together; `text` to stdout when `out` is empty, after the
// files) and returns the exit status (0; --help: 0).
int EmitPrinted(const std::optional<Printed>& printed);

// Every command, registered in one place (commands.cc).
const std::vector<Command>& AllCommands();

// The commands, each defined in its family's file (model_command.cc, ...): `args` are the
// arguments after the command's words.
int ModelShow(const std::vector<std::string>& args);
int ModelList(const std::vector<std::string>& args);
int HardwareList(const std::vector<std::string>& args);
int HardwareShow(const std::vector<std::string>& args);
int HardwareFromProfile(const std::vector<std::string>& args);
int PlanSd(const std::vector<std::string>& args);
int PlanHardware(const std::vector<std::string>& args);
int Run(const std::vector<std::string>& args);
int Profile(const std::vector<std::string>& args);
int FitCalibrateCommand(const std::vector<std::string>& args);
int FitLatencyCommand(const std::vector<std::string>& args);
int FitSdCommand(const std::vector<std::string>& args);
int FitPredictCommand(const std::vector<std::string>& args);
int SimSd(const std::vector<std::string>& args);
int SimOffload(const std::vector<std::string>& args);
int SimEp(const std::vector<std::string>& args);
int SimServe(const std::vector<std::string>& args);
int PlanCapacity(const std::vector<std::string>& args);
int PlanOffload(const std::vector<std::string>& args);
int Validate(const std::vector<std::string>& args);
int Devices(const std::vector<std::string>& args);
int Loadgen(const std::vector<std::string>& args);
int Serve(const std::vector<std::string>& args);
int Sweep(const std::vector<std::string>& args);
int SweepMerge(const std::vector<std::string>& args);

// The prediction commands `moelab sweep` runs per point (sweep_command.cc's table).
std::optional<Printed> PlanSdPrinted(const std::vector<std::string>& args);
std::optional<Printed> PlanHardwarePrinted(const std::vector<std::string>& args);
std::optional<Printed> PlanOffloadPrinted(const std::vector<std::string>& args);
std::optional<Printed> PlanCapacityPrinted(const std::vector<std::string>& args);
std::optional<Printed> SimSdPrinted(const std::vector<std::string>& args);
std::optional<Printed> SimOffloadPrinted(const std::vector<std::string>& args);
std::optional<Printed> SimEpPrinted(const std::vector<std::string>& args);
std::optional<Printed> SimServePrinted(const std::vector<std::string>& args);
std::optional<Printed> FitPredictPrinted(const std::vector<std::string>& args);

}  // namespace moelab::cli
