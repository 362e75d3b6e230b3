#include "report/json_rows.h"

#include <gtest/gtest.h>

#include "tests/support/error_of.h"

namespace moelab::report {
namespace {

TEST(JsonRows, ScalarLeavesByDottedPathArraysLeftOut) {
  const nlohmann::json result = {{"model", {{"name", "m"}, {"bytes", 12}}},
                                 {"ttft_s", 0.5},
                                 {"ok", true},
                                 {"steps", {1, 2, 3}},
                                 {"tpot_s", nullptr},
                                 {"seed", 18446744073709551615ull}};
  const RowSet row = JsonRow(result);
  ASSERT_EQ(row.size(), 1u);
  EXPECT_EQ(row.ToCsv(),
            "model.bytes,model.name,ok,seed,tpot_s,ttft_s\n"
            "12,m,true,18446744073709551615,,0.5\n");
}

TEST(JsonRows, UnionOfColumnsNullWhereMissing) {
  const nlohmann::json array = {{{"a", 1}, {"b", "x,y"}}, {{"a", 2.25}, {"c", {{"d", false}}}}};
  EXPECT_EQ(JsonArrayRows(array).ToCsv(),
            "a,b,c.d\n"
            "1,\"x,y\",\n"
            "2.25,,false\n");
}

TEST(JsonRows, RefusesWhatIsNotRows) {
  EXPECT_NE(
      testing::ErrorOf([] { JsonArrayRows(nlohmann::json::object()); }).find("expected an array"),
      std::string::npos);
  EXPECT_NE(testing::ErrorOf([] { JsonRows({nlohmann::json(3)}); }).find("expected objects"),
            std::string::npos);
}

}  // namespace
}  // namespace moelab::report
