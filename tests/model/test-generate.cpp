// The losslessness matrix on generated fixtures: for every strategy, draft
// lengths 1, 2, 4, 8 and 1 or 3 sequences, speculative output equals plain
// decoding of the same target, greedy and seeded sampling alike. Every case
// drafts and has drafts accepted: the model drafters err on every 4th token
// id (so the greedy matrix also has drafts rejected and rolled back), and the
// n-gram strategies run on a 16-token vocabulary whose 13-token cycle repeats
// within the output, after prompts in which each period of the cycle is
// followed by an extra token (glitched_cycle_prompt).
#include "drafter-model.h"
#include "harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace specdec::test {
namespace {

using fixtures::drafter_kind;

constexpr uint32_t n_vocab = 128;
// Each ends one before a multiple of 4: the prompt's decode yields that
// multiple, so the first draft (from it) errs, whatever the draft length.
const std::vector<std::vector<llama_token>> prompts = {{19, 20, 21, 22, 23}, {90, 6, 7}, {50, 51, 59, 60, 61, 62, 63}};
// For the n-gram strategies on the 16-token target: the cycle with an extra
// token after every period, so some lookups draft wrong tokens.
constexpr uint32_t ngram_vocab = 16;
const std::vector<std::vector<llama_token>> ngram_prompts = {
    glitched_cycle_prompt(9, 5, ngram_vocab), glitched_cycle_prompt(12, 8, ngram_vocab), glitched_cycle_prompt(4, 2, ngram_vocab)};

fixtures::fixture_options wrong_drafter() {
    fixtures::fixture_options opt;
    opt.drafter = drafter_kind::wrong_every_k; // both accepted and rejected drafts
    return opt;
}

// A target model, and the draft model file when the strategy has one.
struct strategy_case {
    std::string      name;
    specdec_strategy strategy;
    std::string      target;
    std::string      draft; // "" for MTP and n-gram
    uint32_t         vocab = n_vocab;
    const std::vector<std::vector<llama_token>> * inputs = &prompts;
};

strategy_case make_case(const std::string & name) {
    const auto opt = wrong_drafter();
    auto llama = [&] { return fixture("llama-target-2-256", [&](const std::string & p) { fixtures::write_llama_target(p, {}); }); };
    if (name == "mtp-qwen35") {
        return {name, SPECDEC_STRATEGY_MTP, fixture("qwen35-mtp-wrong", [&](const std::string & p) { fixtures::write_qwen35_mtp(p, opt); }), ""};
    }
    if (name == "mtp-glm4moe") {
        return {name, SPECDEC_STRATEGY_MTP, fixture("glm4moe-mtp-wrong", [&](const std::string & p) { fixtures::write_glm4moe_mtp(p, opt); }), ""};
    }
    if (name == "eagle3") {
        return {name, SPECDEC_STRATEGY_EAGLE3, llama(), fixture("eagle3-wrong-2-256", [&](const std::string & p) { fixtures::write_eagle3_draft(p, opt); })};
    }
    if (name == "dflash" || name == "dflash2") {
        const bool v2 = name == "dflash2";
        return {name, SPECDEC_STRATEGY_DFLASH, llama(),
                fixture(name + "-wrong-2-256", [&](const std::string & p) { fixtures::write_dflash_draft(p, opt, v2); })};
    }
    if (name == "draft") {
        return {name, SPECDEC_STRATEGY_DRAFT, llama(),
                fixture("llama-draft-wrong-2-256", [&](const std::string & p) { fixtures::write_llama_draft(p, opt); })};
    }
    fixtures::fixture_options small;
    small.n_vocab = ngram_vocab;
    specdec_strategy st = SPECDEC_STRATEGY_COUNT;
    EXPECT_EQ(specdec_strategy_from_name(name.c_str(), &st), SPECDEC_STATUS_OK) << name;
    return {name, st, fixture("llama-target-v16", [&](const std::string & p) { fixtures::write_llama_target(p, small); }), "",
            ngram_vocab, &ngram_prompts};
}

// A gtest name from a case name: dashes become underscores.
std::string test_name(std::string n) {
    std::replace(n.begin(), n.end(), '-', '_');
    return n;
}

struct opened {
    llama_model_ptr   target_model;
    llama_model_ptr   draft_model;
    llama_context_ptr target;
    llama_context_ptr draft;
};

opened open(const strategy_case & c, const session_params & sp) {
    opened o;
    o.target_model = load_model(c.target);
    context_options t;
    t.n_ctx = 512; // the n-gram prompts are 70 tokens per sequence
    t.n_seq_max = sp.n_seq;
    t.n_rs_seq = static_cast<uint32_t>(sp.n_draft_max);
    o.target = make_context(o.target_model.get(), t);
    if (specdec_strategy_needs_draft_context(c.strategy)) {
        if (!c.draft.empty()) {
            o.draft_model = load_model(c.draft);
        }
        llama_context_params cp = llama_context_default_params();
        cp.n_threads = 1;
        cp.n_threads_batch = 1;
        o.draft = make_draft_context(o.target.get(), o.draft_model.get(), sp, cp);
    }
    return o;
}

// Plain decoding of `inputs` (the case's first n_seq prompts where not given).
generation_result plain_reference(const strategy_case & c, std::span<const std::vector<llama_token>> inputs,
                                  const generate_params & gp) {
    auto model = load_model(c.target);
    context_options t;
    t.n_ctx = 512; // the n-gram prompts are 70 tokens per sequence
    t.n_seq_max = static_cast<uint32_t>(inputs.size());
    auto ctx = make_context(model.get(), t);
    return generate_plain(ctx.get(), inputs, gp);
}

generation_result plain_reference(const strategy_case & c, size_t n_seq, const generate_params & gp) {
    return plain_reference(c, std::span(c.inputs->data(), n_seq), gp);
}

class Lossless : public ::testing::TestWithParam<std::tuple<std::string, int, int>> {};

TEST_P(Lossless, GreedyOutputEqualsPlainDecoding) {
    const auto & [name, n_draft, n_seq] = GetParam();
    const strategy_case c = make_case(name);
    session_params sp = specdec_session_default_params();
    sp.strategy = c.strategy;
    sp.n_draft_max = n_draft;
    sp.n_seq = static_cast<uint32_t>(n_seq);

    generate_params gp = specdec_generate_default_params();
    gp.n_predict = 32;
    const generation_result ref = plain_reference(c, static_cast<size_t>(n_seq), gp);

    opened o = open(c, sp);
    session s(o.target.get(), o.draft.get(), sp);
    const generation_result out = generate(s, std::span(c.inputs->data(), static_cast<size_t>(n_seq)), gp);
    ASSERT_EQ(out.sequences.size(), static_cast<size_t>(n_seq));
    uint64_t drafted = 0;
    uint64_t accepted = 0;
    for (size_t i = 0; i < static_cast<size_t>(n_seq); ++i) {
        EXPECT_EQ(out.sequences[i].tokens, ref.sequences[i].tokens) << "sequence " << i;
        EXPECT_EQ(out.sequences[i].tokens, expected_cycle((*c.inputs)[i].back(), 32, c.vocab));
        EXPECT_EQ(out.sequences[i].text, ref.sequences[i].text);
        drafted += out.sequences[i].stats.n_drafted;
        accepted += out.sequences[i].stats.n_accepted;
    }
    EXPECT_GT(accepted, 0u);
    // Some drafts rejected and rolled back. Whether an n-gram lookup meets an
    // extra token depends on where the steps fall, so the n-gram rejections
    // are asserted in Ngram.DraftsAreAcceptedAndRejected.
    if (!c.draft.empty() || c.strategy == SPECDEC_STRATEGY_MTP) {
        EXPECT_GT(drafted, accepted);
    }
    EXPECT_TRUE(s.is_quiescent());
    EXPECT_EQ(s.stats().n_drafted, drafted);
}

INSTANTIATE_TEST_SUITE_P(Matrix, Lossless,
                         ::testing::Combine(::testing::Values("mtp-qwen35", "mtp-glm4moe", "eagle3", "dflash", "dflash2",
                                                              "draft", "ngram-simple", "ngram-map-k", "ngram-map-k4v",
                                                              "ngram-mod", "ngram-cache"),
                                            ::testing::Values(1, 2, 4, 8), ::testing::Values(1, 3)),
                         [](const auto & tc) {
                             std::string n = test_name(std::get<0>(tc.param));
                             n += "_n";
                             n += std::to_string(std::get<1>(tc.param));
                             n += "_seq";
                             n += std::to_string(std::get<2>(tc.param));
                             return n;
                         });

class SampledLossless : public ::testing::TestWithParam<std::string> {};

TEST_P(SampledLossless, SeededOutputEqualsSeededPlainDecoding) {
    const strategy_case c = make_case(GetParam());
    session_params sp = specdec_session_default_params();
    sp.strategy = c.strategy;
    sp.n_draft_max = 4;
    sp.n_seq = 3;
    generate_params gp = specdec_generate_default_params();
    gp.n_predict = 24;
    gp.temperature = 4.0f; // spreads the constructed logits (margin 16) so drafts are sometimes rejected
    gp.top_k = 40;
    gp.seed = 1234;
    gp.accept = SPECDEC_ACCEPT_EXACT; // seed for seed plain decoding's draws
    const generation_result ref = plain_reference(c, 3, gp);
    opened o = open(c, sp);
    session s(o.target.get(), o.draft.get(), sp);
    const generation_result out = generate(s, *c.inputs, gp);
    for (size_t i = 0; i < c.inputs->size(); ++i) {
        EXPECT_EQ(out.sequences[i].tokens, ref.sequences[i].tokens) << "sequence " << i;
    }
    EXPECT_NE(out.sequences[0].tokens, expected_cycle(prompts[0].back(), 24, n_vocab)); // really sampled
}

INSTANTIATE_TEST_SUITE_P(Strategies, SampledLossless,
                         ::testing::Values("mtp-qwen35", "mtp-glm4moe", "eagle3", "dflash", "dflash2", "draft"),
                         [](const auto & tc) { return test_name(tc.param); });

// Adaptive draft length (chosen per sequence and step, up to 8): greedy and
// seeded sampled output equal plain decoding.
class AdaptiveLossless : public ::testing::TestWithParam<std::tuple<std::string, int>> {};

TEST_P(AdaptiveLossless, OutputEqualsPlainDecoding) {
    const auto & [name, n_seq] = GetParam();
    const strategy_case c = make_case(name);
    session_params sp = specdec_session_default_params();
    sp.strategy = c.strategy;
    sp.n_draft_max = 8;
    sp.n_seq = static_cast<uint32_t>(n_seq);
    const auto n = static_cast<size_t>(n_seq);
    opened o = open(c, sp);
    session s(o.target.get(), o.draft.get(), sp);
    for (const float temperature : {0.0f, 4.0f}) {
        generate_params gp = specdec_generate_default_params();
        gp.n_predict = 40;
        gp.temperature = temperature;
        gp.top_k = 40;
        gp.seed = 99;
        gp.accept = SPECDEC_ACCEPT_EXACT; // seed for seed plain decoding's draws
        const generation_result ref = plain_reference(c, n, gp);
        gp.n_draft = SPECDEC_N_DRAFT_AUTO;
        const generation_result out = generate(s, std::span(c.inputs->data(), n), gp);
        uint64_t drafted = 0;
        uint64_t accepted = 0;
        for (size_t i = 0; i < n; ++i) {
            EXPECT_EQ(out.sequences[i].tokens, ref.sequences[i].tokens) << "sequence " << i << ", temperature " << temperature;
            EXPECT_LE(out.sequences[i].stats.n_drafted, out.sequences[i].stats.n_steps * 8);
            drafted += out.sequences[i].stats.n_drafted;
            accepted += out.sequences[i].stats.n_accepted;
        }
        // Whether auto verifies drafts depends on what this host measures:
        // on these 2-block targets a model drafter's pass costs about a
        // target step, so auto may rightly verify none. The n-gram drafters
        // cost next to nothing and agree greedy, so auto drafts with them;
        // with the others it probes (shadow drafts, counted by the session):
        // every fresh sequence does, before anything is measured.
        if (temperature == 0.0f && c.draft.empty() && c.strategy != SPECDEC_STRATEGY_MTP) {
            EXPECT_GT(drafted, 0u);
            EXPECT_GT(accepted, 0u);
        } else if (temperature == 0.0f) {
            EXPECT_GT(s.stats().n_drafted, 0u);
        }
        EXPECT_TRUE(s.is_quiescent());
    }
}

INSTANTIATE_TEST_SUITE_P(Strategies, AdaptiveLossless,
                         ::testing::Combine(::testing::Values("mtp-qwen35", "mtp-glm4moe", "eagle3", "dflash", "dflash2",
                                                              "draft", "ngram-simple", "ngram-map-k", "ngram-map-k4v",
                                                              "ngram-mod", "ngram-cache"),
                                            ::testing::Values(1, 3)),
                         [](const auto & tc) {
                             std::string n = test_name(std::get<0>(tc.param));
                             return n + "_seq" + std::to_string(std::get<1>(tc.param));
                         });

TEST(Generate, ExactDraftersAcceptEverythingWithSequencesOfDifferentLengths) {
    // Prompts of different lengths put the sequences at different positions;
    // every exact drafter must still be right for every sequence.
    const std::vector<std::vector<llama_token>> uneven = {{60, 61, 62}, {20, 21, 22, 23, 24}, {90, 91}};
    const auto llama = fixture("llama-target-2-256", [](const std::string & p) { fixtures::write_llama_target(p, {}); });
    const std::vector<strategy_case> cases = {
        {"mtp", SPECDEC_STRATEGY_MTP, fixture("glm4moe-mtp-exact", [](const std::string & p) { fixtures::write_glm4moe_mtp(p, {}); }), ""},
        {"eagle3", SPECDEC_STRATEGY_EAGLE3, llama, fixture("eagle3-exact-2-256", [](const std::string & p) { fixtures::write_eagle3_draft(p, {}); })},
        {"dflash", SPECDEC_STRATEGY_DFLASH, llama, fixture("dflash-exact-2-256", [](const std::string & p) { fixtures::write_dflash_draft(p, {}, false); })},
    };
    for (const auto & c : cases) {
        SCOPED_TRACE(c.name);
        session_params sp = specdec_session_default_params();
        sp.strategy = c.strategy;
        sp.n_draft_max = 3;
        sp.n_seq = 3;
        opened o = open(c, sp);
        session s(o.target.get(), o.draft.get(), sp);
        generate_params gp = specdec_generate_default_params();
        gp.n_predict = 20;
        const auto out = generate(s, uneven, gp);
        for (size_t i = 0; i < uneven.size(); ++i) {
            EXPECT_EQ(out.sequences[i].tokens, expected_cycle(uneven[i].back(), 20, n_vocab)) << "sequence " << i;
            EXPECT_GT(out.sequences[i].stats.n_drafted, 0u);
            EXPECT_EQ(out.sequences[i].stats.n_accepted, out.sequences[i].stats.n_drafted) << "sequence " << i;
        }
    }
}

TEST(Generate, ExactDrafterAcceptsAlmostEverything) {
    const auto path = fixture("glm4moe-mtp-exact", [](const std::string & p) { fixtures::write_glm4moe_mtp(p, {}); });
    session_params sp = specdec_session_default_params();
    sp.n_draft_max = 4;
    opened o = open({"mtp", SPECDEC_STRATEGY_MTP, path, ""}, sp);
    session s(o.target.get(), o.draft.get(), sp);
    generate_params gp = specdec_generate_default_params();
    gp.n_predict = 64;
    const auto out = generate(s, std::span(prompts.data(), 1), gp);
    const auto & st = out.sequences[0].stats;
    EXPECT_EQ(st.n_accepted, st.n_drafted);
    EXPECT_GT(static_cast<double>(st.n_accepted) / static_cast<double>(st.n_drafted), 0.99);
    EXPECT_EQ(st.n_steps, 14u); // the prompt's token, then 63 at up to 5 per step
}

// The engine on real kernels: requests added at different steps of an MTP
// session, two slots for four requests (so slots are reused and a request
// waits), a long prompt read in chunks, each with its own draft length (4,
// 1, 0, 3: one batch mixes lengths, and a slot that drafted nothing drafts
// again for its next request); each equals plain decoding of its prompt alone.
class EngineLossless : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineLossless, RequestsJoiningAtDifferentStepsEqualPlainDecoding) {
    const strategy_case c = make_case(GetParam());
    session_params sp = specdec_session_default_params();
    sp.strategy = c.strategy;
    sp.n_draft_max = 4;
    sp.n_seq = 2;
    std::vector<std::vector<llama_token>> inputs = prompts;
    std::vector<llama_token> long_prompt;
    for (llama_token t = 30; t < 70; ++t) {
        long_prompt.push_back(t);
    }
    inputs.push_back(long_prompt);

