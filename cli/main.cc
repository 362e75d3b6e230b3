// moelab: parses the subcommand and hands over to the libraries; nothing else lives here.
#include <iostream>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/output.h"
#include "base/error.h"
#include "base/input_file.h"
#include "base/message_text.h"
#include "report/provenance.h"

namespace {

// Every command, or only those of one group ("fit": fit calibrate, fit latency, ...).
void PrintUsage(std::ostream& out, const std::string& group = "") {
  if (group.empty()) {
    out << "usage: moelab <command> [options]   (moelab <command> --help for its "
           "options)\n\ncommands:\n";
  } else {
    out << "usage: moelab " << group << " <subcommand> [options]   (moelab " << group
        << " <subcommand> --help for its options)\n\nsubcommands:\n";
  }
  for (const moelab::cli::Command& command : moelab::cli::AllCommands()) {
    if (!group.empty() && command.words.front() != group) continue;
    std::string words;
    for (const std::string& word : command.words) words += (words.empty() ? "" : " ") + word;
    out << "  " << words << std::string(words.size() < 14 ? 14 - words.size() : 1, ' ')
        << command.summary << "\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  moelab::cli::SetCommandLine(argc, argv);
  moelab::base::RefuseOutputsOverInputs();  // --out naming a file the command reads is refused
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    PrintUsage(args.empty() ? std::cerr : std::cout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version") {
    // The commit a record's provenance will carry (scripts/record.sh refuses a "-dirty" one).
    const nlohmann::json provenance = moelab::report::Provenance();
    std::cout << "moelab " << provenance["version"].get<std::string>() << " (git "
              << provenance["git_commit"].get<std::string>() << ", "
              << provenance["build"]["compiler"].get<std::string>() << ")\n";
    return 0;
  }
  // The longest registered word sequence that prefixes the arguments names the command.
  const moelab::cli::Command* chosen = nullptr;
  for (const moelab::cli::Command& command : moelab::cli::AllCommands()) {
    if (command.words.size() > args.size()) continue;
    if (!std::equal(command.words.begin(), command.words.end(), args.begin())) continue;
    if (chosen == nullptr || command.words.size() > chosen->words.size()) chosen = &command;
  }
  if (chosen == nullptr) {
    // A group's name alone, or with --help: its subcommands (status 2 when none was asked for).
    bool group = false;
    for (const moelab::cli::Command& command : moelab::cli::AllCommands())
      group |= command.words.size() > 1 && command.words.front() == args[0];
    const bool help = args.size() > 1 && (args[1] == "--help" || args[1] == "-h");
    if (group && (args.size() == 1 || help)) {
      PrintUsage(help ? std::cout : std::cerr, args[0]);
      return help ? 0 : 2;
    }
    std::cerr << "moelab: unknown command '" << args[0] << (args.size() > 1 ? " " + args[1] : "")
              << "'\n";
    PrintUsage(std::cerr);
    return 2;
  }
  try {
    return chosen->run(std::vector<std::string>(
        args.begin() + static_cast<long>(chosen->words.size()), args.end()));
  } catch (const moelab::base::Error& e) {
    std::cerr << "moelab: error: " << moelab::base::OneLineMessage(e.what()) << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "moelab: internal error: " << moelab::base::OneLineMessage(e.what()) << "\n";
    return 3;
  }
}
