#include "weights/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/input_file.h"
#include "base/json_reader.h"
#include "base/message_text.h"
#include "kernels/bf16.h"
#include "kernels/fp16.h"

namespace moelab::weights {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data are little-endian; reads copy bytes as host values");

constexpr uint64_t kHeaderLengthBytes = 8;
constexpr const char* kMetadataKey = "__metadata__";
constexpr const char* kSupportedDtypes = "BF16, F16, F32";

std::string Describe(const nlohmann::json& value) { return base::DescribeJsonValue(value); }

std::string TensorWhere(const std::string& file, const std::string& name) {
  return file + ": tensor '" + base::EscapeForMessage(name, 200) + "'";
}

bool ParseDtype(const std::string& text, TensorDtype* dtype) {
  if (text == "BF16") {
    *dtype = TensorDtype::kBf16;
  } else if (text == "F16") {
    *dtype = TensorDtype::kF16;
  } else if (text == "F32") {
    *dtype = TensorDtype::kF32;
  } else {
    return false;
  }
  return true;
}

// Elements of `shape` times the dtype size, or an Error prefixed by `where` for a negative dim or
// an overflow.
uint64_t CheckedSizeBytes(const std::vector<int64_t>& shape, TensorDtype dtype,
                          const std::string& where) {
  int64_t elements = 1;
  for (const int64_t dim : shape) {
    if (dim < 0) {
      throw base::Error(where + ": negative dimension " + std::to_string(dim) + " in shape " +
                        FormatShape(shape));
    }
    if (__builtin_mul_overflow(elements, dim, &elements)) {
      throw base::Error(where + ": shape " + FormatShape(shape) + " has too many elements");
    }
  }
  int64_t size_bytes = 0;
  if (__builtin_mul_overflow(elements, DtypeSizeBytes(dtype), &size_bytes)) {
    throw base::Error(where + ": shape " + FormatShape(shape) + " has too many elements");
  }
  return static_cast<uint64_t>(size_bytes);
}

}  // namespace

std::string ToString(TensorDtype dtype) {
  switch (dtype) {
    case TensorDtype::kBf16:
      return "BF16";
    case TensorDtype::kF16:
      return "F16";
    case TensorDtype::kF32:
      return "F32";
  }
  return "unknown";
}

int64_t DtypeSizeBytes(TensorDtype dtype) {
  switch (dtype) {
    case TensorDtype::kBf16:
    case TensorDtype::kF16:
      return 2;
    case TensorDtype::kF32:
      return 4;
  }
  return 0;
}