    generate_params gp = specdec_generate_default_params();
    gp.n_predict = 20;
    std::vector<std::vector<llama_token>> want;
    {
        auto model = load_model(c.target);
        context_options t;
        t.n_ctx = 512;
        auto ctx = make_context(model.get(), t);
        for (const auto & prompt : inputs) {
            want.push_back(generate_plain(ctx.get(), std::span(&prompt, 1), gp).sequences[0].tokens);
        }
    }

    opened o = open(c, sp);
    session s(o.target.get(), o.draft.get(), sp);
    std::map<request_id, request_result> done;
    engine_params ep = specdec_engine_default_params();
    ep.n_prefill_chunk = 16;
    engine e(s, ep, [&](const engine_event & ev) {
        if (ev.type == SPECDEC_ENGINE_EVENT_FINISHED) {
            done[ev.id] = *ev.result;
        }
        return true;
    });
    const auto with_length = [&](int32_t n_draft) {
        generate_params p = gp;
        p.n_draft = n_draft;
        return p;
    };
    std::vector<request_id> ids;
    ids.push_back(e.add(inputs[0], with_length(4)));
    e.step();
    e.step();
    ids.push_back(e.add(inputs[1], with_length(1)));
    ids.push_back(e.add(inputs[2], with_length(0))); // waits for a slot
    e.step();
    ids.push_back(e.add(inputs[3], with_length(3)));
    e.run_until_idle();
    uint64_t accepted = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
        ASSERT_TRUE(done.count(ids[i])) << "request " << i;
        EXPECT_EQ(done[ids[i]].output.tokens, want[i]) << "request " << i;
        EXPECT_EQ(done[ids[i]].output.stop, SPECDEC_STOP_BUDGET);
        accepted += done[ids[i]].output.stats.n_accepted;
    }
    EXPECT_GT(accepted, 0u);
    EXPECT_TRUE(s.is_quiescent());
}

