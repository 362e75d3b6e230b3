// The tree's size rules (../shared/style.md, issue 43): outside tests/, no function over 150
// lines and no file over 800 lines. A function's length is the lines from its opening brace to its
// closing brace, both included, found by tests/repo/source_scan's brace scan.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/repo/source_scan.h"
#include "tests/support/test_paths.h"

namespace moelab::testing {
namespace {

namespace fs = std::filesystem;

constexpr int kMaxFunctionLines = 150;
constexpr int kMaxFileLines = 800;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Every C++/CUDA source of the tree outside tests/, build folders and hidden folders.
std::vector<fs::path> SourceFiles() {
  std::vector<fs::path> files;
  for (const fs::directory_entry& top : fs::directory_iterator(SourceDir())) {
    const std::string name = top.path().filename().string();
    if (!top.is_directory() || name == "tests" || name.rfind("build", 0) == 0 || name[0] == '.')
      continue;
    for (const fs::directory_entry& entry : fs::recursive_directory_iterator(top.path())) {
      const std::string extension = entry.path().extension().string();
      if (entry.is_regular_file() &&
          (extension == ".cc" || extension == ".h" || extension == ".cu" || extension == ".cuh"))
        files.push_back(entry.path());
    }
  }
  return files;
}

std::string Relative(const fs::path& path) { return path.lexically_relative(SourceDir()).string(); }

int LineCount(const std::string& text) {
  int lines = 0;
  for (const char c : text) lines += c == '\n';
  return lines + (!text.empty() && text.back() != '\n');
}

TEST(SourceScan, FindsFunctionsPastBracesInLiteralsCommentsAndInitializers) {
  const std::string source =
      "#include <string>\n"                                         // 1
      "#define OPEN {\n"                                            // 2
      "namespace a::b {\n"                                          // 3
      "enum class Kind { kOne, kTwo };\n"                           // 4
      "const int kTable[] = {1, 2'000, 3};\n"                       // 5
      "// a comment with { a brace\n"                               // 6
      "struct Holder {\n"                                           // 7
      "  Holder(int x) : x_{x}, y_(x) {\n"                          // 8
      "    const char* s = \"}\";\n"                                // 9
      "  }\n"                                                       // 10
      "  int Get() const { return x_ + '{'; }\n"                    // 11
      "  int x_{0};\n"                                              // 12
      "  int y_ = 0;\n"                                             // 13
      "};\n"                                                        // 14
      "/* a block comment }\n"                                      // 15
      "   over two lines { */\n"                                    // 16
      "template <typename T>\n"                                     // 17
      "int Run(T options = {}, int n = 3) {\n"                      // 18
      "  auto raw = R\"x(a } b { c)x\";\n"                          // 19
      "  auto f = [](int k) { if (k) { return 1; } return 0; };\n"  // 20
      "  return f(n);\n"                                            // 21
      "}\n"                                                         // 22
      "bool Holder2::operator()(int k) const {\n"                   // 23
      "  return k > 0;\n"                                           // 24
      "}\n"                                                         // 25
      "}  // namespace a::b\n"                                      // 26
      "extern \"C\" {\n"                                            // 27
      "int c_function(void) { return 0; }\n"                        // 28
      "}\n";                                                        // 29
  const SourceScan scan = ScanFunctions(source);
  ASSERT_EQ(scan.problem, "");
  ASSERT_EQ(scan.functions.size(), 5u);
  const std::vector<std::tuple<std::string, int, int>> expected = {{"Holder", 8, 10},
                                                                   {"Get", 11, 11},
                                                                   {"Run", 18, 22},
                                                                   {"Holder2::operator()", 23, 25},
                                                                   {"c_function", 28, 28}};
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(scan.functions[i].name, std::get<0>(expected[i]));
    EXPECT_EQ(scan.functions[i].first_line, std::get<1>(expected[i])) << std::get<0>(expected[i]);
    EXPECT_EQ(scan.functions[i].last_line, std::get<2>(expected[i])) << std::get<0>(expected[i]);
  }
  EXPECT_EQ(scan.functions[2].lines(), 5);
}

TEST(SourceScan, SaysWhenTheBracesDoNotBalance) {
  EXPECT_NE(ScanFunctions("void f() {\n  if (x) {\n}\n").problem, "");
  EXPECT_NE(ScanFunctions("namespace a {\n}\n}\n").problem, "");
}

TEST(SourceScan, MeasuresALongFunction) {
  std::string source = "namespace n {\nvoid Long(int x) {\n";
  for (int i = 0; i < 149; ++i) source += "  x += 1;\n";
  source += "}\n}\n";
  const SourceScan scan = ScanFunctions(source);
  ASSERT_EQ(scan.functions.size(), 1u);
  EXPECT_EQ(scan.functions[0].name, "Long");
  EXPECT_EQ(scan.functions[0].lines(), 151);  // over the bound: the tree test would name it
}

TEST(Size, NoFunctionOver150LinesOutsideTests) {
  const std::vector<fs::path> files = SourceFiles();
  ASSERT_GT(files.size(), 100u) << "the checkout was not found at " << SourceDir();
  for (const fs::path& file : files) {
    const SourceScan scan = ScanFunctions(ReadFile(file));
    EXPECT_EQ(scan.problem, "") << Relative(file) << ": the brace scan failed";
    for (const FunctionSpan& function : scan.functions) {
      EXPECT_LE(function.lines(), kMaxFunctionLines)
          << Relative(file) << ":" << function.first_line << ": " << function.name << " is "
          << function.lines() << " lines (at most " << kMaxFunctionLines
          << " outside tests/: split it into steps)";
    }
  }
}

TEST(Size, NoFileOver800LinesOutsideTests) {
  for (const fs::path& file : SourceFiles()) {
    const int lines = LineCount(ReadFile(file));
    EXPECT_LE(lines, kMaxFileLines) << Relative(file) << " is " << lines << " lines (at most "
                                    << kMaxFileLines << " outside tests/: split it)";
  }
}

}  // namespace
}  // namespace moelab::testing
