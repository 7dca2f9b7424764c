// The one way the CLI turns JSON into text: bytes that are not valid UTF-8
// (a budget that ends inside a character, a model name in another encoding)
// become U+FFFD instead of making nlohmann::json throw.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace cli {

// `indent` < 0: one line; otherwise that many spaces per level.
std::string json_text(const nlohmann::json & j, int indent = 2);

} // namespace cli
