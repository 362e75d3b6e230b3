#include "base/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "base/error.h"

namespace moelab::base {
namespace {

std::mutex& InputsMutex() {
  static std::mutex mutex;
  return mutex;
}

// (device, inode) identifies a file whatever path or link named it.
std::set<std::pair<dev_t, ino_t>>& Inputs() {
  static std::set<std::pair<dev_t, ino_t>> inputs;
  return inputs;
}

bool& GuardOn() {
  static bool on = false;
  return on;
}

std::string KindOf(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

uint64_t RequireRegularFile(const std::filesystem::path& file, std::string_view what) {
  struct stat status {};
  if (::stat(file.c_str(), &status) != 0) {
    const int error = errno;
    throw Error(file.string() + ": cannot read " + std::string(what) + ": " + std::strerror(error));
  }
  if (!S_ISREG(status.st_mode)) {
    throw Error(file.string() + ": " + std::string(what) + " must be a regular file, but this is " +
                KindOf(status.st_mode));
  }
  return static_cast<uint64_t>(status.st_size);
}

std::string ReadInputFile(const std::filesystem::path& file, uint64_t max_bytes,
                          std::string_view what) {
  const uint64_t size = RequireRegularFile(file, what);
  if (size > max_bytes) {
    throw Error(file.string() + ": " + std::string(what) + " is " + std::to_string(size) +
                " bytes, above the limit of " + std::to_string(max_bytes) +
                " bytes for a file read whole into memory (see docs/limits.md)");
  }
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int error = errno;
    throw Error(file.string() + ": cannot open " + std::string(what) + ": " + std::strerror(error));
  }
  NoteInputFile(file);
  std::string text;
  text.resize(static_cast<size_t>(size));
  size_t done = 0;
  while (true) {
    if (done == text.size()) {
      // The file may have grown since stat; read on (within the cap) until end of file.
      if (text.size() >= max_bytes) {
        char probe = 0;
        const ssize_t extra = ::read(fd, &probe, 1);
        if (extra == 0) break;
        ::close(fd);
        throw Error(file.string() + ": " + std::string(what) + " grew above the limit of " +
                    std::to_string(max_bytes) + " bytes while being read");
      }
      text.resize(std::min<uint64_t>(max_bytes, text.size() + 65536));
    }
    const ssize_t got = ::read(fd, text.data() + done, text.size() - done);
    if (got < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      throw Error(file.string() + ": cannot read " + std::string(what) + ": " +
                  std::strerror(error));
    }
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  ::close(fd);
  text.resize(done);
  return text;
}

void NoteInputFile(const std::filesystem::path& file) {
  struct stat status {};
  if (::stat(file.c_str(), &status) != 0) return;
  const std::lock_guard<std::mutex> lock(InputsMutex());
  Inputs().insert({status.st_dev, status.st_ino});
}

void RefuseOutputsOverInputs() {
  const std::lock_guard<std::mutex> lock(InputsMutex());
  GuardOn() = true;
}

bool IsGuardedInput(const std::filesystem::path& file) {
  struct stat status {};
  if (::stat(file.c_str(), &status) != 0) return false;
  const std::lock_guard<std::mutex> lock(InputsMutex());
  return GuardOn() && Inputs().count({status.st_dev, status.st_ino}) > 0;
}

}  // namespace moelab::base
