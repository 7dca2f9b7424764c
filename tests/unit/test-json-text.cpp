// The CLI's JSON writer never throws on bytes that are not UTF-8.
#include "json-text.h"

#include <gtest/gtest.h>

namespace cli {
namespace {

TEST(JsonText, InvalidUtf8IsReplacedNotThrown) {
    nlohmann::json j;
    j["text"] = std::string("ab\xE2\x82"); // a budget that stopped inside "€"
    j["name"] = std::string("\xFFx");
    EXPECT_THROW(static_cast<void>(j.dump()), nlohmann::json::type_error); // what the CLI did before
    EXPECT_EQ(json_text(j, -1), "{\"name\":\"\xEF\xBF\xBDx\",\"text\":\"ab\xEF\xBF\xBD\"}");
}

TEST(JsonText, ValidTextIsUnchanged) {
    const nlohmann::json j = {{"text", "caf\xC3\xA9 \xE2\x82\xAC"}, {"n", 3}};
    EXPECT_EQ(json_text(j, -1), j.dump());
    EXPECT_EQ(json_text(j), j.dump(2));
}

} // namespace
} // namespace cli
