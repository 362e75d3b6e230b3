#include "model/profiled_model.h"

#include <cmath>
#include <utility>

#include "base/error.h"
#include "report/format.h"

namespace moelab::model {
namespace {

// The bits a command line names a format by (moelab run --expert-bits 16|8|4), beside its stored
// bits (16, 8.5, 4.5: scales included); 0 for a name this build does not know.
double NominalBits(const std::string& format) {
  return format == "bf16" ? 16.0 : format == "q8_0" ? 8.0 : format == "q4_0" ? 4.0 : 0.0;
}

std::optional<std::string> StringField(const nlohmann::json& object, const char* key) {
  if (!object.is_object() || !object.contains(key) || !object[key].is_string()) return std::nullopt;
  return object[key].get<std::string>();
}

std::optional<int64_t> CountField(const nlohmann::json& shape, const std::string& key,
                                  const std::string& origin) {
  if (!shape.contains(key)) return std::nullopt;
  if (!shape[key].is_number_integer() || shape[key].get<int64_t>() < 0)
    throw base::Error(origin + ": field 'model.shape." + key + "' must be a non-negative integer");
  return shape[key].get<int64_t>();
}

std::optional<double> BitsField(const nlohmann::json& shape, const std::string& key,
                                const std::string& origin) {
  if (!shape.contains(key)) return std::nullopt;
  if (!shape[key].is_number() || !(shape[key].get<double>() > 0))
    throw base::Error(origin + ": field 'model.shape." + key +
                      "' must be a positive number of bits per weight");
  return shape[key].get<double>();
}

// One part's weights ("expert" or "attention") of a ProfiledModel.
struct Weights {
  const char* part;
  const std::optional<std::string>& format;
  const std::optional<double>& stored_bits;
};

}  // namespace

nlohmann::json ProfiledModel::ToJson() const {
  nlohmann::json json = nlohmann::json::object();
  if (name) json["name"] = *name;
  if (family) json["family"] = *family;
  nlohmann::json s = nlohmann::json::object();
  for (const auto& [key, field] : ShapeOverrides::Fields()) {
    if (shape.*field) s[key] = *(shape.*field);
  }
  if (sliding_window) s["sliding_window"] = *sliding_window;
  if (expert_format) s["expert_format"] = *expert_format;
  if (expert_stored_bits) s["expert_stored_bits"] = *expert_stored_bits;
  if (attention_format) s["attention_format"] = *attention_format;
  if (attention_stored_bits) s["attention_stored_bits"] = *attention_stored_bits;
  if (!s.empty()) json["shape"] = std::move(s);
  return json;
}

ProfiledModel ProfiledModel::FromJson(const nlohmann::json& model, const nlohmann::json& machine,
                                      std::string origin) {
  ProfiledModel m;
  m.origin = std::move(origin);
  m.name = StringField(model, "name");
  m.family = StringField(model, "family");
  if (model.is_object() && model.contains("shape") && model["shape"].is_object()) {
    const nlohmann::json& shape = model["shape"];
    for (const auto& [key, field] : ShapeOverrides::Fields())
      m.shape.*field = CountField(shape, key, m.origin);
    m.sliding_window = CountField(shape, "sliding_window", m.origin);
    m.expert_format = StringField(shape, "expert_format");
    m.attention_format = StringField(shape, "attention_format");
    m.expert_stored_bits = BitsField(shape, "expert_stored_bits", m.origin);
    m.attention_stored_bits = BitsField(shape, "attention_stored_bits", m.origin);
  }
  m.isa = StringField(machine, "isa");
  m.quantized_kernel = StringField(machine, "quantized_kernel");
  return m;
}

ProfiledModel ProfiledModel::Of(const MoeModelSpec& spec) {
  ProfiledModel m;
  m.name = spec.name;
  m.shape.layers = spec.num_layers;
  m.shape.hidden = spec.hidden_size;
  if (spec.moe) {
    m.shape.intermediate = spec.moe->expert_intermediate_size;
    m.shape.experts = spec.moe->num_experts;
    m.shape.top_k = spec.moe->top_k;
  }
  m.expert_stored_bits = spec.bits.experts;
  m.attention_stored_bits = spec.bits.attention;
  return m;
}

MoeModelSpec ProfiledModel::ExecutorSpec(const MoeModelSpec& preset) const {
  MoeModelSpec spec = ExecutorShape(preset, DefaultTargetShape().OverriddenBy(shape));
  spec.bits.experts = ExpertStoredBits();
  spec.bits.attention = AttentionStoredBits();
  return spec;
}

void ProfiledModel::Require(const ProfiledModel& wanted, const std::string& asker) const {
  const auto refuse = [&](const std::string& field, const std::string& measured,
                          const std::string& expected) {
    throw base::Error(origin + ": the profile measured " + measured + ", not " + expected + " (" +
                      asker + "): field '" + field +
                      "'; profile what is predicted (moelab profile with the same --model, shape "
                      "options, --expert-bits and --attention-bits, on the kernel path that runs) "
                      "or predict what it measured");
  };
  if (name && wanted.name && *name != *wanted.name)
    refuse("model.name", "'" + *name + "'", "'" + *wanted.name + "'");
  for (const auto& [key, field] : ShapeOverrides::Fields()) {
    const std::optional<int64_t>& measured = shape.*field;
    const std::optional<int64_t>& expected = wanted.shape.*field;
    if (measured && expected && *measured != *expected) {
      refuse(std::string("model.shape.") + key, std::string(key) + " " + std::to_string(*measured),
             std::to_string(*expected));
    }
  }
  const std::pair<Weights, Weights> parts[] = {
      {{"expert", expert_format, expert_stored_bits},
       {"expert", wanted.expert_format, wanted.expert_stored_bits}},
      {{"attention", attention_format, attention_stored_bits},
       {"attention", wanted.attention_format, wanted.attention_stored_bits}}};
  for (const auto& [measured, expected] : parts) {
    const std::string part = measured.part;
    const std::string format = measured.format.value_or("bf16");
    const double bits = measured.stored_bits.value_or(16.0);
    const std::string what =
        part + " weights " +
        (measured.format ? "as " + format + " (" + report::ShortestText(bits) + " bits per weight)"
                         : "at " + report::ShortestText(bits) + " bits per weight");
    if (expected.format && *expected.format != format)
      refuse("model.shape." + part + "_format", what, *expected.format);
    // Either the stored bits (4.5) or the bits a recorded format is asked for by (4) name it.
    if (expected.stored_bits && std::abs(*expected.stored_bits - bits) > 1e-9 &&
        !(measured.format && std::abs(*expected.stored_bits - NominalBits(format)) <= 1e-9)) {
      refuse("model.shape." + part + "_stored_bits", what,
             report::ShortestText(*expected.stored_bits) + " bits");
    }
  }
  if (isa && wanted.isa && *isa != *wanted.isa)
    refuse("machine.isa", "the " + *isa + " kernels", *wanted.isa);
  if (quantized_kernel && wanted.quantized_kernel && *quantized_kernel != *wanted.quantized_kernel)
    refuse("machine.quantized_kernel", "the " + *quantized_kernel + " quantized kernels",
           *wanted.quantized_kernel);
}

}  // namespace moelab::model
