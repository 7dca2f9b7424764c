// MTP sessions on generated qwen35 (hybrid recurrent) and glm4moe
// (attention-only MoE) targets: greedy output equals plain decoding, and on
// controlled fixtures every step accepts exactly what the construction says.
#include "drafter-model.h"
#include "harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>

namespace specdec::test {
namespace {

using fixtures::drafter_kind;

struct mtp_pair {
    llama_model_ptr   model;
    llama_context_ptr target;
    llama_context_ptr draft;
};

fixtures::fixture_options drafter_options(drafter_kind kind, uint32_t stretch = fixtures::fixture_options{}.stretch) {
    fixtures::fixture_options opt;
    opt.drafter = kind;
    opt.stretch = stretch;
    return opt;
}

std::string mtp_fixture(const std::string & arch, const fixtures::fixture_options & opt) {
    return fixture(arch + "-mtp-" + drafter_tag(opt), [&](const std::string & path) {
        if (arch == "qwen35") {
            fixtures::write_qwen35_mtp(path, opt);
        } else {
            fixtures::write_glm4moe_mtp(path, opt);
        }
    });
}

mtp_pair open_pair(const std::string & path, int n_draft) {
    mtp_pair p;
    p.model = load_model(path);
    context_options t;
    t.n_rs_seq = static_cast<uint32_t>(n_draft);
    p.target = make_context(p.model.get(), t);
    context_options d = t;
    d.type = LLAMA_CONTEXT_TYPE_MTP;
    d.other = p.target.get();
    p.draft = make_context(p.model.get(), d);
    return p;
}

session_params mtp_params(int n_draft) {
    session_params sp = specdec_session_default_params();
    sp.strategy = SPECDEC_STRATEGY_MTP;
    sp.n_draft_max = n_draft;
    return sp;
}

const std::vector<llama_token> prompt = {20, 21, 22, 23, 24};
constexpr int n_predict = 40;
constexpr uint32_t n_vocab = 128;

class MtpAcceptance : public ::testing::TestWithParam<std::tuple<std::string, drafter_kind, int>> {};

TEST_P(MtpAcceptance, MatchesPlainDecodingAndTheConstruction) {
    const auto & [arch, kind, n_draft] = GetParam();
    const fixtures::fixture_options opt = drafter_options(kind);
    const std::string path = mtp_fixture(arch, opt);

    std::vector<llama_token> plain;
    {
        mtp_pair p = open_pair(path, n_draft);
        plain = plain_greedy(p.target.get(), prompt, n_predict);
    }
    ASSERT_EQ(plain, expected_cycle(prompt.back(), n_predict, n_vocab));

    mtp_pair p = open_pair(path, n_draft);
    session s(p.target.get(), p.draft.get(), mtp_params(n_draft));
    const spec_run run = spec_greedy(s, prompt, n_predict);
    EXPECT_EQ(run.tokens, plain);

    // Replay the steps against the reference drafter.
    llama_token t = prompt.back();
    for (size_t step = 0; step < run.accepted.size(); ++step) {
        const auto want = reference_proposal(opt, t, n_draft);
        if (kind == drafter_kind::random) {
            EXPECT_EQ(run.accepted[step], 0) << "step " << step;
        } else {
            EXPECT_EQ(run.proposed[step], static_cast<int>(want.size())) << "step " << step;
            EXPECT_EQ(run.accepted[step], reference_accepted(want, t, n_vocab)) << "step " << step;
        }
        for (int k = 0; k <= run.accepted[step]; ++k) {
            t = fixtures::successor(t, n_vocab);
        }
    }

    const session_stats st = s.stats();
    EXPECT_EQ(st.n_drafted, static_cast<uint64_t>(run.total_proposed()));
    EXPECT_EQ(st.n_accepted, static_cast<uint64_t>(run.total_accepted()));
    EXPECT_EQ(st.n_draft, run.proposed.size());
    if (kind == drafter_kind::exact) {
        EXPECT_EQ(run.total_accepted(), run.total_proposed());
        EXPECT_EQ(st.n_accepted_at[static_cast<size_t>(n_draft - 1)], st.n_accept);
    }
    if (kind == drafter_kind::hidden_only) {
        // Only the first draft of each round reads the target's features.
        EXPECT_EQ(run.total_accepted(), static_cast<int>(run.accepted.size()));
    }
    EXPECT_TRUE(s.is_quiescent());
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, MtpAcceptance,
    ::testing::Combine(::testing::Values("qwen35", "glm4moe"),
                       ::testing::Values(drafter_kind::exact, drafter_kind::wrong_every_k, drafter_kind::hidden_only,
                                         drafter_kind::mixed, drafter_kind::random),
                       ::testing::Values(1, 2, 4)),
    [](const auto & tc) {
        return std::get<0>(tc.param) + "_" + kind_name(std::get<1>(tc.param)) + "_n" + std::to_string(std::get<2>(tc.param));
    });

// With one draft per step, the mixed drafter is accepted exactly on the steps
// whose id_last lies in an accurate stretch.
class MtpMixed : public ::testing::TestWithParam<std::tuple<std::string, uint32_t>> {};

TEST_P(MtpMixed, AcceptsExactlyTheAccurateStretches) {
    const auto & [arch, stretch] = GetParam();
    const std::string path = mtp_fixture(arch, drafter_options(drafter_kind::mixed, stretch));
    std::vector<llama_token> plain;
    {
        mtp_pair p = open_pair(path, 1);
        plain = plain_greedy(p.target.get(), prompt, n_predict);
    }

    mtp_pair p = open_pair(path, 1);
    session s(p.target.get(), p.draft.get(), mtp_params(1));
    const spec_run run = spec_greedy(s, prompt, n_predict);
    EXPECT_EQ(run.tokens, plain);

    expect_mixed_run(run, s, prompt.back(), n_predict, stretch, n_vocab);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MtpMixed,
                         ::testing::Combine(::testing::Values("qwen35", "glm4moe"), ::testing::Values(1u, 5u, 16u)),
                         [](const auto & tc) {
                             return std::get<0>(tc.param) + "_stretch" + std::to_string(std::get<1>(tc.param));
                         });

TEST(Mtp, RandomTargetStaysLossless) {
    fixtures::fixture_options opt;
    opt.controlled = false;
    opt.drafter = drafter_kind::random;
    const std::string path = fixture("glm4moe-mtp-random-target", [&](const std::string & p) { fixtures::write_glm4moe_mtp(p, opt); });
    std::vector<llama_token> plain;
    {
        mtp_pair p = open_pair(path, 3);
        plain = plain_greedy(p.target.get(), prompt, 24);
    }
    mtp_pair p = open_pair(path, 3);
    session s(p.target.get(), p.draft.get(), mtp_params(3));
    EXPECT_EQ(spec_greedy(s, prompt, 24).tokens, plain);
    EXPECT_GT(s.stats().n_drafted, 0u);
}

TEST(Mtp, ReportsOneNextnHead) {
    mtp_pair p = open_pair(mtp_fixture("qwen35", drafter_options(drafter_kind::exact)), 2);
    session s(p.target.get(), p.draft.get(), mtp_params(2));
    EXPECT_EQ(s.n_nextn_heads(), 1);
    s.set_nextn_head(0);
    EXPECT_EQ(status_of([&] { s.set_nextn_head(1); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { s.set_nextn_head(-1); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_TRUE(s.reads_target_features());
}

} // namespace
} // namespace specdec::test
