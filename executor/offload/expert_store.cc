#include "executor/offload/expert_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/atomic_file.h"
#include "base/error.h"
#include "executor/offload/checksum.h"
#include "report/format.h"

namespace moelab::executor::offload {
namespace fs = std::filesystem;
namespace {

std::string Reason(int error) { return std::strerror(error); }

std::string Hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

nlohmann::json KeyJson(const ExpertStoreKey& k);

// Model and format for a reader of the folder, then the key's hash: two keys share a file name
// only if they share all of it (a 48-bit hash: a collision is caught by the manifest's full key and
// costs a rebuild, never a wrong read).
std::string Stem(const ExpertStoreKey& key) {
  std::string stem = key.model + "." + key.format;
  for (char& c : stem) {
    const bool safe =
        std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
    if (!safe) c = '_';
  }
  const std::string key_text = KeyJson(key).dump();
  const uint64_t hash = Checksum64(std::as_bytes(std::span(key_text.data(), key_text.size())));
  return stem + "." + Hex(hash).substr(0, 12);
}

// Signal cleanup of the temporary being written: SIGINT (Ctrl-C), SIGTERM and SIGHUP remove it and
// then take their previous action. One writer per process at a time is covered (the executor
// builds one store at a time); a second concurrent writer relies on the next run's reclaiming.
constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};
char g_temp_for_signals[4096];
std::atomic<bool> g_signal_cleanup_claimed{false};  // a writer owns the handlers
std::atomic<bool> g_temp_armed{false};              // ... and g_temp_for_signals is its path
struct sigaction g_previous_actions[std::size(kCleanupSignals)];
// Which handlers this writer installed: an ignored signal (nohup's SIGHUP, a background job's
// SIGINT) stays ignored, as it would without a store being written. Installed, its handler
// removed the temporary and re-raised into SIG_IGN: the build went on and failed at its rename.
bool g_installed[std::size(kCleanupSignals)];

extern "C" void RemoveTemporaryAndReraise(int signal_number) {
  if (g_temp_armed.exchange(false)) ::unlink(g_temp_for_signals);
  for (size_t i = 0; i < std::size(kCleanupSignals); ++i) {
    if (kCleanupSignals[i] == signal_number)
      ::sigaction(signal_number, &g_previous_actions[i], nullptr);
  }
  ::raise(signal_number);  // delivered with the previous action once this handler returns
}

// True when this call armed the handlers (the caller then disarms them).
bool ArmSignalCleanup(const fs::path& temp) {
  const std::string text = temp.string();
  if (text.size() >= sizeof(g_temp_for_signals)) return false;
  bool unclaimed = false;
  if (!g_signal_cleanup_claimed.compare_exchange_strong(unclaimed, true)) return false;
  std::memcpy(g_temp_for_signals, text.c_str(), text.size() + 1);
  struct sigaction action = {};
  action.sa_handler = RemoveTemporaryAndReraise;
  sigemptyset(&action.sa_mask);
  for (size_t i = 0; i < std::size(kCleanupSignals); ++i) {
    struct sigaction current = {};
    ::sigaction(kCleanupSignals[i], nullptr, &current);
    g_installed[i] = current.sa_handler != SIG_IGN;
    if (g_installed[i]) ::sigaction(kCleanupSignals[i], &action, &g_previous_actions[i]);
  }
  g_temp_armed.store(true);
  return true;
}

void DisarmSignalCleanup() {
  g_temp_armed.store(false);
  for (size_t i = 0; i < std::size(kCleanupSignals); ++i) {
    if (g_installed[i]) ::sigaction(kCleanupSignals[i], &g_previous_actions[i], nullptr);
    g_installed[i] = false;
  }
  g_signal_cleanup_claimed.store(false);
}

// Removes DIR/.NAME.experts.tmp-PID files whose process is gone (a writer killed by SIGKILL or a
// power loss): a live writer's temporary, in this process or another, is left alone.
void ReclaimAbandonedTemporaries(const fs::path& dir) {
  std::error_code error;
  for (fs::directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    const size_t at = name.rfind(".experts.tmp-");
    if (name.empty() || name[0] != '.' || at == std::string::npos) continue;
    const std::string pid_text = name.substr(at + std::strlen(".experts.tmp-"));
    char* end_of_pid = nullptr;
    const long pid = std::strtol(pid_text.c_str(), &end_of_pid, 10);
    if (pid_text.empty() || *end_of_pid != '\0' || pid <= 0) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive (or not ours)
    std::error_code ignored;
    fs::remove(it->path(), ignored);
  }
}

nlohmann::json KeyJson(const ExpertStoreKey& k) {
  return {{"model", k.model},
          {"moe_layers", k.moe_layers},
          {"experts", k.experts},
          {"hidden", k.hidden},
          {"intermediate", k.intermediate},
          {"format", k.format},
          {"weights_source", k.weights_source},
          {"gate_up_bytes", k.gate_up_bytes},
          {"down_bytes", k.down_bytes}};
}

// The manifest's key, or nullopt when it is not one (an old schema, a hand edit).
std::optional<ExpertStoreKey> KeyFromJson(const nlohmann::json& j) {
  try {
    ExpertStoreKey k;
    k.model = j.at("model").get<std::string>();
    k.moe_layers = j.at("moe_layers").get<int64_t>();
    k.experts = j.at("experts").get<int64_t>();
    k.hidden = j.at("hidden").get<int64_t>();
    k.intermediate = j.at("intermediate").get<int64_t>();
    k.format = j.at("format").get<std::string>();
    k.weights_source = j.at("weights_source").get<std::string>();
    k.gate_up_bytes = j.at("gate_up_bytes").get<int64_t>();
    k.down_bytes = j.at("down_bytes").get<int64_t>();
    return k;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

int64_t ExpertCount(const ExpertStoreKey& key) { return key.moe_layers * key.experts; }

std::string ExpertName(int64_t layer, int64_t expert) {
  return "MoE layer " + std::to_string(layer) + " expert " + std::to_string(expert);
}

}  // namespace

fs::path StoreDataPath(const fs::path& dir, const ExpertStoreKey& key) {
  return dir / (Stem(key) + ".experts");
}
fs::path StoreManifestPath(const fs::path& dir, const ExpertStoreKey& key) {
  return dir / (Stem(key) + ".manifest.json");
}

ExpertStoreKey ExpertStoreKeyFor(const ExecutorConfig& config, const std::string& weights_source) {
  FfnWeights probe;
  probe.Allocate(config.hidden_size, config.expert_intermediate_size, config.expert_format);
  ExpertStoreKey key;
  key.model = config.name;
  key.moe_layers = config.num_layers - config.first_dense_layers;
  key.experts = config.num_experts;
  key.hidden = config.hidden_size;
  key.intermediate = config.expert_intermediate_size;
  key.format = ToString(config.expert_format);
  key.weights_source = weights_source;
  key.gate_up_bytes = static_cast<int64_t>(probe.gate_up.Storage().size());
  key.down_bytes = static_cast<int64_t>(probe.down.Storage().size());
  return key;
}

fs::path DefaultOffloadDir() {
  if (const char* dir = std::getenv("MOELAB_OFFLOAD_DIR"); dir && *dir) return dir;
  if (const char* cache = std::getenv("XDG_CACHE_HOME"); cache && *cache)
    return fs::path(cache) / "moelab" / "experts";
  if (const char* home = std::getenv("HOME"); home && *home)
    return fs::path(home) / ".cache" / "moelab" / "experts";
  return fs::temp_directory_path() / "moelab-experts";
}

AlignedBuffer::AlignedBuffer(int64_t bytes) : size_(bytes) {
  const size_t rounded =
      static_cast<size_t>((bytes + kStoreAlignment - 1) / kStoreAlignment * kStoreAlignment);
  void* p = std::aligned_alloc(static_cast<size_t>(kStoreAlignment), rounded);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, rounded);
  data_.reset(static_cast<std::byte*>(p));
}

void AlignedBuffer::Free::operator()(std::byte* p) const { std::free(p); }

std::unique_ptr<ExpertStore> ExpertStore::Open(const fs::path& dir, const ExpertStoreKey& key) {
  const fs::path manifest_path = StoreManifestPath(dir, key);
  const fs::path data_path = StoreDataPath(dir, key);
  std::error_code error;
  if (!fs::exists(manifest_path, error) || !fs::exists(data_path, error)) return nullptr;
  nlohmann::json manifest;
  {
    std::ifstream in(manifest_path);
    if (!in)
      throw base::Error(manifest_path.string() +
                        ": cannot read the expert store manifest: " + Reason(errno));
    manifest = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  }
  if (manifest.is_discarded() || !manifest.is_object() ||
      manifest.value("schema", "") != kExpertStoreSchema)
    return nullptr;
  const std::optional<ExpertStoreKey> stored =
      manifest.contains("key") ? KeyFromJson(manifest["key"]) : std::nullopt;
  if (!stored || !(*stored == key)) return nullptr;
  const int64_t count = ExpertCount(key);
  if (!manifest.contains("experts") || !manifest["experts"].is_array() ||
      static_cast<int64_t>(manifest["experts"].size()) != count) {
    return nullptr;
  }
  const uintmax_t size = fs::file_size(data_path, error);
  if (error || static_cast<int64_t>(size) != count * key.block_bytes()) return nullptr;

  std::unique_ptr<ExpertStore> store(new ExpertStore());
  store->key_ = key;
  store->data_path_ = data_path;
  for (const nlohmann::json& entry : manifest["experts"]) {
    const std::string text = entry.value("checksum", "");
    char* end = nullptr;
    const uint64_t value = std::strtoull(text.c_str(), &end, 16);
    if (text.size() != 16 || end != text.c_str() + 16) return nullptr;
    store->checksums_.push_back(value);
  }
  store->fd_ = ::open(data_path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  if (store->fd_ < 0 && errno == EINVAL) {
    store->direct_ = false;
    store->warning_ =
        "warning: " + dir.string() +
        ": the file system refuses O_DIRECT; expert reads go through the page cache, so the "
        "storage tier is not cold (hit and miss counts hold, read times and stalls do not)";
    store->fd_ = ::open(data_path.c_str(), O_RDONLY | O_CLOEXEC);
  }
  if (store->fd_ < 0)
    throw base::Error(data_path.string() + ": cannot open the expert store: " + Reason(errno));
  return store;
}

ExpertStore::~ExpertStore() {
  if (fd_ >= 0) ::close(fd_);
}

void ExpertStore::CheckRead(int64_t layer, int64_t expert, const AlignedBuffer& buffer,
                            const FfnWeights& out) const {
  if (layer < 0 || layer >= key_.moe_layers || expert < 0 || expert >= key_.experts) {
    throw base::Error(data_path_.string() + ": no " + ExpertName(layer, expert) + " in this store");
  }
  if (static_cast<int64_t>(out.gate_up.Storage().size()) != key_.gate_up_bytes ||
      static_cast<int64_t>(out.down.Storage().size()) != key_.down_bytes ||
      buffer.size() < key_.block_bytes()) {
    throw base::Error(data_path_.string() + ": reading " + ExpertName(layer, expert) +
                      " into a buffer of another shape or format (an offload runtime bug)");
  }
}

int64_t ExpertStore::BlockOffset(int64_t layer, int64_t expert) const {
  return (layer * key_.experts + expert) * key_.block_bytes();
}

void ExpertStore::ThrowReadError(int64_t layer, int64_t expert, int error_number) const {
  throw base::Error(data_path_.string() + ": reading " + ExpertName(layer, expert) + ": " +
                    Reason(error_number));
}

void ExpertStore::ThrowTruncated(int64_t layer, int64_t expert, int64_t end_byte) const {
  throw base::Error(data_path_.string() + ": truncated: " + ExpertName(layer, expert) +
                    " ends at byte " + std::to_string(end_byte) +
                    " (delete the file to rebuild the store)");
}

void ExpertStore::Unpack(int64_t layer, int64_t expert, const AlignedBuffer& buffer,
                         FfnWeights& out) const {
  const std::span<const std::byte> payload(buffer.data(),
                                           static_cast<size_t>(key_.payload_bytes()));
  if (!VerifiedCopy(payload, checksums_[static_cast<size_t>(layer * key_.experts + expert)],
                    out.gate_up.MutableStorage(), out.down.MutableStorage())) {
    throw base::Error(data_path_.string() + ": checksum mismatch for " + ExpertName(layer, expert) +
                      ": the file is corrupted (delete it to rebuild the store)");
  }
}

void ExpertStore::Read(int64_t layer, int64_t expert, AlignedBuffer& buffer, FfnWeights& out,
                       std::chrono::steady_clock::time_point* block_read_at) const {
  CheckRead(layer, expert, buffer, out);
  ReadBlock(layer, expert, buffer);
  if (block_read_at) *block_read_at = std::chrono::steady_clock::now();
  Unpack(layer, expert, buffer, out);
}

void ExpertStore::ReadBlock(int64_t layer, int64_t expert, AlignedBuffer& buffer) const {
  if (layer < 0 || layer >= key_.moe_layers || expert < 0 || expert >= key_.experts) {
    throw base::Error(data_path_.string() + ": no " + ExpertName(layer, expert) + " in this store");
  }
  const int64_t offset = BlockOffset(layer, expert);
  const int64_t block = key_.block_bytes();
  if (buffer.size() < block) {
    throw base::Error(data_path_.string() + ": reading " + ExpertName(layer, expert) +
                      " into a buffer smaller than its block (an offload runtime bug)");
  }
  int64_t done = 0;
  while (done < block) {
    const ssize_t got =
        ::pread(fd_, buffer.data() + done, static_cast<size_t>(block - done), offset + done);
    if (got < 0) {
      if (errno == EINTR) continue;
      ThrowReadError(layer, expert, errno);
    }
    if (got == 0) ThrowTruncated(layer, expert, offset + done);
    done += got;
  }
}

ExpertStoreLock::ExpertStoreLock(const fs::path& dir, const ExpertStoreKey& key,
                                 std::ostream* waiting) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error)
    throw base::Error("--offload-dir " + dir.string() +
                      ": cannot create the folder: " + error.message());
  std::string name = ".";  // piece by piece: GCC 12's -Wrestrict false positive (bug 105329)
  name += Stem(key);
  name += ".lock";
  const fs::path path = dir / name;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0 && errno == EROFS) {
    // A read-only mount (a store baked into an image, shared read-only): nothing here can be
    // written, so a complete store is read as it is; its lock, when present, is still taken (flock
    // needs no write access), and without one no writer can exist on this mount.
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0 && errno == ENOENT) return;
  }
  if (fd_ < 0)
    throw base::Error("--offload-dir " + dir.string() + ": cannot create the store's lock " +
                      path.filename().string() + ": " + Reason(errno));
  int operation = LOCK_EX | LOCK_NB;  // first without waiting, to say so before a wait
  while (::flock(fd_, operation) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK && operation != LOCK_EX) {
      if (waiting) {
        *waiting << "moelab: waiting for the expert store " << (dir / Stem(key)).string()
                 << ": another process holds its lock " << path.filename().string()
                 << " while it builds or opens it" << std::endl;
      }
      operation = LOCK_EX;
      continue;
    }
    const int reason = errno;
    ::close(fd_);
    throw base::Error("--offload-dir " + dir.string() +
                      ": cannot lock the expert store: " + Reason(reason));
  }
}

