#include "executor/expert_placement.h"

#include "base/error.h"
#include "base/json_reader.h"
#include "base/message_text.h"

namespace moelab::executor {

std::vector<int32_t> ExpertPlacement::ExpertsOf(int rank) const {
  std::vector<int32_t> experts;
  for (int64_t e = 0; e < num_experts(); ++e) {
    if (rank_of_expert[e] == rank) experts.push_back(static_cast<int32_t>(e));
  }
  return experts;
}

std::string ExpertPlacement::Key() const {
  // Appended piecewise: g++ 12's -Wrestrict misfires on "literal" + std::to_string(...).
  std::string key = "ranks ";
  key += std::to_string(ranks);
  key += ":";
  for (int32_t r : rank_of_expert) {
    key += ' ';
    key += std::to_string(r);
  }
  return key;
}

ExpertPlacement ContiguousPlacement(int64_t num_experts, int ranks) {
  if (ranks < 1 || num_experts % ranks != 0) {
    throw base::Error("--expert-parallel " + std::to_string(ranks) + " does not divide the " +
                      std::to_string(num_experts) +
                      " routed experts into equal contiguous blocks: choose a rank count that "
                      "divides them, or give --placement FILE");
  }
  ExpertPlacement placement;
  placement.ranks = ranks;
  for (int64_t e = 0; e < num_experts; ++e)
    placement.rank_of_expert.push_back(static_cast<int32_t>(e * ranks / num_experts));
  return placement;
}

ExpertPlacement LoadPlacement(const std::filesystem::path& file, int64_t num_experts, int ranks) {
  const nlohmann::json json = base::JsonReader::ParseFile(file);
  const base::JsonReader reader(json, file.string());
  const std::string schema = reader.String("schema");
  if (schema != "moelab.expert_placement/1") reader.Fail("schema", "\"moelab.expert_placement/1\"");
  // A misspelt or extra field was ignored: "rank" for "ranks" then read as no placement at all.
  for (const auto& [key, value] : json.items()) {
    if (key != "schema" && key != "ranks") {
      throw base::Error(base::EscapeForMessage(file.string()) + ": field '" +
                        base::EscapeForMessage(key) +
                        "': unknown (a moelab.expert_placement/1 file holds schema and ranks)");
    }
  }
  const std::string expected = "an array of " + std::to_string(ranks) +
                               " lists of expert ids, one per rank (--expert-parallel " +
                               std::to_string(ranks) + ")";
  if (!reader.Has("ranks")) reader.Fail("ranks", expected);
  const nlohmann::json& lists = json.at("ranks");
  if (!lists.is_array() || static_cast<int64_t>(lists.size()) != ranks) {
    reader.Fail("ranks", expected);
  }
  ExpertPlacement placement;
  placement.ranks = ranks;
  placement.rank_of_expert.assign(static_cast<size_t>(num_experts), -1);
  const std::string where = base::EscapeForMessage(file.string());
  for (int r = 0; r < ranks; ++r) {
    const nlohmann::json& list = lists[static_cast<size_t>(r)];
    const std::string field = where + ": ranks[" + std::to_string(r) + "]";
    if (!list.is_array()) throw base::Error(field + ": expected a list of expert ids");
    for (const nlohmann::json& id : list) {
      if (!id.is_number_integer()) {
        throw base::Error(field + ": expert id " + base::EscapeForMessage(id.dump()) +
                          " is not a whole number (expected an id in [0, " +
                          std::to_string(num_experts) + "))");
      }
      if (id.get<int64_t>() < 0 || id.get<int64_t>() >= num_experts) {
        throw base::Error(field + ": expert id " + id.dump() + " is not in [0, " +
                          std::to_string(num_experts) + ")");
      }
      const int64_t e = id.get<int64_t>();
      if (placement.rank_of_expert[e] >= 0) {
        throw base::Error(field + ": expert " + std::to_string(e) + " is already on rank " +
                          std::to_string(placement.rank_of_expert[e]) +
                          " (every expert on exactly one rank)");
      }
      placement.rank_of_expert[e] = r;
    }
  }
  for (int64_t e = 0; e < num_experts; ++e) {
    if (placement.rank_of_expert[e] < 0) {
      throw base::Error(where + ": expert " + std::to_string(e) +
                        " is on no rank (every expert of the " + std::to_string(num_experts) +
                        " on exactly one rank)");
    }
  }
  return placement;
}

}  // namespace moelab::executor
