#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "model/executor_shape.h"
#include "model/model_spec.h"

namespace moelab::model {

// What a profile measured: which model, at which executor shape, with which expert and attention
// weight formats, on which kernel path. The one owner of these facts:
//  - the profiler writes them (ToJson: the profile's "model" and "draft" objects; the kernel path
//    is the same profile's machine.isa and machine.quantized_kernel, which its machine description
//    writes), a latency fit copies "model" and "machine" from its profile, and every reader parses
//    them here (FromJson), once, with errors naming the file and field;
//  - a fact a profile did not record (profiles written before it existed) stays unset, and
//    FromJson(ToJson(m)) == m, so a fit carries its profile's object unchanged; an unrecorded
//    weight format is bf16 (the formats were recorded from the first quantized kernels on);
//  - whether a prediction or run may use the profile is decided by Require alone, with one
//    message naming the file, the field, what was measured and what was expected.
struct ProfiledModel {
  std::string origin;  // the file the facts came from, for messages; not written
  std::optional<std::string> name, family;
  ShapeOverrides shape;                   // model.shape's integer fields, as recorded
  std::optional<int64_t> sliding_window;  // model.shape.sliding_window (written when > 0)
  // model.shape.{expert,attention}_format ("bf16", "q8_0", "q4_0") and _stored_bits (per
  // weight, block scales included: 16, 8.5, 4.5).
  std::optional<std::string> expert_format, attention_format;
  std::optional<double> expert_stored_bits, attention_stored_bits;
  // machine.isa and machine.quantized_kernel: the kernels the operators ran.
  std::optional<std::string> isa, quantized_kernel;

  std::string ExpertFormat() const { return expert_format.value_or("bf16"); }
  std::string AttentionFormat() const { return attention_format.value_or("bf16"); }
  double ExpertStoredBits() const { return expert_stored_bits.value_or(16.0); }
  double AttentionStoredBits() const { return attention_stored_bits.value_or(16.0); }

  // {"name", "family", "shape": {...}} with the recorded facts only (the kernel path apart).
  nlohmann::json ToJson() const;
  // From a profile's (or fit's) "model" object and its "machine" object (either may be null or
  // empty). Errors: a shape field that is not a non-negative integer, stored bits that are not a
  // positive number, naming `origin` and the field.
  static ProfiledModel FromJson(const nlohmann::json& model, const nlohmann::json& machine,
                                std::string origin);
  // The facts of `spec` a profile's curves depend on: its name, the layer shape (layers, hidden,
  // intermediate, experts, top_k) and the stored bits of its experts and attention.
  static ProfiledModel Of(const MoeModelSpec& spec);

  // `preset` as the executor ran it for the profile: the recorded shape (the executor's default
  // target shape for fields it lacks) with the recorded weight formats' stored bits.
  MoeModelSpec ExecutorSpec(const MoeModelSpec& preset) const;

  // The one compatibility check: throws moelab::Error when a fact `wanted` sets differs from what
  // this profile measured (facts the profile did not record are not compared; unrecorded formats
  // are bf16). Bits match the stored bits or the bits a command line names a recorded format by
  // (4 for q4_0). `asker` says who expects them ("--model", "validate's runs here", ...). The
  // message:
  //   FILE: the profile measured WHAT MEASURED, not WANTED (ASKER): field 'FIELD'; profile ...
  void Require(const ProfiledModel& wanted, const std::string& asker) const;
};

}  // namespace moelab::model