std::string FormatShape(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

int64_t TensorInfo::element_count() const {
  int64_t elements = 1;
  for (const int64_t dim : shape) elements *= dim;
  return elements;
}

// ----- SafetensorsFile -----

SafetensorsFile SafetensorsFile::Open(const std::filesystem::path& file) {
  SafetensorsFile result;
  result.path_ = file;
  const std::string name = file.string();
  // O_NONBLOCK: opening a FIFO would otherwise wait forever for a writer; fstat then refuses it.
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int error = errno;
    throw base::Error(name + ": cannot open safetensors file: " + std::strerror(error));
  }
  base::NoteInputFile(file);
  struct stat status {};
  if (::fstat(fd, &status) != 0) {
    const int error = errno;
    ::close(fd);
    throw base::Error(name + ": cannot stat safetensors file: " + std::strerror(error));
  }
  if (!S_ISREG(status.st_mode)) {
    ::close(fd);
    throw base::Error(name + ": not a regular file");
  }
  result.file_size_bytes_ = static_cast<uint64_t>(status.st_size);
  if (result.file_size_bytes_ < kHeaderLengthBytes) {
    ::close(fd);
    throw base::Error(name +
                      ": not a safetensors file: " + std::to_string(result.file_size_bytes_) +
                      " bytes, shorter than the 8-byte header length");
  }
  void* mapping = ::mmap(nullptr, result.file_size_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_error = errno;
  ::close(fd);
  if (mapping == MAP_FAILED) {
    throw base::Error(name + ": cannot memory-map safetensors file: " + std::strerror(map_error));
  }
  result.mapping_ = mapping;  // unmapped by the destructor if the header is refused
  result.ParseHeader();
  return result;
}

SafetensorsFile::SafetensorsFile(SafetensorsFile&& other) noexcept
    : path_(std::move(other.path_)),
      mapping_(std::exchange(other.mapping_, nullptr)),
      file_size_bytes_(std::exchange(other.file_size_bytes_, 0)),
      data_section_begin_(std::exchange(other.data_section_begin_, 0)),
      tensors_(std::move(other.tensors_)),
      metadata_(std::move(other.metadata_)) {}

SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&& other) noexcept {
  if (this != &other) {
    Unmap();
    path_ = std::move(other.path_);
    mapping_ = std::exchange(other.mapping_, nullptr);
    file_size_bytes_ = std::exchange(other.file_size_bytes_, 0);
    data_section_begin_ = std::exchange(other.data_section_begin_, 0);
    tensors_ = std::move(other.tensors_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

SafetensorsFile::~SafetensorsFile() { Unmap(); }

void SafetensorsFile::Unmap() {
  if (mapping_ != nullptr) ::munmap(mapping_, file_size_bytes_);
  mapping_ = nullptr;
}

void SafetensorsFile::ParseHeader() {
  const std::string file = path_.string();
  const auto* bytes = static_cast<const unsigned char*>(mapping_);
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | bytes[i];
  if (header_bytes > file_size_bytes_ - kHeaderLengthBytes) {
    throw base::Error(file + ": header length " + std::to_string(header_bytes) +
                      " bytes exceeds the rest of the file (" +
                      std::to_string(file_size_bytes_ - kHeaderLengthBytes) +
                      " bytes): truncated or not a safetensors file");
  }
  data_section_begin_ = kHeaderLengthBytes + header_bytes;
  const uint64_t data_section_bytes = file_size_bytes_ - data_section_begin_;

  const nlohmann::json header = base::ParseJsonText(
      std::string_view(reinterpret_cast<const char*>(bytes) + kHeaderLengthBytes, header_bytes),
      file, "safetensors header JSON");
  if (!header.is_object()) {
    throw base::Error(file + ": safetensors header must be a JSON object, got " + Describe(header));
  }

  for (const auto& [name, entry] : header.items()) {
    if (name == kMetadataKey) {
      if (!entry.is_object()) {
        throw base::Error(file + ": '__metadata__' must be an object of strings, got " +
                          Describe(entry));
      }
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) {
          throw base::Error(file + ": '__metadata__' entry '" + key + "' must be a string, got " +
                            Describe(value));
        }
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    const std::string where = TensorWhere(file, name);
    if (!entry.is_object()) {
      throw base::Error(where + ": expected an object with dtype, shape and data_offsets, got " +
                        Describe(entry));
    }
    for (const char* key : {"dtype", "shape", "data_offsets"}) {
      if (!entry.contains(key)) throw base::Error(where + ": missing '" + key + "'");
    }

    TensorInfo info;
    info.name = name;
    const nlohmann::json& dtype = entry["dtype"];
    if (!dtype.is_string())
      throw base::Error(where + ": 'dtype' must be a string, got " + Describe(dtype));
    if (!ParseDtype(dtype.get<std::string>(), &info.dtype)) {
      throw base::Error(where + ": unsupported dtype '" +
                        base::EscapeForMessage(dtype.get<std::string>()) +
                        "' (supported: " + kSupportedDtypes + ")");
    }

    const nlohmann::json& shape = entry["shape"];
    if (!shape.is_array()) {
      throw base::Error(where + ": 'shape' must be an array of integers, got " + Describe(shape));
    }
    for (const nlohmann::json& dim : shape) {
      if (!dim.is_number_integer() ||
          (dim.is_number_unsigned() && dim.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))) {
        throw base::Error(where + ": 'shape' must be an array of integers, got " + Describe(shape));
      }
      info.shape.push_back(dim.get<int64_t>());
    }
    const uint64_t expected_bytes = CheckedSizeBytes(info.shape, info.dtype, where);

    const nlohmann::json& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned()) {
      throw base::Error(where +
                        ": 'data_offsets' must be [begin, end] with 0 <= begin <= end, got " +
                        Describe(offsets));
    }
    info.data_begin = offsets[0].get<uint64_t>();
    info.data_end = offsets[1].get<uint64_t>();
    if (info.data_begin > info.data_end) {
      throw base::Error(where +
                        ": 'data_offsets' must be [begin, end] with 0 <= begin <= end, got " +
                        Describe(offsets));
    }
    if (info.data_end > data_section_bytes) {
      throw base::Error(where + ": data_offsets " + Describe(offsets) +
                        " extend past the end of the file (data section is " +
                        std::to_string(data_section_bytes) + " bytes)");
    }
    if (info.data_end - info.data_begin != expected_bytes) {
      throw base::Error(where + ": data_offsets " + Describe(offsets) + " span " +
                        std::to_string(info.data_end - info.data_begin) + " bytes, but shape " +
                        FormatShape(info.shape) + " of " + ToString(info.dtype) + " needs " +
                        std::to_string(expected_bytes) + " bytes");
    }
    tensors_.emplace(name, std::move(info));
  }
  CheckNoOverlap(file);
}

void SafetensorsFile::CheckNoOverlap(const std::string& file) const {
  // Two tensors sharing bytes would alias each other's weights; the format forbids it.
  std::vector<const TensorInfo*> by_offset;
  for (const auto& [name, info] : tensors_) {
    if (info.data_end > info.data_begin) by_offset.push_back(&info);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->data_begin < b->data_begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& before = *by_offset[i - 1];
    const TensorInfo& after = *by_offset[i];
    if (after.data_begin < before.data_end) {
      throw base::Error(TensorWhere(file, after.name) + ": data_offsets [" +
                        std::to_string(after.data_begin) + ", " + std::to_string(after.data_end) +
                        "] overlap tensor '" + base::EscapeForMessage(before.name) + "' [" +
                        std::to_string(before.data_begin) + ", " + std::to_string(before.data_end) +
                        "]");
    }
  }
}

bool SafetensorsFile::Has(const std::string& name) const { return tensors_.contains(name); }

const TensorInfo& SafetensorsFile::Info(const std::string& name) const {
  const auto found = tensors_.find(name);
  if (found == tensors_.end()) throw base::Error(TensorWhere(path_.string(), name) + " not found");
  return found->second;
}

std::vector<std::string> SafetensorsFile::Names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& [name, info] : tensors_) names.push_back(name);
  return names;
}

