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

// Per-family registration functions, called only by AllCommands().
void RegisterModelCommands(std::vector<Command>& commands);
void RegisterHardwareCommands(std::vector<Command>& commands);
void RegisterPlanCommands(std::vector<Command>& commands);
void RegisterDeviceCommands(std::vector<Command>& commands);
void RegisterRunCommands(std::vector<Command>& commands);
void RegisterProfileCommands(std::vector<Command>& commands);
void RegisterFitCommands(std::vector<Command>& commands);
void RegisterSimSdCommands(std::vector<Command>& commands);
void RegisterSimOffloadCommands(std::vector<Command>& commands);
void RegisterPlanOffloadCommands(std::vector<Command>& commands);
void RegisterValidateCommands(std::vector<Command>& commands);

}  // namespace moelab::cli
