#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace moelab::base {

// Option values as numbers and lists, the one grammar every command's lists use. Errors name the
// option ("--batch '0,2': ...") and what was expected.

// "1,2,4" or "1-8" or "1-64:x2" (geometric) or a mix: "1,2,4-6". Values must be >= minimum and
// each listed once (every value is a row or a point; "4,2,4" or "1-8,4" is refused).
std::vector<int64_t> ParseIntList(const std::string& text, const std::string& option,
                                  int64_t minimum);

// One whole number in [minimum, maximum], whole text: "--OPTION 'TEXT': expected a whole number
// in [MIN, MAX]" otherwise (`also` names another accepted word, e.g. "auto", in the message).
int64_t ParseWholeNumber(const std::string& text, const std::string& option, int64_t minimum,
                         int64_t maximum, const std::string& also = "");

// A finite number, whole text.
double ParseNumber(const std::string& text, const std::string& option);

// "0.6,0.7,0.8" or "0.5:0.9:0.1" (start:stop:step, stop included within rounding); a value listed
// twice ("0.8,0.80") is refused.
std::vector<double> ParseNumberList(const std::string& text, const std::string& option);

}  // namespace moelab::base
