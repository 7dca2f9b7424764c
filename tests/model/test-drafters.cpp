// Draft-model strategies on a generated llama target: EAGLE-3, DFlash,
// DFlash2, a classic draft model, and n-gram lookup. Greedy output equals
// plain decoding; on controlled drafts every step accepts exactly what the
// construction predicts.
#include "drafter-model.h"
#include "harness.h"

#include "gguf.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <tuple>

namespace specdec::test {
namespace {

using fixtures::drafter_kind;

constexpr uint32_t n_vocab = 128;
// The break between 23 and 40 makes the hidden-feature drafters miss the
// first round, which a drafter reading the wrong position would keep missing.
const std::vector<llama_token> prompt = {20, 21, 22, 23, 40};
constexpr int n_predict = 40;

std::string target_path(const fixtures::fixture_options & opt = {}) {
    return fixture("llama-target-" + std::to_string(opt.n_layer) + "-" + std::to_string(opt.n_embd) +
                       (opt.controlled ? "" : "-random"),
                   [&](const std::string & p) { fixtures::write_llama_target(p, opt); });
}

std::string draft_path(const std::string & strategy, drafter_kind kind, const fixtures::fixture_options & base = {}) {
    fixtures::fixture_options opt = base;
    opt.drafter = kind;
    return fixture(strategy + "-" + drafter_tag(opt) + "-" + std::to_string(opt.n_layer) + "-" + std::to_string(opt.n_embd),
                   [&](const std::string & p) {
                       if (strategy == "eagle3") {
                           fixtures::write_eagle3_draft(p, opt);
                       } else {
                           fixtures::write_dflash_draft(p, opt, strategy == "dflash2");
                       }
                   });
}

struct pair_setup {
    pair_setup(const std::string & target_file, const std::string & draft_file, context_options draft_opt = {})
        : target_model(load_model(target_file)), draft_model(load_model(draft_file)) {
        target = make_context(target_model.get(), {});
        draft_opt.other = target.get();
        draft = make_context(draft_model.get(), draft_opt);
    }
    llama_model_ptr   target_model;
    llama_model_ptr   draft_model;
    llama_context_ptr target;
    llama_context_ptr draft;
};

session_params params_for(specdec_strategy strategy, int n_draft) {
    session_params sp = specdec_session_default_params();
    sp.strategy = strategy;
    sp.n_draft_max = n_draft;
    return sp;
}

specdec_strategy strategy_of(const std::string & name) {
    specdec_strategy s = SPECDEC_STRATEGY_COUNT;
    EXPECT_EQ(specdec_strategy_from_name(name == "dflash2" ? "dflash" : name.c_str(), &s), SPECDEC_STATUS_OK);
    return s;
}

// One greedy sequence per prompt through the library's loop
// (specdec::generate) on a fresh pair; `draft_file` may be "" (n-gram).
generation_result generate_pair(const std::string & target_file, const std::string & draft_file, const session_params & sp,
                                const std::vector<std::vector<llama_token>> & prompts, int n) {
    llama_model_ptr target_model = load_model(target_file);
    llama_model_ptr draft_model = draft_file.empty() ? nullptr : load_model(draft_file);
    context_options t;
    t.n_ctx = 512;
    t.n_seq_max = sp.n_seq;
    llama_context_ptr target = make_context(target_model.get(), t);
    llama_context_ptr draft;
    if (draft_model) {
        context_options d = t;
        d.other = target.get();
        draft = make_context(draft_model.get(), d);
    }
    session s(target.get(), draft.get(), sp);
    generate_params gp = specdec_generate_default_params();
    gp.n_predict = n;
    generation_result out = generate(s, prompts, gp);
    uint64_t drafted = 0;
    uint64_t accepted = 0;
    for (const sequence_result & r : out.sequences) {
        drafted += r.stats.n_drafted;
        accepted += r.stats.n_accepted;
    }
    EXPECT_EQ(s.stats().n_drafted, drafted);
    EXPECT_EQ(s.stats().n_accepted, accepted);
    EXPECT_TRUE(s.is_quiescent());
    return out;
}

std::vector<llama_token> plain_tokens() {
    static const std::vector<llama_token> tokens = [] {
        auto model = load_model(target_path());
        auto ctx = make_context(model.get(), {});
        return plain_greedy(ctx.get(), prompt, n_predict);
    }();
    return tokens;
}

class DraftModelAcceptance : public ::testing::TestWithParam<std::tuple<std::string, drafter_kind, int>> {};

TEST_P(DraftModelAcceptance, MatchesPlainDecodingAndTheConstruction) {
    const auto & [strategy, kind, n_draft] = GetParam();
    ASSERT_EQ(plain_tokens(), expected_cycle(prompt.back(), n_predict, n_vocab));

    pair_setup p(target_path(), draft_path(strategy, kind));
    session s(p.target.get(), p.draft.get(), params_for(strategy_of(strategy), n_draft));
    const spec_run run = spec_greedy(s, prompt, n_predict);
    EXPECT_EQ(run.tokens, plain_tokens());

    fixtures::fixture_options opt;
    opt.drafter = kind;
    llama_token prev = prompt[prompt.size() - 2];
    llama_token t = prompt.back();
    for (size_t step = 0; step < run.accepted.size(); ++step) {
        if (kind == drafter_kind::random) {
            EXPECT_EQ(run.accepted[step], 0) << "step " << step;
        } else {
            const auto want = reference_proposal(opt, t, n_draft, prev, true);
            EXPECT_EQ(run.proposed[step], static_cast<int>(want.size())) << "step " << step;
            EXPECT_EQ(run.accepted[step], reference_accepted(want, t, n_vocab)) << "step " << step;
        }
        for (int k = 0; k <= run.accepted[step]; ++k) {
            prev = t;
            t = fixtures::successor(t, n_vocab);
        }
    }
    EXPECT_EQ(s.stats().n_accepted, static_cast<uint64_t>(run.total_accepted()));
    EXPECT_EQ(s.stats().n_drafted, static_cast<uint64_t>(run.total_proposed()));
    if (kind == drafter_kind::hidden_only) {
        EXPECT_EQ(run.accepted[0], 0);
        EXPECT_EQ(run.total_accepted(), run.total_proposed() - n_draft);
    }

    // The same counts through the library's own loop.
    const generation_result out =
        generate_pair(target_path(), draft_path(strategy, kind), params_for(strategy_of(strategy), n_draft), {prompt}, n_predict);
    const sequence_result & r = out.sequences.at(0);
    EXPECT_EQ(r.tokens, plain_tokens());
    if (kind == drafter_kind::random) {
        EXPECT_GT(r.stats.n_drafted, 0u);
        EXPECT_EQ(r.stats.n_accepted, 0u);
    } else {
        expect_stats_eq(r.stats, reference_generation(opt, prompt[prompt.size() - 2], prompt.back(), n_draft, n_predict, true));
    }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, DraftModelAcceptance,
    ::testing::Combine(::testing::Values("eagle3", "dflash", "dflash2"),
                       ::testing::Values(drafter_kind::exact, drafter_kind::wrong_every_k, drafter_kind::hidden_only,
                                         drafter_kind::mixed, drafter_kind::random),
                       ::testing::Values(1, 2, 4)),
    [](const auto & tc) {
        return std::get<0>(tc.param) + "_" + kind_name(std::get<1>(tc.param)) + "_n" + std::to_string(std::get<2>(tc.param));
    });

// With one draft per step, the mixed drafter is accepted exactly on the steps
// whose id_last lies in an accurate stretch.
class DraftModelMixed : public ::testing::TestWithParam<std::tuple<std::string, uint32_t>> {};

TEST_P(DraftModelMixed, AcceptsExactlyTheAccurateStretches) {
    const auto & [strategy, stretch] = GetParam();
    fixtures::fixture_options opt;
    opt.stretch = stretch;
    pair_setup p(target_path(), draft_path(strategy, drafter_kind::mixed, opt));
    session s(p.target.get(), p.draft.get(), params_for(strategy_of(strategy), 1));
    const spec_run run = spec_greedy(s, prompt, n_predict);
    EXPECT_EQ(run.tokens, plain_tokens());

    expect_mixed_run(run, s, prompt.back(), n_predict, stretch, n_vocab);

    opt.drafter = drafter_kind::mixed;
    const generation_result out = generate_pair(target_path(), draft_path(strategy, drafter_kind::mixed, opt),
                                                params_for(strategy_of(strategy), 1), {prompt}, n_predict);
    EXPECT_EQ(out.sequences.at(0).tokens, plain_tokens());
    expect_stats_eq(out.sequences.at(0).stats,
                    reference_generation(opt, prompt[prompt.size() - 2], prompt.back(), 1, n_predict, true));
}

// A vocabulary of 32,768 tokens (the test-32k shape, width 128): EAGLE-3 and
// DFlash drafts stay on the first 128 ids, so acceptance is exactly as with
// 128 tokens.
TEST(DraftModelLargeVocabulary, AcceptsExactlyAsConstructed) {
    const fixtures::fixture_options shape = fixtures::find_shape("test-32k")->options;
    const std::string target = fixture("llama-target-test-32k", [&](const std::string & p) { fixtures::write_llama_target(p, shape); });
    for (const std::string strategy : {"eagle3", "dflash"}) {
        for (const drafter_kind kind : {drafter_kind::exact, drafter_kind::wrong_every_k}) {
            SCOPED_TRACE(strategy + " " + kind_name(kind));
            fixtures::fixture_options opt = shape;
            opt.drafter = kind;
            const std::string draft = fixture(strategy + "-test-32k-" + drafter_tag(opt), [&](const std::string & p) {
                strategy == "eagle3" ? fixtures::write_eagle3_draft(p, opt) : fixtures::write_dflash_draft(p, opt, false);
            });
            const generation_result out = generate_pair(target, draft, params_for(strategy_of(strategy), 3), {prompt}, n_predict);
            const sequence_result & r = out.sequences.at(0);
            EXPECT_EQ(r.tokens, expected_cycle(prompt.back(), n_predict, opt.n_vocab));
            const specdec_sequence_stats want = reference_generation(opt, prompt[prompt.size() - 2], prompt.back(), 3, n_predict, true);
            expect_stats_eq(r.stats, want);
            EXPECT_GT(want.n_accepted, 0u);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DraftModelMixed,
                         ::testing::Combine(::testing::Values("eagle3", "dflash", "dflash2"), ::testing::Values(1u, 5u, 16u)),
                         [](const auto & tc) {
                             return std::get<0>(tc.param) + "_stretch" + std::to_string(std::get<1>(tc.param));
                         });

TEST(FixtureOptions, MixedDrafterNeedsAPositiveStretch) {
    fixtures::fixture_options opt;
    opt.drafter = drafter_kind::mixed;
    opt.stretch = 0;
    const std::string path = target_path() + ".stretch0.gguf";
    EXPECT_THROW(fixtures::write_eagle3_draft(path, opt), std::runtime_error);
    EXPECT_THROW(fixtures::write_dflash_draft(path, opt, false), std::runtime_error);
    EXPECT_THROW(fixtures::write_glm4moe_mtp(path, opt), std::runtime_error);
}

TEST(DraftModel, ClassicDraftOfTheSameFamilyIsAlwaysRight) {
    auto target_model = load_model(target_path());
    auto draft_model = load_model(target_path());
    auto target = make_context(target_model.get(), {});
    auto draft = make_context(draft_model.get(), {});
    session s(target.get(), draft.get(), params_for(SPECDEC_STRATEGY_DRAFT, 4));
    const spec_run run = spec_greedy(s, prompt, n_predict);
    EXPECT_EQ(run.tokens, plain_tokens());
    EXPECT_GT(run.total_proposed(), 0);
    EXPECT_EQ(run.total_accepted(), run.total_proposed());
}

// The margin fixtures.h states: after any active token the successor scores
// sqrt(n_embd) and every other token, the 32,640 inert ones included (whose
// lm_head rows are random beyond the active dimensions), exactly 0.
TEST(DraftModelLargeVocabulary, InertTokensLoseByTheStatedMargin) {
    fixtures::fixture_options opt = fixtures::find_shape("test-32k")->options;
    opt.n_embd = 256; // room for the inert rows' random part
    const std::string path = fixture("llama-target-32k-256", [&](const std::string & p) { fixtures::write_llama_target(p, opt); });
    auto model = load_model(path);
    auto ctx = make_context(model.get(), {});
    const std::vector<llama_token> tokens = {20, 127, 1, 3, 30000, 9};
    test_batch batch(static_cast<int32_t>(tokens.size()));
    for (size_t i = 0; i < tokens.size(); ++i) {
        batch.add(tokens[i], static_cast<llama_pos>(i), 0, true);
    }
    ASSERT_EQ(llama_decode(ctx.get(), batch.b), 0);
    const float margin = std::sqrt(static_cast<float>(opt.n_embd));
    for (size_t i = 0; i < tokens.size(); ++i) {
        SCOPED_TRACE(tokens[i]);
        const float * logits = llama_get_logits_ith(ctx.get(), static_cast<int32_t>(i));
        const llama_token next = fixtures::successor(tokens[i], opt.n_vocab);
        EXPECT_EQ(next, fixtures::successor(fixtures::embedded_as(tokens[i], opt.n_vocab), opt.n_vocab));
        EXPECT_NEAR(logits[next], margin, 0.01f * margin);
        float others = -1e9f;
        for (int32_t t = 0; t < static_cast<int32_t>(opt.n_vocab); ++t) {
            others = t == next ? others : std::max(others, std::fabs(logits[t]));
        }
        EXPECT_LT(others, 1e-3f);
    }
}

// A classic draft that disagrees with the target: its successor rule is off
// by one on every 4th token id, so drafts are rejected there and the draft
// and target caches are rolled back, with one and with three sequences.
// Four drafts per step read four consecutive ids, so every step meets one.
TEST(DraftModel, ClassicDraftThatDisagreesIsRolledBack) {
    fixtures::fixture_options opt;
    opt.drafter = drafter_kind::wrong_every_k;
    const std::string draft = fixture("llama-draft-wrong-2-256", [&](const std::string & p) { fixtures::write_llama_draft(p, opt); });
    const std::vector<std::vector<llama_token>> prompts = {prompt, {60, 61, 62}, {90, 7, 8, 9}};
    for (const size_t n_seq : {size_t{1}, size_t{3}}) {
        SCOPED_TRACE(n_seq);
        session_params sp = params_for(SPECDEC_STRATEGY_DRAFT, 4);
        sp.n_seq = static_cast<uint32_t>(n_seq);
        const std::vector<std::vector<llama_token>> used(prompts.begin(), prompts.begin() + static_cast<std::ptrdiff_t>(n_seq));
        const generation_result out = generate_pair(target_path(), draft, sp, used, n_predict);
        for (size_t i = 0; i < n_seq; ++i) {
            const auto & p = used[i];
            const sequence_result & r = out.sequences.at(i);
            EXPECT_EQ(r.tokens, expected_cycle(p.back(), n_predict, n_vocab)) << "sequence " << i;
            const specdec_sequence_stats want = reference_generation(opt, p[p.size() - 2], p.back(), 4, n_predict, false);
            ASSERT_GT(want.n_accepted, 0u);
            ASSERT_LT(want.n_accepted, want.n_drafted);
            expect_stats_eq(r.stats, want);
        }
    }
}

TEST(DraftModel, RandomTargetStaysLossless) {
    fixtures::fixture_options opt;
    opt.controlled = false;
    auto target_model = load_model(target_path(opt));
    std::vector<llama_token> plain;
    {
        auto ctx = make_context(target_model.get(), {});
        plain = plain_greedy(ctx.get(), prompt, 24);
    }
    auto target = make_context(target_model.get(), {});
    auto draft_model = load_model(draft_path("eagle3", drafter_kind::random));
    context_options d;
    d.other = target.get();
    auto draft = make_context(draft_model.get(), d);
    session s(target.get(), draft.get(), params_for(SPECDEC_STRATEGY_EAGLE3, 3));
    EXPECT_EQ(spec_greedy(s, prompt, 24).tokens, plain);
}

TEST(Ngram, RepeatedTextIsDraftedFromTheHistory) {
    // Two full cycles of the target's pattern: the second is predictable from the first.
    std::vector<llama_token> cycle_prompt;
    llama_token t = 3;
    for (uint32_t i = 0; i < 2 * (n_vocab - 3) + 10; ++i) {
        cycle_prompt.push_back(t);
        t = fixtures::successor(t, n_vocab);
    }
    for (const char * name : {"ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache"}) {
        SCOPED_TRACE(name);
        auto model = load_model(target_path());
        context_options o;
        o.n_ctx = 512;
        auto target = make_context(model.get(), o);
        specdec_strategy st = SPECDEC_STRATEGY_COUNT;
        ASSERT_EQ(specdec_strategy_from_name(name, &st), SPECDEC_STATUS_OK);
        session s(target.get(), nullptr, params_for(st, 4));
        const spec_run run = spec_greedy(s, cycle_prompt, 24);
        EXPECT_EQ(run.tokens, expected_cycle(cycle_prompt.back(), 24, n_vocab));
        EXPECT_EQ(run.total_accepted(), run.total_proposed());
        EXPECT_GT(run.total_proposed(), 0);
    }
}

// A 16-token vocabulary, whose 13-token cycle the output repeats, after a
// prompt in which every period of the cycle is followed by an extra token:
// every n-gram strategy drafts, has drafts accepted, and has drafts rejected
// (where the history says "extra" and the target continues the cycle).
TEST(Ngram, DraftsAreAcceptedAndRejected) {
    constexpr uint32_t small_vocab = 16;
    fixtures::fixture_options opt;
    opt.n_vocab = small_vocab;
    const std::string target = fixture("llama-target-v16", [&](const std::string & p) { fixtures::write_llama_target(p, opt); });
    const std::vector<std::vector<llama_token>> prompts = {glitched_cycle_prompt(9, 4, small_vocab)};
    for (const char * name : {"ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache"}) {
        for (const int n_draft : {1, 4}) {
            SCOPED_TRACE(std::string(name) + " n_draft " + std::to_string(n_draft));
            specdec_strategy st = SPECDEC_STRATEGY_COUNT;
            ASSERT_EQ(specdec_strategy_from_name(name, &st), SPECDEC_STATUS_OK);
            const generation_result out = generate_pair(target, "", params_for(st, n_draft), prompts, n_predict);
            const sequence_result & r = out.sequences.at(0);
            EXPECT_EQ(r.tokens, expected_cycle(prompts[0].back(), n_predict, small_vocab));
            EXPECT_GT(r.stats.n_accepted, 0u);
            EXPECT_GT(r.stats.n_drafted, r.stats.n_accepted); // some rejected
            uint64_t accepted_at = 0;
            for (uint64_t n : r.stats.n_accepted_at) {
                accepted_at += n;
            }
            EXPECT_EQ(accepted_at, r.stats.n_accepted);
            EXPECT_LE(r.stats.n_drafted, r.stats.n_steps * static_cast<uint64_t>(n_draft));
        }
    }
}

// --- compatibility of draft models -------------------------------------------------

TEST(DraftCompatibility, Eagle3MadeForADeeperTarget) {
    fixtures::fixture_options deep;
    deep.n_layer = 6;
    pair_setup p(target_path(), draft_path("eagle3", drafter_kind::exact, deep));
    EXPECT_EQ(status_of([&] { session s(p.target.get(), p.draft.get(), params_for(SPECDEC_STRATEGY_EAGLE3, 2)); }),
              SPECDEC_STATUS_LAYER_MISMATCH);
}

TEST(DraftCompatibility, Eagle3MadeForAnotherWidthIsRefusedBeforeItsContextExists) {
    // llama.cpp aborts while building a context over this pair (a matrix
    // product of mismatched widths), so the check runs on the models.
    fixtures::fixture_options narrow;
    narrow.n_embd = 128;
    auto target_model = load_model(target_path());
    auto draft_model = load_model(draft_path("eagle3", drafter_kind::exact, narrow));
    auto target = make_context(target_model.get(), {});
    EXPECT_EQ(status_of([&] {
                  make_draft_context(target.get(), draft_model.get(), params_for(SPECDEC_STRATEGY_EAGLE3, 2),
                                     llama_context_default_params());
              }),
              SPECDEC_STATUS_WIDTH_MISMATCH);
}

TEST(DraftContext, BuildsWhatEachStrategyNeeds) {
    auto target_model = load_model(target_path());
    auto target = make_context(target_model.get(), {});
    for (const std::string strategy : {"eagle3", "dflash", "dflash2"}) {
        SCOPED_TRACE(strategy);
        auto draft_model = load_model(draft_path(strategy, drafter_kind::exact));
        const session_params sp = params_for(strategy_of(strategy), 4);
        llama_context_ptr draft = make_draft_context(target.get(), draft_model.get(), sp, llama_context_default_params());
        EXPECT_EQ(llama_n_ctx(draft.get()), llama_n_ctx(target.get()));
        llama_memory_clear(llama_get_memory(target.get()), true);
        session s(target.get(), draft.get(), sp);
        const spec_run run = spec_greedy(s, prompt, 16);
        EXPECT_EQ(run.tokens, expected_cycle(prompt.back(), 16, n_vocab));
        EXPECT_EQ(run.total_accepted(), run.total_proposed());

        // and through the library's loop on the same contexts
        generate_params gp = specdec_generate_default_params();
        gp.n_predict = 16;
        const std::vector<std::vector<llama_token>> prompts = {prompt};
        const generation_result out = generate(s, prompts, gp);
        EXPECT_EQ(out.sequences.at(0).tokens, expected_cycle(prompt.back(), 16, n_vocab));
        expect_stats_eq(out.sequences.at(0).stats,
                        reference_generation(fixtures::fixture_options{}, prompt[prompt.size() - 2], prompt.back(), 4, 16, true));
    }
}

TEST(DraftContext, MtpNeedsTheNextnTensors) {
    const std::string path = fixture("glm4moe-mtp-exact", [](const std::string & p) { fixtures::write_glm4moe_mtp(p, {}); });
    llama_model_params mp = llama_model_default_params(); // load_mtp = false
    llama_model_ptr model(llama_model_load_from_file(path.c_str(), mp));
    ASSERT_TRUE(model);
    auto target = make_context(model.get(), {});
    EXPECT_EQ(status_of([&] {
                  make_draft_context(target.get(), nullptr, params_for(SPECDEC_STRATEGY_MTP, 2), llama_context_default_params());
              }),
              SPECDEC_STATUS_MODEL_UNSUPPORTED);
    auto plain = load_model(target_path());
    auto plain_target = make_context(plain.get(), {});
    EXPECT_EQ(status_of([&] {
                  make_draft_context(plain_target.get(), nullptr, params_for(SPECDEC_STRATEGY_MTP, 2), llama_context_default_params());
              }),
              SPECDEC_STATUS_MODEL_UNSUPPORTED);
}

TEST(DraftCompatibility, StrategyMustMatchTheDraftArchitecture) {
    pair_setup p(target_path(), draft_path("dflash", drafter_kind::exact));
    EXPECT_EQ(status_of([&] { session s(p.target.get(), p.draft.get(), params_for(SPECDEC_STRATEGY_EAGLE3, 2)); }),
              SPECDEC_STATUS_MODEL_UNSUPPORTED);
    EXPECT_EQ(status_of([&] { session s(p.target.get(), p.draft.get(), params_for(SPECDEC_STRATEGY_MTP, 2)); }),
              SPECDEC_STATUS_WRONG_CONTEXT_TYPE);
    // The contexts still serve the right strategy.
    session s(p.target.get(), p.draft.get(), params_for(SPECDEC_STRATEGY_DFLASH, 2));
    EXPECT_EQ(spec_greedy(s, prompt, 10).tokens, expected_cycle(prompt.back(), 10, n_vocab));
}

TEST(DraftCompatibility, MtpOnATargetWithoutNextnLayers) {
    auto model = load_model(target_path());
    auto target = make_context(model.get(), {});
    context_options o;
    o.type = LLAMA_CONTEXT_TYPE_MTP;
    // llama.cpp creates an MTP context only for models with nextn layers;
    // a default second context is refused for its type first.
    auto draft = make_context(model.get(), {});
    EXPECT_EQ(status_of([&] { session s(target.get(), draft.get(), params_for(SPECDEC_STRATEGY_MTP, 2)); }),
              SPECDEC_STATUS_WRONG_CONTEXT_TYPE);
}

TEST(DraftCompatibility, DflashNeedsOutputsForTheWholeBlock) {
    context_options one_output;
    one_output.n_outputs_max_per_seq = 1;
    pair_setup p(target_path(), draft_path("dflash", drafter_kind::exact), one_output);
    EXPECT_EQ(status_of([&] { session s(p.target.get(), p.draft.get(), params_for(SPECDEC_STRATEGY_DFLASH, 3)); }),
              SPECDEC_STATUS_BATCH_CAPACITY);
}

// Copies a GGUF file with the value of one u32 metadata key replaced: in the
// file the key's characters are followed by its type (u32) and its value.
std::string with_u32(const std::string & path, const std::string & key, uint32_t value) {
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t at = bytes.find(key);
    EXPECT_NE(at, std::string::npos);
    const size_t value_at = at + key.size() + 4;
    uint32_t type = 0;
    std::memcpy(&type, bytes.data() + at + key.size(), 4);
    EXPECT_EQ(type, static_cast<uint32_t>(GGUF_TYPE_UINT32));
    std::memcpy(bytes.data() + value_at, &value, 4);
    const std::string out = path + "." + key + "-" + std::to_string(value) + ".gguf";
    std::ofstream(out, std::ios::binary) << bytes;
    return out;
}

TEST(DraftCompatibility, DflashWithABlockOfOneIsRefused) {
    const std::string bad = with_u32(draft_path("dflash", drafter_kind::exact), "dflash.block_size", 1);
    EXPECT_EQ(specdec_check_pair(target_path().c_str(), bad.c_str(), SPECDEC_STRATEGY_DFLASH), SPECDEC_STATUS_MODEL_UNSUPPORTED);
    pair_setup p(target_path(), bad);
    EXPECT_EQ(status_of([&] { session s(p.target.get(), p.draft.get(), params_for(SPECDEC_STRATEGY_DFLASH, 2)); }),
              SPECDEC_STATUS_MODEL_UNSUPPORTED);
    EXPECT_NE(std::string(specdec_last_error()).size(), 0u);
}

TEST(DraftCompatibility, ClassicDraftWithAnotherTokenTextIsRefused) {
    // In the tokens array each piece is a u64 length and its bytes; rename
    // the piece "Q" (id 52) to a tab, a text no other token has (llama.cpp
    // asserts on duplicate texts), so that one token's text differs.
    std::ifstream in(target_path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string q(std::string("\x01\0\0\0\0\0\0\0", 8) + "Q" + std::string("\x01\0\0\0\0\0\0\0", 8) + "R");
    const size_t at = bytes.find(q);
    ASSERT_NE(at, std::string::npos);
    bytes[at + 8] = '\t';
    const std::string other = target_path() + ".renamed-token.gguf";
    std::ofstream(other, std::ios::binary) << bytes;

    EXPECT_EQ(specdec_check_pair(target_path().c_str(), other.c_str(), SPECDEC_STRATEGY_DRAFT), SPECDEC_STATUS_VOCAB_MISMATCH);
    auto target_model = load_model(target_path());
    auto draft_model = load_model(other);
    auto target = make_context(target_model.get(), {});
    auto draft = make_context(draft_model.get(), {});
    EXPECT_EQ(status_of([&] { session s(target.get(), draft.get(), params_for(SPECDEC_STRATEGY_DRAFT, 2)); }),
              SPECDEC_STATUS_VOCAB_MISMATCH);
    EXPECT_NE(std::string(specdec_last_error()).find("52"), std::string::npos);
}

TEST(DraftCompatibility, DflashClampsTheDraftLengthToItsBlock) {
    pair_setup p(target_path(), draft_path("dflash", drafter_kind::exact));
    session s(p.target.get(), p.draft.get(), params_for(SPECDEC_STRATEGY_DFLASH, 12));
    EXPECT_EQ(s.params().n_draft_max, 7); // block size 8: the anchor plus 7 masked positions
}

TEST(DraftLifecycle, ProcessBeforeAnyTargetDecodeIsRefused) {
    pair_setup p(target_path(), draft_path("eagle3", drafter_kind::exact));
    session s(p.target.get(), p.draft.get(), params_for(SPECDEC_STRATEGY_EAGLE3, 2));
    test_batch b(2);
    b.add(20, 0, 0, true);
    EXPECT_EQ(status_of([&] { s.process(b.b); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(spec_greedy(s, prompt, 8).tokens, expected_cycle(prompt.back(), 8, n_vocab));
}

TEST(DraftLifecycle, BatchLargerThanTheDraftContextIsRefused) {
    context_options small;
    small.n_batch = 8;
    small.n_ubatch = 8;
    pair_setup p(target_path(), draft_path("eagle3", drafter_kind::exact), small);
    session s(p.target.get(), p.draft.get(), params_for(SPECDEC_STRATEGY_EAGLE3, 2));
    std::vector<llama_token> long_prompt(20);
    for (size_t i = 0; i < long_prompt.size(); ++i) {
        long_prompt[i] = static_cast<llama_token>(10 + i);
    }
    EXPECT_EQ(status_of([&] { spec_greedy(s, long_prompt, 4); }), SPECDEC_STATUS_BATCH_CAPACITY);
}

} // namespace
} // namespace specdec::test
