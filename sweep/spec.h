#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace moelab::sweep {

// The most points one spec may expand to (docs/limits.md): a million points of `plan sd` is hours
// on one core and a few GiB of rows; past it, split the grid into several specs.
inline constexpr int64_t kMaxSweepPoints = 1'000'000;

// A sweep spec (`moelab.sweep_spec/1`, docs/sweep.md): one prediction command, options fixed for
// every point, and a grid of option -> list of values whose cartesian product is the points, in
// the spec's order with the last grid option changing fastest. Option values are strings, numbers
// or booleans, given to the command as `--name value` (true: the bare flag; false: left out).
struct SweepSpec {
  std::string origin;   // the spec's file, for messages
  std::string command;  // "plan sd", ...
  std::vector<std::pair<std::string, nlohmann::ordered_json>> options;
  std::vector<std::pair<std::string, std::vector<nlohmann::ordered_json>>> grid;
  nlohmann::ordered_json document;  // the spec as read (key order kept)
  std::string hash;                 // 16 hex digits over the document's compact text

  int64_t PointCount() const;
  // The grid value index of each grid option at `point` (last option fastest).
  std::vector<size_t> ValueIndices(int64_t point) const;
  // The command's arguments at `point`: the fixed options, then the grid's, as `--name value`.
  std::vector<std::string> PointArguments(int64_t point) const;
  // "point 5 (batch=4, gamma=2)", for messages.
  std::string PointLabel(int64_t point) const;
  // The point's grid values as given in the spec: {"batch": 4, "gamma": 2}.
  nlohmann::ordered_json PointValues(int64_t point) const;
};

// Parses and checks a spec: schema, `command` one of `commands`, `options` an object of scalars,
// `grid` a non-empty object of non-empty lists of scalars, no option in both, options that write
// files or pick the output format (`reserved`) refused, at most kMaxSweepPoints points. Errors
// name `origin` and the field.
SweepSpec ParseSweepSpec(const std::string& text, const std::string& origin,
                         const std::vector<std::string>& commands,
                         const std::vector<std::string>& reserved);
SweepSpec LoadSweepSpec(const std::string& path, const std::vector<std::string>& commands,
                        const std::vector<std::string>& reserved);

// An option value as the command line gives it: strings as they are, numbers in their shortest
// round-trip text ("0.7", "16").
std::string OptionText(const nlohmann::ordered_json& value);

}  // namespace moelab::sweep
