#include "common/json_text.h"

#include "gtest/gtest.h"

namespace moetune {
namespace {

using google::protobuf::Value;

TEST(JsonTextTest, KeysSortedWithNumbersInNumericOrder) {
  Value root;
  auto& fields = *root.mutable_struct_value()->mutable_fields();
  for (const char* batch : {"32", "1", "8"}) {
    auto& entry = *fields[batch].mutable_struct_value()->mutable_fields();
    entry["tp"].set_number_value(1);
    entry["backend"].set_string_value("a \"b\"");
  }
  EXPECT_EQ(JsonText(root, -1),
            "{\"1\":{\"backend\":\"a \\\"b\\\"\",\"tp\":1},"
            "\"8\":{\"backend\":\"a \\\"b\\\"\",\"tp\":1},"
            "\"32\":{\"backend\":\"a \\\"b\\\"\",\"tp\":1}}");
  Value list;
  list.mutable_list_value()->add_values()->set_bool_value(true);
  EXPECT_EQ(JsonText(list, 2), "[\n  true\n]");
}

TEST(JsonTextTest, ObjectLinesKeepTheCallersOrder) {
  std::vector<std::pair<std::string, Value>> fields(2);
  fields[0].first = "time";
  fields[0].second.set_string_value("t");
  fields[1].first = "a";
  fields[1].second.set_number_value(2.5);
  EXPECT_EQ(JsonObjectLine(fields), "{\"time\":\"t\",\"a\":2.5}");
}

}  // namespace
}  // namespace moetune
