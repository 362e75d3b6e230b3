#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace moelab::weights {

// Reading (and, for tests and tools, writing) Hugging Face safetensors weight files
// (https://github.com/huggingface/safetensors): an 8-byte little-endian header length N, N bytes of
// UTF-8 JSON {"__metadata__": {string: string}, "<tensor>": {"dtype", "shape", "data_offsets"}},
// then the data section, to which data_offsets are relative. Every malformed file is a
// moelab::Error naming the file and, where there is one, the tensor.

enum class TensorDtype { kBf16, kF16, kF32 };

// "BF16", "F16", "F32": the names safetensors headers use.
std::string ToString(TensorDtype dtype);
int64_t DtypeSizeBytes(TensorDtype dtype);
// "[8, 64]"; "[]" for a scalar.
std::string FormatShape(const std::vector<int64_t>& shape);

struct TensorInfo {
  std::string name;
  TensorDtype dtype = TensorDtype::kF32;
  std::vector<int64_t> shape;
  uint64_t data_begin = 0;  // byte offsets into the data section
  uint64_t data_end = 0;

  // Product of the dims (1 for a scalar).
  int64_t element_count() const;
};

// One .safetensors file, memory-mapped read-only for the object's lifetime. The header is
// validated completely by Open; reads copy (and convert) one tensor at a time.
class SafetensorsFile {
 public:
  static SafetensorsFile Open(const std::filesystem::path& file);

  SafetensorsFile(SafetensorsFile&& other) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&& other) noexcept;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;
  ~SafetensorsFile();

  const std::filesystem::path& path() const { return path_; }
  // The optional "__metadata__" string map (e.g. {"format": "pt"}).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  bool Has(const std::string& name) const;
  // Error "<file>: tensor '<name>' not found".
  const TensorInfo& Info(const std::string& name) const;
  // All tensor names, sorted.
  std::vector<std::string> Names() const;

  // Copy tensor `name` into `out` (element_count() elements) after checking that its shape equals
  // `expected_shape`. ReadBf16 converts F32 with round-to-nearest-even and F16 through float
  // (exact widening, then the same rounding); ReadF32 widens BF16 and F16 exactly.
  void ReadBf16(const std::string& name, const std::vector<int64_t>& expected_shape,
                uint16_t* out) const;
  void ReadF32(const std::string& name, const std::vector<int64_t>& expected_shape,
               float* out) const;

 private:
  SafetensorsFile() = default;
  void Unmap();
  void ParseHeader();
  void CheckNoOverlap(const std::string& file) const;
  const TensorInfo& CheckedInfo(const std::string& name,
                                const std::vector<int64_t>& expected_shape) const;
  const std::byte* TensorData(const TensorInfo& info) const;

  std::filesystem::path path_;
  void* mapping_ = nullptr;
  uint64_t file_size_bytes_ = 0;
  uint64_t data_section_begin_ = 0;  // 8 + header length
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A model's weights: a single .safetensors file; a folder with model.safetensors; or a folder with
// model.safetensors.index.json ({"weight_map": {tensor: shard file}}) and its shards. With an index
// the weight_map is authoritative: every shard it names must exist and hold the tensors mapped to
// it; tensors a shard holds beyond those are not visible.
class SafetensorsModel {
 public:
  static SafetensorsModel Open(const std::filesystem::path& file_or_folder);

  // The file or the folder given to Open.
  const std::filesystem::path& path() const { return path_; }
  const std::vector<SafetensorsFile>& files() const { return files_; }

  bool Has(const std::string& name) const;
  const TensorInfo& Info(const std::string& name) const;
  // All tensor names, sorted.
  std::vector<std::string> Names() const;

  void ReadBf16(const std::string& name, const std::vector<int64_t>& expected_shape,
                uint16_t* out) const;
  void ReadF32(const std::string& name, const std::vector<int64_t>& expected_shape,
               float* out) const;

 private:
  SafetensorsModel() = default;
  const SafetensorsFile& FileOf(const std::string& name) const;

  std::filesystem::path path_;
  std::filesystem::path index_file_;  // empty without an index
  std::vector<SafetensorsFile> files_;
  std::map<std::string, size_t> file_of_tensor_;  // index into files_
};

// Builds a .safetensors file in memory and writes it atomically. Tensors are laid out in name
// order and the header is padded with spaces to a multiple of 8 bytes, as the reference writer
// does.
class SafetensorsWriter {
 public:
  // Copies element_count * DtypeSizeBytes(dtype) bytes from `data` (little-endian values). Error
  // on a duplicate or empty name, the reserved name "__metadata__" or a negative dim.
  void Add(const std::string& name, TensorDtype dtype, std::vector<int64_t> shape,
           const void* data);
  // Adds a BF16 tensor from floats, rounding to nearest even.
  void AddBf16FromFloat(const std::string& name, std::vector<int64_t> shape, const float* values);
  void SetMetadata(const std::string& key, const std::string& value);

  // Writes to a temporary file in the same folder, then renames it over `file`.
  void Write(const std::filesystem::path& file) const;

 private:
  struct Entry {
    TensorDtype dtype;
    std::vector<int64_t> shape;
    std::vector<std::byte> bytes;
  };
  std::map<std::string, Entry> tensors_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace moelab::weights
