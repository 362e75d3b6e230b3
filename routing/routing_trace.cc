#include "routing/routing_trace.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/json_reader.h"
#include "base/message_text.h"

namespace moelab::routing {
namespace {

bool IsKnownStepKind(const std::string& kind) {
  for (const char* known : {"prefill", "decode", "beam", "draft", "verify", "warm-up"})
    if (kind == known) return true;
  return false;
}

// Expert indices are int32; 2^20 bounds the per-step count tables a hostile file can demand.
constexpr int64_t kMaxExperts = int64_t{1} << 20;

[[noreturn]] void FailField(const std::string& origin, const std::string& field,
                            const std::string& what) {
  throw base::Error(origin + ": field '" + field + "': " + what);
}

std::string StepField(size_t step) { return "steps[" + std::to_string(step) + "]"; }

std::string Brief(const nlohmann::json& value) { return base::DescribeJsonValue(value, 40); }

std::string ListExperts(const std::vector<int32_t>& experts) {
  std::string text = "[";
  for (size_t k = 0; k < experts.size(); ++k) {
    if (k > 0) text += ", ";
    text += std::to_string(experts[k]);
  }
  return text + "]";
}

void ValidateHeader(const RoutingTrace& trace, const std::string& origin) {
  if (trace.num_layers < 1) {
    FailField(origin, "num_layers",
              "expected an integer >= 1, got " + std::to_string(trace.num_layers));
  }
  if (trace.num_experts < 1 || trace.num_experts > kMaxExperts) {
    FailField(origin, "num_experts",
              "expected an integer in [1, " + std::to_string(kMaxExperts) + "], got " +
                  std::to_string(trace.num_experts));
  }
  if (trace.top_k < 1 || trace.top_k > trace.num_experts) {
    FailField(origin, "top_k",
              "expected an integer in [1, num_experts = " + std::to_string(trace.num_experts) +
                  "], got " + std::to_string(trace.top_k));
  }
}

// The array at `key`, or an Error that names the field (missing or not an array).
const nlohmann::json& ArrayField(const base::JsonReader& reader, const std::string& key,
                                 const std::string& expected) {
  if (!reader.json().contains(key)) {
    throw base::Error(reader.origin() + ": missing required field '" + reader.FieldName(key) + "'");
  }
  const nlohmann::json& value = reader.json()[key];
  if (!value.is_array()) reader.Fail(key, expected);
  return value;
}

// A JSON number that is a whole number (integers, or floats that are exactly whole), as int64;
// false otherwise or when out of int64 range.
bool WholeNumber(const nlohmann::json& value, int64_t& out) {
  if (value.is_number_unsigned()) {
    if (value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return false;
    out = static_cast<int64_t>(value.get<uint64_t>());
    return true;
  }
  if (value.is_number_integer()) {
    out = value.get<int64_t>();
    return true;
  }
  if (value.is_number_float()) {
    const double number = value.get<double>();
    if (!std::isfinite(number) || number != std::floor(number) || std::fabs(number) > 9.0e18) {
      return false;
    }
    out = static_cast<int64_t>(number);
    return true;
  }
  return false;
}

std::vector<std::vector<std::vector<int32_t>>> ParseExperts(const nlohmann::json& layers,
                                                            const RoutingTrace& trace,
                                                            const std::string& origin,
                                                            const std::string& field) {
  std::vector<std::vector<std::vector<int32_t>>> experts;
  experts.reserve(layers.size());
  for (size_t layer = 0; layer < layers.size(); ++layer) {
    const nlohmann::json& tokens = layers[layer];
    const std::string at_layer = "layer " + std::to_string(layer);
    if (!tokens.is_array()) {
      FailField(origin, field, at_layer + ": expected an array of tokens, got " + Brief(tokens));
    }
    std::vector<std::vector<int32_t>>& out_layer = experts.emplace_back();
    out_layer.reserve(tokens.size());
    for (size_t token = 0; token < tokens.size(); ++token) {
      const nlohmann::json& ranked = tokens[token];
      const std::string at_token = at_layer + " token " + std::to_string(token);
      if (!ranked.is_array()) {
        FailField(origin, field,
                  at_token + ": expected an array of expert indices, got " + Brief(ranked));
      }
      std::vector<int32_t>& out_token = out_layer.emplace_back();
      out_token.reserve(ranked.size());
      for (size_t k = 0; k < ranked.size(); ++k) {
        int64_t expert = 0;
        if (!WholeNumber(ranked[k], expert)) {
          FailField(origin, field,
                    at_token + " entry " + std::to_string(k) +
                        ": expected an expert index (an integer), got " + Brief(ranked[k]));
        }
        if (expert < 0 || expert >= trace.num_experts) {
          FailField(origin, field,
                    at_token + " routes to expert " + std::to_string(expert) +
                        ", but num_experts is " + std::to_string(trace.num_experts));
        }
        out_token.push_back(static_cast<int32_t>(expert));
      }
    }
  }
  return experts;
}

// "expert_counts" is redundant; when present it must say what "experts" says.
void CheckExpertCounts(const nlohmann::json& counts,
                       const std::vector<std::vector<int64_t>>& expected, const std::string& origin,
                       const std::string& field) {
  const std::string shape = "expected [num_layers = " + std::to_string(expected.size()) +
                            "][num_experts = " + std::to_string(expected[0].size()) + "] counts";
  if (!counts.is_array() || counts.size() != expected.size()) {
    FailField(origin, field, shape + ", got " + Brief(counts));
  }
  for (size_t layer = 0; layer < expected.size(); ++layer) {
    const nlohmann::json& row = counts[layer];
    if (!row.is_array() || row.size() != expected[layer].size()) {
      FailField(origin, field, shape + ", layer " + std::to_string(layer) + " is " + Brief(row));
    }
    for (size_t expert = 0; expert < expected[layer].size(); ++expert) {
      int64_t count = 0;
      if (!WholeNumber(row[expert], count) || count != expected[layer][expert]) {
        FailField(origin, field,
                  "layer " + std::to_string(layer) + " expert " + std::to_string(expert) + " is " +
                      Brief(row[expert]) + ", but 'experts' routes " +
                      std::to_string(expected[layer][expert]) + " tokens to it");
      }
    }
  }
}

void AppendInt(std::string& text, int64_t value) {
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  text.append(buffer, result.ptr);
}

std::string JsonString(const std::string& value, const std::string& what) {
  try {
    return nlohmann::json(value).dump();
  } catch (const nlohmann::json::exception&) {
    throw base::Error("routing trace: " + what + " is not valid UTF-8");
  }
}

std::string TraceName(const RoutingTrace& trace) { return "routing trace '" + trace.source + "'"; }

}  // namespace

std::vector<std::vector<int64_t>> RoutingTrace::ExpertCounts(size_t step) const {
  if (step >= steps.size()) {
    throw base::Error(TraceName(*this) + ": step " + std::to_string(step) +
                      " is out of range, the trace has " + std::to_string(steps.size()) + " steps");
  }
  ValidateHeader(*this, TraceName(*this));
  const RoutingStep& routed = steps[step];
  if (routed.experts.size() != static_cast<size_t>(num_layers)) {
    FailField(TraceName(*this), StepField(step) + ".experts",
              "has " + std::to_string(routed.experts.size()) + " layers, but num_layers is " +
                  std::to_string(num_layers));
  }
  std::vector<std::vector<int64_t>> counts(num_layers, std::vector<int64_t>(num_experts, 0));
  for (size_t layer = 0; layer < routed.experts.size(); ++layer) {
    for (size_t token = 0; token < routed.experts[layer].size(); ++token) {
      for (int32_t expert : routed.experts[layer][token]) {
        if (expert < 0 || expert >= num_experts) {
          FailField(TraceName(*this), StepField(step) + ".experts",
                    "layer " + std::to_string(layer) + " token " + std::to_string(token) +
                        " routes to expert " + std::to_string(expert) + ", but num_experts is " +
                        std::to_string(num_experts));
        }
        ++counts[layer][expert];
      }
    }
  }
  return counts;
}

void RoutingTrace::Validate(const std::string& origin) const {
  ValidateHeader(*this, origin);
  for (size_t step = 0; step < steps.size(); ++step) {
    const RoutingStep& routed = steps[step];
    const std::string field = StepField(step);
    if (routed.kind.empty()) FailField(origin, field + ".kind", "expected a non-empty string");
    if (routed.tokens < 0) {
      FailField(origin, field + ".tokens",
                "expected an integer >= 0, got " + std::to_string(routed.tokens));
    }
    if (!routed.sequence_tokens.empty()) {
      int64_t sum = 0;
      for (int64_t n : routed.sequence_tokens) {
        if (n < 1)
          FailField(origin, field + ".sequence_tokens",
                    "expected counts >= 1, got " + std::to_string(n));
        sum += n;
      }
      if (sum != routed.tokens) {
        FailField(origin, field + ".sequence_tokens",
                  "sums to " + std::to_string(sum) + ", but the step's tokens is " +
                      std::to_string(routed.tokens));
      }
    }
    const std::string experts_field = field + ".experts";
    if (routed.experts.size() != static_cast<size_t>(num_layers)) {
      FailField(origin, experts_field,
                "has " + std::to_string(routed.experts.size()) + " layers, but num_layers is " +
                    std::to_string(num_layers));
    }
    for (size_t layer = 0; layer < routed.experts.size(); ++layer) {
      const auto& tokens = routed.experts[layer];
      if (tokens.size() != static_cast<size_t>(routed.tokens)) {
        FailField(origin, experts_field,
                  "layer " + std::to_string(layer) + " has " + std::to_string(tokens.size()) +
                      " tokens, but the step's tokens is " + std::to_string(routed.tokens));
      }
      for (size_t token = 0; token < tokens.size(); ++token) {
        const std::vector<int32_t>& ranked = tokens[token];
        const std::string at = "layer " + std::to_string(layer) + " token " + std::to_string(token);
        if (ranked.size() != static_cast<size_t>(top_k)) {
          FailField(origin, experts_field,
                    at + " has " + std::to_string(ranked.size()) + " experts, but top_k is " +
                        std::to_string(top_k));
        }
        for (size_t k = 0; k < ranked.size(); ++k) {
          if (ranked[k] < 0 || ranked[k] >= num_experts) {
            FailField(origin, experts_field,
                      at + " routes to expert " + std::to_string(ranked[k]) +
                          ", but num_experts is " + std::to_string(num_experts));
          }
          for (size_t j = 0; j < k; ++j) {
            if (ranked[j] == ranked[k]) {
              FailField(origin, experts_field,
                        at + " routes to expert " + std::to_string(ranked[k]) + " twice (experts " +
                            ListExperts(ranked) + "); the K experts must be distinct");
            }
          }
        }
      }
    }
  }
}

nlohmann::json RoutingTraceToJson(const RoutingTrace& trace) {
  trace.Validate(TraceName(trace));
  nlohmann::json json;
  json["schema"] = kRoutingTraceSchema;
  json["source"] = trace.source;
  json["num_layers"] = trace.num_layers;
  json["num_experts"] = trace.num_experts;
  json["top_k"] = trace.top_k;
  json["steps"] = nlohmann::json::array();
  for (size_t step = 0; step < trace.steps.size(); ++step) {
    const RoutingStep& routed = trace.steps[step];
    nlohmann::json& out = json["steps"].emplace_back(
        nlohmann::json{{"kind", routed.kind}, {"tokens", routed.tokens}});
    if (!routed.sequence_tokens.empty()) out["sequence_tokens"] = routed.sequence_tokens;
    out["experts"] = routed.experts;
    out["expert_counts"] = trace.ExpertCounts(step);
  }
  return json;
}

RoutingTrace RoutingTraceFromJson(const nlohmann::json& json, const std::string& origin) {
  const base::JsonReader reader(json, origin);
  const std::string schema = reader.String("schema");
  if (schema != kRoutingTraceSchema) {
    reader.Fail("schema", std::string("\"") + kRoutingTraceSchema + "\"");
  }
  RoutingTrace trace;
  trace.source = reader.String("source");
  trace.num_layers = reader.Int("num_layers", 1);
  trace.num_experts = reader.Int("num_experts", 1);
  trace.top_k = reader.Int("top_k", 1);
  ValidateHeader(trace, origin);

  const nlohmann::json& steps = ArrayField(reader, "steps", "an array of steps");
  trace.steps.reserve(steps.size());
  for (size_t step = 0; step < steps.size(); ++step) {
    const base::JsonReader step_reader(steps[step], origin, StepField(step));
    RoutingStep& routed = trace.steps.emplace_back();
    routed.kind = step_reader.String("kind");
    // The passes moelab writes; another word was accepted and then routed as a decode step.
    if (!IsKnownStepKind(routed.kind))
      step_reader.Fail("kind", "prefill, decode, beam, draft, verify or warm-up");
    routed.tokens = step_reader.Int("tokens", 0);
    if (steps[step].contains("sequence_tokens")) {
      const nlohmann::json& counts =
          ArrayField(step_reader, "sequence_tokens", "an array of token counts");
      for (size_t i = 0; i < counts.size(); ++i) {
        if (!counts[i].is_number_integer()) {
          FailField(origin, StepField(step) + ".sequence_tokens",
                    "expected integers, got " + Brief(counts[i]));
        }
        routed.sequence_tokens.push_back(counts[i].get<int64_t>());
      }
    }
    const nlohmann::json& experts =
        ArrayField(step_reader, "experts", "an array [layer][token][k] of expert indices");
    routed.experts = ParseExperts(experts, trace, origin, step_reader.FieldName("experts"));
  }
  trace.Validate(origin);

  for (size_t step = 0; step < steps.size(); ++step) {
    if (steps[step].contains("expert_counts")) {
      CheckExpertCounts(steps[step]["expert_counts"], trace.ExpertCounts(step), origin,
                        StepField(step) + ".expert_counts");
    }
  }
  return trace;
}

RoutingTrace LoadRoutingTrace(const std::string& path) {
  return RoutingTraceFromJson(base::JsonReader::ParseFile(path), path);
}

std::string RoutingTraceToText(const RoutingTrace& trace) {
  trace.Validate(TraceName(trace));
  std::string text = "{\n";
  text += "  \"schema\": \"";
  text += kRoutingTraceSchema;
  text += "\",\n  \"source\": " + JsonString(trace.source, "source") + ",\n";
  text += "  \"num_layers\": " + std::to_string(trace.num_layers) + ",\n";
  text += "  \"num_experts\": " + std::to_string(trace.num_experts) + ",\n";
  text += "  \"top_k\": " + std::to_string(trace.top_k) + ",\n";
  text += "  \"steps\": [";
  for (size_t step = 0; step < trace.steps.size(); ++step) {
    const RoutingStep& routed = trace.steps[step];
    text += step == 0 ? "\n    " : ",\n    ";
    text += "{\"kind\":" + JsonString(routed.kind, StepField(step) + ".kind");
    text += ",\"tokens\":";
    AppendInt(text, routed.tokens);
    if (!routed.sequence_tokens.empty()) {
      text += ",\"sequence_tokens\":[";
      for (size_t i = 0; i < routed.sequence_tokens.size(); ++i) {
        if (i > 0) text += ',';
        AppendInt(text, routed.sequence_tokens[i]);
      }
      text += ']';
    }
    text += ",\"experts\":[";
    for (size_t layer = 0; layer < routed.experts.size(); ++layer) {
      if (layer > 0) text += ',';
      text += '[';
      for (size_t token = 0; token < routed.experts[layer].size(); ++token) {
        if (token > 0) text += ',';
        text += '[';
        const std::vector<int32_t>& ranked = routed.experts[layer][token];
        for (size_t k = 0; k < ranked.size(); ++k) {
          if (k > 0) text += ',';
          AppendInt(text, ranked[k]);
        }
        text += ']';
      }
      text += ']';
    }
    text += "],\"expert_counts\":[";
    const std::vector<std::vector<int64_t>> counts = trace.ExpertCounts(step);
    for (size_t layer = 0; layer < counts.size(); ++layer) {
      if (layer > 0) text += ',';
      text += '[';
      for (size_t expert = 0; expert < counts[layer].size(); ++expert) {
        if (expert > 0) text += ',';
        AppendInt(text, counts[layer][expert]);
      }
      text += ']';
    }
    text += "]}";
  }
  text += trace.steps.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return text;
}

void SaveRoutingTrace(const RoutingTrace& trace, const std::string& path) {
  // Validate and render before touching the file system: an invalid trace writes nothing.
  base::WriteFileAtomically(path, RoutingTraceToText(trace));
}

}  // namespace moelab::routing
