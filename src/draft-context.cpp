// Creating the draft context a strategy needs, after the model checks that
// llama.cpp would otherwise turn into an abort while building the context.
#include "specdec/specdec.hpp"

#include "compat.h"
#include "error.h"
#include "params.h"
#include "strategy-traits.h"

#include <algorithm>

namespace specdec {

using detail::fail;

llama_context_ptr make_draft_context(llama_context * target, llama_model * draft_model, const session_params & params,
                                     llama_context_params cparams) {
    detail::validate_params(params);
    if (target == nullptr) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "the target context must not be NULL");
    }
    const detail::strategy_traits & tr = detail::traits_of(params.strategy);
    if (tr.weights == detail::draft_weights::none) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "strategy '", specdec_strategy_name(params.strategy),
             "' drafts from the history alone and needs no draft context");
    }
    const llama_model * target_model = llama_get_model(target);
    const bool mtp = tr.weights == detail::draft_weights::target_heads;
    if (mtp && draft_model != nullptr && draft_model != target_model) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "strategy '", tr.name, "' drafts with the target's own heads; pass NULL as the draft model");
    }
    if (!mtp && draft_model == nullptr) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "strategy '", specdec_strategy_name(params.strategy), "' needs a draft model");
    }
    const llama_model * model = mtp ? target_model : draft_model;
    detail::validate_models(target_model, model, params);

    const uint32_t per_seq = static_cast<uint32_t>(params.n_draft_max) + 1;
    cparams.ctx_type  = tr.draft_context;
    cparams.ctx_other = target;
    cparams.n_ctx     = llama_n_ctx(target);
    cparams.n_seq_max = std::max(cparams.n_seq_max, params.n_seq);
    // The drafter replays every target batch on this context.
    cparams.n_batch   = std::max({cparams.n_batch, llama_n_batch(target), per_seq});
    cparams.n_ubatch  = std::max(cparams.n_ubatch, per_seq);
    if (llama_model_is_recurrent(model) || llama_model_is_hybrid(model)) {
        cparams.n_rs_seq = std::max(cparams.n_rs_seq, static_cast<uint32_t>(params.n_draft_max));
    }
    if (tr.dflash_block) {
        cparams.n_outputs_max_per_seq = std::max(cparams.n_outputs_max_per_seq, per_seq);
        cparams.n_outputs_max = std::max(cparams.n_outputs_max, params.n_seq * per_seq);
    }
    llama_context * ctx = llama_init_from_model(const_cast<llama_model *>(model), cparams);
    if (ctx == nullptr) {
        fail(SPECDEC_STATUS_NATIVE_FAILURE, "llama.cpp could not create the draft context (see its log)");
    }
    return llama_context_ptr(ctx);
}

} // namespace specdec
