#include "llama-internal.h"

// llama.h offers no getter for the context type (MTP validation needs it) or
// for the feature outputs a context extracts (a session restores them).
#include "llama-context.h"
#include "llama-model.h"
#include "llama-ext.h"

#include <algorithm>

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

feature_outputs feature_outputs_of(const llama_context * ctx) {
    const llama_cparams & c = ctx->get_cparams();
    return {c.embeddings_nextn, c.embeddings_nextn_masked, c.embeddings_layer_inp};
}

void set_feature_outputs(llama_context * ctx, const feature_outputs & o) {
    const feature_outputs now = feature_outputs_of(ctx);
    if (now.nextn != o.nextn || now.nextn_masked != o.nextn_masked) {
        llama_set_embeddings_nextn(ctx, o.nextn, o.nextn_masked);
    }
    for (size_t lid = 0; lid < std::min(now.layer_inputs.size(), o.layer_inputs.size()); ++lid) {
        if (now.layer_inputs[lid] != o.layer_inputs[lid]) {
            llama_set_embeddings_layer_inp(ctx, static_cast<uint32_t>(lid), o.layer_inputs[lid]);
        }
    }
}

} // namespace specdec::detail
