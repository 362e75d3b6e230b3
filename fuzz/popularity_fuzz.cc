// Expert popularity tables (model/fiddler LoadPopularityTable): the CSV form and the JSON form,
// chosen by the first byte, then a placement from them.
#include "fuzz/fuzz_support.h"
#include "model/fiddler.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const bool json = size > 0 && (data[0] & 1);
  const auto file =
      moelab::fuzz::WriteInput(data, size, json ? "popularity.json" : "popularity.csv");
  moelab::fuzz::Refuses([&] {
    const moelab::model::PopularityTable table = moelab::model::LoadPopularityTable(file.string());
    const auto placement = moelab::model::PlaceByPopularity(table, 4);
    moelab::model::ExpectedHitRate(table, placement);
  });
  return 0;
}
