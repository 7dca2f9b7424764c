#include "llama-internal.h"

// llama.h offers no getter for the context type, which MTP validation needs.
#include "llama-context.h"
#include "llama-model.h"

namespace specdec::detail {

llama_context_type context_type(const llama_context * ctx) {
    return ctx->get_cparams().ctx_type;
}

bool has_nextn_tensors(const llama_model * model) {
    const uint32_t first_nextn = model->hparams.n_layer();
    return model->hparams.n_layer_nextn > 0 && model->layers.size() > first_nextn &&
           model->layers[first_nextn].nextn.eh_proj != nullptr;
}

bool has_tensor(const llama_model * model, const char * name) {
    return model->get_tensor(name) != nullptr;
}

uint32_t n_outputs_max_per_seq(const llama_context * ctx) {
    return ctx->get_cparams().n_outputs_max_per_seq;
}

} // namespace specdec::detail