// Three slots; the request in slot 1 finishes first, so the one in slot 2
// moves into slot 1 (its events say so; what slot 1 kept goes to the prompt
// cache), with a session and with plain decoding alike; every output
// equals plain decoding of its prompt alone, and the moved request drafts
// and keeps what it does when nothing moves (keep_finished holds the freed
// slot, so the same run moves nothing).
TEST_P(EngineLossless, ARequestMovedIntoAFreedSlotEqualsPlainDecoding) {
    const strategy_case c = make_case(GetParam());
    session_params sp = specdec_session_default_params();
    sp.strategy = c.strategy;
    sp.n_draft_max = 4;
    sp.n_seq = 3;
    const std::vector<int32_t> n_predict = {24, 3, 24};
    std::vector<std::vector<llama_token>> want;
    {
        auto model = load_model(c.target);
        context_options t;
        t.n_ctx = 512;
        auto ctx = make_context(model.get(), t);
        for (size_t i = 0; i < prompts.size(); ++i) {
            generate_params gp = specdec_generate_default_params();
            gp.n_predict = n_predict[i];
            want.push_back(generate_plain(ctx.get(), std::span(&prompts[i], 1), gp).sequences[0].tokens);
        }
    }
    struct outcome {
        std::map<request_id, request_result>            done;
        std::map<request_id, std::vector<llama_seq_id>> slots; // per token event
        std::vector<request_id>                         ids;
    };
    const auto run = [&](engine & e, outcome & out, int32_t n_draft) {
        for (size_t i = 0; i < prompts.size(); ++i) {
            generate_params gp = specdec_generate_default_params();
            gp.n_predict = n_predict[i];
            gp.n_draft = n_draft;
            out.ids.push_back(e.add(prompts[i], gp));
        }
        e.run_until_idle();
        for (size_t i = 0; i < prompts.size(); ++i) {
            ASSERT_TRUE(out.done.count(out.ids[i])) << "request " << i;
            EXPECT_EQ(out.done[out.ids[i]].output.tokens, want[i]) << "request " << i;
        }
    };
    const auto log_into = [](outcome & out) {
        return [&out](const engine_event & ev) {
            if (ev.type == SPECDEC_ENGINE_EVENT_FINISHED) {
                out.done[ev.id] = *ev.result;
            } else {
                out.slots[ev.id].push_back(ev.seq_id);
            }
            return true;
        };
    };
    std::vector<outcome> outcomes(2);
    for (const bool keep : {false, true}) {
        SCOPED_TRACE(keep ? "keep_finished" : "moving");
        opened o = open(c, sp);
        session s(o.target.get(), o.draft.get(), sp);
        engine_params ep = specdec_engine_default_params();
        ep.keep_finished = keep;
        ep.prompt_cache_bytes = 64 << 20; // slot 1's positions are saved before the move
        outcome & out = outcomes[keep ? 1 : 0];
        engine e(s, ep, log_into(out));
        run(e, out, 4);
        const std::vector<llama_seq_id> & moved = out.slots[out.ids[2]];
        EXPECT_EQ(moved.front(), 2);
        EXPECT_EQ(moved.back(), keep ? 2 : 1);
        EXPECT_EQ(e.prompt_cache().n_sequences, keep ? 0u : 1u) << "what slot 1 held, saved before the move";
        EXPECT_TRUE(s.is_quiescent());
    }
    const specdec_sequence_stats & m = outcomes[0].done[outcomes[0].ids[2]].output.stats;
    const specdec_sequence_stats & k = outcomes[1].done[outcomes[1].ids[2]].output.stats;
    EXPECT_EQ(m.n_drafted, k.n_drafted);
    EXPECT_EQ(m.n_accepted, k.n_accepted);
    EXPECT_EQ(m.n_steps, k.n_steps);
    EXPECT_GT(m.n_accepted, 0u);

    // Plain decoding moves the target's cells alone.
    auto model = load_model(c.target);
    context_options t;
    t.n_ctx = 512;
    t.n_seq_max = 3;
    auto ctx = make_context(model.get(), t);
    outcome plain;
    engine e(ctx.get(), specdec_engine_default_params(), log_into(plain));
    run(e, plain, -1);
    EXPECT_EQ(plain.slots[plain.ids[2]].back(), 1);
}

