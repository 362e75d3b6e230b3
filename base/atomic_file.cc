#include "base/atomic_file.h"

#include <unistd.h>

#include <atomic>
#include <fstream>

#include "base/error.h"

namespace moelab {

void WriteFileAtomically(const std::filesystem::path& path,
                         const std::function<void(std::ostream&)>& write) {
  const std::filesystem::path folder = path.has_parent_path() ? path.parent_path() : ".";
  if (!std::filesystem::is_directory(folder)) {
    throw Error(path.string() + ": cannot write: folder '" + folder.string() + "' does not exist");
  }
  static std::atomic<int> counter{0};
  std::string name = ".";
  name += path.filename().string();
  name += ".tmp.";
  name += std::to_string(getpid());
  name += ".";
  name += std::to_string(counter++);
  const std::filesystem::path temporary = folder / name;
  try {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(path.string() + ": cannot create temporary file " + temporary.string());
    write(out);
    out.flush();
    if (!out) throw Error(path.string() + ": write failed");
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw;
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::filesystem::remove(temporary, error);
    throw Error(path.string() + ": cannot move the written file into place: " + error.message());
  }
}

void WriteFileAtomically(const std::filesystem::path& path, const std::string& text) {
  WriteFileAtomically(path, [&](std::ostream& out) { out << text; });
}

}  // namespace moelab
