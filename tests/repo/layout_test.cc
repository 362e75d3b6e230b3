// The README's Layout table against the code: for every library folder, the folders its sources
// include must be exactly those the table says it may depend on, so the table stays true as the
// code moves (a dependency added without the table, or one the table keeps after the code dropped
// it, fails here).
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/test_paths.h"

namespace moelab {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A code folder: a top-level folder with a CMakeLists.txt, apart from the test and build helpers.
bool IsCodeFolder(const fs::path& dir) {
  const std::string name = dir.filename().string();
  return fs::is_directory(dir) && fs::exists(dir / "CMakeLists.txt") && name != "tests" &&
         name != "cmake" && name.rfind("build", 0) != 0;
}

std::set<std::string> CodeFolders() {
  std::set<std::string> folders;
  for (const fs::directory_entry& entry : fs::directory_iterator(testing::SourceDir()))
    if (IsCodeFolder(entry.path())) folders.insert(entry.path().filename().string());
  return folders;
}

// The Layout table's rows: folder -> the folders named in its "may depend on" cell (a file named
// there, `kernels/bf16.h`, counts as its folder). Rows whose cell names no folder of ours and is
// not "nothing of ours" (cli/: everything; tests/: the libraries; data folders) map to nullopt-like
// absence: they are left out.
std::map<std::string, std::set<std::string>> DeclaredDependencies(
    const std::set<std::string>& code_folders) {
  const std::string readme = ReadFile(testing::SourceDir() / "README.md");
  const size_t layout = readme.find("## Layout");
  EXPECT_NE(layout, std::string::npos) << "README.md has no '## Layout' section";
  std::map<std::string, std::set<std::string>> declared;
  std::istringstream lines(readme.substr(layout));
  const std::regex row(R"(^\| `([a-z_]+)/` \|.*\| ([^|]*) \|$)");
  const std::regex named_folder("`([a-z_]+)/");
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("## ", 0) == 0 && line != "## Layout") break;
    std::smatch match;
    if (!std::regex_match(line, match, row) || !code_folders.count(match[1].str())) continue;
    const std::string cell = match[2].str();
    std::set<std::string> folders;
    for (std::sregex_iterator it(cell.begin(), cell.end(), named_folder), end; it != end; ++it)
      folders.insert((*it)[1].str());
    if (folders.empty() && cell.find("nothing of ours") != 0) continue;  // "everything; ..."
    folders.erase("base");
    declared[match[1].str()] = folders;
  }
  return declared;
}

// The other code folders whose headers a folder's sources include ("folder/...").
std::set<std::string> IncludedFolders(const std::string& folder,
                                      const std::set<std::string>& code_folders) {
  std::set<std::string> included;
  const std::regex include_line(R"re(#include "([a-z_]+)/)re");
  for (const fs::directory_entry& entry :
       fs::recursive_directory_iterator(testing::SourceDir() / folder)) {
    const std::string extension = entry.path().extension().string();
    if (!entry.is_regular_file() ||
        (extension != ".cc" && extension != ".h" && extension != ".cu" && extension != ".cuh"))
      continue;
    const std::string text = ReadFile(entry.path());
    for (std::sregex_iterator it(text.begin(), text.end(), include_line), end; it != end; ++it) {
      const std::string other = (*it)[1].str();
      // base/ (errors, JSON fields, atomic files) is everyone's: the table says so once.
      if (other != folder && other != "base" && code_folders.count(other)) included.insert(other);
    }
  }
  return included;
}

std::string Joined(const std::set<std::string>& folders) {
  std::string text;
  for (const std::string& folder : folders) text += (text.empty() ? "" : ", ") + folder + "/";
  return text.empty() ? "(none)" : text;
}

TEST(Layout, EveryCodeFolderHasAReadmeAndARow) {
  const std::set<std::string> code_folders = CodeFolders();
  ASSERT_GT(code_folders.size(), 10u) << "the checkout was not found at " << testing::SourceDir();
  const std::string readme = ReadFile(testing::SourceDir() / "README.md");
  for (const std::string& folder : code_folders) {
    EXPECT_TRUE(fs::exists(testing::SourceDir() / folder / "README.md")) << folder << "/README.md";
    EXPECT_NE(readme.find("| `" + folder + "/` |"), std::string::npos)
        << "README.md's Layout table has no row for " << folder << "/";
  }
}

TEST(Layout, TableNamesExactlyTheFoldersEachFolderIncludes) {
  const std::set<std::string> code_folders = CodeFolders();
  const std::map<std::string, std::set<std::string>> declared = DeclaredDependencies(code_folders);
  ASSERT_GT(declared.size(), 10u) << "README.md's Layout table was not parsed";
  for (const auto& [folder, may_depend_on] : declared) {
    const std::set<std::string> included = IncludedFolders(folder, code_folders);
    EXPECT_EQ(included, may_depend_on)
        << folder << "/: the README's Layout table says it may depend on " << Joined(may_depend_on)
        << "; its sources include " << Joined(included);
  }
}

}  // namespace
}  // namespace moelab
