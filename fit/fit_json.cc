#include "fit/fit_json.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "base/json_reader.h"

namespace moelab::fit {
namespace {

constexpr double kBoundTolerance = 1e-9;

nlohmann::json Optional(const std::optional<double>& value) {
  return value && std::isfinite(*value) ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json Finite(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

std::optional<double> ReadOptional(const base::JsonReader& reader, const std::string& key) {
  if (!reader.Has(key)) return std::nullopt;
  const nlohmann::json& value = reader.json()[key];
  if (!value.is_number() || !std::isfinite(value.get<double>())) {
    reader.Fail(key, "a finite number or null");
  }
  return value.get<double>();
}

// Any finite number (JsonReader::Number needs a minimum).
double ReadFinite(const base::JsonReader& reader, const std::string& key) {
  return reader.Number(key, -std::numeric_limits<double>::max(), true);
}

base::JsonReader CheckHeader(const nlohmann::json& json, const std::string& origin,
                             const std::string& kind) {
  const base::JsonReader reader(json, origin);
  if (reader.String("schema") != kFitSchema)
    reader.Fail("schema", std::string("\"") + kFitSchema + "\"");
  const std::string found = reader.String("kind");
  if (found != kind) {
    reader.Fail("kind", "\"" + kind + "\" (a fit written by `moelab fit " + kind + "`)");
  }
  return reader;
}

nlohmann::json StringArray(const std::vector<std::string>& values) {
  nlohmann::json array = nlohmann::json::array();
  for (const std::string& value : values) array.push_back(value);
  return array;
}

std::vector<std::string> ReadStringArray(const base::JsonReader& reader, const std::string& key) {
  std::vector<std::string> values;
  if (!reader.Has(key)) return values;
  const nlohmann::json& array = reader.json()[key];
  if (!array.is_array()) reader.Fail(key, "an array of strings");
  for (const nlohmann::json& value : array) {
    if (!value.is_string()) reader.Fail(key, "an array of strings");
    values.push_back(value.get<std::string>());
  }
  return values;
}

nlohmann::json FormToJson(const LatencyFormFit& fit) {
  const std::vector<std::string>& names = LatencyFormParameterNames(fit.form);
  nlohmann::json params = nlohmann::json::object();
  nlohmann::json errors = nlohmann::json::object();
  if (fit.form == LatencyForm::kInterpolated) {
    nlohmann::json knots = nlohmann::json::array();
    for (size_t i = 0; i + 1 < fit.params.size(); i += 2)
      knots.push_back({fit.params[i], fit.params[i + 1]});
    params["knots"] = knots;
  }
  for (size_t i = 0; i < names.size(); ++i) {
    params[names[i]] = fit.params[i];
    errors[names[i]] = Optional(i < fit.std_errors.size() ? fit.std_errors[i] : std::nullopt);
  }
  return {{"params", params},
          {"std_errors", errors},
          {"rmse", fit.rmse_s},
          {"mape", fit.mape},
          {"r2", Optional(fit.r2)},
          {"loo_rmse", Optional(fit.loo_rmse_s)},
          {"loo_relative_rmse", Optional(fit.loo_relative_rmse)},
          {"covariance", fit.covariance_status},
          {"at_bound", StringArray(fit.at_bound)}};
}

// params.knots: [[x, seconds], ...], x strictly increasing, seconds finite and >= 0, two or more.
std::vector<double> ReadKnots(const base::JsonReader& params) {
  const char* expected =
      "an array of two or more [x, seconds] pairs, x strictly increasing, seconds >= 0";
  if (!params.Has("knots") || !params.json()["knots"].is_array()) params.Fail("knots", expected);
  const nlohmann::json& knots = params.json()["knots"];
  if (knots.size() < 2) params.Fail("knots", expected);
  std::vector<double> flat;
  for (const nlohmann::json& knot : knots) {
    if (!knot.is_array() || knot.size() != 2 || !knot[0].is_number() || !knot[1].is_number()) {
      params.Fail("knots", expected);
    }
    const double x = knot[0].get<double>(), seconds = knot[1].get<double>();
    if (!std::isfinite(x) || !std::isfinite(seconds) || seconds < 0 ||
        (!flat.empty() && !(x > flat[flat.size() - 2]))) {
      params.Fail("knots", expected);
    }
    flat.push_back(x);
    flat.push_back(seconds);
  }
  return flat;
}

LatencyFormFit FormFromJson(const base::JsonReader& reader, LatencyForm form) {
  LatencyFormFit fit;
  fit.form = form;
  const base::JsonReader params = reader.Object("params");
  const std::optional<base::JsonReader> errors = reader.OptionalObject("std_errors");
  if (form == LatencyForm::kInterpolated) fit.params = ReadKnots(params);
  for (const std::string& name : LatencyFormParameterNames(form)) {
    fit.params.push_back(ReadFinite(params, name));
    fit.std_errors.push_back(errors ? ReadOptional(*errors, name) : std::nullopt);
  }
  const std::vector<std::string>& names = LatencyFormParameterNames(form);
  for (const auto& [name, value] : params.json().items()) {
    if (form == LatencyForm::kInterpolated && name == "knots") continue;
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      params.Fail(name, "no such parameter: the " + ToString(form) + " form has only its own");
    }
  }
  fit.rmse_s = reader.Number("rmse", 0.0, true);
  fit.mape = reader.Number("mape", 0.0, true);
  fit.r2 = ReadOptional(reader, "r2");
  fit.loo_rmse_s = ReadOptional(reader, "loo_rmse");
  fit.loo_relative_rmse = ReadOptional(reader, "loo_relative_rmse");
  fit.covariance_status = reader.String("covariance", "not_computed");
  fit.at_bound = ReadStringArray(reader, "at_bound");
  // A misspelt field of a form ("loo_rmse_s", a std_errors entry "b " for "b") was ignored.
  if (errors) errors->RefuseUnknownFields("a latency fit form's std_errors");
  reader.RefuseUnknownFields("a latency fit's form");
  return fit;
}

}  // namespace

std::string FitKind(const nlohmann::json& json, const std::string& origin) {
  const base::JsonReader reader(json, origin);
  if (reader.String("schema") != kFitSchema)
    reader.Fail("schema", std::string("\"") + kFitSchema + "\"");
  const std::string kind = reader.String("kind");
  if (kind != "sd" && kind != "latency") reader.Fail("kind", "\"sd\" or \"latency\"");
  return kind;
}

nlohmann::json SdFitToJson(const SdFit& fit) {
  nlohmann::json params = nlohmann::json::object();
  nlohmann::json errors = nlohmann::json::object();
  nlohmann::json bounds = nlohmann::json::object();
  nlohmann::json initial = nlohmann::json::object();
  for (size_t i = 0; i < model::MoesdParams::kNames.size(); ++i) {
    const std::string name = model::MoesdParams::kNames[i];
    params[name] = fit.params.values[i];
    errors[name] = Optional(fit.std_errors[i]);
    bounds[name] = {{"lower", Finite(fit.bounds.lower[i])}, {"upper", Finite(fit.bounds.upper[i])}};
    initial[name] = fit.initial_params.values[i];
  }
  const SdFitScales& s = fit.scales;
  nlohmann::json json;
  json["schema"] = kFitSchema;
  json["kind"] = "sd";
  json["params"] = params;
  json["std_errors"] = errors;
  json["rmse"] = fit.rmse;
  json["mape"] = fit.mape;
  json["r2"] = Optional(fit.r2);
  json["loo_rmse"] = Optional(fit.loo_rmse);
  json["n"] = fit.n;
  json["denominator"] = ToString(fit.denominator);
  json["ridge_point_tokens"] = s.ridge_point_tokens;
  json["bounds"] = bounds;
  json["model"] = s.model;
  json["draft"] = s.draft;
  json["hardware"] = s.hardware;
  json["scales"] = {{"bandwidth_bytes_per_s", s.bandwidth_bytes_per_s},
                    {"devices", s.devices},
                    {"t_dense_s", s.t_dense_s},
                    {"t_expert_s", s.t_expert_s},
                    {"t_draft_s", s.t_draft_s},
                    {"t_reject_max_s", s.t_reject_max_s},
                    {"t_reject_source", s.t_reject_source},
                    {"max_batch", s.max_batch}};
  json["covariance"] = {{"status", fit.covariance_status},
                        {"note", fit.covariance_note},
                        {"gauge_fixed", StringArray(fit.gauge_fixed)}};
  json["at_bound"] = StringArray(fit.at_bound);
  json["solver"] = {{"final_cost", fit.final_cost},
                    {"iterations", fit.iterations},
                    {"best_start", fit.best_start},
                    {"starts", fit.options.starts},
                    {"starts_converged", fit.starts_converged},
                    {"seed", fit.options.seed},
                    {"loss", fit.options.loss},
                    {"loss_scale", fit.options.loss_scale},
                    {"max_iterations", fit.options.max_iterations},
                    {"termination", fit.termination_message},
                    {"initial_params", initial}};
  json["units"] = {{"rmse", "speedup"},
                   {"loo_rmse", "speedup"},
                   {"mape", "percent"},
                   {"time_parameters", "seconds"},
                   {"lambda", "fraction of the ridge point"},
                   {"s", "growth per token"}};
  return json;
}

SdFit SdFitFromJson(const nlohmann::json& json, const std::string& origin) {
  const base::JsonReader reader = CheckHeader(json, origin, "sd");
  SdFit fit;
  const base::JsonReader params = reader.Object("params");
  const std::optional<base::JsonReader> errors = reader.OptionalObject("std_errors");
  const base::JsonReader bounds = reader.Object("bounds");
  for (size_t i = 0; i < model::MoesdParams::kNames.size(); ++i) {
    const std::string name = model::MoesdParams::kNames[i];
    fit.params.values[i] = ReadFinite(params, name);
    if (errors) fit.std_errors[i] = ReadOptional(*errors, name);
    const base::JsonReader bound = bounds.Object(name);
    fit.bounds.lower[i] = ReadFinite(bound, "lower");
    fit.bounds.upper[i] =
        bound.Has("upper") ? ReadFinite(bound, "upper") : std::numeric_limits<double>::infinity();
    bound.RefuseUnknownFields("an sd fit's bound");
    if (!(fit.bounds.lower[i] <= fit.bounds.upper[i])) bound.Fail("upper", "a number >= lower");
    const double slack = kBoundTolerance * std::max(1.0, std::fabs(fit.params.values[i]));
    if (fit.params.values[i] < fit.bounds.lower[i] - slack ||
        fit.params.values[i] > fit.bounds.upper[i] + slack) {
      params.Fail(name, "a value within bounds." + name + " [" +
                            std::to_string(fit.bounds.lower[i]) + ", " +
                            std::to_string(fit.bounds.upper[i]) + "]");
    }
  }
  // A parameter the model does not have ("lamda" beside "lambda") was ignored.
  params.RefuseUnknownFields("an sd fit's params (MoESD's parameters)");
  if (errors) errors->RefuseUnknownFields("an sd fit's std_errors");
  bounds.RefuseUnknownFields("an sd fit's bounds");
  if (fit.params.values[8] <= 0) params.Fail("lambda", "a number > 0");
  if (fit.params.values[9] < 1) params.Fail("s", "a number >= 1");
  fit.rmse = reader.Number("rmse", 0.0, true);
  fit.mape = reader.Number("mape", 0.0, true);
  fit.r2 = ReadOptional(reader, "r2");
  fit.loo_rmse = ReadOptional(reader, "loo_rmse");
  fit.n = reader.Int("n", 1);
  try {
    fit.denominator = model::SdDenominatorFromString(reader.String("denominator"));
  } catch (const base::Error&) {
    reader.Fail("denominator", "\"algorithm1\" or \"equation4\"");
  }
  SdFitScales& s = fit.scales;
  s.ridge_point_tokens = reader.Number("ridge_point_tokens", 0.0);
  s.model = reader.String("model");
  s.draft = reader.String("draft");
  s.hardware = reader.String("hardware");
  if (const std::optional<base::JsonReader> scales = reader.OptionalObject("scales")) {
    s.bandwidth_bytes_per_s = scales->Number("bandwidth_bytes_per_s", 0.0);
    s.devices = scales->Int("devices", 1);
    s.t_dense_s = scales->Number("t_dense_s", 0.0);
    s.t_expert_s = scales->Number("t_expert_s", 0.0);
    s.t_draft_s = scales->Number("t_draft_s", 0.0);
    s.t_reject_max_s = scales->Number("t_reject_max_s", 0.0);
    s.t_reject_source = scales->String("t_reject_source", "");
    s.max_batch = scales->Int("max_batch", 1, 1);
    scales->RefuseUnknownFields("an sd fit's scales");
  }
  if (const std::optional<base::JsonReader> covariance = reader.OptionalObject("covariance")) {
    fit.covariance_status = covariance->String("status");
    fit.covariance_note = covariance->String("note", "");
    fit.gauge_fixed = ReadStringArray(*covariance, "gauge_fixed");
    covariance->RefuseUnknownFields("an sd fit's covariance");
  }
  fit.at_bound = ReadStringArray(reader, "at_bound");
  if (const std::optional<base::JsonReader> solver = reader.OptionalObject("solver")) {
    fit.final_cost = solver->Number("final_cost", 0.0, true);
    fit.iterations = static_cast<int>(solver->Int("iterations", 0));
    fit.best_start = static_cast<int>(solver->Int("best_start", 0, 0));
    fit.options.starts = static_cast<int>(solver->Int("starts", 1));
    fit.starts_converged = static_cast<int>(solver->Int("starts_converged", 0));
    fit.options.seed = static_cast<uint64_t>(solver->Int("seed", 0));
    fit.options.loss = solver->String("loss");
    fit.options.loss_scale = solver->Number("loss_scale", 0.0);
    fit.options.max_iterations = static_cast<int>(solver->Int("max_iterations", 1));
    fit.termination_message = solver->String("termination", "");
    if (const std::optional<base::JsonReader> initial = solver->OptionalObject("initial_params")) {
      for (size_t i = 0; i < model::MoesdParams::kNames.size(); ++i) {
        fit.initial_params.values[i] = ReadFinite(*initial, model::MoesdParams::kNames[i]);
      }
      initial->RefuseUnknownFields("an sd fit's solver.initial_params");
    }
    solver->RefuseUnknownFields("an sd fit's solver");
  }
  // "units", "provenance" and "measurements" (the files fitted) are what fit sd writes for a
  // reader.
  for (const char* written : {"units", "provenance", "measurements"}) reader.Has(written);
  reader.RefuseUnknownFields("an sd fit (moelab.fit/1)");
  return fit;
}

SdFit LoadSdFit(const std::filesystem::path& file) {
  if (!std::filesystem::exists(file)) throw base::Error(file.string() + ": fit file not found");
  const nlohmann::json document = base::JsonReader::ParseFile(file);
  if (FitKind(document, file.string()) != "sd") {
    throw base::Error(file.string() +
                      ": a latency fit; expected an sd fit (written by `moelab fit sd`)");
  }
  return SdFitFromJson(document, file.string());
}

nlohmann::json LatencyFitToJson(const LatencyFit& fit) {
  nlohmann::json operators = nlohmann::json::array();
  for (const OperatorCurve& curve : fit.operators) {
    nlohmann::json forms = nlohmann::json::object();
    for (const LatencyFormFit& form : curve.forms) forms[ToString(form.form)] = FormToJson(form);
    operators.push_back(
        {{"operator", curve.op},
         {"device", curve.device},
         {"shape", curve.shape},
         {"variable", curve.variable},
         {"tokens", curve.tokens ? nlohmann::json(*curve.tokens) : nlohmann::json(nullptr)},
         {"n", curve.n},
         {"x_min", curve.x_min},
         {"x_max", curve.x_max},
         {"forms", forms},
         {"best", ToString(curve.best)},
         {"notes", StringArray(curve.notes)}});
  }
  nlohmann::json skipped = nlohmann::json::array();
  for (const SkippedGroup& group : fit.skipped) {
    skipped.push_back({{"operator", group.op},
                       {"device", group.device},
                       {"shape", group.shape},
                       {"reason", group.reason}});
  }
  nlohmann::json json;
  json["schema"] = kFitSchema;
  json["kind"] = "latency";
  json["profile"] = fit.profile;
  json["machine"] = fit.machine;
  json["model"] = fit.model.ToJson();
  if (fit.draft_name) json["draft"] = {{"name", *fit.draft_name}};
  json["operators"] = operators;
  json["skipped"] = skipped;
  json["options"] = {{"starts", fit.options.starts},
                     {"seed", fit.options.seed},
                     {"loss", fit.options.loss},
                     {"loss_scale", fit.options.loss_scale},
                     {"max_iterations", fit.options.max_iterations}};
  json["units"] = {{"rmse", "seconds"},
                   {"loo_rmse", "seconds"},
                   {"mape", "percent"},
                   {"roofline", "bias, k: seconds; P: tokens; s: growth per token"},
                   {"quadratic", "a: seconds; b: seconds per token; c: seconds per token squared"},
                   {"linear", "a: seconds; b: seconds per token (per byte when variable is bytes)"},
                   {"constant", "c: seconds"}};
  return json;
}

LatencyFit LatencyFitFromJson(const nlohmann::json& json, const std::string& origin) {
  const base::JsonReader reader = CheckHeader(json, origin, "latency");
  LatencyFit fit;
  fit.profile = reader.String("profile", "");
  if (const auto machine = reader.OptionalObject("machine")) fit.machine = machine->json();
  const std::optional<base::JsonReader> model = reader.OptionalObject("model");
  fit.model = model::ProfiledModel::FromJson(model ? model->json() : nlohmann::json::object(),
                                             fit.machine, origin);
  if (const std::optional<base::JsonReader> draft = reader.OptionalObject("draft"))
    fit.draft_name = draft->String("name");
  if (!json.contains("operators") || !json["operators"].is_array()) {
    reader.Fail("operators", "an array of operator curves");
  }
  for (size_t i = 0; i < json["operators"].size(); ++i) {
    const base::JsonReader entry(json["operators"][i], origin,
                                 "operators[" + std::to_string(i) + "]");
    OperatorCurve curve;
    curve.op = entry.String("operator");
    curve.device = entry.String("device");
    curve.shape = entry.Object("shape").json();
    curve.variable = entry.String("variable");
    if (curve.variable != "tokens" && curve.variable != "bytes") {
      entry.Fail("variable", "\"tokens\" or \"bytes\"");
    }
    if (entry.Has("tokens")) curve.tokens = entry.Int("tokens", 0);
    curve.n = entry.Int("n", 1);
    curve.x_min = ReadFinite(entry, "x_min");
    curve.x_max = ReadFinite(entry, "x_max");
    const base::JsonReader forms = entry.Object("forms");
    for (const auto& [name, value] : forms.json().items()) {
      LatencyForm form;
      try {
        form = LatencyFormFromString(name);
      } catch (const base::Error&) {
        forms.Fail(name, "a form named interpolated, roofline, quadratic, linear or constant");
      }
      curve.forms.push_back(FormFromJson(forms.Object(name), form));
    }
    if (curve.forms.empty()) entry.Fail("forms", "at least one fitted form");
    std::sort(curve.forms.begin(), curve.forms.end(),
              [](const LatencyFormFit& a, const LatencyFormFit& b) { return a.form < b.form; });
    try {
      curve.best = LatencyFormFromString(entry.String("best"));
    } catch (const base::Error&) {
      entry.Fail("best", "one of the fitted forms");
    }
    if (curve.Form(curve.best) == nullptr) entry.Fail("best", "one of the fitted forms");
    curve.notes = ReadStringArray(entry, "notes");
    entry.RefuseUnknownFields("a latency fit's operator curve");
    fit.operators.push_back(std::move(curve));
  }
  if (json.contains("skipped")) {
    if (!json["skipped"].is_array()) reader.Fail("skipped", "an array");
    for (size_t i = 0; i < json["skipped"].size(); ++i) {
      const base::JsonReader entry(json["skipped"][i], origin,
                                   "skipped[" + std::to_string(i) + "]");
      fit.skipped.push_back({entry.String("operator"), entry.String("device"),
                             entry.Object("shape").json(), entry.String("reason")});
      entry.RefuseUnknownFields("a latency fit's skipped group");
    }
  }
  if (const auto options = reader.OptionalObject("options")) {
    fit.options.starts = static_cast<int>(options->Int("starts", 1));
    fit.options.seed = static_cast<uint64_t>(options->Int("seed", 0));
    fit.options.loss = options->String("loss");
    fit.options.loss_scale = options->Number("loss_scale", 0.0);
    fit.options.max_iterations = static_cast<int>(options->Int("max_iterations", 1));
    options->RefuseUnknownFields("a latency fit's options");
  }
  // A misspelt top-level field was ignored. "units" and "provenance" are what fit latency writes
  // for a reader.
  for (const char* written : {"operators", "skipped", "units", "provenance"}) reader.Has(written);
  reader.RefuseUnknownFields("a latency fit (moelab.fit/1)");
  return fit;
}

LatencyFit LoadLatencyFit(const std::filesystem::path& file) {
  if (!std::filesystem::exists(file)) throw base::Error(file.string() + ": fit file not found");
  return LatencyFitFromJson(base::JsonReader::ParseFile(file), file.string());
}

}  // namespace moelab::fit
