// Compatibility rules between a strategy, its target and its draft context.
// Everything here only reads llama.cpp state; nothing decodes or allocates.
#pragma once

#include "specdec/specdec.h"

#include <string>

namespace specdec::detail {

// Model-level rules of the strategy (architecture, extraction sites, widths,
// vocabularies, MTP heads). `draft` is the target's own model for MTP and
// nullptr for n-gram strategies. Throws error(<compatibility status>).
void validate_models(const llama_model * target, const llama_model * draft, const specdec_session_params & params);

// Throws error(<compatibility status>) for the first rule `target`/`draft`
// break for `params` (already validated): context types and capacities, then
// validate_models. Each message says what to change.
void validate_contexts(const llama_context * target, const llama_context * draft,
                       const specdec_session_params & params);

// Vocabulary rules a classic draft model must meet (same as llama.cpp's
// draft-model check): same type, same BOS/EOS handling, sizes within 128,
// identical token texts from id 5 on. Returns "" when compatible, else why not.
std::string vocab_mismatch(const llama_model * target, const llama_model * draft);

// The model's general.architecture ("" if missing).
std::string model_arch(const llama_model * model);

} // namespace specdec::detail
