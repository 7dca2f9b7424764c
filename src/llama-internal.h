// The only place where specdec reads llama.cpp state that its public headers
// do not expose. Pinned to llama.cpp v0.5.0 (see scripts/bootstrap.sh).
#pragma once

#include "llama.h"

namespace specdec::detail {

// The llama_context_type a context was created with.
llama_context_type context_type(const llama_context * ctx);

// True when the model was loaded with its NextN (MTP) tensors
// (llama_model_params.load_mtp); MTP contexts abort without them.
bool has_nextn_tensors(const llama_model * model);

// True when the model holds a tensor of that name.
bool has_tensor(const llama_model * model, const char * name);

// Most outputs one sequence may request in a batch when a backend sampler is attached.
uint32_t n_outputs_max_per_seq(const llama_context * ctx);

} // namespace specdec::detail
