// storage_read: pread of expert-sized blocks from a temporary file, the slow tier of a CPU-only
// machine. The file (storage_file_blocks x the largest block, at least 64 MiB, varied bytes; the
// reads walk through it) is written, synced and dropped from the page cache, then opened with
// O_DIRECT (4 KiB-aligned buffer, offsets and sizes) and unlinked at once, so nothing is left
// behind even if the process dies. Where O_DIRECT is refused (open or a probe read fails) or not
// requested, reads are buffered, each after an untimed POSIX_FADV_DONTNEED of its range, and a
// note says so. Manual timing: only the pread.
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "base/error.h"
#include "profiler/impl/benches.h"

namespace moelab::profiler::impl {
namespace {

constexpr int64_t kAlignment = 4096;
constexpr int64_t kWriteChunkBytes = int64_t{4} << 20;
// Smallest file the reads walk through, so small blocks do not all come from a disk cache.
constexpr int64_t kMinFileBytes = int64_t{64} << 20;

std::string ErrnoText() { return std::strerror(errno); }

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

// An open file descriptor, closed on scope exit.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Reset(); }
  Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Fd& operator=(Fd&& other) noexcept {
    if (this != &other) {
      Reset();
      fd_ = other.fd_;
      other.fd_ = -1;
    }
    return *this;
  }
  int get() const { return fd_; }
  void Reset() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

std::string FilesystemName(const std::filesystem::path& dir, bool* in_memory) {
  struct statfs info {};
  *in_memory = false;
  if (statfs(dir.c_str(), &info) != 0) return "unknown filesystem";
  switch (static_cast<unsigned long>(info.f_type)) {
    case TMPFS_MAGIC:
      *in_memory = true;
      return "tmpfs";
    case RAMFS_MAGIC:
      *in_memory = true;
      return "ramfs";
    case EXT4_SUPER_MAGIC:
      return "ext4";  // also ext2/ext3: same magic
    case XFS_SUPER_MAGIC:
      return "xfs";
    case BTRFS_SUPER_MAGIC:
      return "btrfs";
    case OVERLAYFS_SUPER_MAGIC:
      return "overlayfs";
    case NFS_SUPER_MAGIC:
      return "nfs";
    default:
      return "filesystem type 0x" + [&] {
        char hex[32];
        std::snprintf(hex, sizeof(hex), "%lx", static_cast<unsigned long>(info.f_type));
        return std::string(hex);
      }();
  }
}

// Writes `bytes` of varied content (so no layer can compress or deduplicate it), syncs it and
// drops it from the page cache. Removes the file and throws on failure.
void WriteScratchFile(const std::filesystem::path& path, int64_t bytes) {
  Fd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (fd.get() < 0)
    throw base::Error("storage_read: cannot create " + path.string() + ": " + ErrnoText());
  std::vector<uint64_t> chunk(static_cast<size_t>(kWriteChunkBytes / 8));
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (int64_t written = 0; written < bytes;) {
    for (uint64_t& word : chunk) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      word = state;
    }
    const int64_t n = std::min(kWriteChunkBytes, bytes - written);
    const char* data = reinterpret_cast<const char*>(chunk.data());
    for (int64_t done = 0; done < n;) {
      const ssize_t w = write(fd.get(), data + done, static_cast<size_t>(n - done));
      if (w <= 0) {
        const std::string why = w < 0 ? ErrnoText() : "no progress";
        unlink(path.c_str());
        throw base::Error("storage_read: cannot write " + path.string() + ": " + why);
      }
      done += w;
    }
    written += n;
  }
  if (fsync(fd.get()) != 0) {
    const std::string why = ErrnoText();
    unlink(path.c_str());
    throw base::Error("storage_read: cannot sync " + path.string() + ": " + why);
  }
  posix_fadvise(fd.get(), 0, static_cast<off_t>(bytes), POSIX_FADV_DONTNEED);
}

class StorageReadBench : public OperatorBench {
 public:
  StorageReadBench(const std::vector<GridPoint>& points, const BenchEnvironment& env) {
    int64_t max_bytes = kAlignment;
    for (const GridPoint& p : points) {
      if (p.bytes % kAlignment != 0) {
        throw base::Error("storage_read: block sizes must be multiples of 4096 bytes, got " +
                          std::to_string(p.bytes));
      }
      max_bytes = std::max(max_bytes, p.bytes);
    }
    file_bytes_ = std::max(std::max<int64_t>(1, env.spec->storage_file_blocks) * max_bytes,
                           kMinFileBytes / max_bytes * max_bytes);
    const std::filesystem::path dir =
        env.storage_dir.empty() ? std::filesystem::temp_directory_path() : env.storage_dir;
    std::error_code error;
    if (!std::filesystem::is_directory(dir, error)) {
      throw base::Error("storage_read: the storage folder " + dir.string() +
                        " does not exist or is not a folder");
    }
    RequireMemory(static_cast<double>(max_bytes), "storage_read buffer");
    void* buffer = std::aligned_alloc(kAlignment, static_cast<size_t>(max_bytes));
    if (buffer == nullptr)
      throw base::Error("storage_read: cannot allocate " + std::to_string(max_bytes) + " bytes");
    buffer_.reset(static_cast<unsigned char*>(buffer));

    static std::atomic<int> counter{0};
    const std::filesystem::path path =
        dir / (".moelab-profile-storage-" + std::to_string(getpid()) + "-" +
               std::to_string(counter++) + ".bin");
    WriteScratchFile(path, file_bytes_);
    std::string refusal;
    if (env.storage_direct_io) {
      Fd direct(open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC));
      if (direct.get() < 0) {
        refusal = "open with O_DIRECT: " + ErrnoText();
      } else if (pread(direct.get(), buffer_.get(), kAlignment, 0) != kAlignment) {
        refusal = "read with O_DIRECT: " + ErrnoText();
      } else {
        fd_ = std::move(direct);
        direct_ = true;
      }
    }
    if (!direct_) fd_ = Fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    const int open_errno = errno;
    unlink(path.c_str());  // the open descriptor keeps the data until it is closed
    if (fd_.get() < 0)
      throw base::Error("storage_read: cannot open " + path.string() + ": " +
                        std::strerror(open_errno));