const TensorInfo& SafetensorsFile::CheckedInfo(const std::string& name,
                                               const std::vector<int64_t>& expected_shape) const {
  const TensorInfo& info = Info(name);
  if (info.shape != expected_shape) {
    throw base::Error(TensorWhere(path_.string(), name) + ": expected shape " +
                      FormatShape(expected_shape) + ", file has " + FormatShape(info.shape));
  }
  return info;
}

const std::byte* SafetensorsFile::TensorData(const TensorInfo& info) const {
  return static_cast<const std::byte*>(mapping_) + data_section_begin_ + info.data_begin;
}

void SafetensorsFile::ReadBf16(const std::string& name, const std::vector<int64_t>& expected_shape,
                               uint16_t* out) const {
  const TensorInfo& info = CheckedInfo(name, expected_shape);
  const size_t count = static_cast<size_t>(info.element_count());
  if (count == 0) return;
  const std::byte* data = TensorData(info);
  switch (info.dtype) {
    case TensorDtype::kBf16:
      std::memcpy(out, data, count * sizeof(uint16_t));
      return;
    case TensorDtype::kF16:
      for (size_t i = 0; i < count; ++i) {
        uint16_t half = 0;
        std::memcpy(&half, data + i * sizeof(half), sizeof(half));
        out[i] = kernels::FloatToBf16(kernels::Fp16ToFloat(half));
      }
      return;
    case TensorDtype::kF32:
      for (size_t i = 0; i < count; ++i) {
        float value = 0;
        std::memcpy(&value, data + i * sizeof(value), sizeof(value));
        out[i] = kernels::FloatToBf16(value);
      }
      return;
  }
}