ExpertStoreLock::~ExpertStoreLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

ExpertStoreWriter::ExpertStoreWriter(const fs::path& dir, const ExpertStoreKey& key,
                                     std::ostream* progress)
    : dir_(dir), key_(key), progress_(progress), block_(key.block_bytes()) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error)
    throw base::Error("--offload-dir " + dir.string() +
                      ": cannot create the folder: " + error.message());
  ReclaimAbandonedTemporaries(dir);
  // A store is written only when the one of this key does not open (missing, truncated, its
  // manifest gone), under the key's lock: its old data file is replaced, so it is removed first
  // and its space counts as free (a stale store on a nearly full disk was never rebuilt: the
  // check below counted the file being replaced as taken).
  fs::remove(StoreDataPath(dir, key), error);
  const int64_t total = ExpertCount(key) * key.block_bytes();
  struct statvfs file_system = {};
  if (::statvfs(dir.c_str(), &file_system) == 0) {
    const double free_bytes =
        static_cast<double>(file_system.f_bavail) * static_cast<double>(file_system.f_frsize);
    if (static_cast<double>(total) > free_bytes) {
      throw base::Error("--offload-dir " + dir.string() + ": the expert store needs " +
                        report::FormatBytes(static_cast<double>(total)) +
                        " and the file system has " + report::FormatBytes(free_bytes) +
                        " free (choose a folder on a larger disk)");
    }
    if (progress_) {
      *progress_ << "moelab: building the expert store " << StoreDataPath(dir, key).string() << ": "
                 << ExpertCount(key) << " experts, "
                 << report::FormatBytes(static_cast<double>(total)) << " ("
                 << report::FormatBytes(free_bytes) << " free)" << std::endl;
    }
  }
  // The old manifest goes first: from here until Commit no manifest vouches for the data file.
  fs::remove(StoreManifestPath(dir, key), error);
  if (error)
    throw base::Error("--offload-dir " + dir.string() +
                      ": cannot remove the old manifest: " + error.message());
  // Appended piece by piece: "." + a temporary string trips GCC 12's -Wrestrict false positive
  // (GCC bug 105329).
  std::string temp_name = ".";
  temp_name += StoreDataPath(dir, key).filename().string();
  temp_name += ".tmp-";
  temp_name += std::to_string(::getpid());
  temp_path_ = dir / temp_name;
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    const int reason = errno;
    temp_path_.clear();  // not created: nothing to remove (and not someone else's to remove)
    throw base::Error("--offload-dir " + dir.string() +
                      ": cannot write the expert store: " + Reason(reason));
  }
  signals_armed_ = ArmSignalCleanup(temp_path_);
  if (const int status = ::posix_fallocate(fd_, 0, total); status != 0) {
    Discard();  // the destructor does not run after a throwing constructor
    throw base::Error("--offload-dir " + dir.string() + ": cannot reserve " +
                      report::FormatBytes(static_cast<double>(total)) +
                      " for the expert store: " + Reason(status));
  }
  std::memset(block_.data(), 0, static_cast<size_t>(block_.size()));
  start_ = std::chrono::steady_clock::now();
}

