#include "serve-grammar.h"

#include "json-schema-to-grammar.h"

#include <stdexcept>

namespace cli::serve {

std::string json_schema_grammar(const std::string & schema) {
    return json_schema_to_grammar(common_json::parse(schema));
}

} // namespace cli::serve
