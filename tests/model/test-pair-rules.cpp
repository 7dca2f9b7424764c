// One rule set for target/draft pairs: specdec_check_pair (metadata only, as
// the CLI checks before loading) and the checks on loaded models (as session
// creation runs them, here through make_draft_context) must give the same
// status for every pair, including BOS/EOS ids that differ where they are
// not added, and DFlash block sizes that are absent or too small.
#include "gguf-edit.h"
#include "harness.h"

#include "gguf.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace specdec::test {
namespace {

std::string llama_file(uint32_t n_layer = 2, uint32_t n_embd = 256) {
    fixtures::fixture_options opt;
    opt.n_layer = n_layer;
    opt.n_embd = n_embd;
    return fixture("llama-target-" + std::to_string(n_layer) + "-" + std::to_string(n_embd),
                   [&](const std::string & p) { fixtures::write_llama_target(p, opt); });
}
std::string qwen35_file() {
    return fixture("qwen35-mtp-exact", [](const std::string & p) { fixtures::write_qwen35_mtp(p, {}); });
}
std::string eagle3_file(uint32_t n_layer = 2, uint32_t n_embd = 256) {
    fixtures::fixture_options opt;
    opt.n_layer = n_layer;
    opt.n_embd = n_embd;
    return fixture("eagle3-exact-" + std::to_string(n_layer) + "-" + std::to_string(n_embd),
                   [&](const std::string & p) { fixtures::write_eagle3_draft(p, opt); });
}
std::string dflash_file(bool v2) {
    const std::string name = v2 ? "dflash2" : "dflash";
    return fixture(name + "-exact-2-256", [&](const std::string & p) { fixtures::write_dflash_draft(p, {}, v2); });
}
std::string edited(const std::string & name, const std::string & base, const std::function<void(gguf_context *)> & edit) {
    return fixture("pair-rules-" + name, [&](const std::string & p) { fixtures::edit_gguf_file(base, p, edit); });
}

struct pair_case {
    const char *     name;
    std::function<std::string()> target;
    std::function<std::string()> draft; // nullptr: no draft model
    specdec_strategy strategy;
    specdec_status   expected;
};

const std::vector<pair_case> & cases() {
    static const std::vector<pair_case> all = {
        {"Eagle3", [] { return llama_file(); }, [] { return eagle3_file(); }, SPECDEC_STRATEGY_EAGLE3, SPECDEC_STATUS_OK},
        {"Eagle3ForADeeperTarget", [] { return llama_file(); }, [] { return eagle3_file(6); }, SPECDEC_STRATEGY_EAGLE3,
         SPECDEC_STATUS_LAYER_MISMATCH},
        {"Eagle3ForANarrowerTarget", [] { return llama_file(); }, [] { return eagle3_file(2, 128); }, SPECDEC_STRATEGY_EAGLE3,
         SPECDEC_STATUS_WIDTH_MISMATCH},
        {"Eagle3DraftAsDflash", [] { return llama_file(); }, [] { return eagle3_file(); }, SPECDEC_STRATEGY_DFLASH,
         SPECDEC_STATUS_MODEL_UNSUPPORTED},
        {"Dflash", [] { return llama_file(); }, [] { return dflash_file(false); }, SPECDEC_STRATEGY_DFLASH, SPECDEC_STATUS_OK},
        {"Dflash2", [] { return llama_file(); }, [] { return dflash_file(true); }, SPECDEC_STRATEGY_DFLASH, SPECDEC_STATUS_OK},
        {"DflashWithoutMarkovHeadAsDspark", [] { return llama_file(); }, [] { return dflash_file(false); },
         SPECDEC_STRATEGY_DSPARK, SPECDEC_STATUS_MODEL_UNSUPPORTED},
        {"DflashWithoutBlockSize", [] { return llama_file(); },
         [] { return edited("dflash-no-block-size", dflash_file(false), [](gguf_context * g) { gguf_remove_key(g, "dflash.block_size"); }); },
         SPECDEC_STRATEGY_DFLASH, SPECDEC_STATUS_OK},
        {"DflashWithABlockOfOne", [] { return llama_file(); },
         [] { return edited("dflash-block-1", dflash_file(false), [](gguf_context * g) { gguf_set_val_u32(g, "dflash.block_size", 1); }); },
         SPECDEC_STRATEGY_DFLASH, SPECDEC_STATUS_MODEL_UNSUPPORTED},
        {"DflashWithoutMaskToken", [] { return llama_file(); },
         [] { return edited("dflash-no-mask", dflash_file(false), [](gguf_context * g) { gguf_remove_key(g, "tokenizer.ggml.mask_token_id"); }); },
         SPECDEC_STRATEGY_DFLASH, SPECDEC_STATUS_MODEL_UNSUPPORTED},
        {"ClassicDraft", [] { return llama_file(); }, [] { return llama_file(); }, SPECDEC_STRATEGY_DRAFT, SPECDEC_STATUS_OK},
        {"ClassicDraftWithAnotherBosNotAdded", [] { return llama_file(); },
         [] { return edited("llama-bos-4", llama_file(), [](gguf_context * g) { gguf_set_val_u32(g, "tokenizer.ggml.bos_token_id", 4); }); },
         SPECDEC_STRATEGY_DRAFT, SPECDEC_STATUS_OK},
        {"ClassicDraftWithAnotherEosNotAdded", [] { return llama_file(); },
         [] { return edited("llama-eos-4", llama_file(), [](gguf_context * g) { gguf_set_val_u32(g, "tokenizer.ggml.eos_token_id", 4); }); },
         SPECDEC_STRATEGY_DRAFT, SPECDEC_STATUS_OK},
        {"ClassicDraftWithAnotherBosAdded",
         [] { return edited("llama-add-bos", llama_file(), [](gguf_context * g) { gguf_set_val_bool(g, "tokenizer.ggml.add_bos_token", true); }); },
         [] {
             return edited("llama-add-bos-4", llama_file(), [](gguf_context * g) {
                 gguf_set_val_bool(g, "tokenizer.ggml.add_bos_token", true);
                 gguf_set_val_u32(g, "tokenizer.ggml.bos_token_id", 4);
             });
         },
         SPECDEC_STRATEGY_DRAFT, SPECDEC_STATUS_VOCAB_MISMATCH},
        {"ClassicDraftAddingBosWhereTheTargetDoesNot", [] { return llama_file(); },
         [] { return edited("llama-add-bos", llama_file(), [](gguf_context * g) { gguf_set_val_bool(g, "tokenizer.ggml.add_bos_token", true); }); },
         SPECDEC_STRATEGY_DRAFT, SPECDEC_STATUS_VOCAB_MISMATCH},
        {"ClassicDraftWithAnotherTokenText", [] { return llama_file(); },
         [] {
             return edited("llama-token-9", llama_file(), [](gguf_context * g) {
                 const int64_t id = gguf_find_key(g, "tokenizer.ggml.tokens");
                 std::vector<std::string> texts;
                 for (size_t i = 0; i < gguf_get_arr_n(g, id); ++i) {
                     texts.emplace_back(gguf_get_arr_str(g, id, i));
                 }
                 texts[9] = "zz-unique";
                 std::vector<const char *> ptrs;
                 for (const auto & t : texts) {
                     ptrs.push_back(t.c_str());
                 }
                 gguf_set_arr_str(g, "tokenizer.ggml.tokens", ptrs.data(), ptrs.size());
             });
         },
         SPECDEC_STRATEGY_DRAFT, SPECDEC_STATUS_VOCAB_MISMATCH},
        {"Eagle3AsClassicDraft", [] { return llama_file(); }, [] { return eagle3_file(); }, SPECDEC_STRATEGY_DRAFT,
         SPECDEC_STATUS_MODEL_UNSUPPORTED},
        {"Mtp", [] { return qwen35_file(); }, nullptr, SPECDEC_STRATEGY_MTP, SPECDEC_STATUS_OK},
        {"MtpWithoutNextnLayers", [] { return llama_file(); }, nullptr, SPECDEC_STRATEGY_MTP, SPECDEC_STATUS_MODEL_UNSUPPORTED},
    };
    return all;
}

// The status of the checks on loaded models, as session creation runs them.
specdec_status loaded_status(const pair_case & c) {
    llama_model_ptr target = load_model(c.target());
    llama_model_ptr draft = c.draft ? load_model(c.draft()) : nullptr;
    context_options t;
    t.n_rs_seq = 3;
    llama_context_ptr ctx = make_context(target.get(), t);
    session_params sp = specdec_session_default_params();
    sp.strategy = c.strategy;
    return status_of([&] { make_draft_context(ctx.get(), draft.get(), sp, llama_context_default_params()); });
}

class PairRules : public ::testing::TestWithParam<size_t> {};

TEST_P(PairRules, MetadataAndLoadedModelsAgree) {
    const pair_case & c = cases()[GetParam()];
    const std::string t = c.target();
    const std::string d = c.draft ? c.draft() : std::string();
    const specdec_status from_metadata = specdec_check_pair(t.c_str(), c.draft ? d.c_str() : nullptr, c.strategy);
    const std::string why = specdec_last_error();
    EXPECT_EQ(from_metadata, c.expected) << specdec_status_name(from_metadata) << ": " << why;
    EXPECT_EQ(loaded_status(c), c.expected);
}

INSTANTIATE_TEST_SUITE_P(Pairs, PairRules, ::testing::Range<size_t>(0, cases().size()),
                         [](const ::testing::TestParamInfo<size_t> & i) { return std::string(cases()[i.param].name); });

// llama.cpp's qwen35 (and glm4moe, deepseek2, ...) MTP graph asserts a single
// NextN block. A file declaring two, whose first NextN block has its tensors,
// is refused from its metadata (llama.cpp could not load this edited file:
// the second block's tensors are missing).
TEST(PairRules, SeveralNextnBlocksWhereOneIsSupported) {
    const std::string path = edited("qwen35-two-nextn", qwen35_file(), [](gguf_context * g) {
        gguf_set_val_u32(g, "qwen35.block_count", 4);
        gguf_set_val_u32(g, "qwen35.nextn_predict_layers", 2);
    });
    EXPECT_EQ(specdec_check_pair(path.c_str(), nullptr, SPECDEC_STRATEGY_MTP), SPECDEC_STATUS_MODEL_UNSUPPORTED);
    EXPECT_NE(std::string(specdec_last_error()).find("exactly one"), std::string::npos) << specdec_last_error();
    EXPECT_EQ(specdec_check_pair(qwen35_file().c_str(), nullptr, SPECDEC_STRATEGY_MTP), SPECDEC_STATUS_OK);
}

} // namespace
} // namespace specdec::test