// Two slots and a prompt cache: the first conversation loses its slot to
// a third prompt and is saved; its next turn comes while that slot is busy
// again, so it is loaded into the other slot (the MTP head's state moves
// with it). It decodes only its new tokens, drafts and keeps drafts, and
// equals plain decoding of its whole prompt.
TEST_P(EngineLossless, AConversationSavedFromOneSlotContinuesInAnother) {
    const strategy_case c = make_case(GetParam());
    session_params sp = specdec_session_default_params();
    sp.strategy = c.strategy;
    sp.n_draft_max = 4;
    sp.n_seq = 2;
    opened o = open(c, sp);
    session s(o.target.get(), o.draft.get(), sp);
    ASSERT_TRUE(s.can_move_sequences());
    std::map<request_id, request_result> done;
    engine_params ep = specdec_engine_default_params();
    ep.reuse_prompts = true;
    ep.prompt_cache_bytes = 64 << 20;
    engine e(s, ep, [&](const engine_event & ev) {
        if (ev.type == SPECDEC_ENGINE_EVENT_FINISHED) {
            done[ev.id] = *ev.result;
        }
        return true;
    });
    generate_params gp = specdec_generate_default_params();
    gp.n_predict = 12;
    const auto turn = [&](const std::vector<llama_token> & prompt) {
        const request_id id = e.add(prompt, gp);
        e.run_until_idle();
        return done.at(id);
    };
    const auto next = [](std::vector<llama_token> prompt, const request_result & answer, llama_token more) {
        prompt.insert(prompt.end(), answer.output.tokens.begin(), answer.output.tokens.end());
        prompt.push_back(more);
        return prompt;
    };
    const request_result a1 = turn(prompts[0]);
    turn(prompts[1]);
    const request_result c1 = turn(prompts[2]);
    ASSERT_EQ(a1.seq_id, 0);
    ASSERT_EQ(c1.seq_id, 0) << "the third prompt takes the first conversation's slot";
    ASSERT_EQ(e.prompt_cache().n_sequences, 1u);

    const request_id c2 = e.add(next(prompts[2], c1, 5), gp);
    const std::vector<llama_token> a2 = next(prompts[0], a1, 7);
    const request_id a2_id = e.add(a2, gp);
    e.run_until_idle();
    EXPECT_EQ(done.at(c2).seq_id, 0);
    const request_result & r = done.at(a2_id);
    EXPECT_EQ(r.seq_id, 1);
    EXPECT_EQ(r.n_prompt_cached, prompts[0].size() + a1.output.tokens.size() - 1);
    EXPECT_GT(r.output.stats.n_accepted, 0u);
    EXPECT_TRUE(s.is_quiescent());
    EXPECT_EQ(r.output.tokens, plain_reference(c, std::span(&a2, 1), gp).sequences[0].tokens);
}

