#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "base/number_lists.h"  // ParseNumber, ParseIntList, ParseNumberList: option values

namespace moelab::cli {

namespace po = boost::program_options;

// Parses `args` against `options` (no positional arguments unless `positional` is given). Prints
// help and returns false when --help was asked for; throws moelab::Error on bad options.
bool ParseOptions(const std::string& usage, const po::options_description& options,
                  const std::vector<std::string>& args, po::variables_map& values,
                  const po::positional_options_description* positional = nullptr);

}  // namespace moelab::cli
