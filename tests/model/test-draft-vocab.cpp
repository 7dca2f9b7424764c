// A restricted draft vocabulary on the MTP fixtures (qwen35 hybrid, glm4moe
// attention-only): greedy output stays plain decoding's even when the subset
// leaves out tokens the target writes; the head never proposes a token
// outside the subset, and is accepted exactly where the construction says
// (a draft chain stops being accepted at its first left-out token); with
// the whole vocabulary as the subset it proposes what the unrestricted head
// proposes; bad requests fail with INVALID_CONFIG before llama.cpp runs.
#include "harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <tuple>

namespace specdec::test {
namespace {

using fixtures::drafter_kind;

constexpr uint32_t n_vocab = 128;
const std::vector<llama_token> prompt = {20, 21, 22, 23, 24};

std::string mtp_fixture(const std::string & arch, drafter_kind kind, bool controlled = true) {
    fixtures::fixture_options opt;
    opt.drafter = kind;
    opt.controlled = controlled;
    const std::string name = arch + "-mtp-vocab-" + (controlled ? "" : "random-target-") + std::to_string(static_cast<int>(kind));
    return fixture(name, [&](const std::string & path) { write_mtp_target(arch, path, opt); });
}

struct mtp_pair {
    llama_model_ptr   model;
    llama_context_ptr target;
    llama_context_ptr draft;

