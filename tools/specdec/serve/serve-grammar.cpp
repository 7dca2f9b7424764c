#include "serve-grammar.h"

#include "specdec/specdec.h"

#include "json-schema-to-grammar.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace cli::serve {

namespace {

// The deepest nesting of groups in a regular expression (escapes and
// character classes skipped), without recursion.
size_t regex_group_depth(const std::string & re) {
    size_t depth = 0;
    size_t deepest = 0;
    bool in_class = false;
    for (size_t i = 0; i < re.size(); ++i) {
        const char c = re[i];
        if (c == '\\') {
            ++i;
        } else if (in_class) {
            in_class = c != ']';
        } else if (c == '[') {
            in_class = true;
        } else if (c == '(') {
            deepest = std::max(deepest, ++depth);
        } else if (c == ')' && depth > 0) {
            --depth;
        }
    }
    return deepest;
}

// llama.cpp's converter turns each `pattern` into grammar rules with one
// level of recursion per group: a pattern nested 100,000 deep would
// overflow the stack. Walks the schema with a stack of its own.
void check_patterns(const common_json & schema) {
    std::vector<const common_json *> todo{&schema};
    while (!todo.empty()) {
        const common_json * v = todo.back();
        todo.pop_back();
        if (v->is_object()) {
            if (v->contains("pattern") && v->at("pattern").is_string() &&
                regex_group_depth(v->at("pattern").get<std::string>()) > SPECDEC_MAX_GRAMMAR_NESTING) {
                throw std::runtime_error("a 'pattern' nests groups deeper than " + std::to_string(SPECDEC_MAX_GRAMMAR_NESTING) +
                                         " levels");
            }
        }
        if (v->is_object() || v->is_array()) {
            for (const common_json & child : *v) {
                todo.push_back(&child);
            }
        }
    }
}

} // namespace

std::string json_schema_grammar(const std::string & schema) {
    const common_json parsed = common_json::parse(schema);
    check_patterns(parsed);
    return json_schema_to_grammar(parsed);
}

} // namespace cli::serve