INSTANTIATE_TEST_SUITE_P(Mtp, EngineLossless, ::testing::Values("mtp-qwen35", "mtp-glm4moe"), [](const auto & tc) { return test_name(tc.param); });

// n choices of one prompt (engine add_n), three slots: where the drafter
// copies sequences the prompt is decoded once (the others take the first's
// cells: their prompt tokens count as cached), else in each slot; greedy,
// every choice equals plain decoding; sampled with a seed, choice i equals a
// request of its own with the seed + i. Plain decoding copies the target's cells.
class EngineChoices : public ::testing::TestWithParam<std::string> {};

TEST_P(EngineChoices, DecodeThePromptOnceAndEqualSeparateRequests) {
    const strategy_case c = make_case(GetParam());
    session_params sp = specdec_session_default_params();
    sp.strategy = c.strategy;
    sp.n_draft_max = 4;
    sp.n_seq = 3;
    const std::vector<llama_token> & prompt = (*c.inputs)[0];
    generate_params greedy = specdec_generate_default_params();
    greedy.n_predict = 20;
    generate_params sampled = greedy;
    sampled.temperature = 0.9f;
    sampled.seed = 7;
    sampled.ignore_eog = true;
    engine_params ep = specdec_engine_default_params();
    ep.n_prefill_chunk = 16; // the first reads the prompt over several steps while the others wait for it
    using results = std::map<request_id, request_result>;
    const auto record = [](results & done) {
        return [&done](const engine_event & ev) {
            if (ev.type == SPECDEC_ENGINE_EVENT_FINISHED) {
                done[ev.id] = *ev.result;
            }
            return true;
        };
    };
    auto model = load_model(c.target);
    context_options t;
    t.n_ctx = 512;
    t.n_seq_max = 3;
    auto ctx = make_context(model.get(), t);
    const std::vector<llama_token> want = generate_plain(ctx.get(), std::span(&prompt, 1), greedy).sequences[0].tokens;
    llama_memory_clear(llama_get_memory(ctx.get()), true);
    {
        results plain;
        engine e(ctx.get(), ep, record(plain));
        const request_id first = e.add_n(prompt, greedy, 3);
        e.run_until_idle();
        for (request_id i = 0; i < 3; ++i) {
            EXPECT_EQ(plain.at(first + i).output.tokens, want) << "plain, choice " << i;
            EXPECT_EQ(plain.at(first + i).n_prompt_cached, i == 0 ? 0 : prompt.size());
        }
    }

    // Choice by choice what the speculative engine gives, n at once or one request each.
    const auto choices = [&](const generate_params & gp, bool together, bool & copies) {
        opened o = open(c, sp);
        session s(o.target.get(), o.draft.get(), sp);
        copies = s.can_move_sequences();
        results done;
        engine e(s, ep, record(done));
        std::vector<request_id> ids;
        if (together) {
            const request_id first = e.add_n(prompt, gp, 3);
            ids = {first, first + 1, first + 2};
        } else {
            for (uint32_t i = 0; i < 3; ++i) {
                generate_params own = gp;
                own.seed = gp.seed + i;
                ids.push_back(e.add(prompt, own));
            }
        }
        e.run_until_idle();
        EXPECT_TRUE(s.is_quiescent());
        std::vector<request_result> out;
        for (request_id id : ids) {
            out.push_back(done.at(id));
        }
        return out;
    };
    bool copies = false;
    const std::vector<request_result> g = choices(greedy, true, copies);
    EXPECT_EQ(copies, GetParam() != "eagle3") << "EAGLE-3 keeps its state inside llama.cpp";
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(g[i].output.tokens, want) << "greedy, choice " << i;
        EXPECT_EQ(g[i].n_prompt_cached, i > 0 && copies ? prompt.size() : 0) << "the prompt decoded once";
    }
    const std::vector<request_result> together = choices(sampled, true, copies);
    const std::vector<request_result> apart = choices(sampled, false, copies);
    for (size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(together[i].output.tokens, apart[i].output.tokens) << "sampled, choice " << i;
        EXPECT_EQ(together[i].output.tokens.size(), 20u);
    }
}

