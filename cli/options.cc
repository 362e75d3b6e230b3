#include "cli/options.h"

#include <cmath>
#include <iostream>
#include <memory>

#include "base/error.h"
#include "base/message_text.h"
#include "report/format.h"

namespace boost {

void validate(boost::any& value, const std::vector<std::string>& texts, uint64_t*, int) {
  namespace po = boost::program_options;
  po::validators::check_first_occurrence(value);
  const std::string& text = po::validators::get_single_string(texts);
  uint64_t number = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  // from_chars takes no sign, so "-1" and "+1" stop at once; overflow is an error too.
  if (text.empty() || error != std::errc() || end != text.data() + text.size())
    throw po::invalid_option_value(text);
  value = number;
}

void validate(boost::any& value, const std::vector<std::string>& texts, double*, int) {
  namespace po = boost::program_options;
  po::validators::check_first_occurrence(value);
  const std::string& text = po::validators::get_single_string(texts);
  try {
    value = moelab::base::ParseNumber(text, "");  // finite, the whole text
  } catch (const moelab::base::Error&) {
    throw po::invalid_option_value(text);  // Boost's message names the option as given
  }
}

}  // namespace boost

namespace moelab::cli {

namespace {

// An output path given as "" (an unset shell variable) wrote nothing and said nothing: --out
// printed to stdout instead, --trace-out was taken as not asked for.
void RefuseEmptyOutputPaths(const po::variables_map& values) {
  for (const char* name : {"out", "trace-out", "timeline-out", "timeline", "decisions-out",
                           "plot-out", "spec-out", "csv-out"}) {
    if (!values.count(name) || values[name].defaulted()) continue;
    const std::string* text = boost::any_cast<std::string>(&values[name].value());
    if (text && text->empty())
      throw base::Error(std::string("--") + name + " is empty: expected a file path");
  }
}

}  // namespace

bool ParseOptions(const std::string& usage, const po::options_description& options,
                  const std::vector<std::string>& args, po::variables_map& values,
                  const po::positional_options_description* positional) {
  po::options_description all(options);
  all.add_options()("help,h", "show this help");
  try {
    po::command_line_parser parser(args);
    parser.options(all);
    // Exact option names only: Boost's default guesses a unique prefix (--hard ran as --hardware,
    // --al as --alpha), so a script's abbreviation changed meaning or failed as soon as another
    // option shared its prefix, and a half-typed name was taken without a word.
    parser.style(po::command_line_style::default_style & ~po::command_line_style::allow_guessing);
    if (positional) {
      parser.positional(*positional);
    } else {
      parser.positional(po::positional_options_description());
    }
    po::store(parser.run(), values);
    if (values.count("help")) {
      std::cout << usage << "\n\n" << all << "\n";
      return false;
    }
    RefuseEmptyOutputPaths(values);
    po::notify(values);
  } catch (const po::error& e) {
    // Boost quotes the argument as given: escaped, as every message quoting input.
    throw base::Error(base::EscapeForMessage(e.what(), 200) + " (see --help)");
  }
  return true;
}

void AddDraftModelOptions(po::options_description& options, std::string* draft,
                          const std::string& help) {
  const auto given = std::make_shared<std::string>();
  const auto name = [draft, given](const char* option) {
    return po::value<std::string>()->value_name("D")->notifier(
        [draft, given, option](const std::string& text) {
          if (!given->empty()) {
            throw base::Error("--" + *given + " and --" + option +
                              ": the same option (the draft model); give it once");
          }
          *given = option;
          *draft = text;
        });
  };
  const std::string text = help + " (default " + *draft + ")";
  options.add_options()("draft", name("draft"), text.c_str())("draft-model", name("draft-model"),
                                                              "the same as --draft");
}

template <>
po::typed_value<double>* Into<double>(double* field) {
  return po::value<double>(field)->default_value(*field, report::ShortestText(*field));
}

po::typed_value<std::string>* NumberInto(double* field, const std::string& name) {
  return ParsedInto(field, report::ShortestText(*field),
                    [name](const std::string& text) { return base::ParseNumber(text, name); });
}

po::typed_value<std::string>* NumberInto(std::optional<double>* field, const std::string& name) {
  return ParsedIntoOptional(
      field, [name](const std::string& text) { return base::ParseNumber(text, name); });
}

std::vector<std::string> SplitNameList(const std::string& text, const std::string& name) {
  std::vector<std::string> names;
  size_t start = 0;
  while (start <= text.size() && !text.empty()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    names.push_back(text.substr(start, comma - start));
    if (names.back().empty())
      throw base::Error("--" + name + " " + text + ": empty item in the comma-separated list");
    start = comma + 1;
  }
  return names;
}

}  // namespace moelab::cli
