#include "report/row_set.h"

#include <gtest/gtest.h>

#include "tests/support/error_of.h"

namespace moelab::report {
namespace {

RowSet Sample() {
  RowSet rows({{"name", "name"},
               {"count", "n"},
               {"time_s", "time",
                [](const Cell& c) { return std::to_string(std::get<double>(c) * 1e3) + " ms"; }},
               {"ok", "ok"},
               {"hidden", "hidden", nullptr, false}});
  rows.Add({std::string("a,\"b\""), int64_t{3}, 0.25, true, Cell{}});
  rows.Add({std::string("c"), int64_t{-1}, Cell{}, false, 1.0 / 3.0});
  return rows;
}

TEST(RowSet, JsonCsvAndTableShowTheSameRows) {
  const RowSet rows = Sample();
  const nlohmann::json json = rows.ToJson();
  ASSERT_EQ(json.size(), 2u);
  EXPECT_EQ(json[0]["name"], "a,\"b\"");
  EXPECT_EQ(json[0]["count"], 3);
  EXPECT_EQ(json[0]["time_s"], 0.25);
  EXPECT_TRUE(json[0]["hidden"].is_null());
  EXPECT_TRUE(json[1]["time_s"].is_null());
  EXPECT_EQ(json[1]["hidden"], 1.0 / 3.0);
  // RFC 4180 quoting; full precision so a CSV reader gets the JSON's numbers back.
  EXPECT_EQ(rows.ToCsv(),
            "name,count,time_s,ok,hidden\n"
            "\"a,\"\"b\"\"\",3,0.25,true,\n"
            "c,-1,,false,0.33333333333333331\n");
  const std::string table = rows.ToTable();
  EXPECT_NE(table.find("250.000000 ms"), std::string::npos) << table;
  EXPECT_EQ(table.find("hidden"), std::string::npos) << table;  // JSON and CSV only
  EXPECT_NE(table.find("yes"), std::string::npos);
  EXPECT_NE(table.find("-"), std::string::npos);  // the null time
}

TEST(RowSet, RefusesARowOfTheWrongWidth) {
  RowSet rows({{"a", "a"}, {"b", "b"}});
  EXPECT_EQ(testing::ErrorOf([&] { rows.Add({int64_t{1}}); }), "row of 1 cells for 2 columns");
}

}  // namespace
}  // namespace moelab::report