void ExpertStoreWriter::Discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_path_.empty()) {
    std::error_code ignored;
    fs::remove(temp_path_, ignored);
    temp_path_.clear();
  }
  if (signals_armed_) DisarmSignalCleanup();
  signals_armed_ = false;
}

ExpertStoreWriter::~ExpertStoreWriter() { Discard(); }

void ExpertStoreWriter::Add(int64_t layer, int64_t expert, const FfnWeights& weights) {
  if (layer * key_.experts + expert != next_) {
    throw base::Error("expert store: experts must be added in (layer, expert) order; got " +
                      ExpertName(layer, expert));
  }
  const std::span<const std::byte> gate_up = weights.gate_up.Storage();
  const std::span<const std::byte> down = weights.down.Storage();
  if (static_cast<int64_t>(gate_up.size()) != key_.gate_up_bytes ||
      static_cast<int64_t>(down.size()) != key_.down_bytes) {
    throw base::Error("expert store: " + ExpertName(layer, expert) +
                      " has another shape or format than the store");
  }
  std::memcpy(block_.data(), gate_up.data(), gate_up.size());
  std::memcpy(block_.data() + gate_up.size(), down.data(), down.size());
  checksums_.push_back(Checksum64({block_.data(), static_cast<size_t>(key_.payload_bytes())}));
  const int64_t block = key_.block_bytes();
  int64_t done = 0;
  while (done < block) {
    const ssize_t wrote = ::pwrite(fd_, block_.data() + done, static_cast<size_t>(block - done),
                                   next_ * block + done);
    if (wrote < 0) {
      if (errno == EINTR) continue;
      throw base::Error(temp_path_.string() + ": writing the expert store: " + Reason(errno));
    }
    done += wrote;
  }
  ++next_;
  const int64_t count = ExpertCount(key_);
  if (progress_ && next_ * 10 / count != (next_ - 1) * 10 / count) {
    const double elapsed_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const double remaining_s =
        elapsed_s * static_cast<double>(count - next_) / static_cast<double>(next_);
    *progress_ << "moelab: expert store " << next_ * 100 / count << " % ("
               << report::FormatSeconds(elapsed_s) << ", about "
               << report::FormatSeconds(remaining_s) << " left)" << std::endl;
  }
}

