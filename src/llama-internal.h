// The only place where specdec reads llama.cpp state that its public headers
// do not expose. Pinned to llama.cpp v0.5.0 (see scripts/bootstrap.sh).
#pragma once

#include "llama.h"

namespace specdec::detail {

// The llama_context_type a context was created with.
llama_context_type context_type(const llama_context * ctx);

} // namespace specdec::detail
