#include "tests/repo/source_scan.h"

#include <algorithm>
#include <cctype>
#include <regex>

namespace moelab::testing {
namespace {

bool IsIdentifierChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

// Blanks source[from, to) except newlines.
void Blank(std::string& text, size_t from, size_t to) {
  for (size_t i = from; i < to && i < text.size(); ++i)
    if (text[i] != '\n') text[i] = ' ';
}

// The end (one past) of the quoted literal opening at `open` (a " or '), escapes honoured.
size_t QuotedEnd(const std::string& text, size_t open) {
  const char quote = text[open];
  for (size_t i = open + 1; i < text.size(); ++i) {
    if (text[i] == '\\') {
      ++i;
    } else if (text[i] == quote || text[i] == '\n') {
      return i + 1;  // an unterminated literal ends at its line, as the compiler would complain
    }
  }
  return text.size();
}

// Whether the " at `quote` opens a raw string: R (or u8R, uR, UR, LR) right before it, not the
// tail of a longer identifier.
bool OpensRawString(const std::string& text, size_t quote) {
  if (quote == 0 || text[quote - 1] != 'R') return false;
  size_t start = quote - 1;
  while (start > 0 && IsIdentifierChar(text[start - 1])) --start;
  const std::string prefix = text.substr(start, quote - start);
  return prefix == "R" || prefix == "u8R" || prefix == "uR" || prefix == "UR" || prefix == "LR";
}

size_t RawStringEnd(const std::string& text, size_t quote) {
  const size_t paren = text.find('(', quote);
  if (paren == std::string::npos) return text.size();
  std::string closing(1, ')');  // )delimiter" (appended: GCC 12 misreads ")" + string, -Wrestrict)
  closing.append(text, quote + 1, paren - quote - 1);
  closing += '"';
  const size_t end = text.find(closing, paren);
  return end == std::string::npos ? text.size() : end + closing.size();
}

// A preprocessor line's end (at its newline), backslash continuations followed.
size_t PreprocessorEnd(const std::string& text, size_t hash) {
  size_t i = hash;
  while (i < text.size()) {
    const size_t newline = text.find('\n', i);
    if (newline == std::string::npos) return text.size();
    size_t last = newline;
    while (last > i && (text[last - 1] == ' ' || text[last - 1] == '\r')) --last;
    if (last > i && text[last - 1] == '\\') {
      i = newline + 1;
    } else {
      return newline;
    }
  }
  return text.size();
}

std::string Trimmed(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  const size_t end = text.find_last_not_of(" \t\r\n");
  return text.substr(begin, end - begin + 1);
}

// The declaration with leading `template <...>` and `[[...]]` parts removed.
std::string WithoutTemplateHead(std::string head) {
  for (bool changed = true; changed;) {
    changed = false;
    head = Trimmed(head);
    if (head.rfind("template", 0) == 0 && head.find('<') != std::string::npos &&
        Trimmed(head.substr(8, head.find('<') - 8)).empty()) {
      int depth = 0;
      for (size_t i = head.find('<'); i < head.size(); ++i) {
        depth += head[i] == '<' ? 1 : head[i] == '>' ? -1 : 0;
        if (depth == 0) {
          head = head.substr(i + 1);
          changed = true;
          break;
        }
      }
    } else if (head.rfind("[[", 0) == 0 && head.find("]]") != std::string::npos) {
      head = head.substr(head.find("]]") + 2);
      changed = true;
    }
  }
  return head;
}

std::vector<std::string> Words(const std::string& text, size_t count) {
  std::vector<std::string> words;
  std::string word;
  for (const char c : text + " ") {
    if (IsIdentifierChar(c)) {
      word += c;
    } else {
      if (!word.empty()) words.push_back(word);
      word.clear();
      if (words.size() == count || !(c == ' ' || c == '\t' || c == '\n' || c == '\r')) break;
    }
  }
  return words;
}

// What a `{` opens, from the declaration text before it (since the last `;`, `{` or `}`).
enum class BraceKind {
  kScope,         // namespace, extern "C", class, struct, union: its members are scanned
  kFunction,      // a function (or a lambda at namespace scope): one span
  kBlock,         // an enum or an initializer: skipped
  kInDeclaration  // a default argument or a member initializer: the declaration goes on after it
};

BraceKind Classify(const std::string& declaration) {
  const std::string head = WithoutTemplateHead(declaration);
  const auto open = std::count(head.begin(), head.end(), '(');
  const auto close = std::count(head.begin(), head.end(), ')');
  if (open > close) return BraceKind::kInDeclaration;  // f(Options o = {}) or f({1, 2})
  const std::vector<std::string> words = Words(head, 2);
  const std::string first = words.empty() ? "" : words[0];
  const std::string second = words.size() < 2 ? "" : words[1];
  if (first == "namespace" || (first == "inline" && second == "namespace") ||
      (first == "extern" && open == 0))
    return BraceKind::kScope;
  if (first == "class" || first == "struct" || first == "union") return BraceKind::kScope;
  if (first == "enum" || open == 0 || head.empty() || head.back() == '=') return BraceKind::kBlock;
  // A constructor's member initializer in braces, `: a_(x), b_{y}`: after `) :` the text ends in
  // the member's name (or a type's `>`), where a body would follow `)` or a qualifier.
  static const std::regex initializer_list(R"(\)\s*:[^:])");
  const std::string last_word = [&] {
    size_t start = head.size();
    while (start > 0 && IsIdentifierChar(head[start - 1])) --start;
    return head.substr(start);
  }();
  if (std::regex_search(head, initializer_list) &&
      (IsIdentifierChar(head.back()) || head.back() == '>') && last_word != "const" &&
      last_word != "noexcept" && last_word != "override" && last_word != "final" &&
      last_word != "mutable")
    return BraceKind::kInDeclaration;
  return BraceKind::kFunction;
}

// The qualified name that ends right before head[end] (`ns::Class<T>::Method`), or "".
std::string NameBefore(const std::string& head, size_t end) {
  while (end > 0 && std::isspace(static_cast<unsigned char>(head[end - 1]))) --end;
  size_t start = end;
  while (start > 0) {
    const char c = head[start - 1];
    if (IsIdentifierChar(c) || c == ':' || c == '~') {
      --start;
    } else if (c == '>') {  // template arguments: Into<double>
      int depth = 0;
      size_t i = start;
      do {
        --i;
        depth += head[i] == '>' ? 1 : head[i] == '<' ? -1 : 0;
      } while (i > 0 && depth > 0);
      if (depth != 0) break;
      start = i;
    } else {
      break;
    }
  }
  return Trimmed(head.substr(start, end - start));
}

// The function's name as declared: the qualified identifier before its parameter list
// (`operator==` and `operator()` included, `__attribute__((...))` and the like passed over); a
// lambda at namespace scope is named by its variable.
std::string FunctionName(const std::string& declaration) {
  const std::string head = WithoutTemplateHead(declaration);
  size_t op = head.find("operator");  // the keyword, not part of a longer name
  while (op != std::string::npos && ((op > 0 && IsIdentifierChar(head[op - 1])) ||
                                     (op + 8 < head.size() && IsIdentifierChar(head[op + 8]))))
    op = head.find("operator", op + 8);
  for (size_t paren = head.find('('); paren != std::string::npos;) {
    if (op != std::string::npos && op < paren) {
      paren = head.find('(', head.compare(op + 8, 2, "()") == 0 ? op + 10 : op + 8);
      size_t start = op;  // Class::operator==, without the return type before it
      while (start > 0 && (IsIdentifierChar(head[start - 1]) || head[start - 1] == ':')) --start;
      return paren == std::string::npos ? "(unnamed)" : Trimmed(head.substr(start, paren - start));
    }
    const std::string name = NameBefore(head, paren);
    if (name != "__attribute__" && name != "alignas" && name != "__launch_bounds__" &&
        name != "__declspec")
      return !name.empty() ? name : "lambda " + Trimmed(head.substr(0, head.find('=')));
    int depth = 0;  // past the attribute's arguments
    for (; paren < head.size(); ++paren) {
      depth += head[paren] == '(' ? 1 : head[paren] == ')' ? -1 : 0;
      if (depth == 0) break;
    }
    paren = head.find('(', paren);
  }
  return "(unnamed)";
}

}  // namespace

std::string CodeOnly(const std::string& source) {
  std::string code = source;
  bool line_start = true;
  for (size_t i = 0; i < code.size();) {
    const char c = code[i];
    size_t end = i;
    if (line_start && c == '#') {
      end = PreprocessorEnd(code, i);
    } else if (c == '/' && i + 1 < code.size() && code[i + 1] == '/') {
      end = code.find('\n', i);
      if (end == std::string::npos) end = code.size();
    } else if (c == '/' && i + 1 < code.size() && code[i + 1] == '*') {
      end = code.find("*/", i + 2);
      end = end == std::string::npos ? code.size() : end + 2;
    } else if (c == '"') {
      end = OpensRawString(code, i) ? RawStringEnd(code, i) : QuotedEnd(code, i);
    } else if (c == '\'' && !(i > 0 && IsIdentifierChar(code[i - 1]))) {
      end = QuotedEnd(code, i);  // after a digit or letter it is a digit separator: 1'000
    }
    if (end > i) {
      Blank(code, i, end);
      i = end;
      continue;
    }
    if (c == '\n') {
      line_start = true;
    } else if (c != ' ' && c != '\t' && c != '\r') {
      line_start = false;
    }
    ++i;
  }
  return code;
}

SourceScan ScanFunctions(const std::string& source) {
  const std::string code = CodeOnly(source);
  std::vector<size_t> newlines;
  for (size_t i = 0; i < code.size(); ++i)
    if (code[i] == '\n') newlines.push_back(i);
  const auto line_of = [&](size_t pos) {
    return static_cast<int>(std::upper_bound(newlines.begin(), newlines.end(), pos) -
                            newlines.begin()) +
           1;
  };
  const auto matching_close = [&](size_t open) {
    int depth = 0;
    for (size_t i = open; i < code.size(); ++i) {
      depth += code[i] == '{' ? 1 : code[i] == '}' ? -1 : 0;
      if (depth == 0) return i;
    }
    return std::string::npos;
  };
  SourceScan scan;
  int scopes = 0;
  std::string declaration;
  for (size_t i = 0; i < code.size(); ++i) {
    const char c = code[i];
    if (c == ';') {
      declaration.clear();
    } else if (c == '}') {
      if (scopes == 0) {
        scan.problem = "a } at line " + std::to_string(line_of(i)) + " closes nothing";
        return scan;
      }
      --scopes;
      declaration.clear();
    } else if (c != '{') {
      declaration += c;
    } else {
      const BraceKind kind = Classify(declaration);
      if (kind == BraceKind::kScope) {
        ++scopes;
        declaration.clear();
        continue;
      }
      const size_t close = matching_close(i);
      if (close == std::string::npos) {
        scan.problem = "the { at line " + std::to_string(line_of(i)) + " is never closed";
        return scan;
      }
      if (kind == BraceKind::kFunction)
        scan.functions.push_back({FunctionName(declaration), line_of(i), line_of(close)});
      if (kind == BraceKind::kInDeclaration) {
        declaration += "{}";
      } else {
        declaration.clear();
      }
      i = close;
    }
  }
  if (scopes != 0)
    scan.problem = std::to_string(scopes) + " namespace or class braces never closed";
  return scan;
}

}  // namespace moelab::testing
