#pragma once

#include <string>
#include <vector>

namespace moelab::testing {

// A function body found in C++/CUDA source text: its name as written before the parameter list
// (qualified: `Class::Method`), the 1-based lines of its opening and closing braces, and its length
// in lines (both braces included).
struct FunctionSpan {
  std::string name;
  int first_line = 0;
  int last_line = 0;
  int lines() const { return last_line - first_line + 1; }
};

// What ScanFunctions found: the function bodies, and why the scan gave up (empty when it did not:
// braces that do not balance once comments, strings and preprocessor lines are left out).
struct SourceScan {
  std::vector<FunctionSpan> functions;
  std::string problem;
};

// The source with comments, string and character literals (raw strings too) and preprocessor lines
// replaced by spaces, newlines kept, so the brace depth and line numbers are the code's.
std::string CodeOnly(const std::string& source);

// The function bodies of a source file by brace depth: a `{` outside every function whose
// declaration since the last `;`, `{` or `}` holds a `(` opens a function (lambdas and local
// classes inside count as their function's lines); namespaces, `extern "C"`, classes and structs
// are entered (their member functions count on their own); enums, initializers and a
// constructor's member-initializer braces are not functions. Good enough for this tree's style,
// not a C++ parser: a macro that expands to braces would confuse it, and the scan says so when the
// braces do not balance.
SourceScan ScanFunctions(const std::string& source);

}  // namespace moelab::testing
