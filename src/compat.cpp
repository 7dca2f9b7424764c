#include "compat.h"

#include "error.h"
#include "llama-internal.h"
#include "llama-ext.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
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

bool is_recurrent(const llama_model * model) {
    return llama_model_is_recurrent(model) || llama_model_is_hybrid(model);
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
             "' must be of type ", want == LLAMA_CONTEXT_TYPE_MTP ? "LLAMA_CONTEXT_TYPE_MTP" : "LLAMA_CONTEXT_TYPE_DEFAULT",
             ", but it is ", have == LLAMA_CONTEXT_TYPE_MTP ? "LLAMA_CONTEXT_TYPE_MTP" : "LLAMA_CONTEXT_TYPE_DEFAULT");
    }
}

void check_mtp(const llama_model * model, const llama_model * draft) {
    if (draft != model) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED,
             "MTP drafts with the target's own nextn heads: create the draft context over the target model");
    }
    if (llama_model_n_layer_nextn(model) < 1) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "the target model (", model_arch(model),
             ") has no MTP (nextn) layers; choose another strategy or a model that ships MTP heads");
    }
    if (!has_nextn_tensors(model)) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED,
             "the target model was loaded without its MTP tensors; load it with llama_model_params.load_mtp = true");
    }
}

// EAGLE-3 and DFlash drafts name target layers whose inputs they read.
void check_extraction_sites(const llama_model * target, const llama_model * draft, const char * what,
                            bool exactly_three) {
    const uint32_t n_ids = llama_model_target_layer_ids_n(draft);
    const int32_t * ids = llama_model_target_layer_ids(draft);
    if ((exactly_three && n_ids != 3) || n_ids == 0 || ids == nullptr) {
        fail(SPECDEC_STATUS_LAYER_MISMATCH, "the ", what, " draft names ", n_ids, " target layers in ",
             model_arch(draft), ".target_layers; ", exactly_three ? "EAGLE-3 needs exactly three" : "it needs at least one");
    }
    const int32_t n_layer = llama_model_n_layer(target);
    // gpt-oss targets may also name their terminal site n_layer (its nextn output).
    const bool terminal_ok = exactly_three && model_arch(target) == "gpt-oss";
    for (uint32_t k = 0; k < n_ids; ++k) {
        const bool ok = (ids[k] >= 0 && ids[k] < n_layer) || (terminal_ok && ids[k] == n_layer);
        if (!ok) {
            fail(SPECDEC_STATUS_LAYER_MISMATCH, "the ", what, " draft reads target layer ", ids[k],
                 ", but the target has ", n_layer, " layers (valid: 0..", n_layer - 1,
                 terminal_ok ? " or n_layer" : "", "); the draft was made for another target");
        }
    }
    const std::string hidden = meta(draft, model_arch(draft) + ".target_hidden_size");
    if (!hidden.empty() && std::atoll(hidden.c_str()) != llama_model_n_embd(target)) {
        fail(SPECDEC_STATUS_WIDTH_MISMATCH, "the ", what, " draft was made for a target of hidden size ", hidden,
             ", but this target's hidden size is ", llama_model_n_embd(target));
    }
}

void check_eagle3(const llama_model * target, const llama_model * draft_model) {
    if (model_arch(draft_model) != "eagle3") {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "strategy 'eagle3' needs a draft model of architecture eagle3, got '",
             model_arch(draft_model), "'");
    }
    check_extraction_sites(target, draft_model, "EAGLE-3", true);
}