INSTANTIATE_TEST_SUITE_P(Choices, EngineChoices, ::testing::Values("mtp-qwen35", "mtp-glm4moe", "draft", "eagle3"),
                         [](const auto & tc) { return test_name(tc.param); });

// Moving a sequence, as the engine does to close a gap between its slots,
// carries everything the sequence had: after session `a` moves its sequence
// 2 into sequence 0 half-way, it drafts, accepts and emits exactly what
// session `b` does on sequence 2 unmoved, and both hold the same bytes: the
// session checkpoint (history and the drafter's own state, its sequence id
// aside), and the target computes the same logits, bit for bit.
class SequenceMove : public ::testing::TestWithParam<std::string> {};

TEST_P(SequenceMove, CarriesEverythingTheSequenceHad) {
    const strategy_case c = make_case(GetParam());
    session_params sp = specdec_session_default_params();
    sp.strategy = c.strategy;
    sp.n_draft_max = 4;
    sp.n_seq = 3;
    opened oa = open(c, sp);
    opened ob = open(c, sp);
    session a(oa.target.get(), oa.draft.get(), sp);
    session b(ob.target.get(), ob.draft.get(), sp);
    ASSERT_TRUE(a.can_move_sequences());
    const std::vector<llama_token> & prompt = (*c.inputs)[0];
    const spec_run a1 = spec_greedy(a, prompt, 12, 2);
    const spec_run b1 = spec_greedy(b, prompt, 12, 2);
    ASSERT_EQ(a1.tokens, b1.tokens);

    a.move_sequence(2, 0);
    const auto without_id = [](std::vector<uint8_t> blob) {
        std::fill(blob.begin() + 32, blob.begin() + 36, uint8_t{0}); // the blob's sequence id (state-codec.h)
        return blob;
    };
    EXPECT_EQ(without_id(a.state(0)), without_id(b.state(2)));
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(oa.target.get()), 2), -1) << "the sequence it left is empty";
    if (oa.draft) {
        EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(oa.draft.get()), 2), -1);
    }

    const spec_run a2 = spec_continue(a, a1.n_past, a1.id_last, 20, 0);
    const spec_run b2 = spec_continue(b, b1.n_past, b1.id_last, 20, 2);
    EXPECT_EQ(a2.tokens, b2.tokens);
    EXPECT_EQ(a2.proposed, b2.proposed);
    EXPECT_EQ(a2.accepted, b2.accepted);
    EXPECT_GT(b2.total_proposed(), 0);
    // The last verification's logits, bit for bit: the moved cells are the cells.
    const int32_t vocab = llama_vocab_n_tokens(llama_model_get_vocab(oa.target_model.get()));
    const float * la = llama_get_logits_ith(oa.target.get(), 0);
    const float * lb = llama_get_logits_ith(ob.target.get(), 0);
    ASSERT_TRUE(la != nullptr && lb != nullptr);
    EXPECT_TRUE(std::equal(la, la + vocab, lb));
    EXPECT_EQ(without_id(a.state(0)), without_id(b.state(2)));
}