void SafetensorsFile::ReadF32(const std::string& name, const std::vector<int64_t>& expected_shape,
                              float* out) const {
  const TensorInfo& info = CheckedInfo(name, expected_shape);
  const size_t count = static_cast<size_t>(info.element_count());
  if (count == 0) return;
  const std::byte* data = TensorData(info);
  switch (info.dtype) {
    case TensorDtype::kBf16:
      for (size_t i = 0; i < count; ++i) {
        uint16_t bf16 = 0;
        std::memcpy(&bf16, data + i * sizeof(bf16), sizeof(bf16));
        out[i] = kernels::Bf16ToFloat(bf16);
      }
      return;
    case TensorDtype::kF16:
      for (size_t i = 0; i < count; ++i) {
        uint16_t half = 0;
        std::memcpy(&half, data + i * sizeof(half), sizeof(half));
        out[i] = kernels::Fp16ToFloat(half);
      }
      return;
    case TensorDtype::kF32:
      std::memcpy(out, data, count * sizeof(float));
      return;
  }
}

// ----- SafetensorsModel -----

SafetensorsModel SafetensorsModel::Open(const std::filesystem::path& file_or_folder) {
  SafetensorsModel model;
  model.path_ = file_or_folder;
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(file_or_folder, error);
  if (!std::filesystem::exists(status)) {
    throw base::Error(file_or_folder.string() + ": no such safetensors file or folder");
  }
  std::filesystem::path single_file = file_or_folder;
  if (std::filesystem::is_directory(status)) {
    const std::filesystem::path index = file_or_folder / "model.safetensors.index.json";
    single_file = file_or_folder / "model.safetensors";
    if (std::filesystem::exists(index)) {
      model.index_file_ = index;
    } else if (!std::filesystem::exists(single_file)) {
      throw base::Error(file_or_folder.string() +
                        ": no model.safetensors or model.safetensors.index.json in this folder");
    }
  }

  if (model.index_file_.empty()) {
    model.files_.push_back(SafetensorsFile::Open(single_file));
    for (const std::string& name : model.files_.front().Names()) model.file_of_tensor_[name] = 0;
    return model;
  }

  const std::string index_name = model.index_file_.string();
  const nlohmann::json index_json = base::JsonReader::ParseFile(model.index_file_);
  const base::JsonReader weight_map = base::JsonReader(index_json, index_name).Object("weight_map");
  if (weight_map.json().empty()) throw base::Error(index_name + ": field 'weight_map' is empty");
  std::map<std::string, size_t> shard_of_name;
  for (const auto& [tensor, shard] : weight_map.json().items()) {
    if (!shard.is_string() || shard.get<std::string>().empty()) {
      weight_map.Fail(tensor, "a shard file name");
    }
    const std::string shard_name = shard.get<std::string>();
    const std::filesystem::path shard_relative(shard_name);
    // Shards live in the index's folder: an absolute path or ".." would read any file on the
    // machine.
    const bool climbs = std::any_of(shard_relative.begin(), shard_relative.end(),
                                    [](const std::filesystem::path& part) { return part == ".."; });
    if (shard_relative.is_absolute() || climbs) {
      throw base::Error(index_name + ": weight_map maps tensor '" + base::EscapeForMessage(tensor) +
                        "' to shard '" + base::EscapeForMessage(shard_name) +
                        "', which is outside the index's folder");
    }
    auto found = shard_of_name.find(shard_name);
    if (found == shard_of_name.end()) {
      const std::filesystem::path shard_path = file_or_folder / shard_name;
      if (!std::filesystem::is_regular_file(shard_path)) {
        throw base::Error(index_name + ": weight_map maps tensor '" +
                          base::EscapeForMessage(tensor, 200) + "' to shard '" +
                          base::EscapeForMessage(shard_name, 200) + "', which does not exist (" +
                          base::EscapeForMessage(shard_path.string(), 400) + ")");
      }
      model.files_.push_back(SafetensorsFile::Open(shard_path));
      found = shard_of_name.emplace(shard_name, model.files_.size() - 1).first;
    }
    if (!model.files_[found->second].Has(tensor)) {
      throw base::Error(index_name + ": weight_map maps tensor '" +
                        base::EscapeForMessage(tensor, 200) + "' to shard '" +
                        base::EscapeForMessage(shard_name, 200) + "', which does not contain it");
    }
    model.file_of_tensor_[tensor] = found->second;
  }
  return model;
}

