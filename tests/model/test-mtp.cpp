// MTP sessions on generated qwen35 (hybrid recurrent) and glm4moe
// (attention-only MoE) targets: greedy output equals plain decoding, and on
// controlled fixtures every step accepts exactly what the construction says.
#include "drafter-model.h"
#include "harness.h"
#include "mtp-drafter.h"

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
    return fixture(arch + "-mtp-" + drafter_tag(opt), [&](const std::string & path) { write_mtp_target(arch, path, opt); });
}

mtp_pair open_pair(const std::string & path, int n_draft, uint32_t n_ctx = context_options{}.n_ctx) {
    mtp_pair p;
    p.model = load_model(path);
    context_options t;
    t.n_ctx = n_ctx;
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

// One greedy sequence after `prompt` through the library's loop
// (specdec::generate) on a fresh pair.
sequence_result generate_one(const std::string & path, int n_draft, int n) {
    mtp_pair p = open_pair(path, n_draft);
    session s(p.target.get(), p.draft.get(), mtp_params(n_draft));
    generate_params gp = specdec_generate_default_params();
    gp.n_predict = n;
    const std::vector<std::vector<llama_token>> prompts = {prompt};
    generation_result out = generate(s, prompts, gp);
    EXPECT_TRUE(s.is_quiescent());
    EXPECT_EQ(s.stats().n_accepted, out.sequences.at(0).stats.n_accepted);
    return out.sequences.at(0);
}

// The counts the construction implies for generate_one() with `opt`'s drafter.
specdec_sequence_stats reference_run(const fixtures::fixture_options & opt, int n_draft, int n) {
    return reference_generation(opt, prompt[prompt.size() - 2], prompt.back(), n_draft, n, false);
}

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

    // The same counts through the library's own loop.
    const sequence_result out = generate_one(path, n_draft, n_predict);
    EXPECT_EQ(out.tokens, plain);
    if (kind == drafter_kind::random) {
        EXPECT_GT(out.stats.n_drafted, 0u);
        EXPECT_EQ(out.stats.n_accepted, 0u);
    } else {
        expect_stats_eq(out.stats, reference_run(opt, n_draft, n_predict));
    }
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

    const sequence_result out = generate_one(path, 1, n_predict);
    EXPECT_EQ(out.tokens, plain);
    expect_stats_eq(out.stats, reference_run(drafter_options(drafter_kind::mixed, stretch), 1, n_predict));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MtpMixed,
                         ::testing::Combine(::testing::Values("qwen35", "glm4moe"), ::testing::Values(1u, 5u, 16u)),
                         [](const auto & tc) {
                             return std::get<0>(tc.param) + "_stretch" + std::to_string(std::get<1>(tc.param));
                         });

// A vocabulary of 32,768 tokens (the test-32k shape, width 128): the
// constructions stay on the first 128 ids and every other id's lm_head row
// loses by the stated margin, so acceptance is exactly as with 128 tokens.
TEST(MtpLargeVocabulary, AcceptsExactlyAsConstructed) {
    for (const drafter_kind kind : {drafter_kind::exact, drafter_kind::wrong_every_k, drafter_kind::mixed}) {
        fixtures::fixture_options opt = fixtures::find_shape("test-32k")->options;
        opt.drafter = kind;
        SCOPED_TRACE(kind_name(kind));
        const std::string path = fixture("glm4moe-mtp-test-32k-" + drafter_tag(opt),
                                         [&](const std::string & p) { fixtures::write_glm4moe_mtp(p, opt); });
        {
            auto model = load_model(path);
            ASSERT_EQ(llama_vocab_n_tokens(llama_model_get_vocab(model.get())), 32768);
        }
        // Four a step from 25 on: each step's fourth draft reads a multiple of 4.
        const sequence_result out = generate_one(path, 4, n_predict);
        EXPECT_EQ(out.tokens, expected_cycle(prompt.back(), n_predict, opt.n_vocab));
        const specdec_sequence_stats want = reference_run(opt, 4, n_predict);
        expect_stats_eq(out.stats, want);
        if (kind == drafter_kind::exact) {
            EXPECT_EQ(want.n_accepted, want.n_drafted);
        } else {
            EXPECT_LT(want.n_accepted, want.n_drafted);
        }
    }
}

// The Qwen3-0.6B shape (vocabulary 151,936, width 1024, 28 layers, 16/8
// heads of 128, FFN 3072) with a glm4moe MTP block, quantized to Q8_0: the
// exact drafter is accepted every time through the library's loop.
TEST(MtpRealShape, Qwen3SmallIsAcceptedExactly) {
    fixtures::fixture_options opt = fixtures::find_shape("qwen3-0.6b")->options;
    const std::string path = fixture("glm4moe-mtp-qwen3-0.6b-exact-q8_0", [&](const std::string & p) {
        fixtures::write_with_type([&](const std::string & f16) { fixtures::write_glm4moe_mtp(f16, opt); }, p,
                                  fixtures::weight_type::q8_0);
    });
    constexpr int n = 16;
    {
        auto model = load_model(path);
        ASSERT_EQ(llama_vocab_n_tokens(llama_model_get_vocab(model.get())), 151936);
        ASSERT_EQ(llama_model_n_embd(model.get()), 1024);
        auto ctx = make_context(model.get(), {});
        const std::vector<std::vector<llama_token>> prompts = {prompt};
        generate_params gp = specdec_generate_default_params();
        gp.n_predict = n;
        EXPECT_EQ(generate_plain(ctx.get(), prompts, gp).sequences.at(0).tokens, expected_cycle(prompt.back(), n, opt.n_vocab));
    }
    const sequence_result out = generate_one(path, 3, n);
    EXPECT_EQ(out.tokens, expected_cycle(prompt.back(), n, opt.n_vocab));
    const specdec_sequence_stats want = reference_run(opt, 3, n);
    expect_stats_eq(out.stats, want);
    EXPECT_EQ(want.n_accepted, want.n_drafted);
    EXPECT_EQ(want.n_steps, 5u); // the prompt's token, then 15 at up to 4 per step
}

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

