#include "model/hardware_spec.h"

#include <set>
#include <vector>

#include "base/error.h"
#include "base/json_reader.h"
#include "base/limits.h"
#include "base/message_text.h"
#include "base/units.h"

namespace moelab::model {
namespace {

PeakFlops ParsePeakFlops(const base::JsonReader& reader) {
  PeakFlops peak;
  for (const auto& [dtype, value] : reader.json().items()) {
    peak[dtype] = reader.Number(dtype, 0.0);
  }
  if (peak.empty()) reader.Fail("", "at least one data type with its peak FLOP/s");
  return peak;
}

nlohmann::json PeakToJson(const PeakFlops& peak) {
  nlohmann::json json = nlohmann::json::object();
  for (const auto& [dtype, value] : peak) json[dtype] = value;
  return json;
}

// A memory size, at most kMaxBytes so that every byte count derived from it fits int64.
double MemoryBytes(const base::JsonReader& reader, std::string_view key, bool allow_zero = false) {
  const double bytes = reader.Number(key, 0.0, allow_zero);
  if (bytes > base::kMaxBytes) reader.Fail(key, "a size in bytes of at most 2^60 (1 EiB)");
  return bytes;
}

}  // namespace

std::string ToString(HardwareKind kind) {
  switch (kind) {
    case HardwareKind::kAccelerator:
      return "accelerator";
    case HardwareKind::kHost:
      return "host";
    case HardwareKind::kLink:
      return "link";
    case HardwareKind::kNode:
      return "node";
  }
  return "?";
}

AcceleratorSpec AcceleratorSpecFromJson(const nlohmann::json& json, const std::string& origin,
                                        const std::string& path) {
  const base::JsonReader reader(json, origin, path);
  AcceleratorSpec spec;
  spec.peak_flops = ParsePeakFlops(reader.Object("peak_flops"));
  spec.memory_bytes = MemoryBytes(reader, "memory_bytes");
  spec.memory_bandwidth_bytes_per_s = reader.BytesPerSecond("memory_bandwidth_bytes_per_s");
  spec.sm_count = reader.Int("sm_count", 0, 0);
  // hw show --json writes the accelerator's own name and price here (a node's top level names the
  // node): a shown file read back keeps them.
  spec.display_name = reader.String("display_name", "");
  if (reader.Has("price_usd_per_hour")) {
    spec.price_usd_per_hour = reader.Number("price_usd_per_hour", 0);
    spec.price_source = reader.String("price_source");
  } else if (reader.Has("price_source")) {
    reader.Fail("price_source", "only beside price_usd_per_hour");
  }
  // A misspelt field ("memory_bandwith_bytes_per_s" beside a right one, "sm_counts") was ignored.
  reader.RefuseUnknownFields("a moelab.hardware/1 accelerator object");
  return spec;
}

HostSpec HostSpecFromJson(const nlohmann::json& json, const std::string& origin,
                          const std::string& path) {
  const base::JsonReader reader(json, origin, path);
  HostSpec spec;
  spec.name = reader.String("name", "");  // hw show --json writes the host preset's name here
  spec.cpu_name = reader.String("cpu_name");
  spec.cores = reader.Int("cores", 1);
  spec.peak_flops = ParsePeakFlops(reader.Object("peak_flops"));
  // 0: no RAM of the host's own holds experts (hw from-profile: the RAM is the compute device's).
  spec.dram_bytes = MemoryBytes(reader, "dram_bytes", /*allow_zero=*/true);
  spec.dram_bandwidth_bytes_per_s = reader.BytesPerSecond("dram_bandwidth_bytes_per_s");
  spec.storage_read_bandwidth_bytes_per_s =
      reader.BytesPerSecond("storage_read_bandwidth_bytes_per_s");
  spec.storage_reads_in_flight =
      reader.Has("storage_reads_in_flight")
          ? reader.Count("storage_reads_in_flight", 1, base::kMaxReadsInFlight)
          : 1;
  spec.storage_read_bandwidth_beside_compute_bytes_per_s =
      reader.Number("storage_read_bandwidth_beside_compute_bytes_per_s", 0.0, false, 0.0);
  spec.compute_rate_while_storage_reads =
      reader.Number("compute_rate_while_storage_reads", 0.0, false, 1.0);
  if (spec.compute_rate_while_storage_reads > 1) {
    reader.Fail("compute_rate_while_storage_reads",
                "a fraction of the rate alone in (0, 1]: reads never speed the computation up");
  }
  reader.RefuseUnknownFields("a moelab.hardware/1 host object");
  return spec;
}

LinkSpec LinkSpecFromJson(const nlohmann::json& json, const std::string& origin,
                          const std::string& path) {
  const base::JsonReader reader(json, origin, path);
  LinkSpec spec;
  spec.name = reader.String("name", "");  // hw show --json writes the link preset's name here
  spec.host_to_device_bandwidth_bytes_per_s =
      reader.BytesPerSecond("host_to_device_bandwidth_bytes_per_s");
  spec.device_to_host_bandwidth_bytes_per_s =
      reader.BytesPerSecond("device_to_host_bandwidth_bytes_per_s");
  spec.latency_s = reader.Seconds("latency_s");
  reader.RefuseUnknownFields("a moelab.hardware/1 link object");
  return spec;
}

InterconnectSpec InterconnectSpecFromJson(const nlohmann::json& json, const std::string& origin,
                                          const std::string& path) {
  const base::JsonReader reader(json, origin, path);
  InterconnectSpec spec;
  spec.kind = reader.String("kind");
  spec.bandwidth_bytes_per_s = reader.BytesPerSecond("bandwidth_bytes_per_s");
  spec.latency_s = reader.Seconds("latency_s");
  reader.RefuseUnknownFields("a moelab.hardware/1 interconnect object");
  return spec;
}

nlohmann::json HardwareSpecToJson(const HardwareSpec& spec) {
  nlohmann::json json;
  json["schema"] = "moelab.hardware/1";
  json["name"] = spec.name;
  json["display_name"] = spec.display_name;
  json["kind"] = ToString(spec.kind);
  if (spec.accelerator) {
    const AcceleratorSpec& a = *spec.accelerator;
    json["accelerator"] = {{"display_name", a.display_name},
                           {"peak_flops", PeakToJson(a.peak_flops)},
                           {"memory_bytes", a.memory_bytes},
                           {"memory_bandwidth_bytes_per_s", a.memory_bandwidth_bytes_per_s},
                           {"sm_count", a.sm_count}};
    if (a.price_usd_per_hour) {
      json["accelerator"]["price_usd_per_hour"] = *a.price_usd_per_hour;
      json["accelerator"]["price_source"] = a.price_source;
    }
    json["accelerator_count"] = spec.accelerator_count;
  }
  if (spec.host) {
    const HostSpec& h = *spec.host;
    json["host"] = {{"name", h.name},
                    {"cpu_name", h.cpu_name},
                    {"cores", h.cores},
                    {"peak_flops", PeakToJson(h.peak_flops)},
                    {"dram_bytes", h.dram_bytes},
                    {"dram_bandwidth_bytes_per_s", h.dram_bandwidth_bytes_per_s},
                    {"storage_read_bandwidth_bytes_per_s", h.storage_read_bandwidth_bytes_per_s},
                    {"storage_reads_in_flight", h.storage_reads_in_flight}};
    if (h.storage_read_bandwidth_beside_compute_bytes_per_s > 0) {
      json["host"]["storage_read_bandwidth_beside_compute_bytes_per_s"] =
          h.storage_read_bandwidth_beside_compute_bytes_per_s;
    }
    if (h.compute_rate_while_storage_reads < 1)
      json["host"]["compute_rate_while_storage_reads"] = h.compute_rate_while_storage_reads;
  }
  if (spec.host_link) {
    const LinkSpec& l = *spec.host_link;
    // A link file's object is "link" (docs/schemas.md); an accelerator's or node's "host_link".
    json[spec.kind == HardwareKind::kLink ? "link" : "host_link"] = {
        {"name", l.name},
        {"host_to_device_bandwidth_bytes_per_s", l.host_to_device_bandwidth_bytes_per_s},
        {"device_to_host_bandwidth_bytes_per_s", l.device_to_host_bandwidth_bytes_per_s},
        {"latency_s", l.latency_s}};
  }
  if (spec.interconnect) {
    json["interconnect"] = {{"kind", spec.interconnect->kind},
                            {"bandwidth_bytes_per_s", spec.interconnect->bandwidth_bytes_per_s},
                            {"latency_s", spec.interconnect->latency_s}};
  }
  if (spec.scale_out) {
    json["accelerators_per_node"] = spec.accelerators_per_node;
    json["scale_out"] = {{"kind", spec.scale_out->kind},
                         {"bandwidth_bytes_per_s", spec.scale_out->bandwidth_bytes_per_s},
                         {"latency_s", spec.scale_out->latency_s}};
  }
  if (spec.compute_device_is_host) json["compute_device_is_host"] = true;
  json["sources"] = spec.sources;
  return json;
}

double PeakFlopsFor(const PeakFlops& peak, const std::string& dtype, std::string* used_dtype) {
  // A hardware without the asked type falls back (and says which it used), but a name that is no
  // data type at all (a typo: --dtype xyz) is refused rather than silently priced as bf16.
  static const std::set<std::string> kKnownDtypes = {"fp64", "fp32", "tf32", "bf16", "fp16",
                                                     "fp8",  "int8", "fp4",  "int4"};
  if (!kKnownDtypes.count(dtype) && !peak.count(dtype)) {
    throw base::Error(
        "unknown compute data type '" + base::EscapeForMessage(dtype) +
        "': expected fp64, fp32, tf32, bf16, fp16, fp8, int8, fp4 or int4 (or a type the "
        "hardware's "
        "peak_flops lists)");
  }
  // Only to a type at least as wide, whose peak is not faster: fp8 and 4-bit types run as bf16,
  // fp16 or fp32 on hardware without their units, but an fp64 or fp32 computation priced at a
  // 16-bit peak was 15x too fast (an H100 preset lists no fp64).
  std::vector<std::string> candidates = {dtype};
  if (dtype == "tf32") {
    candidates.push_back("fp32");
  } else if (dtype != "fp64" && dtype != "fp32" && kKnownDtypes.count(dtype)) {
    candidates.insert(candidates.end(), {"bf16", "fp16", "fp32"});
  }
  for (const std::string& candidate : candidates) {
    auto it = peak.find(candidate);
    if (it != peak.end()) {
      if (used_dtype) *used_dtype = candidate;
      return it->second;
    }
  }
  std::string tried;
  for (const std::string& candidate : candidates) tried += (tried.empty() ? "" : ", ") + candidate;
  throw base::Error("no peak FLOP/s for data type '" + dtype + "' in the hardware's peak_flops (" +
                    "looked for " + tried + "; a wider type is never priced at a narrower one's " +
                    "peak)");
}

}  // namespace moelab::model