const SafetensorsFile& SafetensorsModel::FileOf(const std::string& name) const {
  const auto found = file_of_tensor_.find(name);
  if (found == file_of_tensor_.end()) {
    const std::string where =
        index_file_.empty() ? files_.front().path().string() : index_file_.string();
    throw base::Error(TensorWhere(where, name) + " not found");
  }
  return files_[found->second];
}

bool SafetensorsModel::Has(const std::string& name) const { return file_of_tensor_.contains(name); }

const TensorInfo& SafetensorsModel::Info(const std::string& name) const {
  return FileOf(name).Info(name);
}

std::vector<std::string> SafetensorsModel::Names() const {
  std::vector<std::string> names;
  names.reserve(file_of_tensor_.size());
  for (const auto& [name, file] : file_of_tensor_) names.push_back(name);
  return names;
}

void SafetensorsModel::ReadBf16(const std::string& name, const std::vector<int64_t>& expected_shape,
                                uint16_t* out) const {
  FileOf(name).ReadBf16(name, expected_shape, out);
}

void SafetensorsModel::ReadF32(const std::string& name, const std::vector<int64_t>& expected_shape,
                               float* out) const {
  FileOf(name).ReadF32(name, expected_shape, out);
}

// ----- SafetensorsWriter -----

void SafetensorsWriter::Add(const std::string& name, TensorDtype dtype, std::vector<int64_t> shape,
                            const void* data) {
  const std::string where = "SafetensorsWriter: tensor '" + name + "'";
  if (name.empty()) throw base::Error("SafetensorsWriter: empty tensor name");
  if (name == kMetadataKey) throw base::Error(where + ": the name is reserved for metadata");
  if (tensors_.contains(name)) throw base::Error(where + ": added twice");
  const uint64_t size_bytes = CheckedSizeBytes(shape, dtype, where);
  if (size_bytes > 0 && data == nullptr) throw base::Error(where + ": no data");
  Entry entry{dtype, std::move(shape), std::vector<std::byte>(size_bytes)};
  if (size_bytes > 0) std::memcpy(entry.bytes.data(), data, size_bytes);
  tensors_.emplace(name, std::move(entry));
}

void SafetensorsWriter::AddBf16FromFloat(const std::string& name, std::vector<int64_t> shape,
                                         const float* values) {
  const uint64_t size_bytes =
      CheckedSizeBytes(shape, TensorDtype::kBf16, "SafetensorsWriter: tensor '" + name + "'");
  const size_t count = size_bytes / sizeof(uint16_t);
  if (count > 0 && values == nullptr) {
    throw base::Error("SafetensorsWriter: tensor '" + name + "': no data");
  }
  std::vector<uint16_t> converted(count);
  for (size_t i = 0; i < count; ++i) converted[i] = kernels::FloatToBf16(values[i]);
  Add(name, TensorDtype::kBf16, std::move(shape), converted.data());
}

void SafetensorsWriter::SetMetadata(const std::string& key, const std::string& value) {
  metadata_[key] = value;
}

void SafetensorsWriter::Write(const std::filesystem::path& file) const {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata_.empty()) header[kMetadataKey] = metadata_;
  uint64_t offset = 0;
  for (const auto& [name, entry] : tensors_) {
    header[name] = {{"dtype", ToString(entry.dtype)},
                    {"shape", entry.shape},
                    {"data_offsets", {offset, offset + entry.bytes.size()}}};
    offset += entry.bytes.size();
  }
  std::string header_text = header.dump();
  // Pad so the data section starts 8-byte aligned.
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  unsigned char length_bytes[kHeaderLengthBytes];
  for (size_t i = 0; i < kHeaderLengthBytes; ++i) {
    length_bytes[i] =
        static_cast<unsigned char>(static_cast<uint64_t>(header_text.size()) >> (8 * i));
  }

  base::WriteFileAtomically(file, [&](std::ostream& out) {
    out.write(reinterpret_cast<const char*>(length_bytes), sizeof(length_bytes));
    out.write(header_text.data(), static_cast<std::streamsize>(header_text.size()));
    for (const auto& [name, entry] : tensors_) {
      out.write(reinterpret_cast<const char*>(entry.bytes.data()),
                static_cast<std::streamsize>(entry.bytes.size()));
    }
  });
}

}  // namespace moelab::weights
