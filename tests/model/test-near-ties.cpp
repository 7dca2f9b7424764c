// Near-ties: the tier where "not one token different" can fail. The
// controlled fixtures put the successor token sqrt(n_embd) above every other
// logit, so no rounding difference can change a token there. Random-weight
// targets at a real width have near-ties everywhere, as real models do: a
// kernel that rounds a row differently when it shares a batch changes the
// greedy token within a few dozen tokens. Each case compares token ids over
// n_predict tokens, for a dense, an MoE and a hybrid (recurrent) target in
// F16, Q8_0, Q4_0 and Q4_K_M (NearTiesTypes below checks the other types):
//  - plain decoding of each prompt alone: the reference;
//  - plain decoding of all prompts in one batch;
//  - MTP speculation at draft lengths 1, 3 and 8, one sequence and all
//    (the heads are random too: nearly every draft is rejected and rolled
//    back, so this checks the first row of each verification batch and the
//    cleanup);
//  - replayed verification: the reference continuation fed back in chunks
//    of k + 1 rows per sequence, every sequence in one batch, as a drafter
//    that is always right would be verified; every row's greedy token must
//    be the reference's next token;
//  - prompt reuse: a conversation's later turns on an engine that keeps the
//    earlier turns' positions, plain and MTP, against each turn's prompt
//    decoded whole on a fresh context, log-probabilities included.
#include "harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>

