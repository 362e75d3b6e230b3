#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "base/number_lists.h"

namespace moelab::cli {

namespace po = boost::program_options;

// Parses `args` against `options` (no positional arguments unless `positional` is given). Prints
// help and returns false when --help was asked for; throws moelab::Error on bad options.
bool ParseOptions(const std::string& usage, const po::options_description& options,
                  const std::vector<std::string>& args, po::variables_map& values,
                  const po::positional_options_description* positional = nullptr);

// Numbers and lists ("1,2,4", "1-8", "1-256:x2", "0.5:0.9:0.1"): base/number_lists.h.
using moelab::ParseIntList;
using moelab::ParseNumber;
using moelab::ParseNumberList;

}  // namespace moelab::cli
