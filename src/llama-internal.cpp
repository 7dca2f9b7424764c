#include "llama-internal.h"

// llama.h offers no getter for the context type, which MTP validation needs.
#include "llama-context.h"

namespace specdec::detail {

llama_context_type context_type(const llama_context * ctx) {
    return ctx->get_cparams().ctx_type;
}

} // namespace specdec::detail
