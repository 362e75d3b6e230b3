#include "executor/offload/expert_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/atomic_file.h"
#include "base/error.h"
#include "executor/offload/checksum.h"

namespace moelab::executor::offload {
namespace fs = std::filesystem;
namespace {

std::string Reason(int error) { return std::strerror(error); }

std::string Hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(value));
  return text;
}

std::string Stem(const ExpertStoreKey& key) {
  std::string stem = key.model + "." + key.format;
  for (char& c : stem) {
    const bool safe =
        std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
    if (!safe) c = '_';
  }
  return stem;
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

ExpertStoreWriter::ExpertStoreWriter(const fs::path& dir, const ExpertStoreKey& key)
    : dir_(dir), key_(key), block_(key.block_bytes()) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error)
    throw base::Error("--offload-dir " + dir.string() +
                      ": cannot create the folder: " + error.message());
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
  if (fd_ < 0)
    throw base::Error("--offload-dir " + dir.string() +
                      ": cannot write the expert store: " + Reason(errno));
  const int64_t total = ExpertCount(key) * key.block_bytes();
  if (const int status = ::posix_fallocate(fd_, 0, total); status != 0) {
    throw base::Error("--offload-dir " + dir.string() + ": cannot reserve " +
                      std::to_string(total) + " bytes for the expert store: " + Reason(status));
  }
  std::memset(block_.data(), 0, static_cast<size_t>(block_.size()));
}

ExpertStoreWriter::~ExpertStoreWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!temp_path_.empty()) {
    std::error_code ignored;
    fs::remove(temp_path_, ignored);
  }
}

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
  base::WriteFileAtomically(StoreManifestPath(dir_, key_), manifest.dump(1) + "\n");
}

}  // namespace moelab::executor::offload
