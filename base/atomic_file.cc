#include "base/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cerrno>
#include <cstring>
#include <streambuf>

#include "base/error.h"
#include "base/input_file.h"

namespace moelab::base {
namespace {

std::string Reason(int error) { return std::strerror(error); }

// Writes all of `size` bytes; returns 0 or the errno of the failed write.
int WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t written = ::write(fd, data, size);
    if (written < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (written == 0) return EIO;
    data += written;
    size -= static_cast<size_t>(written);
  }
  return 0;
}

// An ostream buffer over a file descriptor that remembers the first write error (ofstream loses
// errno, which is how "write failed: Success" messages happen).
class FdBuffer : public std::streambuf {
 public:
  explicit FdBuffer(int fd) : fd_(fd), buffer_(1 << 16) {
    setp(buffer_.data(), buffer_.data() + buffer_.size());
  }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type ch) override {
    if (Drain() != 0) return traits_type::eof();
    if (!traits_type::eq_int_type(ch, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(ch);
      pbump(1);
    }
    return traits_type::not_eof(ch);
  }
  int sync() override { return Drain() == 0 ? 0 : -1; }

 private:
  int Drain() {
    if (error_ == 0) error_ = WriteAll(fd_, pbase(), static_cast<size_t>(pptr() - pbase()));
    setp(buffer_.data(), buffer_.data() + buffer_.size());
    return error_;
  }

  int fd_;
  std::vector<char> buffer_;
  int error_ = 0;
};

// Runs `write` into `fd` and flushes; returns 0 or the errno of the first failure. An exception
// from `write` propagates.
int Fill(int fd, const std::function<void(std::ostream&)>& write) {
  FdBuffer buffer(fd);
  std::ostream out(&buffer);
  write(out);
  out.flush();
  if (buffer.error() != 0) return buffer.error();
  return out ? 0 : EIO;
}

void WriteInPlace(const std::filesystem::path& path,
                  const std::function<void(std::ostream&)>& write) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) {
    const int error = errno;
    throw Error(path.string() + ": cannot open for writing: " + Reason(error));
  }
  int error = 0;
  try {
    error = Fill(fd, write);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) throw Error(path.string() + ": write failed: " + Reason(error));
}

// Writes `write` into a hidden temporary beside `path` (flushed, fsync'ed and closed, each step
// checked) and returns its name; nothing is left behind on failure.
std::filesystem::path StageTemporary(const std::filesystem::path& path,
                                     const std::function<void(std::ostream&)>& write) {
  const std::filesystem::path folder = path.has_parent_path() ? path.parent_path() : ".";
  std::error_code ignored;
  if (!std::filesystem::is_directory(folder, ignored)) {
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
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int error = errno;
    throw Error(path.string() + ": cannot create temporary file " + temporary.string() + ": " +
                Reason(error));
  }
  int error = 0;
  std::string step = "write failed";
  try {
    error = Fill(fd, write);
  } catch (...) {
    ::close(fd);
    std::filesystem::remove(temporary, ignored);
    throw;
  }
  // Data reaches the disk before the rename makes it visible: a crash after the rename never
  // shows an empty or partial file under the final name.
  if (error == 0 && ::fsync(fd) != 0) {
    error = errno;
    step = "fsync failed";
  }
  if (::close(fd) != 0 && error == 0) {
    error = errno;
    step = "close failed";
  }
  if (error != 0) {
    std::filesystem::remove(temporary, ignored);
    throw Error(path.string() + ": " + step + ": " + Reason(error));
  }
  return temporary;
}

// Renames a staged temporary over `path` (the temporary removed on failure).
void Publish(const std::filesystem::path& temporary, const std::filesystem::path& path) {
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw Error(path.string() + ": cannot move the written file into place: " + Reason(error));
  }
  // Best effort: persist the rename itself. A failure here cannot undo it, so it is not an error.
  const std::filesystem::path folder = path.has_parent_path() ? path.parent_path() : ".";
  const int folder_fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (folder_fd >= 0) {
    ::fsync(folder_fd);
    ::close(folder_fd);
  }
}

