#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "base/number_lists.h"  // ParseNumber, ParseIntList, ParseNumberList: option values

// Unsigned options (the seeds): Boost reads "-1" into a uint64_t as 2^64-1. This overload, found
// through boost::any's namespace and a better match than Boost's own (int, not long), takes only
// whole decimal numbers within uint64_t; anything else is Boost's "the argument ('-1') for option
// '--seed' is invalid", naming the option as given.
namespace boost {
void validate(boost::any& value, const std::vector<std::string>& texts, uint64_t*, int);
// Double options: finite numbers only (Boost reads "inf" and "nan"), refused the same way.
void validate(boost::any& value, const std::vector<std::string>& texts, double*, int);
}  // namespace boost

namespace moelab::cli {

namespace po = boost::program_options;

// Parses `args` against `options` (no positional arguments unless `positional` is given). Prints
// help and returns false when --help was asked for; throws moelab::Error on bad options.
bool ParseOptions(const std::string& usage, const po::options_description& options,
                  const std::vector<std::string>& args, po::variables_map& values,
                  const po::positional_options_description* positional = nullptr);

// Options bound to the typed request they fill: po::notify (in ParseOptions) stores each value, so
// an option is declared once, next to its field, and the field's initial value is the default.
template <typename T>
po::typed_value<T>* Into(T* field) {
  return po::value<T>(field)->default_value(*field);
}

// A double's default as --help prints it: the shortest text that reads back (0.8, not Boost's
// 0.80000000000000004).
template <>
po::typed_value<double>* Into<double>(double* field);

// An option given as text and parsed into `*field` by `parse` (strict parsers that name the option
// in their errors); `shown_default` is what --help prints and what `parse` sees when not given.
template <typename T, typename Parse>
po::typed_value<std::string>* ParsedInto(T* field, const std::string& shown_default, Parse parse) {
  return po::value<std::string>()
      ->default_value(shown_default)
      ->notifier([field, parse](const std::string& text) { *field = parse(text); });
}

// As ParsedInto, for an optional field: set only when the option is given.
template <typename T, typename Parse>
po::typed_value<std::string>* ParsedIntoOptional(std::optional<T>* field, Parse parse) {
  return po::value<std::string>()->notifier(
      [field, parse](const std::string& text) { *field = parse(text); });
}

// A number (base::ParseNumber, errors name --`name`) into `*field`, default: its value.
po::typed_value<std::string>* NumberInto(double* field, const std::string& name);
po::typed_value<std::string>* NumberInto(std::optional<double>* field, const std::string& name);

// The draft model under two exact names: --draft, as run, sim sd, fit sd and validate name it, and
// --draft-model, as serve, sim serve and plan capacity named it first. Options are never guessed
// from a prefix (ParseOptions), so --draft had been refused there; both at once is refused too.
// The field's initial value is the default, shown in `help`.
void AddDraftModelOptions(po::options_description& options, std::string* draft,
                          const std::string& help);

// A comma-separated list of names, empty items refused.
std::vector<std::string> SplitNameList(const std::string& text, const std::string& name);

}  // namespace moelab::cli
