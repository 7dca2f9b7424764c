// The generation loop against a scripted target and drafter, no model:
// losslessness, stop conditions, held-back streaming, statistics, rollback,
// failures part-way, shared caches, and the sampling distribution.
#include "fake-backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <numeric>

namespace specdec::test {
namespace {

using detail::generation_backend;
using detail::run_generation;

const std::vector<std::vector<llama_token>> three_prompts = {{1, 2, 3}, {4}, {7, 8, 9, 10, 11}};

// --- losslessness ----------------------------------------------------------------

class GreedyLossless : public ::testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(GreedyLossless, EqualsPlainDecoding) {
    const auto [n_draft, wrong_every, n_seq] = GetParam();
    const std::vector<std::vector<llama_token>> prompts(three_prompts.begin(), three_prompts.begin() + n_seq);

    fake_backend plain(0, silent_drafter());
    const generation_result ref = run_generation(plain, prompts, greedy(37), {});

    fake_backend spec(n_draft, chained_drafter(wrong_every));
    const generation_result out = run_generation(spec, prompts, greedy(37), {});
    ASSERT_EQ(out.sequences.size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(out.sequences[i].tokens, ref.sequences[i].tokens);
        EXPECT_EQ(out.sequences[i].tokens, expected(prompts[i].back(), 37));
        EXPECT_EQ(out.sequences[i].stop, SPECDEC_STOP_BUDGET);
        EXPECT_EQ(out.sequences[i].text.size(), 37u);
        const auto & st = out.sequences[i].stats;
        EXPECT_EQ(st.n_generated, 37u);
        // Every step emits the kept prefix plus one target token; the prompt's
        // decode, counted as a step, emits the first.
        EXPECT_EQ(st.n_accepted + st.n_steps, 37u);
        if (wrong_every == 0) {
            EXPECT_EQ(st.n_accepted, st.n_drafted);
            EXPECT_EQ(st.n_steps, 1 + static_cast<uint64_t>((36 + n_draft) / (n_draft + 1)));
        }
        EXPECT_EQ(std::accumulate(st.n_accepted_at, st.n_accepted_at + SPECDEC_MAX_DRAFT, uint64_t{0}), st.n_accepted);
        EXPECT_EQ(std::accumulate(st.n_proposed_at, st.n_proposed_at + SPECDEC_MAX_DRAFT, uint64_t{0}), st.n_drafted);
    }
    EXPECT_TRUE(spec.pending.empty());
    // One verification batch per step for all sequences together.
    EXPECT_LT(spec.n_decodes, plain.n_decodes);
}

INSTANTIATE_TEST_SUITE_P(Drafts, GreedyLossless,
                         ::testing::Combine(::testing::Values(1, 2, 4, 8), ::testing::Values(0, 3), ::testing::Values(1, 3)),
                         [](const auto & tc) {
                             std::string name = "n";
                             name += std::to_string(std::get<0>(tc.param));
                             name += "_wrong";
                             name += std::to_string(std::get<1>(tc.param));
                             name += "_seq";
                             name += std::to_string(std::get<2>(tc.param));
                             return name;
                         });

TEST(Generator, RejectedPositionsAreDroppedBeforeTheNextStep) {
    fake_backend spec(4, chained_drafter(2));
    run_generation(spec, {{{5}}}, greedy(20), {});
    // The fake checks every decode continues the sequence; here the final
    // memory holds exactly prompt + emitted tokens minus the last id_last.
    EXPECT_EQ(spec.kv[0].size(), 20u);
    EXPECT_FALSE(spec.accepted_calls.empty());
    EXPECT_TRUE(std::any_of(spec.accepted_calls.begin(), spec.accepted_calls.end(), [](uint16_t n) { return n < 4; }));
}

TEST(Generator, AcceptanceMatchesTheScriptedDrafter) {
    // Wrong whenever the input is even: from 1 the chain is 1 -> 4 (even) -> 13 wrong.
    std::vector<int32_t> caps;
    fake_backend spec_capped(3, [&](llama_seq_id s, llama_token t, int32_t cap) {
        caps.push_back(cap);
        return chained_drafter(2)(s, t, cap);
    });
    const auto out = run_generation(spec_capped, {{{1}}}, greedy(30), {});
    ASSERT_EQ(caps.size(), spec_capped.accepted_calls.size());
    llama_token t = greedy_next(1); // the prompt's decode emitted the first token
    size_t step = 0;
    uint64_t kept_total = 0;
    for (uint16_t kept : spec_capped.accepted_calls) {
        // Reference: the chain's agreeing prefix at this step's cap.
        const auto want = chained_drafter(2)(0, t, caps[step]);
        uint16_t k = 0;
        llama_token x = t;
        while (k < want.size() && want[k] == greedy_next(x)) {
            x = want[k];
            ++k;
        }
        EXPECT_EQ(kept, k) << "step " << step++;
        kept_total += kept;
        for (int i = 0; i <= kept; ++i) {
            t = greedy_next(t);
        }
    }
    // Both paths ran: some drafts kept, some rejected.
    EXPECT_GT(kept_total, 0u);
    EXPECT_LT(kept_total, out.sequences[0].stats.n_drafted);
    EXPECT_EQ(kept_total, out.sequences[0].stats.n_accepted);
}

// --- adaptive draft length and synthetic acceptance ----------------------------------

TEST(Generator, AdaptiveLengthIsLossless) {
    for (int wrong_every : {0, 2, 5}) {
        fake_backend plain(0, silent_drafter());
        const generation_result ref = run_generation(plain, three_prompts, greedy(60), {});
        std::vector<int32_t> caps;
        fake_backend spec(8, [&](llama_seq_id s, llama_token t, int32_t cap) {
            caps.push_back(cap);
            return chained_drafter(wrong_every)(s, t, cap);
        });
        const generation_result out = run_generation(spec, three_prompts, greedy(60, SPECDEC_N_DRAFT_AUTO), {});
        for (size_t i = 0; i < three_prompts.size(); ++i) {
            EXPECT_EQ(out.sequences[i].tokens, ref.sequences[i].tokens) << "wrong_every " << wrong_every;
            const auto & st = out.sequences[i].stats;
            EXPECT_LE(st.n_drafted, st.n_steps * 8);
            EXPECT_EQ(std::accumulate(st.n_proposed_at, st.n_proposed_at + SPECDEC_MAX_DRAFT, uint64_t{0}), st.n_drafted);
        }
        EXPECT_FALSE(caps.empty());
        EXPECT_TRUE(std::all_of(caps.begin(), caps.end(), [](int32_t c) { return c >= 1 && c <= 8; }));
        EXPECT_TRUE(spec.pending.empty());
    }
}

TEST(Generator, SyntheticAcceptanceKeepsDraftsAtTheGivenRate) {
    // A drafter that is always wrong: with synthetic acceptance 1 every draft
    // is kept anyway (the text is not the target's), with 0 none is.
    const auto wrong = [](llama_seq_id, llama_token t, int32_t cap) {
        return std::vector<llama_token>(static_cast<size_t>(cap), static_cast<llama_token>((greedy_next(t) + 1) % 15));
    };
    generate_params all = greedy(30, 4);
    all.synthetic_acceptance = 1.0f;
    fake_backend a(4, wrong);
    const auto kept_all = run_generation(a, {{{1}}}, all, {});
    EXPECT_EQ(kept_all.sequences[0].stats.n_accepted, kept_all.sequences[0].stats.n_drafted);
    EXPECT_EQ(kept_all.sequences[0].stats.n_steps, 7u); // the prompt's token, then 5 tokens a step
    EXPECT_NE(kept_all.sequences[0].tokens, expected(1, 30));

    generate_params none = all;
    none.synthetic_acceptance = 0.0f;
    fake_backend b(4, wrong);
    const auto kept_none = run_generation(b, {{{1}}}, none, {});
    EXPECT_EQ(kept_none.sequences[0].stats.n_accepted, 0u);
    EXPECT_EQ(kept_none.sequences[0].tokens, expected(1, 30));

    // The rate alone decides: at 0 even an exact drafter keeps nothing.
    fake_backend exact(4, chained_drafter());
    const auto exact_none = run_generation(exact, {{{1}}}, none, {});
    EXPECT_GT(exact_none.sequences[0].stats.n_drafted, 0u);
    EXPECT_EQ(exact_none.sequences[0].stats.n_accepted, 0u);
    EXPECT_EQ(exact_none.sequences[0].tokens, expected(1, 30));

    // In between: the kept share is near the rate, and seeded runs repeat.
    generate_params half = all;
    half.synthetic_acceptance = 0.5f;
    half.n_predict = 3000;
    half.ignore_eog = true;
    fake_backend c(4, wrong);
    fake_backend d(4, wrong);
    const auto x = run_generation(c, {{{1}}}, half, {});
    const auto y = run_generation(d, {{{1}}}, half, {});
    EXPECT_EQ(x.sequences[0].tokens, y.sequences[0].tokens);
    const auto & st = x.sequences[0].stats;
    EXPECT_NEAR(static_cast<double>(st.n_accepted_at[0]) / static_cast<double>(st.n_proposed_at[0]), 0.5, 0.05);
    EXPECT_NEAR(static_cast<double>(st.n_accepted_at[1]) / static_cast<double>(st.n_accepted_at[0]), 0.5, 0.05);
}

// --- stopping and streaming ---------------------------------------------------------

TEST(Generator, CallbackFiresOncePerTokenAndCanStopOneSequence) {
    fake_backend spec(4, chained_drafter());
    std::map<llama_seq_id, int> calls;
    const auto out = run_generation(spec, three_prompts, greedy(25), [&](llama_seq_id seq, llama_token, std::string_view piece) {
        EXPECT_EQ(piece.size(), 1u);
        ++calls[seq];
        return !(seq == 1 && calls[seq] == 7);
    });
    EXPECT_EQ(calls[0], 25);
    EXPECT_EQ(calls[1], 7);
    EXPECT_EQ(calls[2], 25);
    EXPECT_EQ(out.sequences[1].stop, SPECDEC_STOP_CALLBACK);
    EXPECT_EQ(out.sequences[1].tokens.size(), 7u);
    EXPECT_EQ(out.sequences[0].stop, SPECDEC_STOP_BUDGET);
}

TEST(Generator, EndOfGenerationStopsUnlessIgnored) {
    // 14 -> 43 mod 15 = 13 ... make the target emit EOG after token 4.
    fake_backend spec(4, chained_drafter());
    spec.logits_for = [](llama_token t, float * out) {
        std::fill(out, out + V, 0.0f);
        out[t == 4 ? eog : greedy_next(t)] = 10.0f;
    };
    const auto out = run_generation(spec, {{{1}}}, greedy(30), {});
    EXPECT_EQ(out.sequences[0].stop, SPECDEC_STOP_EOG);
    EXPECT_EQ(out.sequences[0].tokens, std::vector<llama_token>({4})); // 1 -> 4 -> EOG (not emitted)

    fake_backend again(4, chained_drafter());
    again.logits_for = spec.logits_for;
    generate_params p = greedy(5);
    p.ignore_eog = true;
    const auto cont = run_generation(again, {{{1}}}, p, {});
    EXPECT_EQ(cont.sequences[0].stop, SPECDEC_STOP_BUDGET);
    EXPECT_EQ(cont.sequences[0].tokens[1], eog);
}

// What a token callback saw: per call the token and its piece.
struct stream_log {
    std::vector<llama_token> tokens;
    std::vector<std::string> pieces;
    std::string text() const {
        std::string t;
        for (const auto & p : pieces) {
            t += p;
        }
        return t;
    }
    token_callback callback() {
        return [this](llama_seq_id, llama_token token, std::string_view piece) {
            tokens.push_back(token);
            pieces.emplace_back(piece);
            return true;
        };
    }
};

generate_params with_stops(int n_predict, const std::vector<const char *> & stops) {
    generate_params p = greedy(n_predict);
    p.stop_strings = stops.data();
    p.n_stop_strings = stops.size();
    return p;
}

TEST(Generator, StopStringsAreNeverStreamed) {
    // From 1: 4 13 10 1 -> "e" "n" "k" "b": "k" waits (it may begin "kb"), then "kb" is cut.
    fake_backend spec(4, chained_drafter());
    const std::vector<const char *> stops = {"kb"};
    stream_log log;
    const auto out = run_generation(spec, {{{1}}}, with_stops(40, stops), log.callback());
    EXPECT_EQ(out.sequences[0].stop, SPECDEC_STOP_STRING);
    EXPECT_EQ(log.tokens, std::vector<llama_token>({4, 13, 10, 1})); // one call per token
    EXPECT_EQ(log.pieces, std::vector<std::string>({"e", "n", "", ""}));
    EXPECT_EQ(log.text(), out.sequences[0].text);

    // A held prefix that turns out not to be a stop string is released with the next token.
    fake_backend again(4, chained_drafter());
    const std::vector<const char *> no_match = {"kx"};
    stream_log log2;
    const auto out2 = run_generation(again, {{{1}}}, with_stops(6, no_match), log2.callback());
    EXPECT_EQ(out2.sequences[0].stop, SPECDEC_STOP_BUDGET);
    EXPECT_EQ(log2.pieces, std::vector<std::string>({"e", "n", "", "kb", "e", "n"}));
    EXPECT_EQ(log2.text(), out2.sequences[0].text);
}

TEST(Generator, TheEarliestStopStringWinsWhateverItsPlaceInTheList) {
    // "enk" completes with "k", as does "nk"; "enk" starts first.
    fake_backend spec(4, chained_drafter());
    const std::vector<const char *> stops = {"nk", "enk"};
    stream_log log;
    const auto out = run_generation(spec, {{{1}}}, with_stops(40, stops), log.callback());
    EXPECT_EQ(out.sequences[0].stop, SPECDEC_STOP_STRING);
    EXPECT_EQ(out.sequences[0].text, "");
    EXPECT_EQ(out.sequences[0].tokens, std::vector<llama_token>({4, 13, 10})); // up to the token completing it
    EXPECT_EQ(log.text(), "");
}

TEST(Generator, SplitUtf8CharactersStreamWhole) {
    // "€" is E2 82 AC: token 4 carries two bytes, token 13 the last.
    const auto pieces = [](llama_token t) {
        return t == 4 ? std::string("\xE2\x82") : t == 13 ? std::string("\xAC") : std::string(1, static_cast<char>('a' + t));
    };
    fake_backend spec(4, chained_drafter());
    spec.piece_of = pieces;
    stream_log log;
    const auto out = run_generation(spec, {{{1}}}, greedy(3), log.callback());
    EXPECT_EQ(log.pieces, std::vector<std::string>({"", "\xE2\x82\xAC", "k"}));
    EXPECT_EQ(out.sequences[0].text, "\xE2\x82\xAC" "k");

    // A budget that ends inside the character releases its bytes as they are.
    fake_backend cut(4, chained_drafter());
    cut.piece_of = pieces;
    stream_log log2;
    const auto out2 = run_generation(cut, {{{1}}}, greedy(1), log2.callback());
    EXPECT_EQ(log2.pieces, std::vector<std::string>({"\xE2\x82"}));
    EXPECT_EQ(out2.sequences[0].text, "\xE2\x82");

    // End of generation with bytes held: one last call with LLAMA_TOKEN_NULL carries them.
    fake_backend eog_after(4, chained_drafter());
    eog_after.piece_of = pieces;
    eog_after.logits_for = [](llama_token t, float * o) {
        std::fill(o, o + V, 0.0f);
        o[t == 4 ? eog : greedy_next(t)] = 10.0f;
    };
    stream_log log3;
    const auto out3 = run_generation(eog_after, {{{1}}}, greedy(30), log3.callback());
    EXPECT_EQ(out3.sequences[0].stop, SPECDEC_STOP_EOG);
    EXPECT_EQ(log3.tokens, std::vector<llama_token>({4, LLAMA_TOKEN_NULL}));
    EXPECT_EQ(log3.pieces, std::vector<std::string>({"", "\xE2\x82"}));
}

TEST(Generator, PiecesWithNulBytesStreamWhole) {
    fake_backend spec(4, chained_drafter());
    spec.piece_of = [](llama_token t) { return std::string("x\0", 2) + static_cast<char>('a' + t); };
    stream_log log;
    const auto out = run_generation(spec, {{{1}}}, greedy(2), log.callback());
    EXPECT_EQ(log.pieces, std::vector<std::string>({std::string("x\0e", 3), std::string("x\0n", 3)}));
    EXPECT_EQ(out.sequences[0].text.size(), 6u);
}

TEST(Generator, StopStringsCutTheTextEvenAcrossTokens) {
    // From 1: 4 13 10 1 4 ... -> pieces "e" "n" "k" "b" "e"
    fake_backend spec(4, chained_drafter());
    const char * stops[] = {"kb"};
    generate_params p = greedy(40);
    p.stop_strings = stops;
    p.n_stop_strings = 1;
    const auto out = run_generation(spec, {{{1}}}, p, {});
    EXPECT_EQ(out.sequences[0].stop, SPECDEC_STOP_STRING);
    EXPECT_EQ(out.sequences[0].text, "en");
    EXPECT_EQ(out.sequences[0].tokens, std::vector<llama_token>({4, 13, 10, 1}));
}

TEST(Generator, TheContextLimitIsACleanStop) {
    fake_backend spec(4, chained_drafter(), 4, /*n_ctx=*/12);
    const auto out = run_generation(spec, {{{1, 2, 3}}}, greedy(100), {});
    EXPECT_EQ(out.sequences[0].stop, SPECDEC_STOP_CONTEXT);
    EXPECT_EQ(out.sequences[0].tokens.size(), 10u); // 12 positions: 2 prompt tokens decoded + 10
    EXPECT_EQ(out.sequences[0].tokens, expected(3, 10));
}

TEST(Generator, AUnifiedCacheIsSharedByTheSequences) {
    // Three sequences: with one cache of 30 cells each gets 10 positions, as
    // with separate caches of 10; the fake checks the cells never overflow.
    for (const bool unified : {true, false}) {
        fake_backend spec(4, chained_drafter(3), 4, unified ? 30 : 10);
        spec.unified = unified;
        const auto out = run_generation(spec, three_prompts, greedy(100), {});
        for (size_t i = 0; i < three_prompts.size(); ++i) {
            EXPECT_EQ(out.sequences[i].stop, SPECDEC_STOP_CONTEXT) << "unified " << unified << ", sequence " << i;
            const int n = 10 - static_cast<int>(three_prompts[i].size() - 1);
            EXPECT_EQ(out.sequences[i].tokens, expected(three_prompts[i].back(), n)) << "unified " << unified;
        }
    }
}

TEST(Generator, DraftsNeverReachBeyondTheBudget) {
    int32_t max_cap_at_end = 0;
    fake_backend spec(8, [&](llama_seq_id s, llama_token t, int32_t cap) {
        max_cap_at_end = cap;
        return chained_drafter()(s, t, cap);
    });
    const auto out = run_generation(spec, {{{1}}}, greedy(12), {});
    EXPECT_EQ(out.sequences[0].tokens.size(), 12u);
    EXPECT_EQ(out.sequences[0].stats.n_generated, 12u);
    EXPECT_LE(max_cap_at_end, 1); // 1 from the prompt and 9 from the first step, 2 left: at most 1 draft
}

TEST(Generator, ZeroBudgetOnlyPrefills) {
    fake_backend spec(4, chained_drafter());
    const auto out = run_generation(spec, {{{1, 2, 3}}}, greedy(0), {});
    EXPECT_TRUE(out.sequences[0].tokens.empty());
    EXPECT_EQ(spec.kv[0].size(), 3u); // the whole prompt, and no token drawn
}

// --- failures inside the loop --------------------------------------------------------

// Runs `f`, which must throw generation_error, and returns it.
generation_error failure_of(const std::function<void()> & f) {
    try {
        f();
    } catch (const generation_error & e) {
        return e;
    }
    ADD_FAILURE() << "no generation_error";
    return generation_error(SPECDEC_STATUS_OK, "", {});
}

TEST(Generator, AFailedStepKeepsTheOutputSoFarAndLeavesTheBackendReusable) {
    fake_backend plain(0, silent_drafter());
    const generation_result clean = run_generation(plain, three_prompts, greedy(40), {});
    for (const int fail_at : {0, 1, 4}) { // decode 0 is the prefill, 1 the first step, 4 a later one
        SCOPED_TRACE(fail_at);
        fake_backend spec(3, chained_drafter(4));
        spec.fail_at_decode = fail_at;
        int seq1_calls = 0;
        const auto stop_seq1 = [&](llama_seq_id seq, llama_token, std::string_view) {
            return seq != 1 || ++seq1_calls < 2; // sequence 1 stops itself at its second token
        };
        const generation_error e = failure_of([&] { run_generation(spec, three_prompts, greedy(40), stop_seq1); });
        EXPECT_EQ(e.code(), SPECDEC_STATUS_DECODE_FAILED);
        EXPECT_NE(std::string(e.what()).find("scripted decode failure"), std::string::npos);
        const auto & partial = e.partial().sequences;
        ASSERT_EQ(partial.size(), three_prompts.size());
        for (size_t i = 0; i < partial.size(); ++i) {
            const auto & tokens = partial[i].tokens;
            ASSERT_LE(tokens.size(), clean.sequences[i].tokens.size());
            EXPECT_TRUE(std::equal(tokens.begin(), tokens.end(), clean.sequences[i].tokens.begin())) << "sequence " << i;
            EXPECT_EQ(partial[i].text.size(), tokens.size());
            EXPECT_EQ(partial[i].stats.n_generated, tokens.size());
            const bool seq1_done = i == 1 && fail_at > 1; // stopped by its callback in the first step
            EXPECT_EQ(partial[i].stop, seq1_done ? SPECDEC_STOP_CALLBACK : SPECDEC_STOP_ERROR) << "sequence " << i;
        }
        // The prefill emits each sequence's first token.
        EXPECT_EQ(partial[0].tokens.empty(), fail_at == 0);
        // Quiescent, every sequence emptied.
        EXPECT_TRUE(spec.pending.empty());
        EXPECT_EQ(spec.n_resets, 3);
        for (const auto & [seq, held] : spec.kv) {
            EXPECT_TRUE(held.empty()) << "sequence " << seq;
        }
        // The same backend then generates the clean output.
        spec.fail_at_decode = -1;
        const generation_result again = run_generation(spec, three_prompts, greedy(40), {});
        for (size_t i = 0; i < three_prompts.size(); ++i) {
            EXPECT_EQ(again.sequences[i].tokens, clean.sequences[i].tokens);
            EXPECT_EQ(again.sequences[i].stop, SPECDEC_STOP_BUDGET);
        }
    }
}

TEST(Generator, AnExceptionFromTheCallbackIsAFailureToo) {
    fake_backend spec(4, chained_drafter());
    const generation_error e = failure_of([&] {
        run_generation(spec, {{{1}}}, greedy(20), [](llama_seq_id, llama_token t, std::string_view) -> bool {
            if (t == 10) {
                throw error(SPECDEC_STATUS_INVALID_ARGUMENT, "the caller gave up");
            }
            return true;
        });
    });
    EXPECT_EQ(e.code(), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(e.partial().sequences[0].tokens, std::vector<llama_token>({4, 13, 10}));
    EXPECT_EQ(e.partial().sequences[0].stop, SPECDEC_STOP_ERROR);
    EXPECT_TRUE(spec.pending.empty());
}

TEST(Generator, NanLogitsAreANativeFailure) {
    for (const float temperature : {0.0f, 1.0f}) {
        fake_backend spec(4, chained_drafter());
        spec.logits_for = [](llama_token t, float * out) {
            std::fill(out, out + V, t == 13 ? std::nanf("") : 0.0f);
            out[greedy_next(t)] = 10.0f;
        };
        generate_params p = greedy(20);
        p.temperature = temperature;
        const generation_error e = failure_of([&] { run_generation(spec, {{{1}}}, p, {}); });
        EXPECT_EQ(e.code(), SPECDEC_STATUS_NATIVE_FAILURE) << "temperature " << temperature;
        if (temperature == 0.0f) {
            EXPECT_EQ(e.partial().sequences[0].tokens, std::vector<llama_token>({4, 13})); // 13's successor is NaN
        }
        EXPECT_TRUE(spec.pending.empty());
    }
}

TEST(Generator, BadInputIsATypedError) {
    auto status = [](const std::function<void()> & f) {
        try {
            f();
        } catch (const error & e) {
            return e.code();
        }
        return SPECDEC_STATUS_OK;
    };
    fake_backend spec(4, chained_drafter(), 2, 8);
    EXPECT_EQ(status([&] { run_generation(spec, {{{}}}, greedy(4), {}); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(status([&] { run_generation(spec, {{{1, V}}}, greedy(4), {}); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(status([&] { run_generation(spec, {{{1}, {2}, {3}}}, greedy(4), {}); }), SPECDEC_STATUS_SEQ_CAPACITY);
    EXPECT_EQ(status([&] { run_generation(spec, {{{1, 2, 3, 4, 5, 6, 7, 8, 9}}}, greedy(4), {}); }), SPECDEC_STATUS_CONTEXT_FULL);
    EXPECT_EQ(status([&] { run_generation(spec, {{{1}}}, greedy(4, 5), {}); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(status([&] { run_generation(spec, {{{1}}}, greedy(-1), {}); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(status([&] { run_generation(spec, {{{1}}}, greedy(4, -3), {}); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    generate_params p = greedy(4);
    p.temperature = 1.0f;
    p.top_p = 0.0f;
    EXPECT_EQ(status([&] { run_generation(spec, {{{1}}}, p, {}); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    for (float rate : {1.5f, std::nanf("")}) {
        generate_params q = greedy(4);
        q.synthetic_acceptance = rate;
        EXPECT_EQ(status([&] { run_generation(spec, {{{1}}}, q, {}); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    }
    EXPECT_EQ(spec.n_decodes, 0); // nothing ran
}

// --- sampling ----------------------------------------------------------------------

// A target whose next-token distribution is spread out: p(x | t) ∝ w[(x - t) mod V].
void spread_logits(llama_token t, float * out) {
    static const float w[V] = {2.0f, 1.2f, 0.3f, 1.7f, 0.1f, 0.9f, 1.1f, 0.0f, 0.5f, 1.4f, 0.2f, 0.8f, 0.6f, 1.0f, 0.4f, 0.7f};
    for (int x = 0; x < V; ++x) {
        out[x] = w[(x - t + V) % V];
    }
}

std::vector<double> softmax_of(llama_token t) {
    float logits[V];
    spread_logits(t, logits);
    std::vector<double> p(V);
    double z = 0;
    for (int x = 0; x < V; ++x) {
        z += p[static_cast<size_t>(x)] = std::exp(static_cast<double>(logits[x]));
    }
    for (double & v : p) {
        v /= z;
    }
    return p;
}

generate_params sampled(int n_predict, uint32_t seed) {
    generate_params p = greedy(n_predict);
    p.temperature = 1.0f;
    p.seed = seed;
    p.ignore_eog = true;
    p.accept = SPECDEC_ACCEPT_EXACT; // seed for seed plain decoding's draws
    return p;
}

TEST(Sampling, SeededSpeculationEqualsSeededPlainDecoding) {
    uint64_t accepted = 0;
    for (uint32_t seed = 1; seed <= 20; ++seed) {
        fake_backend plain(0, silent_drafter());
        plain.logits_for = spread_logits;
        fake_backend spec(4, [](llama_seq_id, llama_token t, int32_t cap) {
            return std::vector<llama_token>(static_cast<size_t>(cap), static_cast<llama_token>(t)); // the mode of p(.|t)
        });
        spec.logits_for = spread_logits;
        const auto a = run_generation(plain, three_prompts, sampled(30, seed), {});
        const auto b = run_generation(spec, three_prompts, sampled(30, seed), {});
        for (size_t i = 0; i < three_prompts.size(); ++i) {
            EXPECT_EQ(a.sequences[i].tokens, b.sequences[i].tokens) << "seed " << seed;
        }
        accepted += b.sequences[0].stats.n_accepted;
    }
    EXPECT_GT(accepted, 0u); // drafts were really kept, not only rejected
}

// Issue 33: temperature 1e-38 divided logits of 10-20 into infinities, the
// softmax into NaN, and the draw returned the last token of the vocabulary.
// Below SPECDEC_MIN_SAMPLING_TEMPERATURE a request is greedy.
TEST(Sampling, TemperatureBelowTheThresholdIsGreedy) {
    const auto large_logits = [](llama_token t, float * out) {
        spread_logits(t, out);
        for (int x = 0; x < V; ++x) {
            out[x] *= 10.0f; // real models' scale: 0-20
        }
    };
    fake_backend reference(0, silent_drafter());
    reference.logits_for = large_logits;
    const auto want = run_generation(reference, three_prompts, greedy(12), {});
    for (const float temperature : {std::numeric_limits<float>::denorm_min(), 1e-38f, 1e-30f, 0.5f * SPECDEC_MIN_SAMPLING_TEMPERATURE}) {
        fake_backend spec(3, [](llama_seq_id, llama_token t, int32_t cap) {
            return std::vector<llama_token>(static_cast<size_t>(cap), t);
        });
        spec.logits_for = large_logits;
        generate_params p = sampled(12, 7);
        p.temperature = temperature;
        p.ignore_eog = false;
        const auto got = run_generation(spec, three_prompts, p, {});
        for (size_t i = 0; i < three_prompts.size(); ++i) {
            EXPECT_EQ(got.sequences[i].tokens, want.sequences[i].tokens) << "temperature " << temperature;
        }
    }
}

TEST(Sampling, AdaptiveLengthSeededEqualsSeededPlainDecoding) {
    for (uint32_t seed = 1; seed <= 5; ++seed) {
        fake_backend plain(0, silent_drafter());
        plain.logits_for = spread_logits;
        fake_backend spec(6, [](llama_seq_id, llama_token t, int32_t cap) {
            return std::vector<llama_token>(static_cast<size_t>(cap), t);
        });
        spec.logits_for = spread_logits;
        generate_params p = greedy(40, SPECDEC_N_DRAFT_AUTO);
        p.temperature = 1.0f;
        p.seed = seed;
        p.ignore_eog = true;
        p.accept = SPECDEC_ACCEPT_EXACT;
        generate_params q = p;
        q.n_draft = -1;
        const auto a = run_generation(plain, three_prompts, q, {});
        const auto b = run_generation(spec, three_prompts, p, {});
        for (size_t i = 0; i < three_prompts.size(); ++i) {
            EXPECT_EQ(a.sequences[i].tokens, b.sequences[i].tokens) << "seed " << seed;
        }
    }
}

// Pearson's chi-square of observed counts against expected probabilities.
double chi_square(const std::vector<int> & counts, const std::vector<double> & p) {
    const double n = std::accumulate(counts.begin(), counts.end(), 0.0);
    double x2 = 0;
    for (size_t i = 0; i < counts.size(); ++i) {
        const double e = n * p[i];
        x2 += (counts[i] - e) * (counts[i] - e) / e;
    }
    return x2;
}

// Pre-registered bound: the 0.999 quantile of chi-square with 15 degrees of
// freedom. A correct verifier exceeds it once in a thousand runs.
constexpr double chi2_15_999 = 37.697;

TEST(Sampling, EmittedTokensFollowTheTargetDistribution) {
    // The drafter always proposes token 0 then token 1. Position 1's draw is
    // only observed after position 0 accepted the draft (x0 == 0), so its
    // conditional distribution must be p(. | 0).
    constexpr int runs = 24000;
    std::vector<int> first(V, 0);
    std::vector<int> after_accept(V, 0);
    for (int r = 0; r < runs; ++r) {
        fake_backend spec(2, [](llama_seq_id, llama_token, int32_t cap) {
            std::vector<llama_token> p = {0, 1};
            p.resize(static_cast<size_t>(cap));
            return p;
        });
        spec.logits_for = spread_logits;
        const auto out = run_generation(spec, {{{0}}}, sampled(2, static_cast<uint32_t>(r) * 7919u + 13u), {});
        const auto & tok = out.sequences[0].tokens;
        first[static_cast<size_t>(tok[0])]++;
        if (tok[0] == 0) {
            after_accept[static_cast<size_t>(tok[1])]++;
        }
    }
    const double x2_first = chi_square(first, softmax_of(0));
    const double x2_after = chi_square(after_accept, softmax_of(0));
    RecordProperty("chi2_first", std::to_string(x2_first));
    RecordProperty("chi2_after_accept", std::to_string(x2_after));
    EXPECT_LT(x2_first, chi2_15_999) << "first token";
    EXPECT_LT(x2_after, chi2_15_999) << "token after an accepted draft";
    EXPECT_GT(std::accumulate(after_accept.begin(), after_accept.end(), 0), runs / 10);

    // Power: the same counts of the loop's output reject the distributions
    // two classic verifier bugs would emit, so a passing test says something.
    // (1) Keeping the draft with probability p(d) and otherwise drawing from p
    // again (instead of from the residual) emits q(x) = [x = d] p(d) + (1 - p(d)) p(x).
    const std::vector<double> p = softmax_of(0);
    std::vector<double> q(V);
    for (int x = 0; x < V; ++x) {
        q[static_cast<size_t>(x)] = (x == 0 ? p[0] : 0.0) + (1.0 - p[0]) * p[static_cast<size_t>(x)];
    }
    const double x2_vs_biased = chi_square(first, q);
    RecordProperty("chi2_first_vs_biased", std::to_string(x2_vs_biased));
    EXPECT_GT(x2_vs_biased, chi2_15_999);
    // (2) Reading the logits row of the drafted token (1) instead of the
    // accepted one (0) at position 1 emits p(. | 1).
    const double x2_vs_shifted = chi_square(after_accept, softmax_of(1));
    RecordProperty("chi2_after_accept_vs_shifted_row", std::to_string(x2_vs_shifted));
    EXPECT_GT(x2_vs_shifted, chi2_15_999);
}

} // namespace
} // namespace specdec::test
