#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "executor/weights.h"

namespace moelab::executor::offload {

// The slow tier of the offload runtime: every routed expert's weights written once to one file, one
// 4096-byte-aligned contiguous block per expert (gate_up's stored bytes, then down's, in the
// kernels' packed layout), with a manifest beside it (schema "moelab.expert_store/1": the key
// below, block size and per-expert offset, bytes and checksum). Files: DIR/STEM.experts and
// DIR/STEM.manifest.json, STEM = model name, expert format and a hash of the whole key (shape,
// weights source and seed too), so runs of one model with other seeds or shapes keep their own
// stores side by side instead of rebuilding (or, run at once, overwriting) one another's. A store
// is reused when its manifest's key equals the run's and the data file has the manifest's size;
// otherwise rebuilt.
//
// Crash safety: the writer removes the old manifest first, writes the data to a temporary file,
// fsyncs and renames it, and writes the manifest last (atomically), so a run killed at any point
// leaves either no manifest (rebuilt next time) or a complete, matching pair. Checksums are
// verified on every read, so a file corrupted or truncated later is an error naming the file and
// the expert, never wrong numbers. The temporary is removed on every error, on SIGINT, SIGTERM and
// SIGHUP during the write, and, after a SIGKILL or power loss, by the next writer in the folder.
// Concurrency: PrepareExpertStore (offload_runtime.h) opens or builds a store holding
// ExpertStoreLock, so two runs on one folder never write the same store at once.
//
// Reads use O_DIRECT into aligned buffers so the page cache cannot fake a hit; a file system that
// refuses O_DIRECT (tmpfs, some network file systems) falls back to buffered reads with a warning
// (the tier is then not cold: hit and miss counts hold, read times do not).

inline constexpr int64_t kStoreAlignment = 4096;
inline constexpr char kExpertStoreSchema[] = "moelab.expert_store/1";

// What the stored bytes are a function of.
struct ExpertStoreKey {
  std::string model;  // config name
  int64_t moe_layers = 0, experts = 0, hidden = 0, intermediate = 0;
  std::string format;          // bf16 | q8_0 | q4_0
  std::string weights_source;  // "synthetic seed 1", or the safetensors path with size and mtime
  int64_t gate_up_bytes = 0, down_bytes = 0;  // stored bytes per matrix (padding included)

  int64_t payload_bytes() const { return gate_up_bytes + down_bytes; }
  int64_t block_bytes() const {
    return (payload_bytes() + kStoreAlignment - 1) / kStoreAlignment * kStoreAlignment;
  }
  bool operator==(const ExpertStoreKey&) const = default;
};

// The key of `config`'s experts from `weights_source` (shapes from a zero expert of the format).
ExpertStoreKey ExpertStoreKeyFor(const ExecutorConfig& config, const std::string& weights_source);

// The default --offload-dir: $MOELAB_OFFLOAD_DIR, else $XDG_CACHE_HOME/moelab/experts, else
// $HOME/.cache/moelab/experts, else /tmp/moelab-experts (on the disk, not tmpfs, where possible:
// O_DIRECT needs a real file system).
std::filesystem::path DefaultOffloadDir();

// A heap buffer aligned for O_DIRECT, zeroed at construction so that its pages are resident: the
// first read into a reader's buffer would otherwise fault them in inside a timed pass (2-4 us a
// page on the Xeon, a few ms for an expert block).
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(int64_t bytes);
  std::byte* data() const { return data_.get(); }
  int64_t size() const { return size_; }

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte, Free> data_;
  int64_t size_ = 0;
};

class ExpertStore {
 public:
  // The store of `key` in `dir` when its manifest matches and the data file has the manifest's
  // size; nullptr otherwise (missing, another key, another size: the caller rebuilds). Error only
  // for an unreadable file that exists.
  static std::unique_ptr<ExpertStore> Open(const std::filesystem::path& dir,
                                           const ExpertStoreKey& key);
  ~ExpertStore();
  ExpertStore(const ExpertStore&) = delete;
  ExpertStore& operator=(const ExpertStore&) = delete;

  const ExpertStoreKey& key() const { return key_; }
  const std::filesystem::path& data_path() const { return data_path_; }
  bool direct_io() const { return direct_; }
  const std::string& warning() const { return warning_; }  // empty unless O_DIRECT was refused