INSTANTIATE_TEST_SUITE_P(Movable, SequenceMove, ::testing::Values("mtp-qwen35", "mtp-glm4moe", "draft", "ngram-simple"),
                         [](const auto & tc) { return test_name(tc.param); });

// Bad moves are refused before anything changes, each with its status.
TEST(SequenceMoveErrors, AreTypedAndChangeNothing) {
    const strategy_case c = make_case("mtp-glm4moe");
    session_params sp = specdec_session_default_params();
    sp.strategy = c.strategy;
    sp.n_draft_max = 4;
    sp.n_seq = 3;
    opened o = open(c, sp);
    session s(o.target.get(), o.draft.get(), sp);
    const spec_run run = spec_greedy(s, prompts[0], 8, 2);
    spec_greedy(s, prompts[1], 4, 0);
    llama_memory_t mem = llama_get_memory(o.target.get());
    const llama_pos end2 = llama_memory_seq_pos_max(mem, 2);
    const std::vector<uint8_t> before = s.state(2);
    EXPECT_EQ(status_of([&] { s.move_sequence(2, 3); }), SPECDEC_STATUS_BAD_SEQ_ID);
    EXPECT_EQ(status_of([&] { s.move_sequence(-1, 1); }), SPECDEC_STATUS_BAD_SEQ_ID);
    EXPECT_EQ(status_of([&] { s.move_sequence(2, 2); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { s.move_sequence(2, 0); }), SPECDEC_STATUS_INVALID_ARGUMENT) << "sequence 0 holds positions";
    EXPECT_EQ(s.state(2), before);
    const draft_request q{2, run.n_past, run.id_last, -1, nullptr};
    s.draft({&q, 1});
    ASSERT_FALSE(s.proposal(2).empty());
    EXPECT_EQ(status_of([&] { s.move_sequence(2, 1); }), SPECDEC_STATUS_PROPOSAL_PENDING);
    s.accept(2, 0);
    EXPECT_EQ(llama_memory_seq_pos_max(mem, 2), end2);
    EXPECT_EQ(llama_memory_seq_pos_max(mem, 1), -1);

    // EAGLE-3's per-sequence state lives inside llama.cpp: no move.
    const strategy_case e = make_case("eagle3");
    session_params ep = sp;
    ep.strategy = e.strategy;
    opened oe = open(e, ep);
    session se(oe.target.get(), oe.draft.get(), ep);
    EXPECT_FALSE(se.can_move_sequences());
    spec_greedy(se, prompts[0], 4, 2);
    EXPECT_EQ(status_of([&] { se.move_sequence(2, 0); }), SPECDEC_STATUS_MODEL_UNSUPPORTED);
    EXPECT_GE(llama_memory_seq_pos_max(llama_get_memory(oe.target.get()), 2), 0);
}

} // namespace
} // namespace specdec::test