// How `path` is written: replaced through a temporary (`target`: the file itself, or the file a
// link names) or, for a character device or FIFO, in place. Throws for what cannot be written.
struct Destination {
  bool stream = false;
  std::filesystem::path target;
};
Destination DestinationOf(const std::filesystem::path& path) {
  if (path.empty()) throw Error("cannot write: empty output path");
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) {
    const int error = errno;
    if (error != ENOENT) throw Error(path.string() + ": cannot write: " + Reason(error));
    return {false, path};  // a new file (or a dangling link, replaced by the file)
  }
  if (IsGuardedInput(path)) {
    throw Error(path.string() + ": refusing to write: this file is an input of the same command");
  }
  if (S_ISCHR(status.st_mode) || S_ISFIFO(status.st_mode)) return {true, path};
  if (S_ISREG(status.st_mode)) {
    std::error_code error;
    const std::filesystem::path target =
        std::filesystem::is_symlink(path, error) ? std::filesystem::canonical(path, error) : path;
    if (error) throw Error(path.string() + ": cannot resolve the link: " + error.message());
    return {false, target};
  }
  throw Error(
      path.string() + ": cannot write: " +
      (S_ISDIR(status.st_mode) ? "it is a folder" : "it is neither a regular file nor a stream") +
      " (only regular files are replaced; character devices and FIFOs are written in place)");
}

}  // namespace

void WriteFileAtomically(const std::filesystem::path& path,
                         const std::function<void(std::ostream&)>& write) {
  const Destination destination = DestinationOf(path);
  if (destination.stream) {
    WriteInPlace(path, write);
  } else {
    Publish(StageTemporary(destination.target, write), destination.target);
  }
}