    bool in_memory = false;
    const std::string fs = FilesystemName(dir, &in_memory);
    const std::string where = dir.string() + " (" + fs + ")";
    if (direct_) {
      notes_.push_back("storage_read cpu: pread with O_DIRECT from a " +
                       std::to_string(file_bytes_) + "-byte temporary file in " + where +
                       "; the page cache is bypassed (a virtual disk's host may still cache)");
    } else if (env.storage_direct_io) {
      notes_.push_back("storage_read cpu: " + where + " refused O_DIRECT (" + refusal +
                       "); fell back to buffered pread after POSIX_FADV_DONTNEED of each block, "
                       "which may be served from memory");
    } else {
      notes_.push_back("storage_read cpu: O_DIRECT not requested; buffered pread from " + where +
                       " after POSIX_FADV_DONTNEED of each block, which may be served from memory");
    }
    if (in_memory) {
      notes_.push_back("storage_read cpu: " + where +
                       " keeps files in memory: these reads measure memory, not a disk");
    }
  }

  bool manual_time() const override { return true; }

  void Run(benchmark::State& state, const GridPoint& point) override {
    RunGuarded(state, [&] {
      const int64_t slots = std::max<int64_t>(1, file_bytes_ / point.bytes);
      int64_t slot = 0;
      for (auto _ : state) {
        const off_t offset = static_cast<off_t>(slot * point.bytes);
        if (!direct_)
          posix_fadvise(fd_.get(), offset, static_cast<off_t>(point.bytes), POSIX_FADV_DONTNEED);
        const auto begin = std::chrono::steady_clock::now();
        for (int64_t done = 0; done < point.bytes;) {
          const ssize_t r = pread(fd_.get(), buffer_.get() + done,
                                  static_cast<size_t>(point.bytes - done), offset + done);
          if (r <= 0)
            throw base::Error("storage_read: pread failed: " +
                              (r < 0 ? ErrnoText() : std::string("end of file")));
          done += r;
        }
        const auto end = std::chrono::steady_clock::now();
        state.SetIterationTime(std::chrono::duration<double>(end - begin).count());
        benchmark::DoNotOptimize(buffer_.get());
        slot = (slot + 1) % slots;
      }
    });
  }

  void Annotate(const GridPoint& /*point*/, nlohmann::json& sample) const override {
    sample["direct_io"] = direct_;
  }

 private:
  int64_t file_bytes_ = 0;
  bool direct_ = false;
  Fd fd_;
  std::unique_ptr<unsigned char, FreeDeleter> buffer_;
};

}  // namespace

std::unique_ptr<OperatorBench> MakeStorageReadBench(const std::vector<GridPoint>& points,
                                                    const BenchEnvironment& env) {
  return std::make_unique<StorageReadBench>(points, env);
}

}  // namespace moelab::profiler::impl
