#include "compat.h"

#include "error.h"
#include "llama-internal.h"
#include "llama-ext.h"
#include "strategy-traits.h"

#include <cstdlib>
#include <vector>

namespace specdec::detail {

namespace {

const char * strategy_name(const specdec_session_params & p) {
    return specdec_strategy_name(p.strategy);
}

std::string meta(const llama_model * model, const std::string & key) {
    std::vector<char> buf(256);
    const int32_t n = llama_model_meta_val_str(model, key.c_str(), buf.data(), buf.size());
    if (n < 0) {
        return "";
    }
    if (static_cast<size_t>(n) >= buf.size()) {
        buf.resize(static_cast<size_t>(n) + 1);
        llama_model_meta_val_str(model, key.c_str(), buf.data(), buf.size());
    }
    return std::string(buf.data());
}

int64_t meta_int(const llama_model * model, const std::string & key, int64_t fallback) {
    const std::string v = meta(model, key);
    return v.empty() ? fallback : std::atoll(v.c_str());
}

bool is_recurrent(const llama_model * model) {
    return llama_model_is_recurrent(model) || llama_model_is_hybrid(model);
}

const char * type_name(llama_context_type t) {
    return t == LLAMA_CONTEXT_TYPE_MTP ? "LLAMA_CONTEXT_TYPE_MTP" : "LLAMA_CONTEXT_TYPE_DEFAULT";
}

void check_capacity(const llama_context * ctx, const char * role, const specdec_session_params & p) {
    if (llama_n_seq_max(ctx) < p.n_seq) {
        fail(SPECDEC_STATUS_SEQ_CAPACITY, "the ", role, " context holds ", llama_n_seq_max(ctx),
             " sequences but the session needs n_seq = ", p.n_seq, "; create it with n_seq_max >= ", p.n_seq);
    }
    const uint32_t need = static_cast<uint32_t>(p.n_draft_max) + 1;
    if (llama_n_batch(ctx) < need || llama_n_ubatch(ctx) < need) {
        fail(SPECDEC_STATUS_BATCH_CAPACITY, "the ", role, " context has n_batch = ", llama_n_batch(ctx),
             " and n_ubatch = ", llama_n_ubatch(ctx), "; verifying ", p.n_draft_max,
             " drafted tokens needs both >= n_draft_max + 1 = ", need);
    }
    const llama_model * model = llama_get_model(ctx);
    if (is_recurrent(model) && llama_n_rs_seq(ctx) < static_cast<uint32_t>(p.n_draft_max)) {
        fail(SPECDEC_STATUS_RECURRENT_SLOTS, "the ", role, " model has recurrent state and its context keeps ",
             llama_n_rs_seq(ctx), " rollback snapshots per sequence; rejecting drafts needs n_rs_seq >= n_draft_max = ",
             p.n_draft_max, " (llama.cpp keeps 0 when the architecture cannot roll back)");
    }
}

void check_context_type(const llama_context * ctx, const char * role, llama_context_type want,
                        const specdec_session_params & p) {
    const llama_context_type have = context_type(ctx);
    if (have != want) {
        fail(SPECDEC_STATUS_WRONG_CONTEXT_TYPE, "the ", role, " context for strategy '", strategy_name(p),
             "' must be of type ", type_name(want), ", but it is ", type_name(have));
    }
}

// A DFlash block samples every position on the backend (DFlash2 samples on the CPU).
void check_block_outputs(const llama_context * draft, const specdec_session_params & p) {
    const bool dflash2 = llama_model_dflash_selector_top_k(llama_get_model(draft)) > 0;
    const uint32_t need = static_cast<uint32_t>(p.n_draft_max) + 1;
    if (!dflash2 && n_outputs_max_per_seq(draft) < need) {
        fail(SPECDEC_STATUS_BATCH_CAPACITY, "the DFlash draft context allows ", n_outputs_max_per_seq(draft),
             " outputs per sequence; a block needs n_outputs_max_per_seq >= n_draft_max + 1 = ", need);
    }
}

} // namespace

model_facts facts_of(const llama_model * model, bool with_tokens) {
    model_facts f;
    f.arch          = meta(model, "general.architecture");
    f.n_layer       = static_cast<uint32_t>(std::max(llama_model_n_layer(model), 0));
    f.n_layer_nextn = static_cast<uint32_t>(std::max(llama_model_n_layer_nextn(model), 0));
    f.nextn_tensors = has_nextn_tensors(model);
    f.n_embd        = static_cast<uint32_t>(std::max(llama_model_n_embd(model), 0));
    const int32_t * ids = llama_model_target_layer_ids(model);
    if (ids != nullptr) {
        f.target_layers.assign(ids, ids + llama_model_target_layer_ids_n(model));
    }
    f.target_hidden_size    = meta_int(model, f.arch + ".target_hidden_size", 0);
    f.dflash_block_size     = meta_int(model, "dflash.block_size", dflash_default_block_size);
    f.dflash_selector_top_k = llama_model_dflash_selector_top_k(model);
    f.dflash_selector       = has_tensor(model, "selector_hidden.weight");
    f.markov_head           = has_tensor(model, "markov_w1.weight");

    const llama_vocab * v = llama_model_get_vocab(model);
    f.tokenizer = meta(model, "tokenizer.ggml.model");
    f.tokens.resize(with_tokens ? static_cast<size_t>(std::max(llama_vocab_n_tokens(v), 0)) : 0);
    for (size_t i = 0; i < f.tokens.size(); ++i) {
        f.tokens[i] = llama_vocab_get_text(v, static_cast<llama_token>(i));
    }
    f.bos     = llama_vocab_bos(v);
    f.eos     = llama_vocab_eos(v);
    f.mask    = llama_vocab_mask(v);
    f.add_bos = llama_vocab_get_add_bos(v);
    f.add_eos = llama_vocab_get_add_eos(v);
    return f;
}

void validate_contexts(const llama_context * target, const llama_context * draft,
                       const specdec_session_params & p) {
    if (target == nullptr) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "the target context must not be NULL");
    }
    const strategy_traits & tr = traits_of(p.strategy);
    const bool needs_draft = tr.weights != draft_weights::none;
    if (needs_draft && draft == nullptr) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "strategy '", strategy_name(p), "' needs a draft context");
    }
    if (!needs_draft && draft != nullptr) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "strategy '", strategy_name(p),
             "' drafts from the history alone; pass NULL as the draft context");
    }
    if (draft == target) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "the draft context must be a second context, not the target itself");
    }

    check_context_type(target, "target", LLAMA_CONTEXT_TYPE_DEFAULT, p);
    check_capacity(target, "target", p);
    if (draft == nullptr) {
        validate_models(llama_get_model(target), nullptr, p);
        return;
    }
    check_context_type(draft, "draft", tr.draft_context, p);
    check_capacity(draft, "draft", p);
    if (tr.dflash_block) {
        check_block_outputs(draft, p);
    }
    validate_models(llama_get_model(target), llama_get_model(draft), p);
}

void validate_models(const llama_model * target, const llama_model * draft, const specdec_session_params & p) {
    const strategy_traits & tr = traits_of(p.strategy);
    if (tr.weights == draft_weights::target_heads && draft != target) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "strategy '", tr.name,
             "' drafts with the target's own heads: create the draft context over the target model");
    }
    // Only a classic draft model's rule reads the token texts.
    const bool classic = tr.weights == draft_weights::draft_model && tr.draft_arch == nullptr;
    const model_facts t = facts_of(target, classic);
    if (tr.weights == draft_weights::draft_model && draft != nullptr) {
        const model_facts d = facts_of(draft, classic);
        check_models(t, &d, p.strategy);
    } else {
        check_models(t, nullptr, p.strategy);
    }
}

} // namespace specdec::detail
