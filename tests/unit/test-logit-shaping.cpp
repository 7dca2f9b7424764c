// Logit biases and penalties through the engine, against the scripted
// backend: each changes what plain decoding chooses, and speculation (with
// drafts rejected on the way) chooses exactly that too, since every
// verification row sees the tokens emitted before it and only those.
#include "engine.h"
#include "logit-shaping.h"

#include "fake-backend.h"

#include <gtest/gtest.h>

#include <cmath>

namespace specdec::test {
namespace {

using detail::logit_shaper;
using detail::run_generation;

// Several tokens close to the greedy one, so that penalties change choices.
void close_logits(llama_token t, float * out) {
    for (int x = 0; x < V; ++x) {
        out[x] = static_cast<float>((x * 5 + t * 3) % 13) * 0.1f;
    }
    out[greedy_next(t)] = 1.5f;
}

sequence_result run(fake_backend & b, const request_params & p) {
    b.logits_for = close_logits;
    return run_generation(b, {{std::vector<llama_token>{2, 1}}}, p, {}).sequences[0]; // greedy: the cycle 4, 13, 10, 1
}

TEST(LogitShaping, EachChangesPlainDecodingAndSpeculationFollowsExactly) {
    const specdec_logit_bias to_five[] = {{5, 3.0f}};
    const specdec_logit_bias never_greedy[] = {{4, -INFINITY}, {13, -INFINITY}, {10, -INFINITY}};
    struct shaping {
        const char * name;
        request_params p;
    };
    std::vector<shaping> cases;
    const auto with = [&](const char * name, auto set) {
        request_params p = greedy(24);
        p.ignore_eog = true;
        set(p);
        cases.push_back({name, p});
    };
    with("logit_bias +3 on token 5", [&](request_params & p) { p.logit_bias = to_five; p.n_logit_bias = 1; });
    with("logit_bias -inf", [&](request_params & p) { p.logit_bias = never_greedy; p.n_logit_bias = 3; });
    with("presence_penalty", [](request_params & p) { p.presence_penalty = 1.0f; });
    with("frequency_penalty", [](request_params & p) { p.frequency_penalty = 0.3f; });
    with("repeat_penalty", [](request_params & p) { p.repeat_penalty = 2.0f; p.repeat_last_n = 4; });
    with("sampled with a penalty", [](request_params & p) { p.frequency_penalty = 0.5f; p.temperature = 1.0f; p.seed = 9; p.accept = SPECDEC_ACCEPT_EXACT; });

    request_params none = greedy(24);
    none.ignore_eog = true;
    fake_backend base(0, silent_drafter());
    const sequence_result unshaped = run(base, none);
    for (const shaping & c : cases) {
        SCOPED_TRACE(c.name);
        fake_backend plain(0, silent_drafter());
        const sequence_result want = run(plain, c.p);
        EXPECT_NE(want.tokens, unshaped.tokens) << "the shaping must change something for the test to mean anything";
        fake_backend spec(4, chained_drafter(2));
        const sequence_result got = run(spec, c.p);
        EXPECT_EQ(got.tokens, want.tokens);
        EXPECT_GT(got.stats.n_drafted, 0u);
    }
    // What each does, on the plain run.
    fake_backend plain(0, silent_drafter());
    EXPECT_EQ(run(plain, cases[0].p).tokens, std::vector<llama_token>(24, 5)) << "+3 makes token 5 the greedy one everywhere";
    for (const llama_token t : run(plain, cases[1].p).tokens) {
        EXPECT_TRUE(t != 4 && t != 13 && t != 10) << t;
    }
}

TEST(LogitShaping, BadValuesAreTypedErrorsBeforeAnythingRuns) {
    const auto refused = [](auto set) {
        request_params p = greedy(4);
        set(p);
        try {
            logit_shaper::validate(p, nullptr, V);
        } catch (const error & e) {
            return e.code() == SPECDEC_STATUS_INVALID_ARGUMENT;
        }
        return false;
    };
    const specdec_logit_bias outside[] = {{V, 1.0f}};
    const specdec_logit_bias nan_bias[] = {{1, NAN}};
    const specdec_logit_bias plus_inf[] = {{1, INFINITY}};
    EXPECT_TRUE(refused([&](request_params & p) { p.logit_bias = outside; p.n_logit_bias = 1; }));
    EXPECT_TRUE(refused([&](request_params & p) { p.logit_bias = nan_bias; p.n_logit_bias = 1; }));
    EXPECT_TRUE(refused([&](request_params & p) { p.logit_bias = plus_inf; p.n_logit_bias = 1; }));
    EXPECT_TRUE(refused([](request_params & p) { p.n_logit_bias = 1; }));
    EXPECT_TRUE(refused([](request_params & p) { p.presence_penalty = 2.5f; }));
    EXPECT_TRUE(refused([](request_params & p) { p.frequency_penalty = NAN; }));
    EXPECT_TRUE(refused([](request_params & p) { p.repeat_penalty = 0.0f; }));
    EXPECT_TRUE(refused([](request_params & p) { p.repeat_last_n = -1; }));
    EXPECT_TRUE(refused([](request_params & p) { p.grammar = "root ::= \"a\""; })) << "no vocabulary to hold it against";
    EXPECT_FALSE(refused([](request_params & p) { p.grammar = ""; })) << "empty: none";
    EXPECT_TRUE(refused([](request_params & p) { p.n_grammar_triggers = 1; })) << "no triggers there, and no grammar";
    EXPECT_TRUE(refused([](request_params & p) { p.grammar_prefix = "a"; })) << "a prefix without a grammar";
    // Through the engine: refused at add, nothing queued.
    fake_backend b(0, silent_drafter());
    request_params p = greedy(4);
    p.presence_penalty = -3.0f;
    EXPECT_THROW(run_generation(b, {{std::vector<llama_token>{1}}}, p, {}), error);
    request_params synthetic = greedy(4);
    synthetic.synthetic_acceptance = 0.5f;
    synthetic.frequency_penalty = 0.5f;
    EXPECT_THROW(run_generation(b, {{std::vector<llama_token>{1}}}, synthetic, {}), error);
    EXPECT_EQ(b.n_decodes, 0);
}

} // namespace
} // namespace specdec::test