void ExpertStoreWriter::Commit() {
  if (next_ != ExpertCount(key_)) {
    throw base::Error("expert store: " + std::to_string(next_) + " of " +
                      std::to_string(ExpertCount(key_)) + " experts written before commit");
  }
  if (::fsync(fd_) != 0) throw base::Error(temp_path_.string() + ": fsync: " + Reason(errno));
  ::close(fd_);
  fd_ = -1;
  const fs::path data_path = StoreDataPath(dir_, key_);
  if (::rename(temp_path_.c_str(), data_path.c_str()) != 0) {
    throw base::Error(data_path.string() +
                      ": cannot rename the expert store into place: " + Reason(errno));
  }
  temp_path_.clear();
  if (signals_armed_) DisarmSignalCleanup();
  signals_armed_ = false;
  nlohmann::json manifest = {{"schema", kExpertStoreSchema},
                             {"key", KeyJson(key_)},
                             {"block_bytes", key_.block_bytes()},
                             {"alignment", kStoreAlignment}};
  nlohmann::json experts = nlohmann::json::array();
  for (int64_t index = 0; index < next_; ++index) {
    experts.push_back({{"layer", index / key_.experts},
                       {"expert", index % key_.experts},
                       {"offset", index * key_.block_bytes()},
                       {"bytes", key_.payload_bytes()},
                       {"checksum", Hex(checksums_[static_cast<size_t>(index)])}});
  }
  manifest["experts"] = experts;
  try {
    base::WriteFileAtomically(StoreManifestPath(dir_, key_), manifest.dump(1) + "\n");
  } catch (...) {
    // Data without its manifest never opens and only takes the disk (a full disk then refused
    // every rebuild): removed with the failure.
    std::error_code ignored;
    fs::remove(data_path, ignored);
    throw;
  }
}

}  // namespace moelab::executor::offload
