#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/shape_options.h"
#include "model/executor_shape.h"
#include "base/atomic_file.h"
#include "model/describe.h"
#include "model/preset_store.h"

namespace moelab::cli {

int ModelShow(const std::vector<std::string>& args) {
  po::options_description options("moelab model show");
  options.add_options()(
      "model", po::value<std::string>()->required(),
      "model preset name or path (moelab.model/1 file or Hugging Face config.json)")(
      "tau", po::value<std::string>()->default_value("0.95"),
      "fraction of experts counted as 'all' for T_thres")(
      "spec-out", po::value<std::string>()->default_value(""),
      "write the (scaled) model as a moelab.model/1 file, atomically: a --model for every other "
      "command");
  AddShapeOptions(options, "", model::ShapeOverrides{});
  AddOutputOptions(options);
  po::variables_map values;
  if (!ParseOptions("usage: moelab model show --model NAME|PATH [shape overrides] [--spec-out "
                    "FILE] [--json|--csv]",
                    options, args, values))
    return 0;
  const OutputRequest output = OutputRequestFrom(values);
  const double tau = base::ParseNumber(values["tau"].as<std::string>(), "tau");
  model::MoeModelSpec spec =
      model::PresetStore::Default().LoadModel(values["model"].as<std::string>());
  spec = model::ScaledSpec(spec, ShapeFrom(values, "", model::ShapeOverrides{}));
  const std::string spec_out = values["spec-out"].as<std::string>();
  base::RequireWritableDistinctOutputs({{"--out", output.out}, {"--spec-out", spec_out}});
  // Described (and --tau checked) before anything is written: an error leaves no --spec-out.
  nlohmann::json description = model::DescribeModel(spec, tau);
  const std::string text = model::ModelText(spec, description);
  description["schema"] = "moelab.model_show/1";
  description["provenance"] = Provenance();
  const report::RowSet rows =
      output.format == Format::kCsv ? report::JsonRow(description) : report::RowSet({});
  Printed printed{PrintedResult(output, description, text, rows), output.out, {}};
  if (!spec_out.empty())
    printed.files.emplace_back(spec_out, model::ModelSpecToJson(spec).dump(2) + "\n");
  return EmitPrinted(printed);
}

int ModelList(const std::vector<std::string>& args) {
  po::options_description options("moelab model list");
  AddOutputOptions(options);
  po::variables_map values;
  if (!ParseOptions("usage: moelab model list [--json|--csv]", options, args, values)) return 0;
  const OutputRequest output = OutputRequestFrom(values);
  const model::PresetListing listing = model::ListModelPresets(model::PresetStore::Default());
  EmitResult(output,
             {{"schema", "moelab.model_list/1"},
              {"models", listing.presets},
              {"provenance", Provenance()}},
             listing.text, report::JsonArrayRows(listing.presets));
  return 0;
}

}  // namespace moelab::cli