void WriteFilesAtomically(const std::vector<std::pair<std::filesystem::path, std::string>>& files) {
  std::vector<Destination> destinations;
  for (const auto& file : files) destinations.push_back(DestinationOf(file.first));
  std::vector<std::pair<std::filesystem::path, std::filesystem::path>> staged;  // temporary, file
  const auto discard = [&staged](size_t from) {
    std::error_code ignored;
    for (size_t i = from; i < staged.size(); ++i) std::filesystem::remove(staged[i].first, ignored);
  };
  try {
    for (size_t i = 0; i < files.size(); ++i) {
      if (destinations[i].stream) continue;
      const std::string& text = files[i].second;
      staged.emplace_back(
          StageTemporary(destinations[i].target, [&text](std::ostream& out) { out << text; }),
          destinations[i].target);
    }
    // Streams only once every file is staged: a file that cannot be written stops them all. A
    // reader gone (`--out /dev/stdout ... | head`) is a write error here, not SIGPIPE killing the
    // process with the staged temporaries left behind.
    struct sigaction ignore = {}, previous = {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    const bool any_stream = std::any_of(destinations.begin(), destinations.end(),
                                        [](const Destination& d) { return d.stream; });
    if (any_stream && !staged.empty()) ::sigaction(SIGPIPE, &ignore, &previous);
    try {
      for (size_t i = 0; i < files.size(); ++i) {
        if (!destinations[i].stream) continue;
        const std::string& text = files[i].second;
        WriteInPlace(files[i].first, [&text](std::ostream& out) { out << text; });
      }
    } catch (...) {
      if (any_stream && !staged.empty()) ::sigaction(SIGPIPE, &previous, nullptr);
      throw;
    }
    if (any_stream && !staged.empty()) ::sigaction(SIGPIPE, &previous, nullptr);
  } catch (...) {
    discard(0);
    throw;
  }
  for (size_t i = 0; i < staged.size(); ++i) {
    try {
      Publish(staged[i].first, staged[i].second);
    } catch (...) {
      discard(i + 1);
      throw;
    }
  }
}

void CheckWritableOutput(const std::filesystem::path& path) {
  if (path.empty()) throw Error("cannot write: empty output path");
  struct stat status {};
  const bool exists = ::stat(path.c_str(), &status) == 0;
  if (exists) {
    if (S_ISCHR(status.st_mode) || S_ISFIFO(status.st_mode)) {
      if (::access(path.c_str(), W_OK) != 0)
        throw Error(path.string() + ": cannot open for writing: " + Reason(errno));
      return;
    }
    if (!S_ISREG(status.st_mode)) {
      throw Error(path.string() + ": cannot write: " +
                  (S_ISDIR(status.st_mode) ? "it is a folder"
                                           : "it is neither a regular file nor a stream") +
                  " (only regular files are replaced; character devices and FIFOs are written in "
                  "place)");
    }
  } else if (errno != ENOENT) {
    throw Error(path.string() + ": cannot write: " + Reason(errno));
  }
  // A regular file or a new one: replaced through a temporary in its folder (a link's target's
  // folder: the file it names is the one replaced; a dangling link is replaced by the file).
  std::error_code link_error;
  const std::filesystem::path target = exists && std::filesystem::is_symlink(path, link_error)
                                           ? std::filesystem::canonical(path, link_error)
                                           : path;
  if (link_error) throw Error(path.string() + ": cannot resolve the link: " + link_error.message());
  const std::filesystem::path folder = target.has_parent_path() ? target.parent_path() : ".";
  std::error_code ignored;
  if (!std::filesystem::is_directory(folder, ignored)) {
    throw Error(path.string() + ": cannot write: folder '" + folder.string() + "' does not exist");
  }
  if (::access(folder.c_str(), W_OK | X_OK) != 0) {
    throw Error(path.string() + ": cannot write: folder '" + folder.string() +
                "': " + Reason(errno));
  }
  // The permission bits do not tell everything (root passes them; /proc, a read-only mount): a
  // file is created and removed there, as the write will create its temporary. A short name of
  // its own (the output's name may be near NAME_MAX), another one if it exists (a stale probe).
  static std::atomic<int> counter{0};
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::string name = ".moelab-probe.";
    name += std::to_string(getpid());
    name += ".";
    name += std::to_string(counter++);
    const std::filesystem::path probe = folder / name;
    const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) {
      ::close(fd);
      ::unlink(probe.c_str());
      return;
    }
    const int error = errno;
    if (error != EEXIST)
      throw Error(path.string() + ": cannot write: cannot create a file in folder '" +
                  folder.string() + "': " + Reason(error));
  }
}

void WriteFileAtomically(const std::filesystem::path& path, const std::string& text) {
  WriteFileAtomically(path, [&](std::ostream& out) {
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  });
}

void RequireWritableDistinctOutputs(
    const std::vector<std::pair<std::string, std::string>>& outputs) {
  for (const auto& [name, path] : outputs) {
    if (!path.empty()) CheckWritableOutput(path);
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (size_t j = i + 1; j < outputs.size(); ++j) {
      const auto& [first_name, first] = outputs[i];
      const auto& [second_name, second] = outputs[j];
      if (first.empty() || second.empty()) continue;
      std::error_code error;
      // Two outputs to one character device (/dev/null) are harmless; to one file, one is lost.
      if (std::filesystem::is_character_file(first, error)) continue;
      // Absolute first: of a relative path none of whose parts exists, weakly_canonical returns
      // the path as given, so "so.json" and "./so.json" compared different.
      const std::filesystem::path a =
          std::filesystem::weakly_canonical(std::filesystem::absolute(first), error);
      const bool a_ok = !error;
      const std::filesystem::path b =
          std::filesystem::weakly_canonical(std::filesystem::absolute(second), error);
      const bool same =
          (a_ok && !error && a == b) || std::filesystem::equivalent(first, second, error);
      if (same) {
        throw Error(first_name + " and " + second_name + " name the same file '" + first +
                    "': give each output its own file");
      }
    }
  }
}

}  // namespace moelab::base
