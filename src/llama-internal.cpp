#include "llama-internal.h"

// llama.h offers no getter for the context type (MTP validation needs it) or
// for the feature outputs a context extracts (a session restores them).
#include "llama-context.h"
#include "llama-model.h"
#include "llama-ext.h"

#include "ggml-backend.h"

#include <algorithm>
#include <array>
#include <string_view>

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

const ggml_tensor * mtp_head_matrix(const llama_model * model, std::string & why) {
    // Architectures whose v0.5.0 MTP graph computes h_nextn for every row
    // (the output rows are selected after it) and then the head alone, as
    // read in src/models/*.cpp. qwen3next selects the output rows before its
    // block; cohere2moe scales its logits; deepseek4 mixes hyper-connections.
    static constexpr std::array<std::string_view, 6> archs = {"qwen35", "qwen35moe", "glm4moe", "glm-dsa", "deepseek2",
                                                              "deepseek32"};
    char arch[64] = {};
    llama_model_meta_val_str(model, "general.architecture", arch, sizeof(arch));
    if (std::find(archs.begin(), archs.end(), std::string_view(arch)) == archs.end()) {
        why = std::string("its MTP graph (") + arch + ") is not one specdec can split before the head's projection";
        return nullptr;
    }
    const uint32_t il = model->hparams.n_layer();
    if (model->hparams.n_layer_nextn != 1 || model->layers.size() <= il) {
        why = "it has no single NextN head";
        return nullptr;
    }
    const llama_layer_nextn & nextn = model->layers[il].nextn;
    const ggml_tensor * w = nextn.shared_head_head != nullptr ? nextn.shared_head_head : model->output;
    const bool scaled = nextn.shared_head_head != nullptr ? nextn.shared_head_head_s != nullptr || nextn.shared_head_head_in_s != nullptr
                                                          : model->output_s != nullptr || model->output_in_s != nullptr;
    if (w == nullptr || w->ne[2] != 1 || w->ne[3] != 1) {
        why = "the head has no output matrix";
        return nullptr;
    }
    if (scaled) {
        why = "the head's output matrix carries scale tensors";
        return nullptr;
    }
    if (w->buffer == nullptr || !ggml_backend_buffer_is_host(w->buffer) || w->extra != nullptr || w->data == nullptr) {
        why = std::string("the head's output matrix (") + ggml_type_name(w->type) + ") is not in plain host memory (" +
              (w->buffer != nullptr ? ggml_backend_buffer_name(w->buffer) : "no buffer") + "; repacked or on a device)";
        return nullptr;
    }
    return w;
}

} // namespace specdec::detail
