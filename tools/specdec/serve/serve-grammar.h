// `specdec serve`, structured output: a JSON schema turned into a GBNF
// grammar by llama.cpp's own converter (common/json-schema-to-grammar.h of
// the pinned tree), which the engine's grammar sampler then enforces.
#pragma once

#include <string>

namespace cli::serve {

// The GBNF grammar of `schema` (JSON text of a JSON schema). Throws
// std::runtime_error when the text is not JSON or the converter refuses the
// schema (the HTTP layer answers 400).
std::string json_schema_grammar(const std::string & schema);

} // namespace cli::serve