void check_dflash(const llama_model * target, const llama_model * draft_model, const specdec_session_params & p) {
    if (model_arch(draft_model) != "dflash") {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "strategy '", strategy_name(p),
             "' needs a draft model of architecture dflash, got '", model_arch(draft_model), "'");
    }
    check_extraction_sites(target, draft_model, "DFlash", false);
    const std::string block = meta(draft_model, "dflash.block_size");
    if (!block.empty() && std::atoll(block.c_str()) < 2) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "the DFlash draft has dflash.block_size = ", block,
             "; a block needs the anchor and at least one masked position (>= 2)");
    }
    // DFlash2 is announced by a metadata key; without its selector llama.cpp
    // asserts in the first draft ("selector produced no lattice").
    if (llama_model_dflash_selector_top_k(draft_model) > 0 && !has_tensor(draft_model, "selector_hidden.weight")) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "the draft declares dflash.selector_top_k = ",
             llama_model_dflash_selector_top_k(draft_model), " (DFlash2) but has no selector tensors");
    }
    if (llama_vocab_mask(llama_model_get_vocab(draft_model)) < 0) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "the DFlash draft defines no mask token (tokenizer.ggml.mask_token_id)");
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

std::string model_arch(const llama_model * model) {
    return meta(model, "general.architecture");
}

std::string vocab_mismatch(const llama_model * target, const llama_model * draft) {
    const llama_vocab * vt = llama_model_get_vocab(target);
    const llama_vocab * vd = llama_model_get_vocab(draft);
    if (llama_vocab_type(vt) != llama_vocab_type(vd)) {
        return concat("tokenizer types differ (target ", static_cast<int>(llama_vocab_type(vt)), ", draft ",
                      static_cast<int>(llama_vocab_type(vd)), ")");
    }
    if (llama_vocab_get_add_bos(vt) != llama_vocab_get_add_bos(vd) ||
        (llama_vocab_get_add_bos(vt) && llama_vocab_bos(vt) != llama_vocab_bos(vd))) {
        return "BOS token handling differs";
    }
    if (llama_vocab_get_add_eos(vt) != llama_vocab_get_add_eos(vd) ||
        (llama_vocab_get_add_eos(vt) && llama_vocab_eos(vt) != llama_vocab_eos(vd))) {
        return "EOS token handling differs";
    }
    const int32_t nt = llama_vocab_n_tokens(vt);
    const int32_t nd = llama_vocab_n_tokens(vd);
    if (std::abs(nt - nd) > 128) {
        return concat("vocabulary sizes differ by more than 128 (target ", nt, ", draft ", nd, ")");
    }
    for (int32_t i = 5; i < std::min(nt, nd); ++i) {
        if (std::strcmp(llama_vocab_get_text(vt, i), llama_vocab_get_text(vd, i)) != 0) {
            return concat("token ", i, " differs ('", llama_vocab_get_text(vt, i), "' vs '",
                          llama_vocab_get_text(vd, i), "')");
        }
    }
    return "";
}

void validate_contexts(const llama_context * target, const llama_context * draft,
                       const specdec_session_params & p) {
    if (target == nullptr) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "the target context must not be NULL");
    }
    const bool needs_draft = specdec_strategy_needs_draft_context(p.strategy);
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
        return;
    }
    check_context_type(draft, "draft",
                       p.strategy == SPECDEC_STRATEGY_MTP ? LLAMA_CONTEXT_TYPE_MTP : LLAMA_CONTEXT_TYPE_DEFAULT, p);
    check_capacity(draft, "draft", p);

    if (p.strategy == SPECDEC_STRATEGY_DFLASH || p.strategy == SPECDEC_STRATEGY_DSPARK) {
        check_block_outputs(draft, p);
    }
    validate_models(llama_get_model(target), llama_get_model(draft), p);
}

void validate_models(const llama_model * target, const llama_model * draft, const specdec_session_params & p) {
    switch (p.strategy) {
        case SPECDEC_STRATEGY_MTP:
            check_mtp(target, draft);
            break;
        case SPECDEC_STRATEGY_EAGLE3:
            check_eagle3(target, draft);
            break;
        case SPECDEC_STRATEGY_DFLASH:
        case SPECDEC_STRATEGY_DSPARK:
            check_dflash(target, draft, p);
            break;
        case SPECDEC_STRATEGY_DRAFT: {
            const std::string why = vocab_mismatch(target, draft);
            if (!why.empty()) {
                fail(SPECDEC_STATUS_VOCAB_MISMATCH, "the draft model's vocabulary does not match the target's: ", why);
            }
            break;
        }
        default:
            break;
    }
}

} // namespace specdec::detail
