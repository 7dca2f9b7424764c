// The pre-load check that specdec_inspect (and so the CLI) runs on every
// file: header values llama.cpp's loader aborts on, and keys it requires,
// come back as MALFORMED_FILE naming the key. For each abort case the test
// also shows that llama.cpp itself dies loading that file, or in the first
// decode of one token (death tests), so the check covers a real abort and
// the list in gguf-load-check.h stays true.
#include "gguf-edit.h"
#include "harness.h"

#include "gguf.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>

namespace specdec::test {
namespace {

std::string base_file(const std::string & arch) {
    if (arch == "qwen35") {
        return fixture("qwen35-mtp-exact", [](const std::string & p) { fixtures::write_qwen35_mtp(p, {}); });
    }
    if (arch == "glm4moe") {
        return fixture("glm4moe-mtp-exact", [](const std::string & p) { fixtures::write_glm4moe_mtp(p, {}); });
    }
    if (arch == "dflash") {
        return fixture("dflash-exact-2-256", [](const std::string & p) { fixtures::write_dflash_draft(p, {}, false); });
    }
    return fixture("llama-target-2-256", [](const std::string & p) { fixtures::write_llama_target(p, {}); });
}

// Where llama.cpp ends the process on the edited file when nothing checks it first.
enum class aborts { no, loading, decoding };

struct edit_case {
    const char * name;
    const char * arch;                          // the fixture edited
    std::function<void(gguf_context *)> edit;
    const char * key;                           // the message must name it
    aborts llama_aborts;                        // what llama.cpp does with the edited file, unchecked
};

void set_u32(gguf_context * g, const std::string & key, uint32_t v) { gguf_set_val_u32(g, key.c_str(), v); }

const std::vector<edit_case> & cases() {
    static const std::vector<edit_case> all = {
        {"BlockCountAboveMaxLayers", "llama", [](gguf_context * g) { set_u32(g, "llama.block_count", 4000000000u); },
         "llama.block_count", aborts::loading},
        {"ZeroBlockCount", "llama", [](gguf_context * g) { set_u32(g, "llama.block_count", 0); }, "llama.block_count", aborts::loading},
        {"NextnAboveBlockCount", "llama", [](gguf_context * g) { set_u32(g, "llama.nextn_predict_layers", 3); },
         "llama.nextn_predict_layers", aborts::loading},
        {"ExpertCountAboveMax", "llama", [](gguf_context * g) { set_u32(g, "llama.expert_count", 2000); set_u32(g, "llama.expert_used_count", 2); },
         "llama.expert_count", aborts::loading},
        {"MoreExpertsUsedThanExist", "llama", [](gguf_context * g) { set_u32(g, "llama.expert_count", 4); set_u32(g, "llama.expert_used_count", 8); },
         "llama.expert_used_count", aborts::loading},
        {"ExpertsButNoneUsed", "llama", [](gguf_context * g) { set_u32(g, "llama.expert_count", 4); },
         "llama.expert_used_count", aborts::loading},
        {"ExpertGroupsNotBelowExperts", "llama",
         [](gguf_context * g) { set_u32(g, "llama.expert_count", 4); set_u32(g, "llama.expert_used_count", 2); set_u32(g, "llama.expert_group_count", 4); },
         "llama.expert_group_count", aborts::loading},
        {"ExpertGroupsThatDoNotDivide", "llama",
         [](gguf_context * g) {
             set_u32(g, "llama.expert_count", 8); set_u32(g, "llama.expert_used_count", 2);
             set_u32(g, "llama.expert_group_count", 3); set_u32(g, "llama.expert_group_used_count", 1);
         },
         "llama.expert_group_count", aborts::loading},
        {"ExpertGroupsWithoutExperts", "llama", [](gguf_context * g) { set_u32(g, "llama.expert_group_count", 2); },
         "llama.expert_group_count", aborts::loading},
        {"UnknownRopeScaling", "llama", [](gguf_context * g) { gguf_set_val_str(g, "llama.rope.scaling.type", "bogus"); },
         "llama.rope.scaling.type", aborts::loading},
        {"ZeroFullAttentionInterval", "qwen35", [](gguf_context * g) {
             gguf_remove_key(g, "qwen35.attention.recurrent_layers");
             set_u32(g, "qwen35.full_attention_interval", 0);
         }, "qwen35.full_attention_interval", aborts::loading},
        {"Glm4moeWithoutExperts", "glm4moe", [](gguf_context * g) {
             set_u32(g, "glm4moe.expert_count", 0);
             set_u32(g, "glm4moe.expert_used_count", 0);
         }, "glm4moe.expert_count", aborts::loading},
        {"Glm4moeFirstBlockUsesNoExpert", "glm4moe", [](gguf_context * g) {
             // Per-block counts: the generic check sees a block that uses 2;
             // glm4moe's loader asserts on the first block's.
             const uint32_t n_layer = gguf_get_val_u32(g, gguf_find_key(g, "glm4moe.block_count"));
             std::vector<uint32_t> used(n_layer, 2);
             used[0] = 0;
             gguf_set_arr_data(g, "glm4moe.expert_used_count", GGUF_TYPE_UINT32, used.data(), used.size());
         }, "glm4moe.expert_used_count is 0 for the first block", aborts::loading},
        {"DsparkBackboneWithoutOutputGroups", "dflash", [](gguf_context * g) {
             set_u32(g, "dflash.hyper_connection.count", 4);
             set_u32(g, "dflash.attention.output_group_count", 0);
         }, "dflash.attention.output_group_count", aborts::no},
        // The loader takes these; the first decode aborts (issue 33: the
        // server listened, then died on the first request).
        {"RopeDimensionsAboveHead", "glm4moe", [](gguf_context * g) { set_u32(g, "glm4moe.rope.dimension_count", 128); },
         "glm4moe.rope.dimension_count is 128, above the head size 64", aborts::decoding},
        {"NegativeRmsEpsilon", "glm4moe",
         [](gguf_context * g) { gguf_set_val_f32(g, "glm4moe.attention.layer_norm_rms_epsilon", -1.0f); },
         "glm4moe.attention.layer_norm_rms_epsilon is -1", aborts::decoding},
        {"NanRmsEpsilon", "qwen35",
         [](gguf_context * g) { gguf_set_val_f32(g, "qwen35.attention.layer_norm_rms_epsilon", std::nanf("")); },
         "qwen35.attention.layer_norm_rms_epsilon is nan", aborts::no},
        {"ZeroRmsEpsilon", "llama", [](gguf_context * g) { gguf_set_val_f32(g, "llama.attention.layer_norm_rms_epsilon", 0.0f); },
         "llama.attention.layer_norm_rms_epsilon is 0", aborts::no},
        {"NextnWithoutTrunk", "glm4moe", [](gguf_context * g) {
             set_u32(g, "glm4moe.nextn_predict_layers", gguf_get_val_u32(g, gguf_find_key(g, "glm4moe.block_count")));
         }, "no trunk block", aborts::decoding},
        {"DuplicateTokenText", "llama", [](gguf_context * g) {
             std::vector<std::string> texts;
             const int64_t id = gguf_find_key(g, "tokenizer.ggml.tokens");
             for (size_t i = 0; i < gguf_get_arr_n(g, id); ++i) {
                 texts.emplace_back(gguf_get_arr_str(g, id, i));
             }
             texts[7] = texts[6];
             std::vector<const char *> ptrs;
             for (const auto & t : texts) {
                 ptrs.push_back(t.c_str());
             }
             gguf_set_arr_str(g, "tokenizer.ggml.tokens", ptrs.data(), ptrs.size());
         }, "twice", aborts::loading},
    };
    return all;
}

std::string edited(const edit_case & c) {
    const std::string path = fixture(std::string("load-check-") + c.name, [&](const std::string & p) {
        fixtures::edit_gguf_file(base_file(c.arch), p, c.edit);
    });
    return path;
}

class LoadCheck : public ::testing::TestWithParam<size_t> {};

TEST_P(LoadCheck, InspectRefusesWhatTheLoaderAbortsOn) {
    const edit_case & c = cases()[GetParam()];
    // The unedited fixture is accepted, so the edit is what is refused.
    specdec_model_info info{};
    ASSERT_EQ(specdec_inspect(base_file(c.arch).c_str(), &info), SPECDEC_STATUS_OK) << specdec_last_error();
    const std::string path = edited(c);
    EXPECT_EQ(specdec_inspect(path.c_str(), &info), SPECDEC_STATUS_MALFORMED_FILE);
    EXPECT_NE(std::string(specdec_last_error()).find(c.key), std::string::npos) << specdec_last_error();
    EXPECT_EQ(specdec_check_pair(path.c_str(), nullptr, SPECDEC_STRATEGY_NGRAM_SIMPLE), SPECDEC_STATUS_MALFORMED_FILE);
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    if (c.llama_aborts == aborts::loading) {
        EXPECT_DEATH(
            {
                llama_model_params p = llama_model_default_params();
                llama_model_load_from_file(path.c_str(), p);
            },
            "");
    }
    if (c.llama_aborts == aborts::decoding) {
        EXPECT_DEATH(
            {
                llama_model_ptr m = load_model(path); // throws when refused at load: the death test fails
                llama_context_ptr ctx = make_context(m.get(), {});
                test_batch b(1);
                b.add(1, 0, 0, true);
                llama_decode(ctx.get(), b.b);
                std::exit(0); // decoded: no abort, the death test fails
            },
            "");
    }
}

INSTANTIATE_TEST_SUITE_P(Edits, LoadCheck, ::testing::Range<size_t>(0, cases().size()),
                         [](const ::testing::TestParamInfo<size_t> & i) { return std::string(cases()[i.param].name); });

// Keys the loader requires: without them loading fails ("key not found",
// "cannot find tokenizer vocab"), so inspect must not call the file fine.
class RequiredKey : public ::testing::TestWithParam<const char *> {};

TEST_P(RequiredKey, MissingKeyIsMalformedAndNamed) {
    const std::string key = GetParam();
    std::string tag = key;
    std::replace(tag.begin(), tag.end(), '.', '-');
    const std::string path = fixture("load-check-without-" + tag, [&](const std::string & p) {
        fixtures::edit_gguf_file(base_file("llama"), p, [&](gguf_context * g) { gguf_remove_key(g, key.c_str()); });
    });
    specdec_model_info info{};
    EXPECT_EQ(specdec_inspect(path.c_str(), &info), SPECDEC_STATUS_MALFORMED_FILE);
    EXPECT_NE(std::string(specdec_last_error()).find(key), std::string::npos) << specdec_last_error();
    specdec_strategy s{};
    EXPECT_EQ(specdec_detect_strategy(path.c_str(), nullptr, &s), SPECDEC_STATUS_MALFORMED_FILE);
    // What inspect says matches the loader: it cannot load the file either.
    llama_model_params p = llama_model_default_params();
    llama_model * m = llama_model_load_from_file(path.c_str(), p);
    EXPECT_EQ(m, nullptr);
    llama_model_free(m);
}

INSTANTIATE_TEST_SUITE_P(Keys, RequiredKey,
                         ::testing::Values("general.architecture", "llama.context_length", "llama.embedding_length",
                                           "llama.block_count", "tokenizer.ggml.model", "tokenizer.ggml.tokens"),
                         [](const ::testing::TestParamInfo<const char *> & i) {
                             std::string n = i.param;
                             std::replace(n.begin(), n.end(), '.', '_');
                             return n;
                         });

} // namespace
} // namespace specdec::test
