#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "validate/run_validation.h"

namespace moelab::validate {

inline constexpr char kValidationSchema[] = "moelab.validation/1";

// "moelab.validation/1" (validate/README.md): cases, the headline errors (fitted-profile with the
// executor's recorded routing) overall and by kind, every (cost source, routing) summary, best
// gamma rows, the machine and its limits per round, provenance.
nlohmann::json ValidationToJson(const ValidationResult& result);

// The terminal summary: per kind and cost source, median / p90 / max error; best gamma.
std::string ValidationText(const ValidationResult& result);

// A Markdown report of the run: the summaries, every case, best gamma, how to reproduce.
std::string ValidationMarkdown(const ValidationResult& result);

// Writes into `folder`: validation.json, report.md, and the plots as data + gnuplot scripts
// (predicted-vs-measured-time, predicted-vs-measured-speedup, sd-speedup-vs-batch), rendered to
// PNG and SVG when gnuplot is installed (a note in report.md otherwise). Each file atomically.
// Returns whether the plots were rendered.
bool WriteValidationFolder(const ValidationResult& result, const std::filesystem::path& folder);

}  // namespace moelab::validate
