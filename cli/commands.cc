#include "cli/command.h"

namespace moelab::cli {

const std::vector<Command>& AllCommands() {
  static const std::vector<Command> commands = [] {
    std::vector<Command> list;
    RegisterModelCommands(list);
    RegisterHardwareCommands(list);
    RegisterPlanCommands(list);
    RegisterRunCommands(list);
    RegisterProfileCommands(list);
    RegisterFitCommands(list);
    RegisterSimSdCommands(list);
    RegisterSimOffloadCommands(list);
    RegisterPlanOffloadCommands(list);
    RegisterValidateCommands(list);
    RegisterDeviceCommands(list);
    return list;
  }();
  return commands;
}

}  // namespace moelab::cli
