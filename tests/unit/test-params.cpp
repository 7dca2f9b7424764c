// Session parameters: defaults, every validation rule, strategy names.
#include "specdec/specdec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <string>

namespace {

specdec_status validate(const specdec_session_params & p) {
    return specdec_session_params_validate(&p);
}

TEST(Params, DefaultsMatchUpstream) {
    const specdec_session_params p = specdec_session_default_params();
    EXPECT_EQ(p.strategy, SPECDEC_STRATEGY_MTP);
    EXPECT_EQ(p.n_seq, 1u);
    EXPECT_EQ(p.n_draft_max, 3);
    EXPECT_EQ(p.n_draft_min, 0);
    EXPECT_EQ(p.p_min, 0.0f);
    EXPECT_EQ(p.draft_vocab, 0);
    EXPECT_EQ(p.draft_vocab_ranking, nullptr);
    EXPECT_EQ(p.n_draft_vocab_ranking, 0u);
    EXPECT_EQ(validate(p), SPECDEC_STATUS_OK);
}

const llama_token two_tokens[] = {7, 9};

struct bad_case {
    const char * name;
    void (*mutate)(specdec_session_params &);
    const char * field; // must appear in the message
};

const bad_case bad_cases[] = {
    {"n_seq_zero", [](specdec_session_params & p) { p.n_seq = 0; }, "n_seq"},
    {"n_seq_above_bound", [](specdec_session_params & p) { p.n_seq = SPECDEC_MAX_SEQ + 1; }, "n_seq"},
    {"n_draft_max_zero", [](specdec_session_params & p) { p.n_draft_max = 0; }, "n_draft_max"},
    {"n_draft_max_negative", [](specdec_session_params & p) { p.n_draft_max = -3; }, "n_draft_max"},
    {"n_draft_max_above_bound", [](specdec_session_params & p) { p.n_draft_max = SPECDEC_MAX_DRAFT + 1; }, "n_draft_max"},
    {"n_draft_min_negative", [](specdec_session_params & p) { p.n_draft_min = -1; }, "n_draft_min"},
    {"n_draft_min_above_max", [](specdec_session_params & p) { p.n_draft_max = 4; p.n_draft_min = 5; }, "n_draft_min"},
    {"p_min_negative", [](specdec_session_params & p) { p.p_min = -0.01f; }, "p_min"},
    {"p_min_above_one", [](specdec_session_params & p) { p.p_min = 1.01f; }, "p_min"},
    {"p_min_nan", [](specdec_session_params & p) { p.p_min = std::numeric_limits<float>::quiet_NaN(); }, "p_min"},
    {"p_min_inf", [](specdec_session_params & p) { p.p_min = std::numeric_limits<float>::infinity(); }, "p_min"},
    {"draft_vocab_below_auto", [](specdec_session_params & p) { p.draft_vocab = -2; }, "draft_vocab"},
    {"draft_vocab_ranking_empty", [](specdec_session_params & p) { p.draft_vocab_ranking = two_tokens; }, "draft_vocab_ranking"},
    {"draft_vocab_ranking_null", [](specdec_session_params & p) { p.n_draft_vocab_ranking = 2; }, "draft_vocab_ranking"},
    {"draft_vocab_above_ranking", [](specdec_session_params & p) { p.draft_vocab = 3; p.draft_vocab_ranking = two_tokens; p.n_draft_vocab_ranking = 2; }, "draft_vocab"},
    {"strategy_out_of_range", [](specdec_session_params & p) { p.strategy = SPECDEC_STRATEGY_COUNT; }, "strategy"},
    {"strategy_unknown", [](specdec_session_params & p) { p.strategy = static_cast<specdec_strategy>(15); }, "strategy"},
};

class ParamsRejects : public ::testing::TestWithParam<bad_case> {};

TEST_P(ParamsRejects, WithInvalidConfigNamingTheField) {
    specdec_session_params p = specdec_session_default_params();
    GetParam().mutate(p);
    EXPECT_EQ(validate(p), SPECDEC_STATUS_INVALID_CONFIG);
    EXPECT_NE(std::string(specdec_last_error()).find(GetParam().field), std::string::npos) << specdec_last_error();
}

INSTANTIATE_TEST_SUITE_P(AllRules, ParamsRejects, ::testing::ValuesIn(bad_cases),
                         [](const auto & tc) { return std::string(tc.param.name); });

TEST(Params, BoundsAreInclusive) {
    specdec_session_params p = specdec_session_default_params();
    p.n_seq = SPECDEC_MAX_SEQ;
    p.n_draft_max = SPECDEC_MAX_DRAFT;
    p.n_draft_min = SPECDEC_MAX_DRAFT;
    p.p_min = 1.0f;
    EXPECT_EQ(validate(p), SPECDEC_STATUS_OK);
}

TEST(Params, NullIsInvalidArgument) {
    EXPECT_EQ(specdec_session_params_validate(nullptr), SPECDEC_STATUS_INVALID_ARGUMENT);
}

TEST(Strategy, NamesRoundTripAndAreUnique) {
    std::set<std::string> names;
    for (int i = 0; i < SPECDEC_STRATEGY_COUNT; ++i) {
        const auto s = static_cast<specdec_strategy>(i);
        const char * name = specdec_strategy_name(s);
        ASSERT_NE(name, nullptr);
        EXPECT_TRUE(names.insert(name).second) << name;
        specdec_strategy back = SPECDEC_STRATEGY_COUNT;
        ASSERT_EQ(specdec_strategy_from_name(name, &back), SPECDEC_STATUS_OK);
        EXPECT_EQ(back, s);
    }
    EXPECT_EQ(specdec_strategy_name(SPECDEC_STRATEGY_COUNT), nullptr);
}

TEST(Strategy, UnknownNameListsTheKnownOnes) {
    specdec_strategy out = SPECDEC_STRATEGY_MTP;
    EXPECT_EQ(specdec_strategy_from_name("medusa", &out), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(specdec_last_error()).find("eagle3"), std::string::npos);
    EXPECT_EQ(specdec_strategy_from_name(nullptr, &out), SPECDEC_STATUS_INVALID_ARGUMENT);
}

TEST(Strategy, OnlyTheNgramFamilyDraftsWithoutAContext) {
    EXPECT_TRUE(specdec_strategy_needs_draft_context(SPECDEC_STRATEGY_MTP));
    EXPECT_TRUE(specdec_strategy_needs_draft_context(SPECDEC_STRATEGY_EAGLE3));
    EXPECT_TRUE(specdec_strategy_needs_draft_context(SPECDEC_STRATEGY_DFLASH));
    EXPECT_TRUE(specdec_strategy_needs_draft_context(SPECDEC_STRATEGY_DSPARK));
    EXPECT_TRUE(specdec_strategy_needs_draft_context(SPECDEC_STRATEGY_DRAFT));
    EXPECT_FALSE(specdec_strategy_needs_draft_context(SPECDEC_STRATEGY_NGRAM_SIMPLE));
    EXPECT_FALSE(specdec_strategy_needs_draft_context(SPECDEC_STRATEGY_NGRAM_CACHE));
    EXPECT_FALSE(specdec_strategy_needs_draft_context(SPECDEC_STRATEGY_COUNT));
}

TEST(Status, KindsFollowTheGroups) {
    EXPECT_EQ(specdec_status_kind_of(SPECDEC_STATUS_OK), SPECDEC_STATUS_KIND_NONE);
    EXPECT_EQ(specdec_status_kind_of(SPECDEC_STATUS_INVALID_CONFIG), SPECDEC_STATUS_KIND_CONFIGURATION);
    EXPECT_EQ(specdec_status_kind_of(SPECDEC_STATUS_PROPOSAL_PENDING), SPECDEC_STATUS_KIND_LIFECYCLE);
    EXPECT_EQ(specdec_status_kind_of(SPECDEC_STATUS_LAYER_MISMATCH), SPECDEC_STATUS_KIND_COMPATIBILITY);
    EXPECT_EQ(specdec_status_kind_of(SPECDEC_STATUS_STATE_CONFIG), SPECDEC_STATUS_KIND_STATE);
    EXPECT_EQ(specdec_status_kind_of(SPECDEC_STATUS_DECODE_FAILED), SPECDEC_STATUS_KIND_NATIVE);
    EXPECT_EQ(specdec_status_kind_of(static_cast<specdec_status>(510)), SPECDEC_STATUS_KIND_NONE);
}

TEST(Status, EveryCodeHasADistinctName) {
    std::set<std::string> names;
    for (int v = 0; v < 600; ++v) {
        const std::string name = specdec_status_name(static_cast<specdec_status>(v));
        if (name != "UNKNOWN") {
            EXPECT_TRUE(names.insert(name).second) << name;
            EXPECT_NE(specdec_status_kind_of(static_cast<specdec_status>(v)) == SPECDEC_STATUS_KIND_NONE, v != 0) << name;
        }
    }
    EXPECT_EQ(names.size(), 34u);
}

// scripts/bootstrap.sh applies patches/0001 to the llama.cpp it builds on, so
// exact kernels are there and on; the switch is process-wide and reads back.
TEST(ExactKernels, OnByDefaultAndSwitchable) {
    EXPECT_TRUE(specdec_exact_kernels());
    EXPECT_EQ(specdec_set_exact_kernels(false), SPECDEC_STATUS_OK);
    EXPECT_FALSE(specdec_exact_kernels());
    EXPECT_EQ(specdec_set_exact_kernels(true), SPECDEC_STATUS_OK);
    EXPECT_TRUE(specdec_exact_kernels());
    EXPECT_EQ(specdec_status_kind_of(SPECDEC_STATUS_UNAVAILABLE), SPECDEC_STATUS_KIND_COMPATIBILITY);
}

TEST(Engine, CAbiRefusesBadArguments) {
    const specdec_engine_params p = specdec_engine_default_params();
    EXPECT_EQ(p.n_seq, 0u);
    EXPECT_GT(p.max_waiting, 0u);
    EXPECT_GE(p.n_prefill_chunk, 0);
    EXPECT_TRUE(p.reuse_prompts) << "prompt reuse is on by default, as in llama-server";
    specdec_engine * e = reinterpret_cast<specdec_engine *>(1);
    EXPECT_EQ(specdec_engine_init(nullptr, nullptr, &p, nullptr, nullptr, &e), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(e, nullptr);
    EXPECT_EQ(specdec_engine_step(nullptr), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(specdec_engine_cancel(nullptr, 1), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_FALSE(specdec_engine_has_work(nullptr));
    specdec_engine_free(nullptr);
    EXPECT_STREQ(specdec_status_name(SPECDEC_STATUS_QUEUE_FULL), "QUEUE_FULL");
    EXPECT_EQ(specdec_status_kind_of(SPECDEC_STATUS_QUEUE_FULL), SPECDEC_STATUS_KIND_LIFECYCLE);
}

} // namespace
