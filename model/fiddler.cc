#include "model/fiddler.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>

#include "base/error.h"
#include "base/input_file.h"
#include "base/json_reader.h"

namespace moelab::model {
namespace {

std::vector<std::pair<double, ExpertId>> Ranked(const PopularityTable& popularity) {
  std::vector<std::pair<double, ExpertId>> ranked;
  for (size_t layer = 0; layer < popularity.size(); ++layer) {
    for (size_t expert = 0; expert < popularity[layer].size(); ++expert) {
      ranked.push_back({popularity[layer][expert],
                        ExpertId{static_cast<int64_t>(layer), static_cast<int64_t>(expert)}});
    }
  }
  return ranked;
}

double Total(const PopularityTable& popularity) {
  double total = 0;
  for (const auto& layer : popularity) {
    for (double count : layer) total += count;
  }
  return total;
}

bool ById(const ExpertId& a, const ExpertId& b) {
  return a.layer != b.layer ? a.layer < b.layer : a.expert < b.expert;
}

std::vector<ExpertId> Take(std::vector<std::pair<double, ExpertId>> ranked, int64_t capacity,
                           bool most_popular) {
  if (capacity < 0)
    throw base::Error("placement capacity must be >= 0, got " + std::to_string(capacity));
  std::stable_sort(ranked.begin(), ranked.end(), [&](const auto& a, const auto& b) {
    if (a.first != b.first) return most_popular ? a.first > b.first : a.first < b.first;
    return ById(a.second, b.second);
  });
  const size_t count = std::min(ranked.size(), static_cast<size_t>(capacity));
  std::vector<ExpertId> placement;
  for (size_t i = 0; i < count; ++i) placement.push_back(ranked[i].second);
  return placement;
}

void CheckTable(const PopularityTable& table, const std::string& origin) {
  if (table.empty()) throw base::Error(origin + ": popularity table has no layers");
  for (size_t layer = 0; layer < table.size(); ++layer) {
    if (table[layer].size() != table[0].size() || table[layer].empty()) {
      throw base::Error(origin + ": layer " + std::to_string(layer) + " has " +
                        std::to_string(table[layer].size()) + " experts, expected " +
                        std::to_string(table[0].size()) + " like layer 0");
    }
    for (double count : table[layer]) {
      if (!(count >= 0) || !std::isfinite(count)) {
        throw base::Error(origin + ": layer " + std::to_string(layer) +
                          ": popularity counts must be finite and >= 0");
      }
    }
  }
}

}  // namespace

void FiddlerLatencyModel::Validate() const {
  if (!(cpu_base_s >= 0 && cpu_per_token_s >= 0 && gpu_s >= 0 && transfer_s >= 0)) {
    throw base::Error(
        "Fiddler latency model: every latency must be >= 0 (cpu_base_s, cpu_per_token_s, gpu_s, "
        "transfer_s)");
  }
}

std::string ToString(ExpertExecution execution) {
  switch (execution) {
    case ExpertExecution::kSkip:
      return "skip";
    case ExpertExecution::kGpuResident:
      return "gpu";
    case ExpertExecution::kCopyWeightsThenGpu:
      return "copy+gpu";
    case ExpertExecution::kCpu:
      return "cpu";
  }
  return "?";
}

ExpertExecution FiddlerDecide(const FiddlerLatencyModel& model, int64_t tokens, bool on_gpu) {
  if (tokens < 0)
    throw base::Error("tokens routed to an expert must be >= 0, got " + std::to_string(tokens));
  if (tokens == 0) return ExpertExecution::kSkip;
  if (on_gpu) return ExpertExecution::kGpuResident;
  if (model.CpuLatency(tokens) > model.GpuLatency(tokens) + model.transfer_s) {
    return ExpertExecution::kCopyWeightsThenGpu;
  }
  return ExpertExecution::kCpu;
}

double FiddlerExpertLatency(const FiddlerLatencyModel& model, int64_t tokens, bool on_gpu) {
  switch (FiddlerDecide(model, tokens, on_gpu)) {
    case ExpertExecution::kSkip:
      return 0;
    case ExpertExecution::kGpuResident:
      return model.GpuLatency(tokens);
    case ExpertExecution::kCopyWeightsThenGpu:
      return model.transfer_s + model.GpuLatency(tokens);
    case ExpertExecution::kCpu:
      return model.CpuLatency(tokens);
  }
  return 0;
}

int64_t FiddlerCrossoverTokens(const FiddlerLatencyModel& model) {
  model.Validate();
  if (model.cpu_per_token_s == 0) return -1;
  const double gap = model.gpu_s + model.transfer_s - model.cpu_base_s;
  if (gap < 0) return 1;
  // Smallest integer s with cpu_base + b*s > gap + cpu_base, i.e. s > gap / b.
  return static_cast<int64_t>(std::floor(gap / model.cpu_per_token_s)) + 1;
}

std::vector<ExpertId> PlaceByPopularity(const PopularityTable& popularity, int64_t capacity) {
  return Take(Ranked(popularity), capacity, true);
}

std::vector<ExpertId> PlaceLeastPopular(const PopularityTable& popularity, int64_t capacity) {
  return Take(Ranked(popularity), capacity, false);
}

double ExpectedHitRate(const PopularityTable& popularity, const std::vector<ExpertId>& placement) {
  const double total = Total(popularity);
  if (total <= 0) throw base::Error("popularity table has no activations");
  double placed = 0;
  for (const ExpertId& id : placement) {
    if (id.layer < 0 || id.layer >= static_cast<int64_t>(popularity.size()) || id.expert < 0 ||
        id.expert >= static_cast<int64_t>(popularity[id.layer].size())) {
      throw base::Error("placement names expert (" + std::to_string(id.layer) + ", " +
                        std::to_string(id.expert) + ") outside the popularity table");
    }
    placed += popularity[id.layer][id.expert];
  }
  return placed / total;
}

double RandomPlacementHitRate(const PopularityTable& popularity, int64_t capacity) {
  size_t experts = 0;
  for (const auto& layer : popularity) experts += layer.size();
  if (experts == 0) throw base::Error("popularity table has no experts");
  return std::min(
      1.0, static_cast<double>(std::max<int64_t>(capacity, 0)) / static_cast<double>(experts));
}

PopularityTable LoadPopularityTable(const std::string& path) {
  PopularityTable table;
  if (path.ends_with(".json")) {
    const nlohmann::json json = base::JsonReader::ParseFile(path);
    const base::JsonReader reader(json, path);
    if (!reader.Has("expert_popularity") || !json["expert_popularity"].is_array()) {
      reader.Fail("expert_popularity", "an array of per-layer arrays of counts");
    }
    for (const auto& layer : json["expert_popularity"]) {
      if (!layer.is_array())
        reader.Fail("expert_popularity", "an array of per-layer arrays of counts");
      std::vector<double> counts;
      for (const auto& count : layer) {
        if (!count.is_number()) reader.Fail("expert_popularity", "numeric counts");
        counts.push_back(count.get<double>());
      }
      table.push_back(std::move(counts));
    }
  } else {
    if (!std::filesystem::exists(path)) throw base::Error(path + ": cannot open popularity table");
    std::istringstream in(base::ReadInputFile(path, base::kMaxCsvFileBytes, "popularity table"));
    std::string line;
    int64_t line_number = 0;
    while (std::getline(in, line)) {
      ++line_number;
      if (line.empty()) continue;
      if (line_number == 1) {
        if (!line.starts_with("layer,"))
          throw base::Error(path + ": line 1: expected a header \"layer,e0,e1,...\"");
        continue;
      }
      std::stringstream row(line);
      std::string cell;
      std::getline(row, cell, ',');
      if (cell != std::to_string(table.size())) {
        throw base::Error(path + ": line " + std::to_string(line_number) + ": expected layer " +
                          std::to_string(table.size()) + ", got '" + cell + "'");
      }
      std::vector<double> counts;
      while (std::getline(row, cell, ',')) {
        try {
          size_t used = 0;
          counts.push_back(std::stod(cell, &used));
          if (used != cell.size()) throw std::invalid_argument(cell);
        } catch (const std::exception&) {
          throw base::Error(path + ": line " + std::to_string(line_number) + ": '" + cell +
                            "' is not a number");
        }
      }
      table.push_back(std::move(counts));
    }
  }
  CheckTable(table, path);
  return table;
}

}  // namespace moelab::model
