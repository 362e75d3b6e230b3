#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/options.h"

namespace moelab::cli {

// A command's option table built once per thread and parsed again for every call: `moelab
// sweep` calls a prediction command once per point, and building Boost's table (plan sd: 42
// options, each name split through a string stream, each default printed) was a quarter of a
// cheap point's work. The table is bound to one State (the fields its options write); each call
// starts from the State as declaring left it, so a call sees exactly what a fresh table would
// give it -- provided every option's notifier and store target lies in State: one that captures
// anything else (AddDraftModelOptions' "given once" check keeps a shared flag) would carry it
// from call to call, so a command declaring such an option cannot use this as it stands. Not
// copyable or movable: the table points into `state_`.
template <typename State>
class ReusedOptions {
 public:
  using Declare = void (*)(po::options_description& options, State& state);
  // The command's work once the options are parsed into `state` (and `values`).
  using Finish = std::optional<Printed> (*)(const po::variables_map& values, State& state);

  ReusedOptions(const char* caption, const char* usage, Declare declare, Finish finish)
      : options_(caption), usage_(usage), finish_(finish) {
    declare(options_, state_);
    initial_ = state_;
  }
  ReusedOptions(const ReusedOptions&) = delete;
  ReusedOptions& operator=(const ReusedOptions&) = delete;

  std::optional<Printed> Run(const std::vector<std::string>& args) {
    state_ = initial_;
    po::variables_map values;
    if (!ParseOptions(usage_, options_, args, values)) return std::nullopt;
    return finish_(values, state_);
  }

 private:
  po::options_description options_;
  std::string usage_;
  Finish finish_;
  State state_, initial_;
};

}  // namespace moelab::cli
