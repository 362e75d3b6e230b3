// Hardware files as hw show --json writes them read back to the same hardware, and a misspelt
// field inside a component object is refused by name.
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "base/error.h"
#include "model/preset_store.h"
#include "tests/support/test_paths.h"

namespace moelab::model {
namespace {

PresetStore Store() { return PresetStore(testing::PresetDir()); }

class HardwareFile {
 public:
  HardwareFile() : dir_(testing::MakeTempDir("moelab-hardware-readback")) {}
  HardwareSpec Load(const nlohmann::json& json) const {
    const std::filesystem::path path = dir_ / "hw.json";
    std::ofstream(path) << json.dump();
    return Store().LoadHardware(path.string());
  }
  // The error's message (fails the test when the file is accepted).
  std::string Refusal(const nlohmann::json& json) const {
    try {
      Load(json);
    } catch (const base::Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "accepted: " << json.dump();
    return "";
  }

 private:
  std::filesystem::path dir_;
};

// Every preset (accelerators, hosts, links, nodes), a composed node and a node of several
// machines: shown, read back and shown again, the same JSON. Nodes and links were refused
// ("field 'interconnect': expected a string", "missing required field 'link'") and an
// accelerator's price was dropped.
TEST(HardwareReadBack, EveryShownHardwareReadsBackTheSame) {
  const PresetStore store = Store();
  std::vector<std::string> names = {"3xrtx-3090", "16xh100-sxm"};
  for (const PresetEntry& entry : store.ListHardware()) names.push_back(entry.name);
  const HardwareFile file;
  int nodes = 0, priced = 0, links = 0;
  for (const std::string& name : names) {
    const HardwareSpec shown = store.LoadHardware(name);
    const nlohmann::json json = HardwareSpecToJson(shown);
    HardwareSpec read;
    try {
      read = file.Load(json);
    } catch (const base::Error& e) {
      ADD_FAILURE() << name << ": " << e.what();
      continue;
    }
    EXPECT_EQ(HardwareSpecToJson(read), json) << name;
    nodes += shown.kind == HardwareKind::kNode;
    links += shown.kind == HardwareKind::kLink;
    priced += shown.accelerator && shown.accelerator->price_usd_per_hour.has_value();
  }
  EXPECT_GE(nodes, 10);
  EXPECT_GE(links, 4);
  EXPECT_GE(priced, 5);
}

// A shown node, edited, is the edited node: the count and the NVLink bandwidth as written.
TEST(HardwareReadBack, AnEditedNodeIsReadAsEdited) {
  nlohmann::json json = HardwareSpecToJson(Store().LoadHardware("8xh800"));
  json["accelerator_count"] = 4;
  json["interconnect"]["bandwidth_bytes_per_s"] = 4.5e11;
  const HardwareSpec node = HardwareFile().Load(json);
  EXPECT_EQ(node.kind, HardwareKind::kNode);
  EXPECT_EQ(node.accelerator_count, 4);
  EXPECT_EQ(node.interconnect->bandwidth_bytes_per_s, 4.5e11);
  EXPECT_EQ(node.accelerator->display_name, "NVIDIA H800 SXM5 80GB (NVLink 400 GB/s)");
  EXPECT_EQ(node.display_name, "8 x NVIDIA H800 SXM (NVLink 400 GB/s)");
}

TEST(HardwareReadBack, AnInlineNodeNeedsItsLinksAndWholeMachines) {
  const HardwareFile file;
  nlohmann::json node = HardwareSpecToJson(Store().LoadHardware("8xh800"));
  node.erase("interconnect");
  EXPECT_NE(file.Refusal(node).find("field 'interconnect'"), std::string::npos);
  node["accelerator_count"] = 1;  // one accelerator needs no link between accelerators
  EXPECT_EQ(file.Load(node).accelerator_count, 1);
  node["accelerator_count"] = 2000;
  EXPECT_NE(file.Refusal(node).find("at most 1024 on one machine"), std::string::npos);

  nlohmann::json machines = HardwareSpecToJson(Store().LoadHardware("2x8xh100-ib"));
  ASSERT_EQ(machines["accelerators_per_node"], 8);
  machines["accelerator_count"] = 12;
  EXPECT_NE(file.Refusal(machines).find("a whole number of machines of accelerators_per_node (8)"),
            std::string::npos);
  machines["accelerators_per_node"] = 1;  // 2,048 machines: past the bound on machines
  machines["accelerator_count"] = 2048;
  EXPECT_NE(file.Refusal(machines).find("at most 1024 of them"), std::string::npos);
  machines["accelerators_per_node"] = 8;
  machines["accelerator_count"] = 16;
  machines.erase("scale_out");
  EXPECT_NE(file.Refusal(machines).find("field 'accelerators_per_node'"), std::string::npos);
}

// An inline node's accelerator carries its own name and price; the top level is the node's.
TEST(HardwareReadBack, AnInlineNodesAcceleratorNamesAndPricesItself) {
  const HardwareFile file;
  nlohmann::json node = HardwareSpecToJson(Store().LoadHardware("8xh100-sxm"));
  ASSERT_TRUE(node["accelerator"].contains("price_usd_per_hour"));
  EXPECT_EQ(file.Load(node).accelerator->price_usd_per_hour, 2.79);
  nlohmann::json top = node;
  top["price_usd_per_hour"] = 20.0;
  top["price_source"] = "a quote";
  EXPECT_NE(file.Refusal(top).find("field 'price_usd_per_hour': expected inside \"accelerator\""),
            std::string::npos);
  node["accelerator"].erase("display_name");  // was shown as "8 x " with a blank name
  EXPECT_NE(file.Refusal(node).find("field 'accelerator.display_name'"), std::string::npos);
}

// A misspelt field in a component object was ignored and its value taken from nowhere (a
// bandwidth's typo left the right one's value; a second one's typo was never read).
TEST(HardwareReadBack, AMisspeltComponentFieldIsRefusedByName) {
  const HardwareFile file;
  const nlohmann::json node = HardwareSpecToJson(Store().LoadHardware("8xh800"));
  for (const auto& [object, field] :
       std::vector<std::pair<std::string, std::string>>{{"accelerator", "sm_counts"},
                                                        {"host", "dram_bandwith_bytes_per_s"},
                                                        {"host_link", "latency"},
                                                        {"interconnect", "bandwith_bytes_per_s"}}) {
    nlohmann::json json = node;
    json[object][field] = 1;
    const std::string message = file.Refusal(json);
    EXPECT_NE(message.find("field '" + object + "." + field + "': unknown"), std::string::npos)
        << message;
  }
  nlohmann::json machines = HardwareSpecToJson(Store().LoadHardware("2x8xh100-ib"));
  machines["scale_out"]["latency"] = 1;
  EXPECT_NE(file.Refusal(machines).find("field 'scale_out.latency': unknown"), std::string::npos);
}

// hw show writes an accelerator's price inside "accelerator", a preset file at the top level:
// either reads, both at once is refused, and a source alone is no price.
TEST(HardwareReadBack, ThePriceIsReadWhereverItIsWrittenOnce) {
  const HardwareFile file;
  nlohmann::json json = HardwareSpecToJson(Store().LoadHardware("h100-sxm"));
  ASSERT_TRUE(json["accelerator"].contains("price_usd_per_hour"));
  EXPECT_EQ(file.Load(json).accelerator->price_usd_per_hour, 2.79);
  json["price_usd_per_hour"] = 3.0;
  json["price_source"] = "a quote";
  EXPECT_NE(file.Refusal(json).find("field 'price_usd_per_hour': expected one price"),
            std::string::npos);
  json["accelerator"].erase("price_usd_per_hour");
  EXPECT_NE(file.Refusal(json).find("field 'accelerator.price_source': expected only beside"),
            std::string::npos);
  json["accelerator"].erase("price_source");
  EXPECT_EQ(file.Load(json).accelerator->price_usd_per_hour, 3.0);
}

TEST(HardwareReadBack, ComposedCountsAreBounded) {
  const PresetStore store = Store();
  EXPECT_EQ(store.LoadHardware("1024xh100-sxm").accelerator_count, 1024);
  // 20 digits overflowed std::stoll ("internal error: stoll"); 10 are out of range too.
  for (const char* name :
       {"1025xh100-sxm", "0xh100-sxm", "99999999999999999999xh100-sxm", "1234567890xh100-sxm"}) {
    try {
      store.LoadHardware(name);
      ADD_FAILURE() << name;
    } catch (const base::Error& e) {
      EXPECT_NE(std::string(e.what()).find("accelerator count must be 1..1024"), std::string::npos)
          << e.what();
    }
  }
}

}  // namespace
}  // namespace moelab::model
