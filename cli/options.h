#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

namespace moelab::cli {

namespace po = boost::program_options;

// Parses `args` against `options` (no positional arguments unless `positional` is given). Prints
// help and returns false when --help was asked for; throws moelab::Error on bad options.
bool ParseOptions(const std::string& usage, const po::options_description& options,
                  const std::vector<std::string>& args, po::variables_map& values,
                  const po::positional_options_description* positional = nullptr);

// "1,2,4" or "1-8" or "1-64:x2" (geometric) or a mix: "1,2,4-6". Values must be >= minimum.
std::vector<int64_t> ParseIntList(const std::string& text, const std::string& option,
                                  int64_t minimum);

// A finite number, whole text.
double ParseNumber(const std::string& text, const std::string& option);

// "0.6,0.7,0.8" or "0.5:0.9:0.1" (start:stop:step, stop included within rounding).
std::vector<double> ParseNumberList(const std::string& text, const std::string& option);

}  // namespace moelab::cli
