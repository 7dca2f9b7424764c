#include "json-text.h"

namespace cli {

std::string json_text(const nlohmann::json & j, int indent) {
    return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace cli
