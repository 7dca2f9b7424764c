#include "pair-rules.h"

#include "error.h"
#include "strategy-traits.h"

#include <algorithm>
#include <array>
#include <string_view>

namespace specdec::detail {

namespace {

// Architectures whose MTP graph in llama.cpp v0.5.0 asserts a single NextN
// block ("... MTP currently only supports a single MTP block").
constexpr std::array<std::string_view, 9> single_nextn_block_archs = {
    "qwen35", "qwen35moe", "qwen3next", "glm4moe", "glm-dsa", "deepseek2", "deepseek32", "deepseek4", "cohere2moe",
};

void check_mtp(const model_facts & t) {
    if (t.n_layer_nextn == 0) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "the target (", t.arch,
             ") has no MTP (NextN) layers; choose another strategy or a model that ships MTP heads");
    }
    if (!t.nextn_tensors) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "the target's MTP (NextN) tensors are missing: the file declares ",
             t.n_layer_nextn, " NextN layers but holds no blk.", t.n_layer, ".nextn.eh_proj.weight, or the model was "
             "loaded without them (load it with llama_model_params.load_mtp = true)");
    }
    const bool single = std::find(single_nextn_block_archs.begin(), single_nextn_block_archs.end(), t.arch) !=
                        single_nextn_block_archs.end();
    if (single && t.n_layer_nextn > 1) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "the target (", t.arch, ") declares ", t.n_layer_nextn,
             " NextN layers; llama.cpp's ", t.arch, " MTP drafter supports exactly one");
    }
}

// EAGLE-3 and DFlash drafts name the target layers whose inputs they read.
void check_sites(const model_facts & t, const model_facts & d, const strategy_traits & tr) {
    const bool three = tr.sites == extraction_sites::exactly_three;
    const size_t n = d.target_layers.size();
    if (n == 0 || (three && n != 3)) {
        fail(SPECDEC_STATUS_LAYER_MISMATCH, "the draft names ", n, " target layers in ", d.arch, ".target_layers; ",
             three ? "EAGLE-3 needs exactly three" : "it needs at least one");
    }
    // gpt-oss targets may also name their terminal site n_layer (its nextn output).
    const bool terminal_ok = three && t.arch == "gpt-oss";
    const int64_t n_layer = t.n_layer;
    for (int32_t id : d.target_layers) {
        if (!((id >= 0 && id < n_layer) || (terminal_ok && id == n_layer))) {
            fail(SPECDEC_STATUS_LAYER_MISMATCH, "the draft reads target layer ", id, ", but the target has ", n_layer,
                 " layers (valid: 0..", n_layer - 1, terminal_ok ? " or n_layer" : "", "); the draft was made for another target");
        }
    }
    if (d.target_hidden_size != 0 && d.target_hidden_size != t.n_embd) {
        fail(SPECDEC_STATUS_WIDTH_MISMATCH, "the draft was made for a target of hidden size ", d.target_hidden_size,
             ", but this target's hidden size is ", t.n_embd);
    }
}

void check_dflash(const model_facts & d, const strategy_traits & tr) {
    if (d.markov_head != tr.markov_head) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, d.markov_head ? "the draft carries a Markov head (markov_w1.weight): it is a "
             "DSpark draft; choose strategy 'dspark'" : "strategy 'dspark' needs a draft with a Markov head (markov_w1.weight); "
             "this one is a DFlash draft, choose strategy 'dflash'");
    }
    if (d.dflash_block_size < 2) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "the DFlash draft has dflash.block_size = ", d.dflash_block_size,
             "; a block needs the anchor and at least one masked position (>= 2)");
    }
    // Without its selector llama.cpp asserts in the first draft ("selector produced no lattice").
    if (d.dflash_selector_top_k > 0 && !d.dflash_selector) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "the draft declares dflash.selector_top_k = ", d.dflash_selector_top_k,
             " (DFlash2) but has no selector tensors");
    }
    if (d.mask < 0) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "the DFlash draft defines no mask token (tokenizer.ggml.mask_token_id)");
    }
}

// "" when a classic draft's vocabulary matches the target's, else why not.
std::string vocab_mismatch(const model_facts & t, const model_facts & d) {
    if (t.tokenizer != d.tokenizer) {
        return concat("tokenizers differ (target '", t.tokenizer, "', draft '", d.tokenizer, "')");
    }
    if (t.add_bos != d.add_bos || (t.add_bos && t.bos != d.bos)) {
        return concat("BOS token handling differs (target adds ", t.add_bos ? "" : "no ", "BOS ", t.bos, ", draft adds ",
                      d.add_bos ? "" : "no ", "BOS ", d.bos, ")");
    }
    if (t.add_eos != d.add_eos || (t.add_eos && t.eos != d.eos)) {
        return concat("EOS token handling differs (target adds ", t.add_eos ? "" : "no ", "EOS ", t.eos, ", draft adds ",
                      d.add_eos ? "" : "no ", "EOS ", d.eos, ")");
    }
    const size_t nt = t.tokens.size();
    const size_t nd = d.tokens.size();
    if ((nt > nd ? nt - nd : nd - nt) > 128) {
        return concat("vocabulary sizes differ by more than 128 (target ", nt, ", draft ", nd, ")");
    }
    for (size_t i = 5; i < std::min(nt, nd); ++i) {
        if (t.tokens[i] != d.tokens[i]) {
            return concat("token ", i, " differs ('", t.tokens[i], "' vs '", d.tokens[i], "')");
        }
    }
    return "";
}

} // namespace

void check_models(const model_facts & target, const model_facts * draft, specdec_strategy strategy) {
    const strategy_traits & tr = traits_of(strategy);
    const bool needs_model = tr.weights == draft_weights::draft_model;
    if (needs_model && draft == nullptr) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "strategy '", tr.name, "' needs a draft model");
    }
    if (!needs_model && draft != nullptr) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "strategy '", tr.name, "' takes no draft model");
    }
    if (is_draft_arch(target.arch.c_str())) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "a ", target.arch, " file is a draft model, not a target");
    }
    if (tr.weights == draft_weights::target_heads) {
        check_mtp(target);
    }
    if (draft == nullptr) {
        return;
    }
    const model_facts & d = *draft;
    if (tr.draft_arch != nullptr ? d.arch != tr.draft_arch : is_draft_arch(d.arch.c_str())) {
        fail(SPECDEC_STATUS_MODEL_UNSUPPORTED, "strategy '", tr.name, "' needs a draft model of architecture ",
             tr.draft_arch != nullptr ? tr.draft_arch : "that is not draft-only", ", got '", d.arch, "'");
    }
    if (tr.sites != extraction_sites::none) {
        check_sites(target, d, tr);
    }
    if (tr.dflash_block) {
        check_dflash(d, tr);
    }
    if (tr.draft_arch == nullptr) {
        const std::string why = vocab_mismatch(target, d);
        if (!why.empty()) {
            fail(SPECDEC_STATUS_VOCAB_MISMATCH, "the draft model's vocabulary does not match the target's: ", why);
        }
    }
}

} // namespace specdec::detail
