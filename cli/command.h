#pragma once

#include <functional>
#include <string>
#include <vector>

namespace moelab::cli {

// A subcommand: "model show", "plan sd", ... `run` receives the arguments after the command's
// words and returns the process exit status; it throws moelab::Error for bad input.
struct Command {
  std::vector<std::string> words;
  std::string summary;
  std::function<int(const std::vector<std::string>& args)> run;
};

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

}  // namespace moelab::cli