    mtp_pair(const std::string & path, int n_draft) : model(load_model(path)) {
        context_options t;
        t.n_rs_seq = static_cast<uint32_t>(n_draft);
        target = make_context(model.get(), t);
        context_options d = t;
        d.type = LLAMA_CONTEXT_TYPE_MTP;
        d.other = target.get();
        draft = make_context(model.get(), d);
    }
};

session_params params(int n_draft, int32_t draft_vocab, const std::vector<llama_token> * ranking = nullptr) {
    session_params sp = specdec_session_default_params();
    sp.strategy = SPECDEC_STRATEGY_MTP;
    sp.n_draft_max = n_draft;
    sp.draft_vocab = draft_vocab;
    if (ranking != nullptr) {
        sp.draft_vocab_ranking = ranking->data();
        sp.n_draft_vocab_ranking = ranking->size();
    }
    return sp;
}

// The rankings tried: the tokenizer's first 64 (the cycle's tokens 64..127
// left out), the tokenizer's first 16, and a file-style ranking of the even
// ids (every second cycle token left out).
struct ranking_case {
    const char * name;
    int32_t      size;
    bool         evens; // else the tokenizer's ranking
};

std::vector<llama_token> evens() {
    std::vector<llama_token> r;
    for (llama_token t = 0; t < static_cast<llama_token>(n_vocab); t += 2) {
        r.push_back(t);
    }
    return r;
}

// Checks a run's proposals against the subset: each full length, every
// token in the subset, and accepted exactly as far as the cycle's successors
// of the last token stay in it. `last`: the token before the run's first
// step. Returns the tokens accepted.
int expect_drafts_within(const spec_run & run, const std::set<llama_token> & subset, llama_token last, int n_draft) {
    llama_token t = last;
    int accepted = 0;
    for (size_t step = 0; step < run.proposals.size(); ++step) {
        const std::vector<llama_token> & q = run.proposals[step];
        EXPECT_EQ(q.size(), static_cast<size_t>(n_draft)) << "step " << step;
        for (llama_token x : q) {
            EXPECT_EQ(subset.count(x), 1u) << "step " << step << " proposed " << x << ", outside the subset";
        }
        // Accepted: the leading successors of t that the subset holds.
        int want = 0;
        for (llama_token u = fixtures::successor(t, n_vocab); want < n_draft && subset.count(u) == 1;
             u = fixtures::successor(u, n_vocab)) {
            ++want;
        }
        EXPECT_EQ(run.accepted[step], want) << "step " << step << " after token " << t;
        accepted += run.accepted[step];
        for (int k = 0; k <= run.accepted[step]; ++k) {
            t = fixtures::successor(t, n_vocab);
        }
    }
    return accepted;
}

class DraftVocabGreedy : public ::testing::TestWithParam<std::tuple<std::string, ranking_case>> {};

TEST_P(DraftVocabGreedy, MatchesPlainDecodingAndDraftsOnlyTheSubset) {
    const auto & [arch, rc] = GetParam();
    const std::string path = mtp_fixture(arch, drafter_kind::exact);
    constexpr int n_draft = 4;
    constexpr int n_predict = 120; // 25 .. 127, then 3 .. 21: through every subset below
    std::vector<llama_token> plain;
    {
        mtp_pair p(path, n_draft);
        plain = plain_greedy(p.target.get(), prompt, n_predict);
    }
    ASSERT_EQ(plain, expected_cycle(prompt.back(), n_predict, n_vocab));

    const std::vector<llama_token> ranking = evens();
    mtp_pair p(path, n_draft);
    session s(p.target.get(), p.draft.get(), params(n_draft, rc.size, rc.evens ? &ranking : nullptr));
    ASSERT_EQ(s.params().draft_vocab, rc.size);
    ASSERT_EQ(s.params().draft_vocab_ranking, nullptr);
    // The subset: the ranking's first `size` ids.
    std::set<llama_token> subset;
    if (rc.evens) {
        subset.insert(ranking.begin(), ranking.begin() + rc.size);
    } else {
        // The tokenizer's ranking: end of generation (</s>) first, then the
        // normal tokens by id (the fixture's <unk> and <s> are control tokens).
        subset.insert(2);
        for (llama_token t = fixtures::first_cycle_token; static_cast<int32_t>(subset.size()) < rc.size; ++t) {
            subset.insert(t);
        }
    }
    const spec_run run = spec_greedy(s, prompt, n_predict);
    EXPECT_EQ(run.tokens, plain);
    // The subset leaves out tokens the target writes.
    EXPECT_TRUE(std::any_of(plain.begin(), plain.end(), [&](llama_token t) { return subset.count(t) == 0; }));

    const int accepted = expect_drafts_within(run, subset, prompt.back(), n_draft);
    EXPECT_GT(accepted, 0);
    EXPECT_LT(accepted, run.total_proposed());
    EXPECT_EQ(s.stats().n_accepted, static_cast<uint64_t>(accepted));

    // The library's loop gives the same tokens.
    mtp_pair p2(path, n_draft);
    session s2(p2.target.get(), p2.draft.get(), params(n_draft, rc.size, rc.evens ? &ranking : nullptr));
    generate_params gp = specdec_generate_default_params();
    gp.n_predict = n_predict;
    const generation_result out = generate(s2, std::vector<std::vector<llama_token>>{prompt}, gp);
    EXPECT_EQ(out.sequences.at(0).tokens, plain);
    EXPECT_GT(out.sequences.at(0).stats.n_accepted, 0u);
    EXPECT_LT(out.sequences.at(0).stats.n_accepted, out.sequences.at(0).stats.n_drafted);
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, DraftVocabGreedy,
    ::testing::Combine(::testing::Values("qwen35", "glm4moe"),
                       ::testing::Values(ranking_case{"tokenizer64", 64, false}, ranking_case{"tokenizer16", 16, false},
                                         ranking_case{"evens60", 60, true})),
    [](const auto & tc) { return std::get<0>(tc.param) + "_" + std::get<1>(tc.param).name; });

// With every token in the subset, the restricted head (its own projection of
// the gathered rows) proposes exactly what llama.cpp's head proposes, on a
// random target whose logits are close everywhere, step for step.
class DraftVocabWhole : public ::testing::TestWithParam<std::string> {};

TEST_P(DraftVocabWhole, ProposesWhatTheUnrestrictedHeadProposes) {
    const std::string path = mtp_fixture(GetParam(), drafter_kind::random, false);
    constexpr int n_draft = 3;
    constexpr int n_predict = 40;
    std::vector<spec_run> runs;
    for (const int32_t size : {0, static_cast<int32_t>(n_vocab)}) {
        mtp_pair p(path, n_draft);
        session s(p.target.get(), p.draft.get(), params(n_draft, size));
        ASSERT_EQ(s.params().draft_vocab, size);
        runs.push_back(spec_greedy(s, prompt, n_predict));
    }
    EXPECT_EQ(runs[0].tokens, runs[1].tokens);
    ASSERT_EQ(runs[0].proposals.size(), runs[1].proposals.size());
    for (size_t step = 0; step < runs[0].proposals.size(); ++step) {
        EXPECT_EQ(runs[0].proposals[step], runs[1].proposals[step]) << "step " << step;
    }
    EXPECT_GT(runs[0].total_proposed(), 0);
}

INSTANTIATE_TEST_SUITE_P(Archs, DraftVocabWhole, ::testing::Values("qwen35", "glm4moe"));

// Counts re-rank the subset between steps (as a server does with the tokens
// it generated): the tokens that enter take the slots of those that leave,
// nothing is copied when the subset stays, the head then drafts from the new
// subset and is accepted exactly where that holds the text, and the output
// stays plain decoding's. Ties and uncounted tokens go by the tokenizer's
// ranking.
class DraftVocabRanked : public ::testing::TestWithParam<std::string> {};

TEST_P(DraftVocabRanked, CountsMoveTheSubsetBetweenSteps) {
    const std::string path = mtp_fixture(GetParam(), drafter_kind::exact);
    constexpr int n_draft = 4;
    constexpr int n_predict = 40;
    mtp_pair p(path, n_draft);
    session s(p.target.get(), p.draft.get(), params(n_draft, 16)); // the tokenizer's: </s>, then 3 .. 17
    const auto range = [](llama_token from, llama_token to) {
        std::set<llama_token> r;
        for (llama_token t = from; t <= to; ++t) {
            r.insert(t);
        }
        return r;
    };

    // 30 .. 45 counted (the text writes them early in the first run).
    std::vector<uint64_t> counts(n_vocab, 0);
    for (llama_token t = 30; t <= 45; ++t) {
        counts[static_cast<size_t>(t)] = 100 - static_cast<uint64_t>(t);
    }
    EXPECT_EQ(s.rank_draft_vocab(counts), 16);
    EXPECT_EQ(s.rank_draft_vocab(counts), 0); // the same subset: nothing copied
    const spec_run first = spec_greedy(s, prompt, n_predict);
    EXPECT_EQ(first.tokens, expected_cycle(prompt.back(), n_predict, n_vocab));
    const int accepted_first = expect_drafts_within(first, range(30, 45), prompt.back(), n_draft);
    EXPECT_GT(accepted_first, 0);
    EXPECT_LT(accepted_first, first.total_proposed());

    // 38 .. 45 counted more, and 70 .. 77 (later in the text): 8 enter, 8 stay.
    std::fill(counts.begin(), counts.end(), 0);
    for (llama_token t = 38; t <= 45; ++t) {
        counts[static_cast<size_t>(t)] = 200;
    }
    for (llama_token t = 70; t <= 77; ++t) {
        counts[static_cast<size_t>(t)] = 150;
    }
    EXPECT_EQ(s.rank_draft_vocab(counts), 8);
    std::set<llama_token> second_subset = range(38, 45);
    second_subset.merge(range(70, 77));
    const spec_run second = spec_continue(s, first.n_past, first.id_last, n_predict);
    EXPECT_EQ(second.tokens, expected_cycle(first.id_last, n_predict, n_vocab));
    const int accepted_second = expect_drafts_within(second, second_subset, first.id_last, n_draft);
    EXPECT_GT(accepted_second, 0);
    EXPECT_LT(accepted_second, second.total_proposed());

    // Nothing counted: the tokenizer's first 16 again.
    std::fill(counts.begin(), counts.end(), 0);
    EXPECT_EQ(s.rank_draft_vocab(counts), 16);
    std::set<llama_token> tokenizer_subset = range(3, 17);
    tokenizer_subset.insert(2);
    const spec_run third = spec_continue(s, second.n_past, second.id_last, n_predict);
    EXPECT_EQ(third.tokens, expected_cycle(second.id_last, n_predict, n_vocab));
    expect_drafts_within(third, tokenizer_subset, second.id_last, n_draft);
}

INSTANTIATE_TEST_SUITE_P(Archs, DraftVocabRanked, ::testing::Values("qwen35", "glm4moe"));

// Re-ranking refuses what it cannot do, with the subset left as it was: no
// restricted vocabulary in effect, counts of another vocabulary's size, a
// proposal awaiting its verification (the C API's NULL arguments: test-c-header.c).
TEST(DraftVocabRanked, RefusesBadRequestsAndKeepsTheSubset) {
    const std::string path = mtp_fixture("glm4moe", drafter_kind::exact);
    constexpr int n_draft = 3;
    std::vector<uint64_t> counts(n_vocab, 0);
    counts[50] = 1;
    {
        mtp_pair p(path, n_draft);
        session whole(p.target.get(), p.draft.get(), params(n_draft, 0));
        EXPECT_EQ(status_of([&] { whole.rank_draft_vocab(counts); }), SPECDEC_STATUS_INVALID_CONFIG);
    }
    mtp_pair p(path, n_draft);
    session s(p.target.get(), p.draft.get(), params(n_draft, 16));
    const std::vector<uint64_t> short_counts(n_vocab - 1, 1);
    EXPECT_EQ(status_of([&] { s.rank_draft_vocab(short_counts); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    const spec_run run = spec_greedy(s, prompt, 8);
    const draft_request request{0, run.n_past, run.id_last, -1, nullptr};
    s.draft({&request, 1});
    EXPECT_EQ(status_of([&] { s.rank_draft_vocab(counts); }), SPECDEC_STATUS_PROPOSAL_PENDING);
    s.accept(0, 0);
    // Nothing changed by the refusals: the first call that is taken moves exactly one token in.
    EXPECT_EQ(s.rank_draft_vocab(counts), 1);
}

// Requests that cannot be served fail with INVALID_CONFIG at session
// creation, before the drafter touches the contexts.
TEST(DraftVocab, RefusesBadRequestsBeforeNativeCode) {
    const std::string path = mtp_fixture("glm4moe", drafter_kind::exact);
    mtp_pair p(path, 3);
    const auto status = [&](const session_params & sp) {
        return status_of([&] { session s(p.target.get(), p.draft.get(), sp); });
    };
    EXPECT_EQ(status(params(3, n_vocab + 1)), SPECDEC_STATUS_INVALID_CONFIG); // above the vocabulary
    EXPECT_EQ(status(params(3, -2)), SPECDEC_STATUS_INVALID_CONFIG);
    const std::vector<llama_token> out_of_range = {5, 6, static_cast<llama_token>(n_vocab)};
    EXPECT_EQ(status(params(3, 2, &out_of_range)), SPECDEC_STATUS_INVALID_CONFIG);
    const std::vector<llama_token> negative = {5, -1};
    EXPECT_EQ(status(params(3, 1, &negative)), SPECDEC_STATUS_INVALID_CONFIG);
    const std::vector<llama_token> repeated = {5, 6, 5};
    EXPECT_EQ(status(params(3, 2, &repeated)), SPECDEC_STATUS_INVALID_CONFIG);
    const std::vector<llama_token> short_one = {5, 6};
    EXPECT_EQ(status(params(3, 3, &short_one)), SPECDEC_STATUS_INVALID_CONFIG); // more than the ranking holds
    session_params empty = params(3, 2);
    empty.draft_vocab_ranking = short_one.data(); // a pointer with no entries
    EXPECT_EQ(status(empty), SPECDEC_STATUS_INVALID_CONFIG);
    session_params no_pointer = params(3, 2);
    no_pointer.n_draft_vocab_ranking = 2;
    EXPECT_EQ(status(no_pointer), SPECDEC_STATUS_INVALID_CONFIG);
    // A valid one is taken; AUTO is the whole vocabulary at 128 tokens.
    EXPECT_EQ(status(params(3, 64)), SPECDEC_STATUS_OK);
    session s(p.target.get(), p.draft.get(), params(3, SPECDEC_DRAFT_VOCAB_AUTO));
    EXPECT_EQ(s.params().draft_vocab, 0);
}

// Another strategy refuses an explicit size, and takes AUTO as the whole
// vocabulary.
TEST(DraftVocab, OnlyTheMtpStrategyTakesOne) {
    fixtures::fixture_options opt;
    const std::string target_path = fixture("llama-target-draft-vocab", [&](const std::string & path) { fixtures::write_llama_target(path, opt); });
    auto model = load_model(target_path);
    auto target = make_context(model.get(), {});
    session_params sp = params(3, 64);
    sp.strategy = SPECDEC_STRATEGY_NGRAM_SIMPLE;
    EXPECT_EQ(status_of([&] { session s(target.get(), nullptr, sp); }), SPECDEC_STATUS_INVALID_CONFIG);
    sp.draft_vocab = SPECDEC_DRAFT_VOCAB_AUTO;
    session s(target.get(), nullptr, sp);
    EXPECT_EQ(s.params().draft_vocab, 0);
}

// The frequency-ranked fixture (fixtures.h, spread_cycle_zipf) on the
// test-32k shape: the target writes the cycle relabelled to the Zipf
// quantiles, and a restriction to the first N ids is accepted exactly where
// the relabelled text stays below N.
TEST(ZipfFixture, FollowsTheRelabelledCycleAndRestrictsByRank) {
    fixtures::fixture_options opt = fixtures::find_shape("test-32k")->options;
    const std::string path = fixture("glm4moe-mtp-test-32k-exact-zipf1.1", [&](const std::string & p) {
        fixtures::write_glm4moe_mtp(p, opt);
        fixtures::spread_cycle_zipf(p, 1.1);
    });
    const std::vector<int32_t> z = fixtures::zipf_cycle_ids(opt.n_vocab, 1.1);
    ASSERT_EQ(z.size(), 125u);
    ASSERT_TRUE(std::is_sorted(z.begin(), z.end()));
    ASSERT_GT(z.back(), 16384); // a tail past the subset below
    const auto relabel = [&](llama_token t) { return t >= fixtures::first_cycle_token && t < 128 ? z[static_cast<size_t>(t - 3)] : t; };
    std::vector<llama_token> zprompt;
    for (llama_token t : prompt) {
        zprompt.push_back(relabel(t));
    }
    constexpr int n = 130;
    std::vector<llama_token> want;
    for (llama_token t : expected_cycle(prompt.back(), n, n_vocab)) {
        want.push_back(relabel(t));
    }
    mtp_pair p(path, 4);
    EXPECT_EQ(plain_greedy(p.target.get(), zprompt, n), want);
    constexpr int32_t size = 16384;
    mtp_pair q(path, 4);
    session s(q.target.get(), q.draft.get(), params(4, size));
    const spec_run run = spec_greedy(s, zprompt, n);
    EXPECT_EQ(run.tokens, want);
    // Accepted: the leading successors below the subset's bound (the
    // tokenizer's ranking here is </s>, then ids 3 .. size + 1).
    llama_token t = prompt.back();
    for (size_t step = 0; step < run.accepted.size(); ++step) {
        int expect = 0;
        for (llama_token u = fixtures::successor(t, n_vocab); expect < 4 && relabel(u) <= size + 1;
             u = fixtures::successor(u, n_vocab)) {
            ++expect;
        }
        EXPECT_EQ(run.accepted[step], expect) << "step " << step;
        for (int k = 0; k <= run.accepted[step]; ++k) {
            t = fixtures::successor(t, n_vocab);
        }
    }
}

// The cost of one drafting pass (one head decode and its projection) with
// and without a restricted vocabulary, against one plain decoding step of
// the target, on the model SPECDEC_DRAFT_VOCAB_MODEL names (an MTP target,
// e.g. specdec-fixture glm4moe-mtp --shape qwen3-0.6b --type q4_k_m), with
// SPECDEC_DRAFT_VOCAB_THREADS threads (default 2). Each figure is the
// fastest of 60 (a busy machine slows some, never speeds one up). A
// measurement, not a check: run with --gtest_also_run_disabled_tests.
TEST(DraftVocabCost, DISABLED_DraftingPassAgainstAPlainStep) {
    const char * path = std::getenv("SPECDEC_DRAFT_VOCAB_MODEL");
    if (path == nullptr) {
        GTEST_SKIP() << "set SPECDEC_DRAFT_VOCAB_MODEL";
    }
    const char * threads_env = std::getenv("SPECDEC_DRAFT_VOCAB_THREADS");
    const int32_t threads = threads_env != nullptr ? std::atoi(threads_env) : 2;
    constexpr int reps = 60;
    using clock = std::chrono::steady_clock;
    const auto us = [](clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); };
    auto model = load_model(path);
    const int32_t vocab = llama_vocab_n_tokens(llama_model_get_vocab(model.get()));
    std::vector<llama_token> text;
    for (llama_token t = 20; t < 52; ++t) {
        text.push_back(t);
    }
    double plain = 1e30;
    for (const int32_t size : {0, 65536, 32768, 16384, 8192}) {
        if (size >= vocab) {
            continue;
        }
        context_options t;
        t.n_rs_seq = 4;
        t.n_threads = threads;
        auto target = make_context(model.get(), t);
        context_options d = t;
        d.type = LLAMA_CONTEXT_TYPE_MTP;
        d.other = target.get();
        auto draft = make_context(model.get(), d);
        session s(target.get(), draft.get(), params(4, size));
        ASSERT_EQ(s.params().draft_vocab, size);
        test_batch batch(64);
        for (size_t i = 0; i < text.size(); ++i) {
            batch.add(text[i], static_cast<llama_pos>(i), 0, i + 1 == text.size());
        }
        s.decode_target_and_process(batch.b);
        auto n_past = static_cast<llama_pos>(text.size());
        double pass = 1e30;
        for (int r = 0; r < reps; ++r) {
            // One drafting pass: the previous step's row, then one draft row.
            const draft_request q{0, n_past, 60, 1, nullptr};
            const auto t0 = clock::now();
            s.draft({&q, 1});
            pass = std::min(pass, us(clock::now() - t0));
            s.accept(0, 0);
            // One plain step (the token the target chose), timed on its own.
            batch.clear();
            batch.add(60, n_past, 0, true);
            const auto t1 = clock::now();
            s.decode_target(batch.b);
            llama_synchronize(target.get());
            if (size == 0) {
                plain = std::min(plain, us(clock::now() - t1));
            }
            s.process(batch.b);
            ++n_past;
        }
        std::printf("[ measured ] vocabulary %d, %d threads: a drafting pass of %s costs %.0f us, %.3f of a plain step (%.0f us)\n",
                    vocab, threads, size == 0 ? "the whole vocabulary" : (std::to_string(size) + " tokens").c_str(), pass,
                    pass / plain, plain);
    }
}

} // namespace
} // namespace specdec::test