namespace specdec::test {
namespace {

using fixtures::weight_type;

constexpr int n_predict = 256;
const std::vector<std::vector<llama_token>> prompts = {{11, 12, 13, 14}, {500, 7, 4000, 42, 3, 77}, {8000, 256}};

enum class trunk { dense, moe, hybrid };

const char * trunk_name(trunk t) {
    switch (t) {
        case trunk::dense:  return "dense";
        case trunk::moe:    return "moe";
        case trunk::hybrid: return "hybrid";
    }
    return "";
}

const char * type_name(weight_type t) {
    return fixtures::info_of(t).name;
}

// Real models' layer shapes (Qwen3-0.6B for dense and MoE, Qwen3.5-0.8B for
// the hybrid; fixtures.h) with 2 blocks (the hybrid's second one attention)
// and an 8,192-token vocabulary: written in seconds, and (without
// patches/0001) diverging within 40 tokens.
std::string target_file(trunk t, weight_type type) {
    fixtures::fixture_options o = fixtures::find_shape(t == trunk::hybrid ? "qwen3.5-0.8b-8l" : "qwen3-0.6b")->options;
    o.controlled = false;
    o.drafter = fixtures::drafter_kind::random;
    o.n_vocab = 8192;
    o.n_layer = 2;
    o.full_attn_interval = 2;
    o.seed = 5;
    o.dense_trunk = t == trunk::dense;
    const std::string name = std::string("near-tie-2x8192-") + trunk_name(t) + "-" + type_name(type);
    return fixture(name, [&](const std::string & path) {
        fixtures::write_with_type(
            [&](const std::string & p) { t == trunk::hybrid ? fixtures::write_qwen35_mtp(p, o) : fixtures::write_glm4moe_mtp(p, o); },
            path, type);
    });
}

llama_context_ptr target_context(llama_model * model, size_t n_seq, int n_draft, ggml_type kv = GGML_TYPE_F16, int32_t n_threads = 1) {
    context_options o;
    o.type_k = kv;
    o.type_v = kv;
    o.n_threads = n_threads;
    o.n_ctx = 512 * static_cast<uint32_t>(n_seq);
    o.n_seq_max = static_cast<uint32_t>(n_seq);
    o.n_rs_seq = static_cast<uint32_t>(n_draft);
    return make_context(model, o);
}

generate_params greedy() {
    generate_params gp = specdec_generate_default_params();
    gp.n_predict = n_predict;
    gp.ignore_eog = true;
    return gp;
}

// Each row of a chunk of k + 1 reference tokens per sequence, all sequences
// in one batch: the greedy token after row j must be the reference's token
// j + 1. Returns the first mismatch as "sequence s, token i: a != b", or "".
std::string replay_verification(llama_model * model, const std::vector<std::vector<llama_token>> & ref, int k,
                                ggml_type kv = GGML_TYPE_F16, int32_t n_threads = 1) {
    const size_t n_seq = prompts.size();
    const int n_ref = static_cast<int>(ref[0].size());
    auto ctx = target_context(model, n_seq, k, kv, n_threads);
    const int32_t n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    test_batch batch(static_cast<int32_t>(n_seq) * 64, static_cast<int32_t>(n_seq));
    for (size_t s = 0; s < n_seq; ++s) {
        batch.clear();
        for (size_t i = 0; i < prompts[s].size(); ++i) {
            batch.add(prompts[s][i], static_cast<llama_pos>(i), static_cast<llama_seq_id>(s), i + 1 == prompts[s].size());
        }
        if (llama_decode(ctx.get(), batch.b) != 0) {
            return "prefill failed";
        }
        const llama_token first = argmax(llama_get_logits_ith(ctx.get(), -1), n_vocab);
        if (first != ref[s][0]) {
            return "sequence " + std::to_string(s) + ", token 0: " + std::to_string(first) + " != " + std::to_string(ref[s][0]);
        }
    }
    // Feeding ref[s][i] must predict ref[s][i + 1].
    for (int i = 0; i + 1 < n_ref; i += k + 1) {
        const int rows = std::min(k + 1, n_ref - 1 - i);
        batch.clear();
        for (size_t s = 0; s < n_seq; ++s) {
            for (int j = 0; j < rows; ++j) {
                const auto pos = static_cast<llama_pos>(prompts[s].size()) + i + j;
                batch.add(ref[s][static_cast<size_t>(i + j)], pos, static_cast<llama_seq_id>(s), true);
            }
        }
        if (llama_decode(ctx.get(), batch.b) != 0) {
            return "verification decode failed";
        }
        for (size_t s = 0; s < n_seq; ++s) {
            for (int j = 0; j < rows; ++j) {
                const auto row = static_cast<int32_t>(s) * rows + j;
                const llama_token got = argmax(llama_get_logits_ith(ctx.get(), row), n_vocab);
                const llama_token want = ref[s][static_cast<size_t>(i + j + 1)];
                if (got != want) {
                    return "sequence " + std::to_string(s) + ", token " + std::to_string(i + j + 1) + " (row " + std::to_string(j) +
                           " of " + std::to_string(rows) + "): " + std::to_string(got) + " != " + std::to_string(want);
                }
            }
        }
    }
    return "";
}

// Greedy MTP speculation with drafts of up to `k` tokens over `target` (one sequence per prompt of `batch`).
generation_result mtp_generate(llama_context * target, int k, const std::vector<std::vector<llama_token>> & batch, const generate_params & gp) {
    session_params sp = specdec_session_default_params();
    sp.strategy = SPECDEC_STRATEGY_MTP;
    sp.n_draft_max = k;
    sp.n_seq = static_cast<uint32_t>(batch.size());
    llama_context_params cp = llama_context_default_params();
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    auto draft = make_draft_context(target, nullptr, sp, cp);
    session s(target, draft.get(), sp);
    return generate(s, batch, gp);
}

// Each prompt decoded alone, plainly, on a fresh context with cache type `kv`.
std::vector<std::vector<llama_token>> alone_tokens(llama_model * model, ggml_type kv, const generate_params & gp) {
    std::vector<std::vector<llama_token>> ref;
    for (const auto & p : prompts) {
        auto ctx = target_context(model, 1, 0, kv);
        ref.push_back(generate_plain(ctx.get(), std::span(&p, 1), gp).sequences[0].tokens);
    }
    return ref;
}

// The first index at which two token lists differ, or -1.
long first_difference(const std::vector<llama_token> & a, const std::vector<llama_token> & b) {
    const auto [ia, ib] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
    return ia == a.end() && ib == b.end() ? -1 : static_cast<long>(ia - a.begin());
}

class NearTies : public ::testing::TestWithParam<std::tuple<trunk, weight_type>> {};

TEST_P(NearTies, EveryBatchShapeGivesPlainDecodingsTokens) {
    const auto [t, type] = GetParam();
    auto model = load_model(target_file(t, type));

    // The reference: each prompt decoded alone, one token per step.
    std::vector<std::vector<llama_token>> ref;
    for (const auto & p : prompts) {
        auto ctx = target_context(model.get(), 1, 0);
        const generation_result r = generate_plain(ctx.get(), std::span(&p, 1), greedy());
        ASSERT_EQ(r.sequences[0].tokens.size(), static_cast<size_t>(n_predict));
        ref.push_back(r.sequences[0].tokens);
    }
    // Near-ties make a random target's text vary: a target stuck on one
    // token would test nothing.
    for (const auto & r : ref) {
        EXPECT_GT(std::set<llama_token>(r.begin(), r.end()).size(), 8u);
    }

    {
        auto ctx = target_context(model.get(), prompts.size(), 0);
        const generation_result r = generate_plain(ctx.get(), prompts, greedy());
        for (size_t s = 0; s < prompts.size(); ++s) {
            EXPECT_EQ(first_difference(r.sequences[s].tokens, ref[s]), -1) << "plain, all prompts batched: sequence " << s;
        }
    }

    for (const int k : {1, 3, 8}) {
        for (const size_t n_seq : {size_t{1}, prompts.size()}) {
            session_params sp = specdec_session_default_params();
            sp.strategy = SPECDEC_STRATEGY_MTP;
            sp.n_draft_max = k;
            sp.n_seq = static_cast<uint32_t>(n_seq);
            auto target = target_context(model.get(), n_seq, k);
            llama_context_params cp = llama_context_default_params();
            cp.n_threads = 1;
            cp.n_threads_batch = 1;
            auto draft = make_draft_context(target.get(), nullptr, sp, cp);
            session s(target.get(), draft.get(), sp);
            const generation_result r = generate(s, std::span(prompts.data(), n_seq), greedy());
            uint64_t drafted = 0;
            for (size_t i = 0; i < n_seq; ++i) {
                EXPECT_EQ(first_difference(r.sequences[i].tokens, ref[i]), -1)
                    << "MTP k = " << k << ", " << n_seq << " sequence(s): sequence " << i;
                drafted += r.sequences[i].stats.n_drafted;
            }
            EXPECT_GT(drafted, 0u) << "k = " << k; // verification batches of k + 1 rows ran
        }
        EXPECT_EQ(replay_verification(model.get(), ref, k), "") << "replayed verification, k = " << k;
    }

    // A restricted draft vocabulary (the tokenizer's first 1024 of 8192
    // tokens, which the random text leaves often): other drafts, the same text.
    {
        session_params sp = specdec_session_default_params();
        sp.strategy = SPECDEC_STRATEGY_MTP;
        sp.n_draft_max = 8;
        sp.n_seq = static_cast<uint32_t>(prompts.size());
        sp.draft_vocab = 1024;
        auto target = target_context(model.get(), prompts.size(), 8);
        llama_context_params cp = llama_context_default_params();
        cp.n_threads = 1;
        cp.n_threads_batch = 1;
        auto draft = make_draft_context(target.get(), nullptr, sp, cp);
        session s(target.get(), draft.get(), sp);
        ASSERT_EQ(s.params().draft_vocab, 1024);
        const generation_result r = generate(s, prompts, greedy());
        for (size_t i = 0; i < prompts.size(); ++i) {
            EXPECT_EQ(first_difference(r.sequences[i].tokens, ref[i]), -1) << "MTP k = 8, draft vocabulary 1024: sequence " << i;
            EXPECT_GT(r.sequences[i].stats.n_drafted, 0u);
        }
    }
}

// Every weight type llama.cpp's quantizer writes, on the same targets: the
// kernels differ per type (the IQ grid types' panel for 8 rows or more, the
// repacked Q2_K, Q4_K, IQ4_NL and MXFP4 gemm for groups of 4 rows, llamafile's
// sgemm for the legacy types), so each is checked apart. A cell: the
// reference (each prompt alone), plain decoding of all prompts batched, and
// for each draft length k, MTP speculation over all prompts and replayed
// verification of k + 1 rows per prompt. In ctest: k = 8 (27 rows a batch,
// and several rows per expert), one thread, an F16 cache, 128 tokens, on the
// types SPECDEC_NEAR_TIE_TYPES names (default: those below). With
// SPECDEC_NEAR_TIE_MATRIX=1 (scripts/exactness-matrix.sh) each cell runs
// k = 1, 3 and 8, at 1, 2 and 4 threads, with F16, Q8_0 and Q4_0 caches.
std::vector<weight_type> near_tie_types() {
    const char * env = std::getenv("SPECDEC_NEAR_TIE_TYPES");
    std::vector<weight_type> types;
    if (env != nullptr && std::string(env) == "all") {
        for (const auto & i : fixtures::weight_types()) {
            types.push_back(i.type);
        }
        return types;
    }
    // The kernels the NearTies suite does not reach: the IQ grid types'
    // panel beside IQ4_XS's aligned vec_dot (iq4_xs) and beside the others'
    // (iq3_s, which needs no importance matrix), repacked Q2_K (AVX512),
    // IQ4_NL and MXFP4, and sgemm's BF16.
    std::string list = env != nullptr ? env : "iq4_xs,iq3_s,q2_k,iq4_nl,mxfp4_moe,bf16";
    for (size_t at = 0; at < list.size();) {
        const size_t comma = std::min(list.find(',', at), list.size());
        if (const fixtures::weight_type_info * i = fixtures::find_weight_type(list.substr(at, comma - at))) {
            types.push_back(i->type);
        }
        at = comma + 1;
    }
    return types;
}

bool full_matrix() {
    const char * env = std::getenv("SPECDEC_NEAR_TIE_MATRIX");
    return env != nullptr && std::string(env) == "1";
}

class NearTiesTypes : public ::testing::TestWithParam<std::tuple<trunk, weight_type>> {};

TEST_P(NearTiesTypes, SpeculationAndBatchingGivePlainDecodingsTokens) {
    const auto [t, type] = GetParam();
    auto model = load_model(target_file(t, type));
    generate_params gp = greedy();
    gp.n_predict = 128;
    const bool matrix = full_matrix();
    const std::vector<int32_t> thread_counts = matrix ? std::vector<int32_t>{1, 2, 4} : std::vector<int32_t>{1};
    const std::vector<ggml_type> caches =
        matrix ? std::vector<ggml_type>{GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0} : std::vector<ggml_type>{GGML_TYPE_F16};
    const std::vector<int> draft_lengths = matrix ? std::vector<int>{1, 3, 8} : std::vector<int>{8};
    for (const int32_t n_threads : thread_counts) {
        for (const ggml_type kv : caches) {
            SCOPED_TRACE(std::to_string(n_threads) + " thread(s), cache " + ggml_type_name(kv));
            std::vector<std::vector<llama_token>> ref;
            for (const auto & p : prompts) {
                auto ctx = target_context(model.get(), 1, 0, kv, n_threads);
                ref.push_back(generate_plain(ctx.get(), std::span(&p, 1), gp).sequences[0].tokens);
                EXPECT_GT(std::set<llama_token>(ref.back().begin(), ref.back().end()).size(), 8u);
            }
            {
                auto ctx = target_context(model.get(), prompts.size(), 0, kv, n_threads);
                const generation_result r = generate_plain(ctx.get(), prompts, gp);
                for (size_t i = 0; i < prompts.size(); ++i) {
                    EXPECT_EQ(first_difference(r.sequences[i].tokens, ref[i]), -1) << "plain, all prompts batched: sequence " << i;
                }
            }
            for (const int k : draft_lengths) {
                auto target = target_context(model.get(), prompts.size(), k, kv, n_threads);
                const generation_result r = mtp_generate(target.get(), k, prompts, gp);
                for (size_t i = 0; i < prompts.size(); ++i) {
                    EXPECT_EQ(first_difference(r.sequences[i].tokens, ref[i]), -1) << "MTP k = " << k << ": sequence " << i;
                    EXPECT_GT(r.sequences[i].stats.n_drafted, 0u);
                }
                EXPECT_EQ(replay_verification(model.get(), ref, k, kv, n_threads), "") << "replayed verification, k = " << k;
            }
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Types, NearTiesTypes,
                         ::testing::Combine(::testing::Values(trunk::dense, trunk::moe, trunk::hybrid),
                                            ::testing::ValuesIn(near_tie_types())),
                         [](const auto & tc) {
                             return std::string(trunk_name(std::get<0>(tc.param))) + "_" + type_name(std::get<1>(tc.param));
                         });

// A quantized KV cache (-ctk / -ctv q8_0 or q4_0: how long contexts fit a
// CPU's memory) changes the attention's arithmetic, so it gets the same
// check: plain decoding batched and MTP speculation (k = 3 over all
// sequences, k = 8 over one) give each prompt's tokens decoded alone with
// the same cache, on the dense, MoE and hybrid targets at Q8_0.
class NearTiesKvCache : public ::testing::TestWithParam<std::tuple<trunk, ggml_type>> {};

TEST_P(NearTiesKvCache, SpeculationAndBatchingGivePlainDecodingsTokens) {
    const auto [t, kv] = GetParam();
    auto model = load_model(target_file(t, weight_type::q8_0));
    generate_params gp = greedy();
    gp.n_predict = 128;
    const std::vector<std::vector<llama_token>> ref = alone_tokens(model.get(), kv, gp);
    for (const auto & tokens : ref) {
        EXPECT_GT(std::set<llama_token>(tokens.begin(), tokens.end()).size(), 8u);
    }
    {
        auto ctx = target_context(model.get(), prompts.size(), 0, kv);
        const generation_result r = generate_plain(ctx.get(), prompts, gp);
        for (size_t s = 0; s < prompts.size(); ++s) {
            EXPECT_EQ(first_difference(r.sequences[s].tokens, ref[s]), -1) << "plain, all prompts batched: sequence " << s;
        }
    }
    for (const auto & [k, n_seq] : {std::pair{3, prompts.size()}, std::pair{8, size_t{1}}}) {
        auto target = target_context(model.get(), n_seq, k, kv);
        const generation_result r =
            mtp_generate(target.get(), k, std::vector<std::vector<llama_token>>(prompts.begin(), prompts.begin() + n_seq), gp);
        for (size_t i = 0; i < n_seq; ++i) {
            EXPECT_EQ(first_difference(r.sequences[i].tokens, ref[i]), -1) << "MTP k = " << k << ", " << n_seq << " sequence(s): sequence " << i;
            EXPECT_GT(r.sequences[i].stats.n_drafted, 0u);
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Caches, NearTiesKvCache,
                         ::testing::Combine(::testing::Values(trunk::dense, trunk::moe, trunk::hybrid),
                                            ::testing::Values(GGML_TYPE_Q8_0, GGML_TYPE_Q4_0)),
                         [](const auto & tc) {
                             return std::string(trunk_name(std::get<0>(tc.param))) + "_kv_" + ggml_type_name(std::get<1>(tc.param));
                         });

// A unified KV cache (kv_unified: one cache whose cells every sequence
// shares, so a sequence's cells lie among the others') cannot batch exactly:
// attention sums a row's keys in cell order (the tiled kernel of F16/F32
// caches also groups them in 64-cell tiles), and where a sequence's cells
// fall depends on the others. Under exact kernels several sequences on such
// a cache are refused, plain and speculative, for every cache type; one
// sequence, or fast kernels, runs. docs/robustness.md.
class NearTiesUnifiedKv : public ::testing::TestWithParam<ggml_type> {};

TEST_P(NearTiesUnifiedKv, SeveralSequencesAreRefusedUnderExactKernels) {
    const ggml_type kv = GetParam();
    auto model = load_model(target_file(trunk::dense, weight_type::q8_0));
    generate_params gp = greedy();
    gp.n_predict = 16;
    const std::vector<std::vector<llama_token>> ref = alone_tokens(model.get(), kv, gp);
    const auto unified = [&](int n_draft) {
        context_options o;
        o.type_k = kv;
        o.type_v = kv;
        o.kv_unified = true;
        o.n_ctx = 512 * static_cast<uint32_t>(prompts.size());
        o.n_seq_max = static_cast<uint32_t>(prompts.size());
        o.n_rs_seq = static_cast<uint32_t>(n_draft);
        return make_context(model.get(), o);
    };
    const auto expect_refused = [](const std::function<void()> & run, const char * what) {
        try {
            run();
            ADD_FAILURE() << what << ": not refused";
        } catch (const error & e) {
            EXPECT_EQ(e.code(), SPECDEC_STATUS_UNAVAILABLE) << what;
            EXPECT_NE(std::string(e.what()).find("kv_unified"), std::string::npos) << what << ": " << e.what();
        }
    };
    ASSERT_TRUE(specdec_exact_kernels());
    {
        auto ctx = unified(0);
        expect_refused([&] { generate_plain(ctx.get(), prompts, gp); }, "plain, all prompts batched");
        expect_refused([&] { engine e(ctx.get(), specdec_engine_default_params(), {}); }, "an engine of every sequence");
        // One sequence has the cache to itself: its tokens alone.
        const generation_result one = generate_plain(ctx.get(), std::span(prompts).first(1), gp);
        EXPECT_EQ(first_difference(one.sequences[0].tokens, ref[0]), -1);
    }
    auto target = unified(3);
    expect_refused([&] { mtp_generate(target.get(), 3, prompts, gp); }, "MTP k = 3");
    const generation_result fast = [&] {
        const fast_kernels kernels;
        return generate_plain(unified(0).get(), prompts, gp);
    }();
    for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(fast.sequences[i].tokens.size(), ref[i].size()) << "fast kernels run: sequence " << i;
    }
}

INSTANTIATE_TEST_SUITE_P(Caches, NearTiesUnifiedKv, ::testing::Values(GGML_TYPE_F16, GGML_TYPE_Q8_0),
                         [](const auto & tc) { return std::string("kv_") + ggml_type_name(tc.param); });

// Three turns of a conversation on one engine with two slots (a stranger's
// request runs beside the first turn): the second turn's prompt continues
// all the first turn holds, the third's leaves the first answer a third of
// the way in. Each turn's tokens must be its prompt's decoded alone on a
// fresh context, and the reused counts what the memory allows: an
// attention cache cuts back anywhere, the hybrid's recurrent state goes back
// to where the first prompt ended. Then the same on one slot with the
// prompt cache: the stranger takes the slot after the first turn, and the
// second turn has the first's state loaded back from host memory.
TEST_P(NearTies, AReusedPrefixGivesAFreshPrefillsTokens) {
    const auto [t, type] = GetParam();
    auto model = load_model(target_file(t, type));
    constexpr int n_turn = 96;
    generate_params gp = greedy();
    gp.n_predict = n_turn;
    // The second turn also asks for log-probabilities, which must be plain decoding's.
    generate_params with_logprobs = gp;
    with_logprobs.n_top_logprobs = 5;
    const auto alone_result = [&](const std::vector<llama_token> & prompt, const generate_params & p) {
        auto ctx = target_context(model.get(), 1, 0);
        return generate_plain(ctx.get(), std::span(&prompt, 1), p).sequences[0];
    };
    const auto alone = [&](const std::vector<llama_token> & prompt) { return alone_result(prompt, gp).tokens; };
    const std::vector<llama_token> & turn1 = prompts[0];
    const std::vector<llama_token> out1 = alone(turn1);
    std::vector<llama_token> turn2 = turn1;
    turn2.insert(turn2.end(), out1.begin(), out1.end());
    turn2.insert(turn2.end(), {500, 7, 4000});
    std::vector<llama_token> turn3(turn1);
    turn3.insert(turn3.end(), out1.begin(), out1.begin() + n_turn / 3);
    turn3.insert(turn3.end(), {42, 3});
    const sequence_result ref2 = alone_result(turn2, with_logprobs);
    const std::vector<llama_token> & out2 = ref2.tokens;
    const std::vector<llama_token> out3 = alone(turn3);

    for (const auto & [speculative, cached] : {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
        SCOPED_TRACE(std::string(speculative ? "MTP k = 3" : "plain") + (cached ? ", one slot and the prompt cache" : ""));
        auto target = target_context(model.get(), 2, 3);
        session_params sp = specdec_session_default_params();
        sp.strategy = SPECDEC_STRATEGY_MTP;
        sp.n_draft_max = 3;
        sp.n_seq = 2;
        llama_context_params cp = llama_context_default_params();
        cp.n_threads = 1;
        cp.n_threads_batch = 1;
        llama_context_ptr draft;
        std::optional<session> s;
        if (speculative) {
            draft = make_draft_context(target.get(), nullptr, sp, cp);
            s.emplace(target.get(), draft.get(), sp);
        }
        std::map<request_id, request_result> done;
        const event_callback on_event = [&](const engine_event & e) {
            if (e.type == SPECDEC_ENGINE_EVENT_FINISHED) {
                done[e.id] = *e.result;
            }
            return true;
        };
        engine_params ep = specdec_engine_default_params();
        ep.n_seq = cached ? 1 : 2;
        ep.prompt_cache_bytes = cached ? UINT64_MAX : 0;
        ASSERT_TRUE(ep.reuse_prompts);
        std::optional<engine> engine_slot;
        if (speculative) {
            engine_slot.emplace(*s, ep, on_event);
        } else {
            engine_slot.emplace(target.get(), ep, on_event);
        }
        engine & e = *engine_slot;
        const request_id first = e.add(turn1, gp);
        const request_id stranger = e.add(prompts[2], gp);
        e.run_until_idle();
        ASSERT_EQ(first_difference(done.at(first).output.tokens, out1), -1);
        ASSERT_EQ(first_difference(done.at(stranger).output.tokens, alone(prompts[2])), -1);

        const request_id second = e.add(turn2, with_logprobs);
        e.run_until_idle();
        const request_result & r2 = done.at(second);
        ASSERT_EQ(r2.output.logprobs.size(), ref2.logprobs.size());
        ASSERT_EQ(r2.output.top_logprobs.size(), ref2.top_logprobs.size());
        for (size_t i = 0; i < ref2.logprobs.size(); ++i) {
            EXPECT_NEAR(r2.output.logprobs[i], ref2.logprobs[i], 1e-4) << "log-probability of token " << i;
        }
        for (size_t i = 0; i < ref2.top_logprobs.size(); ++i) {
            EXPECT_EQ(r2.output.top_logprobs[i].token, ref2.top_logprobs[i].token) << "alternative " << i % 5 << " of token " << i / 5;
            EXPECT_NEAR(r2.output.top_logprobs[i].logprob, ref2.top_logprobs[i].logprob, 1e-4);
        }
        EXPECT_EQ(r2.seq_id, done.at(first).seq_id) << "the conversation's slot";
        // Everything the first turn left: its prompt and answer less the last
        // answer token, which was drawn but never decoded.
        EXPECT_EQ(r2.n_prompt_cached, turn1.size() + out1.size() - 1);
        EXPECT_EQ(first_difference(r2.output.tokens, out2), -1) << "second turn";

        const request_id third = e.add(turn3, gp);
        e.run_until_idle();
        const request_result & r3 = done.at(third);
        EXPECT_EQ(r3.n_prompt_cached, t == trunk::hybrid ? turn1.size() : turn1.size() + n_turn / 3);
        EXPECT_EQ(first_difference(r3.output.tokens, out3), -1) << "third turn";
    }
}

INSTANTIATE_TEST_SUITE_P(Targets, NearTies,
                         ::testing::Combine(::testing::Values(trunk::dense, trunk::moe, trunk::hybrid),
                                            ::testing::Values(weight_type::f16, weight_type::q8_0, weight_type::q4_0,
                                                              weight_type::q4_k_m)),
                         [](const auto & tc) {
                             return std::string(trunk_name(std::get<0>(tc.param))) + "_" + type_name(std::get<1>(tc.param));
                         });

} // namespace
} // namespace specdec::test

namespace specdec::test {
namespace {

// Grammars, logit biases and penalties on a target where rounding decides
// tokens: MTP speculation (random heads: drafts rejected and rolled back
// all along) chooses exactly what plain decoding with the same request
// does, and the grammar holds (every piece made of the letters it allows).
TEST(NearTiesShaping, AGrammarBiasesAndPenaltiesKeepSpeculationLossless) {
    auto model = load_model(target_file(trunk::dense, weight_type::q4_k_m));
    const llama_vocab * vocab = llama_model_get_vocab(model.get());
    const specdec_logit_bias bias[] = {{500, 4.0f}, {7, -INFINITY}};
    std::vector<std::pair<std::string, generate_params>> requests;
    generate_params base = greedy();
    base.n_predict = 96;
    generate_params grammar = base;
    grammar.grammar = "root ::= [a-e]+";
    grammar.ignore_eog = false;
    requests.emplace_back("grammar", grammar);
    generate_params shaped = base;
    shaped.logit_bias = bias;
    shaped.n_logit_bias = 2;
    shaped.frequency_penalty = 0.4f;
    shaped.presence_penalty = 0.2f;
    shaped.repeat_penalty = 1.3f;
    requests.emplace_back("biases and penalties", shaped);
    for (const auto & [name, p] : requests) {
        SCOPED_TRACE(name);
        auto plain_ctx = target_context(model.get(), 1, 0);
        const sequence_result want = generate_plain(plain_ctx.get(), std::span(&prompts[1], 1), p).sequences[0];
        ASSERT_GE(want.tokens.size(), 8u);
        session_params sp = specdec_session_default_params();
        sp.strategy = SPECDEC_STRATEGY_MTP;
        sp.n_draft_max = 3;
        sp.n_seq = 1;
        auto target = target_context(model.get(), 1, 3);
        llama_context_params cp = llama_context_default_params();
        cp.n_threads = 1;
        cp.n_threads_batch = 1;
        auto draft = make_draft_context(target.get(), nullptr, sp, cp);
        session s(target.get(), draft.get(), sp);
        const sequence_result got = generate(s, std::span(&prompts[1], 1), p).sequences[0];
        EXPECT_EQ(first_difference(got.tokens, want.tokens), -1);
        EXPECT_GT(got.stats.n_drafted, 0u);
        if (name == "grammar") {
            for (const llama_token t : want.tokens) {
                const std::string piece = token_to_piece(vocab, t);
                ASSERT_FALSE(piece.empty());
                for (const char c : piece) {
                    EXPECT_TRUE(c >= 'a' && c <= 'e') << "token " << t << ": '" << piece << "'";
                }
            }
        } else {
            EXPECT_EQ(std::count(want.tokens.begin(), want.tokens.end(), 7), 0) << "a -inf bias";
        }
    }
    // Without the grammar the text leaves those letters: the grammar did something.
    auto ctx = target_context(model.get(), 1, 0);
    const sequence_result free = generate_plain(ctx.get(), std::span(&prompts[1], 1), base).sequences[0];
    EXPECT_NE(free.text.find_first_not_of("abcde"), std::string::npos);
}

} // namespace
} // namespace specdec::test
