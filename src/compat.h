// Compatibility of a strategy with the contexts and models it is given.
// Everything here only reads llama.cpp state; nothing decodes or allocates.
#pragma once

#include "pair-rules.h"

#include "specdec/specdec.h"

#include <string>

namespace specdec::detail {

// The facts the pair rules read, as llama.cpp loaded them; the token texts
// only `with_tokens` (a vocabulary can hold hundreds of thousands).
model_facts facts_of(const llama_model * model, bool with_tokens);

// The pair rules (pair-rules.h) over loaded models. `draft` is the target's
// own model for MTP and nullptr for n-gram strategies.
// Throws error(<compatibility status>).
void validate_models(const llama_model * target, const llama_model * draft, const specdec_session_params & params);

// Throws error(<compatibility status>) for the first rule `target`/`draft`
// break for `params` (already validated): context types and capacities, then
// validate_models. Each message says what to change.
void validate_contexts(const llama_context * target, const llama_context * draft,
                       const specdec_session_params & params);

} // namespace specdec::detail