  // Reads expert (moe layer, expert) through `buffer` (block_bytes(), aligned) into `out` (same
  // shape and format), verifying its checksum. Error naming the file and the expert on a short
  // read, an I/O error or a checksum mismatch. Safe to call from several threads. `block_read_at`,
  // when given, is set to when the block was in `buffer` (the read's end, its checksum's start).
  void Read(int64_t layer, int64_t expert, AlignedBuffer& buffer, FfnWeights& out,
            std::chrono::steady_clock::time_point* block_read_at = nullptr) const;
  // Read's I/O alone: the expert's whole block into `buffer` (block_bytes(), aligned), no checksum
  // and no copy (a probe of the disk itself); the same errors.
  void ReadBlock(int64_t layer, int64_t expert, AlignedBuffer& buffer) const;

  // Read's steps, for a reader that issues the I/O itself (io_uring): the checks before a read,
  // the file and offset of the expert's block, the errors of a failed or short read, and the
  // checksum and copy once the block is in `buffer`.
  void CheckRead(int64_t layer, int64_t expert, const AlignedBuffer& buffer,
                 const FfnWeights& out) const;
  int data_fd() const { return fd_; }
  int64_t BlockOffset(int64_t layer, int64_t expert) const;
  [[noreturn]] void ThrowReadError(int64_t layer, int64_t expert, int error_number) const;
  [[noreturn]] void ThrowTruncated(int64_t layer, int64_t expert, int64_t end_byte) const;
  void Unpack(int64_t layer, int64_t expert, const AlignedBuffer& buffer, FfnWeights& out) const;

 private:
  ExpertStore() = default;
  ExpertStoreKey key_;
  std::filesystem::path data_path_;
  std::vector<uint64_t> checksums_;  // [layer * experts + expert]
  int fd_ = -1;
  bool direct_ = true;
  std::string warning_;
};

// An exclusive lock (flock) on DIR/.STEM.lock for `key`'s store, held for its lifetime: another
// process (or thread) asking for the same store waits, and says so on `waiting` (when given)
// before it does: a run building a large store holds the lock for minutes, and a silent wait reads
// as a hang. Creates DIR; errors name it. On a read-only file system an existing lock file is
// opened read-only and locked, and a missing one is no lock at all (nobody writes there): a
// complete store there is used as it is.
class ExpertStoreLock {
 public:
  ExpertStoreLock(const std::filesystem::path& dir, const ExpertStoreKey& key,
                  std::ostream* waiting = nullptr);
  ~ExpertStoreLock();
  ExpertStoreLock(const ExpertStoreLock&) = delete;
  ExpertStoreLock& operator=(const ExpertStoreLock&) = delete;

 private:
  int fd_ = -1;
};

// Builds a store: Add every expert in (layer, expert) order, then Commit. Destroyed uncommitted, it
// removes its temporary file. Errors name the folder or file and the system's reason (unwritable
// folder; disk full: the free space is checked and the whole file reserved before the first
// expert). The writer first removes temporaries that no live writer owns (this store's, whose
// writer would hold the lock, and any whose process is gone) and the key's old data file (it is
// written only when that store does not open; the caller holds the key's lock), so the space it
// takes counts as free; a manifest that cannot be written removes the data with it. `progress`,
// when given, gets a line
// when the write starts (size, free space) and one per tenth of it.
class ExpertStoreWriter {
 public:
  ExpertStoreWriter(const std::filesystem::path& dir, const ExpertStoreKey& key,
                    std::ostream* progress = nullptr);
  ~ExpertStoreWriter();
  ExpertStoreWriter(const ExpertStoreWriter&) = delete;
  ExpertStoreWriter& operator=(const ExpertStoreWriter&) = delete;

  void Add(int64_t layer, int64_t expert, const FfnWeights& weights);
  void Commit();

 private:
  void Discard();  // closes and removes the temporary (idempotent)

  std::filesystem::path dir_, temp_path_;
  ExpertStoreKey key_;
  std::ostream* progress_ = nullptr;
  std::chrono::steady_clock::time_point start_;
  int fd_ = -1;
  bool signals_armed_ = false;
  int64_t next_ = 0;
  AlignedBuffer block_;
  std::vector<uint64_t> checksums_;
};

// DIR/STEM.experts and DIR/STEM.manifest.json for `key`.
std::filesystem::path StoreDataPath(const std::filesystem::path& dir, const ExpertStoreKey& key);
std::filesystem::path StoreManifestPath(const std::filesystem::path& dir,
                                        const ExpertStoreKey& key);

}  // namespace moelab::executor::offload