// Tokens the MTP head has run (llama.cpp counts every decoded token of a
// context once it synchronises, but reports each of its two counters as at
// least 1: differences are exact once both have counted).
int32_t head_tokens(llama_context * draft) {
    const llama_perf_context_data d = llama_perf_context(draft);
    return d.n_eval + d.n_p_eval;
}

// The off state and per-step lengths: a step that drafts nothing runs
// nothing on the head, however many steps in a row; a step that drafts runs
// the positions kept since it last drafted (exactly once each, rejected ones
// never; after a long stretch without drafts only the last ones, as
// mtp_drafter::kept_rows says) and as many draft rows as it asked for,
// however long the session's maximum is.
class MtpHeadWork : public ::testing::TestWithParam<std::string> {};

TEST_P(MtpHeadWork, RunsKeptPositionsOnceAndDraftsOnlyWhatIsAsked) {
    constexpr int n_draft_max = 6;
    constexpr auto kept = static_cast<llama_pos>(detail::mtp_drafter::kept_rows);
    mtp_pair p = open_pair(mtp_fixture(GetParam(), drafter_options(drafter_kind::exact)), n_draft_max, 1024);
    session s(p.target.get(), p.draft.get(), mtp_params(n_draft_max));
    llama_context * target = p.target.get();
    test_batch batch(n_draft_max + 8);
    for (size_t i = 0; i < prompt.size(); ++i) {
        batch.add(prompt[i], static_cast<llama_pos>(i), 0, i + 1 == prompt.size());
    }
    s.decode_target_and_process(batch.b);
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(p.draft.get()), 0), -1); // processing records; nothing runs yet

    llama_pos n_past = static_cast<llama_pos>(prompt.size());
    llama_pos n_run = 0; // positions the head has run
    llama_token id_last = argmax(llama_get_logits_ith(target, static_cast<int32_t>(prompt.size()) - 1), n_vocab);
    std::vector<llama_token> out = {id_last};
    // The first step (two draft rows: a batch and a single row) makes both counters count.
    // Then 2 * kept + 5 steps without one: the oldest positions are dropped.
    std::vector<int> asked = {2, 1, 0, 0, 0, 3, 0, 2, 6, 0, 1};
    asked.insert(asked.end(), 2 * kept + 5, 0);
    asked.push_back(3);
    for (size_t step = 0; step < asked.size(); ++step) {
        const int n = asked[step];
        const int32_t before = head_tokens(p.draft.get());
        std::vector<llama_token> proposal;
        if (n > 0) {
            const draft_request request{0, n_past, id_last, n, nullptr};
            s.draft({&request, 1});
            proposal.assign(s.proposal(0).begin(), s.proposal(0).end());
            ASSERT_EQ(proposal.size(), static_cast<size_t>(n)); // the exact drafter never stops early
            if (step > 0) {
                const llama_pos recorded = n_past - n_run;
                const llama_pos run = recorded < 2 * kept ? recorded : kept + recorded % kept;
                EXPECT_EQ(head_tokens(p.draft.get()) - before, run + n) << "step " << step << ", " << recorded << " recorded";
            }
            n_run = n_past;
        }
        batch.clear();
        batch.add(id_last, n_past, 0, true);
        for (size_t i = 0; i < proposal.size(); ++i) {
            batch.add(proposal[i], n_past + 1 + static_cast<llama_pos>(i), 0, true);
        }
        s.decode_target_and_process(batch.b);
        size_t k = 0;
        while (k < proposal.size() && argmax(llama_get_logits_ith(target, static_cast<int32_t>(k)), n_vocab) == proposal[k]) {
            ++k;
        }
        EXPECT_EQ(k, proposal.size());
        if (!proposal.empty()) {
            s.accept(0, static_cast<uint16_t>(k));
        }
        if (n == 0) {
            EXPECT_EQ(head_tokens(p.draft.get()), before) << "a step without a draft ran the head";
        }
        out.insert(out.end(), proposal.begin(), proposal.end());
        id_last = argmax(llama_get_logits_ith(target, static_cast<int32_t>(k)), n_vocab);
        out.push_back(id_last);
        n_past += 1 + static_cast<llama_pos>(k);
    }
    EXPECT_EQ(out, expected_cycle(prompt.back(), static_cast<int>(out.size()), n_vocab));
}

INSTANTIATE_TEST_SUITE_P(Archs, MtpHeadWork, ::testing::Values("glm4moe", "qwen35"));

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
