// Log-probabilities: the log-softmax of the target's logits and its most
// likely tokens, as the engine reports them per emitted token, against
// values worked out by hand; and through the engine, a speculative run
// reports for every token what a plain run of the same prompt does.
#include "engine.h"
#include "logprobs.h"

#include "fake-backend.h"

#include <gtest/gtest.h>

#include <cmath>

namespace specdec::test {
namespace {

using detail::engine_core;
using detail::log_probability;
using detail::run_generation;

TEST(Logprobs, LogSoftmaxAndTheMostLikelyTokens) {
    // exp: 1, e, e, e^2 (sum 1 + 2e + e^2 = (1 + e)^2).
    const float logits[4] = {0.0f, 1.0f, 1.0f, 2.0f};
    std::vector<specdec_token_logprob> top;
    const double log_z = 2.0 * std::log(1.0 + std::exp(1.0));
    EXPECT_NEAR(log_probability(logits, 4, 0, 3, top), -log_z, 1e-6);
    ASSERT_EQ(top.size(), 3u);
    EXPECT_EQ(top[0].token, 3);
    EXPECT_NEAR(top[0].logprob, 2.0 - log_z, 1e-6);
    EXPECT_EQ(top[1].token, 1) << "equal logits: lowest id first";
    EXPECT_EQ(top[2].token, 2);
    EXPECT_NEAR(top[2].logprob, 1.0 - log_z, 1e-6);

    top.clear();
    EXPECT_NEAR(log_probability(logits, 4, 3, 0, top), 2.0 - log_z, 1e-6);
    EXPECT_TRUE(top.empty()) << "n_top 0: the token's own alone";

    // Far apart logits: the normaliser neither overflows nor loses the small ones.
    const float wide[3] = {1000.0f, 0.0f, -1000.0f};
    EXPECT_NEAR(log_probability(wide, 3, 0, 0, top), 0.0, 1e-6);
    EXPECT_NEAR(log_probability(wide, 3, 1, 0, top), -1000.0, 1e-3);

    const float bad[2] = {0.0f, NAN};
    EXPECT_THROW(log_probability(bad, 2, 0, 1, top), error);
}

request_params with_logprobs(int n_predict, int32_t n_top) {
    request_params p = greedy(n_predict);
    p.n_top_logprobs = n_top;
    return p;
}

// The engine's events and result carry one log-probability per token and
// n_top alternatives each, the first alternative being the greedy token;
// speculation (with drafts rejected on the way) reports exactly what plain
// decoding of the prompt alone does.
TEST(Logprobs, EveryEmittedTokenHasThemAndSpeculationChangesNone) {
    const auto spread_logits = [](llama_token t, float * out) {
        for (int x = 0; x < V; ++x) {
            out[x] = static_cast<float>((x * 5 + t * 3) % 13) * 0.25f;
        }
        out[greedy_next(t)] = 4.0f;
    };
    const std::vector<llama_token> prompt = {2, 7, 1};
    fake_backend plain(0, silent_drafter());
    plain.logits_for = spread_logits;
    const sequence_result want = run_generation(plain, {{prompt}}, with_logprobs(12, 4), {}).sequences[0];
    ASSERT_EQ(want.tokens.size(), 12u);
    ASSERT_EQ(want.logprobs.size(), 12u);
    ASSERT_EQ(want.top_logprobs.size(), 12u * 4);
    for (size_t i = 0; i < want.tokens.size(); ++i) {
        EXPECT_EQ(want.top_logprobs[4 * i].token, want.tokens[i]) << "greedy: the most likely token";
        EXPECT_EQ(want.top_logprobs[4 * i].logprob, want.logprobs[i]);
        EXPECT_LT(want.logprobs[i], 0.0f);
        EXPECT_GE(want.top_logprobs[4 * i].logprob, want.top_logprobs[4 * i + 3].logprob);
    }

    fake_backend spec(4, chained_drafter(2)); // wrong after the even tokens of the cycle 4, 13, 10, 1
    spec.logits_for = spread_logits;
    std::vector<specdec_token_logprob> streamed;
    size_t streamed_top = 0;
    request_result got;
    engine_core engine(spec, [] {
        engine_params p = specdec_engine_default_params();
        p.n_seq = 1;
        return p;
    }(), [&](const engine_event & e) {
        if (e.type == SPECDEC_ENGINE_EVENT_FINISHED) {
            got = *e.result;
        } else if (e.token != LLAMA_TOKEN_NULL) {
            EXPECT_NE(e.logprob, nullptr);
            EXPECT_EQ(e.logprob->token, e.token);
            streamed.push_back(*e.logprob);
            streamed_top += e.top_logprobs.size();
        }
        return true;
    });
    engine.add(prompt, with_logprobs(12, 4));
    while (engine.has_work()) {
        engine.step();
    }
    EXPECT_EQ(got.output.tokens, want.tokens);
    EXPECT_EQ(got.output.logprobs, want.logprobs);
    ASSERT_EQ(got.output.top_logprobs.size(), want.top_logprobs.size());
    for (size_t i = 0; i < want.top_logprobs.size(); ++i) {
        EXPECT_EQ(got.output.top_logprobs[i].token, want.top_logprobs[i].token);
        EXPECT_EQ(got.output.top_logprobs[i].logprob, want.top_logprobs[i].logprob);
    }
    ASSERT_EQ(streamed.size(), want.tokens.size());
    for (size_t i = 0; i < streamed.size(); ++i) {
        EXPECT_EQ(streamed[i].logprob, want.logprobs[i]);
    }
    EXPECT_EQ(streamed_top, want.top_logprobs.size());
    EXPECT_GT(got.output.stats.n_accepted, 0u);
    EXPECT_LT(got.output.stats.n_accepted, got.output.stats.n_drafted) << "some drafts were rejected";
}

// prompt_logprobs: every prompt token but the first gets its
// log-probability after the tokens before it (what OpenAI's echo reports),
// from the prompt's own decode; a scored prompt reuses nothing of a slot.
TEST(Logprobs, PromptTokensAreScoredAndNotReused) {
    const auto spread_logits = [](llama_token t, float * out) {
        for (int x = 0; x < V; ++x) {
            out[x] = static_cast<float>((x * 5 + t * 3) % 13) * 0.25f;
        }
    };
    const std::vector<llama_token> prompt = {2, 7, 1, 9, 9};
    request_params p = with_logprobs(3, 2);
    p.prompt_logprobs = true;
    fake_backend plain(0, silent_drafter());
    plain.logits_for = spread_logits;
    const sequence_result r = run_generation(plain, {{prompt}}, p, {}).sequences[0];
    ASSERT_EQ(r.prompt_logprobs.size(), prompt.size() - 1);
    ASSERT_EQ(r.prompt_top_logprobs.size(), 2 * (prompt.size() - 1));
    for (size_t i = 0; i + 1 < prompt.size(); ++i) {
        float row[V];
        spread_logits(prompt[i], row);
        std::vector<specdec_token_logprob> top;
        EXPECT_EQ(r.prompt_logprobs[i], log_probability(row, V, prompt[i + 1], 2, top)) << "prompt token " << i + 1;
        EXPECT_EQ(r.prompt_top_logprobs[2 * i].token, top[0].token);
    }
    EXPECT_EQ(r.logprobs.size(), 3u) << "the output's own are still there";

    // Twice on an engine that reuses prompts: the second is decoded whole too.
    fake_backend spec(4, chained_drafter(2));
    spec.logits_for = spread_logits;
    std::vector<request_result> done;
    engine_params ep = specdec_engine_default_params();
    ep.n_seq = 1;
    ASSERT_TRUE(ep.reuse_prompts);
    engine_core engine(spec, ep, [&](const engine_event & e) {
        if (e.type == SPECDEC_ENGINE_EVENT_FINISHED) {
            done.push_back(*e.result);
        }
        return true;
    });
    for (int i = 0; i < 2; ++i) {
        engine.add(prompt, p);
        while (engine.has_work()) {
            engine.step();
        }
    }
    ASSERT_EQ(done.size(), 2u);
    for (const request_result & d : done) {
        EXPECT_EQ(d.n_prompt_cached, 0u);
        EXPECT_EQ(d.output.prompt_logprobs, r.prompt_logprobs);
        EXPECT_EQ(d.output.tokens, r.tokens);
    }
    // Without log-probabilities asked, prompt_logprobs alone asks for nothing.
    request_params bare = greedy(3);
    bare.prompt_logprobs = true;
    fake_backend again(0, silent_drafter());
    EXPECT_TRUE(run_generation(again, {{prompt}}, bare, {}).sequences[0].prompt_logprobs.empty());
}

TEST(Logprobs, NotAskedForNoneAreKeptAndTooManyIsAnError) {
    fake_backend plain(0, silent_drafter());
    const sequence_result r = run_generation(plain, {{std::vector<llama_token>{1}}}, greedy(5), {}).sequences[0];
    EXPECT_TRUE(r.logprobs.empty());
    EXPECT_TRUE(r.top_logprobs.empty());
    EXPECT_THROW(run_generation(plain, {{std::vector<llama_token>{1}}}, with_logprobs(5, SPECDEC_MAX_TOP_LOGPROBS + 1), {}), error);
}

} // namespace
} // namespace specdec::test
