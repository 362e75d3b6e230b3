#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "fit/latency_fit.h"
#include "fit/sd_fit.h"

namespace moelab::fit {

// Fit files, schema "moelab.fit/1" (field by field in fit/README.md), kind "sd" or "latency".
// The writers produce everything but "provenance" (the CLI adds it); the loaders validate what
// they read and throw moelab::Error naming the file and field: wrong schema or kind, missing or
// non-finite parameters, a parameter outside its own bounds, an unknown denominator or form, a
// "best" form that was not fitted. sim/ loads fits through these.
inline constexpr const char* kFitSchema = "moelab.fit/1";

nlohmann::json SdFitToJson(const SdFit& fit);
SdFit SdFitFromJson(const nlohmann::json& json, const std::string& origin);
SdFit LoadSdFit(const std::filesystem::path& file);

nlohmann::json LatencyFitToJson(const LatencyFit& fit);
LatencyFit LatencyFitFromJson(const nlohmann::json& json, const std::string& origin);
LatencyFit LoadLatencyFit(const std::filesystem::path& file);

// The "kind" of a moelab.fit/1 document ("sd" or "latency"), after checking its schema.
std::string FitKind(const nlohmann::json& json, const std::string& origin);

}  // namespace moelab::fit
