// The generation loop's edges on generated fixtures: a decode aborted
// mid-run (C++ and C), the context limit with a unified and with separate KV
// caches, and a moved-from session.
#include "harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>

namespace specdec::test {
namespace {

constexpr uint32_t n_vocab = 128;
const std::vector<std::vector<llama_token>> prompts = {{20, 21, 22, 23, 24}, {90, 7, 8}};

std::string llama_target() {
    return fixture("llama-target-2-256", [](const std::string & p) { fixtures::write_llama_target(p, {}); });
}

std::string mtp_target() {
    fixtures::fixture_options opt;
    opt.drafter = fixtures::drafter_kind::wrong_every_k; // accepted and rejected drafts
    return fixture("glm4moe-mtp-wrong", [&](const std::string & p) { fixtures::write_glm4moe_mtp(p, opt); });
}

bool is_prefix(const std::vector<llama_token> & part, const std::vector<llama_token> & whole) {
    return part.size() <= whole.size() && std::equal(part.begin(), part.end(), whole.begin());
}

// An MTP session over two sequences whose target decodes abort while `abort` is set.
struct aborting_mtp {
    explicit aborting_mtp() {
        sp.n_draft_max = 3;
        sp.n_seq = 2;
        model = load_model(mtp_target());
        context_options t;
        t.n_seq_max = 2;
        target = make_context(model.get(), t);
        llama_context_params cp = llama_context_default_params();
        cp.n_threads = 1;
        cp.n_threads_batch = 1;
        draft = make_draft_context(target.get(), nullptr, sp, cp);
        llama_set_abort_callback(target.get(), [](void * flag) { return *static_cast<bool *>(flag); }, &abort);
    }
    generation_result reference(const generate_params & gp) const {
        auto ctx = make_context(model.get(), {.n_seq_max = 2});
        return generate_plain(ctx.get(), prompts, gp);
    }
    bool sequences_empty() const {
        llama_memory_t mem = llama_get_memory(target.get());
        llama_memory_t dmem = llama_get_memory(draft.get());
        for (llama_seq_id s = 0; s < 2; ++s) {
            if (llama_memory_seq_pos_max(mem, s) != -1 || llama_memory_seq_pos_max(dmem, s) != -1) {
                return false;
            }
        }
        return true;
    }

    session_params    sp = specdec_session_default_params();
    llama_model_ptr   model;
    llama_context_ptr target;
    llama_context_ptr draft;
    bool              abort = false;
};

TEST(GenerateFailure, AnAbortedDecodeKeepsThePrefixAndTheSessionStaysUsable) {
    aborting_mtp m;
    generate_params gp = specdec_generate_default_params();
    gp.n_predict = 40;
    const generation_result ref = m.reference(gp);
    session s(m.target.get(), m.draft.get(), m.sp);

    // Sequence 0's tenth token raises the flag: the next target decode aborts.
    int n0 = 0;
    bool raised = false;
    try {
        generate(s, prompts, gp, [&](llama_seq_id seq, llama_token, std::string_view) {
            if (seq == 0 && ++n0 == 10) {
                m.abort = true;
            }
            return true;
        });
    } catch (const generation_error & e) {
        raised = true;
        EXPECT_EQ(e.code(), SPECDEC_STATUS_DECODE_FAILED);
        ASSERT_EQ(e.partial().sequences.size(), 2u);
        for (size_t i = 0; i < 2; ++i) {
            const sequence_result & r = e.partial().sequences[i];
            EXPECT_EQ(r.stop, SPECDEC_STOP_ERROR) << "sequence " << i;
            EXPECT_TRUE(is_prefix(r.tokens, ref.sequences[i].tokens)) << "sequence " << i;
            EXPECT_EQ(r.text, ref.sequences[i].text.substr(0, r.text.size()));
            EXPECT_LT(r.tokens.size(), 40u);
        }
        EXPECT_GE(e.partial().sequences[0].tokens.size(), 10u);
    }
    ASSERT_TRUE(raised) << "generate did not fail";
    EXPECT_TRUE(s.is_quiescent());
    EXPECT_TRUE(m.sequences_empty());

    m.abort = false;
    const generation_result again = generate(s, prompts, gp);
    for (size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(again.sequences[i].tokens, ref.sequences[i].tokens) << "sequence " << i;
        EXPECT_EQ(again.sequences[i].tokens, expected_cycle(prompts[i].back(), 40, n_vocab));
        EXPECT_EQ(again.sequences[i].stop, SPECDEC_STOP_BUDGET);
    }
    EXPECT_TRUE(s.is_quiescent());
}

struct c_abort {
    bool * flag;
    int    n0;
};

bool raise_at_ten(llama_seq_id seq, llama_token, const char *, size_t, void * user_data) {
    auto * a = static_cast<c_abort *>(user_data);
    if (seq == 0 && ++a->n0 == 10) {
        *a->flag = true;
    }
    return true;
}

TEST(GenerateFailure, TheCApiHandsOutThePartialGenerationWithTheStatus) {
    aborting_mtp m;
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = 40;
    const generation_result ref = m.reference(gp);
    specdec_session * s = nullptr;
    ASSERT_EQ(specdec_session_init(m.target.get(), m.draft.get(), &m.sp, &s), SPECDEC_STATUS_OK);
    const llama_token * ptrs[2] = {prompts[0].data(), prompts[1].data()};
    const size_t sizes[2] = {prompts[0].size(), prompts[1].size()};

    c_abort a{&m.abort, 0};
    specdec_generation * g = nullptr;
    EXPECT_EQ(specdec_generate(s, nullptr, ptrs, sizes, 2, &gp, raise_at_ten, &a, &g), SPECDEC_STATUS_DECODE_FAILED);
    EXPECT_NE(std::string(specdec_last_error()), "");
    ASSERT_NE(g, nullptr);
    ASSERT_EQ(specdec_generation_n_sequences(g), 2u);
    for (size_t i = 0; i < 2; ++i) {
        size_t n = 0;
        const llama_token * t = specdec_generation_tokens(g, i, &n);
        ASSERT_NE(t, nullptr);
        EXPECT_TRUE(is_prefix(std::vector<llama_token>(t, t + n), ref.sequences[i].tokens)) << "sequence " << i;
        EXPECT_EQ(specdec_generation_stop_reason(g, i), SPECDEC_STOP_ERROR);
        if (i == 0) {
            EXPECT_GE(n, 10u);
        }
    }
    specdec_generation_free(g);
    EXPECT_TRUE(specdec_session_is_quiescent(s));
    EXPECT_TRUE(m.sequences_empty());

    m.abort = false;
    g = nullptr;
    ASSERT_EQ(specdec_generate(s, nullptr, ptrs, sizes, 2, &gp, nullptr, nullptr, &g), SPECDEC_STATUS_OK);
    for (size_t i = 0; i < 2; ++i) {
        size_t n = 0;
        const llama_token * t = specdec_generation_tokens(g, i, &n);
        EXPECT_EQ(std::vector<llama_token>(t, t + n), ref.sequences[i].tokens) << "sequence " << i;
        EXPECT_EQ(specdec_generation_stop_reason(g, i), SPECDEC_STOP_BUDGET);
    }
    specdec_generation_free(g);
    specdec_session_free(s);
}

// Three sequences run into the end of their positions: with one cache
// shared by all (kv_unified) each has a third of it, with separate caches
// n_ctx_seq each. Plain and speculative (MTP) decoding stop cleanly, losslessly.
// (Exact kernels refuse several sequences on a unified cache: fast ones here.)
class ContextLayouts : public ::testing::TestWithParam<bool> {};

TEST_P(ContextLayouts, EverySequenceStopsAtItsShare) {
    const bool unified = GetParam();
    std::optional<fast_kernels> fast;
    if (unified) {
        fast.emplace();
    }
    const std::vector<std::vector<llama_token>> three = {{20, 21, 22, 23, 24}, {90, 7, 8}, {50, 51, 60, 61, 62, 63, 64}};
    auto model = load_model(mtp_target());
    context_options o;
    o.n_ctx = 256;
    o.n_seq_max = 3;
    o.kv_unified = unified;
    generate_params gp = specdec_generate_default_params();
    gp.n_predict = 1000;

    auto plain_ctx = make_context(model.get(), o);
    const int64_t share = unified ? llama_n_ctx(plain_ctx.get()) / 3 : llama_n_ctx_seq(plain_ctx.get());
    EXPECT_EQ(llama_n_ctx_seq(plain_ctx.get()), 256u);
    const generation_result plain = generate_plain(plain_ctx.get(), three, gp);

    auto spec_ctx = make_context(model.get(), o);
    session_params sp = specdec_session_default_params();
    sp.n_seq = 3;
    sp.n_draft_max = 4;
    llama_context_params cp = llama_context_default_params();
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    cp.kv_unified = unified;
    auto draft = make_draft_context(spec_ctx.get(), nullptr, sp, cp);
    session s(spec_ctx.get(), draft.get(), sp);
    const generation_result spec = generate(s, three, gp);

    for (size_t i = 0; i < three.size(); ++i) {
        const auto n = static_cast<size_t>(share - static_cast<int64_t>(three[i].size() - 1));
        EXPECT_EQ(plain.sequences[i].stop, SPECDEC_STOP_CONTEXT) << "sequence " << i;
        EXPECT_EQ(plain.sequences[i].tokens.size(), n) << "sequence " << i;
        EXPECT_EQ(plain.sequences[i].tokens, expected_cycle(three[i].back(), static_cast<int>(n), n_vocab));
        EXPECT_EQ(spec.sequences[i].stop, SPECDEC_STOP_CONTEXT) << "sequence " << i;
        EXPECT_EQ(spec.sequences[i].tokens, plain.sequences[i].tokens) << "sequence " << i;
    }
    EXPECT_GT(spec.sequences[0].stats.n_accepted, 0u);
}

INSTANTIATE_TEST_SUITE_P(KvCache, ContextLayouts, ::testing::Values(true, false),
                         [](const auto & tc) { return tc.param ? std::string("unified") : std::string("separate"); });

TEST(SessionMove, GettersOfAMovedFromSessionThrow) {
    auto model = load_model(llama_target());
    auto ctx = make_context(model.get(), {});
    session_params sp = specdec_session_default_params();
    sp.strategy = SPECDEC_STRATEGY_NGRAM_SIMPLE;
    session a(ctx.get(), nullptr, sp);
    session b(std::move(a));
    EXPECT_EQ(status_of([&] { static_cast<void>(a.params()); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { static_cast<void>(a.is_quiescent()); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { static_cast<void>(a.reads_target_features()); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { static_cast<void>(a.target_context()); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { static_cast<void>(a.draft_context()); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { static_cast<void>(a.stats()); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { static_cast<void>(a.n_nextn_heads()); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    // So do the operations.
    const std::vector<llama_token> prompt = {3, 4, 5};
    const draft_request request{0, 3, 6, -1, nullptr};
    EXPECT_EQ(status_of([&] { a.begin(0, prompt); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { a.draft(std::span<const draft_request>(&request, 1)); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { static_cast<void>(a.proposal(0)); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { a.accept(0, 0); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { static_cast<void>(a.state(0)); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { a.set_nextn_head(0); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { a.remove_range(SPECDEC_CONTEXT_TARGET, 0, -1, -1); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    // The session it moved to works, and the moved-from one can take another.
    EXPECT_EQ(b.target_context(), ctx.get());
    EXPECT_TRUE(b.is_quiescent());
    a = std::move(b);
    EXPECT_EQ(a.params().strategy, SPECDEC_STRATEGY_NGRAM_SIMPLE);
    EXPECT_EQ(status_of([&] { static_cast<void>(b.params()); }), SPECDEC_STATUS_INVALID_ARGUMENT);
}

// Plain decoding of `prompt` with `gp`, which MTP speculation (3 tokens a
// step, drafts rejected where shaping forces another token) must repeat:
// the same tokens, text and stop. Returns plain decoding's result.
sequence_result plain_equals_mtp(llama_model * model, const std::vector<std::vector<llama_token>> & prompt, const generate_params & gp) {
    auto ctx = make_context(model, {});
    const sequence_result want = generate_plain(ctx.get(), prompt, gp).sequences[0];
    session_params sp = specdec_session_default_params();
    sp.strategy = SPECDEC_STRATEGY_MTP;
    sp.n_draft_max = 3;
    sp.n_seq = 1;
    auto target = make_context(model, {});
    llama_context_params cp = llama_context_default_params();
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    auto draft = make_draft_context(target.get(), nullptr, sp, cp);
    session s(target.get(), draft.get(), sp);
    const sequence_result got = generate(s, prompt, gp).sequences[0];
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.text, want.text);
    EXPECT_EQ(got.stop, want.stop);
    EXPECT_GT(got.stats.n_drafted, 0u);
    return want;
}

// A lazy grammar (triggers) and a grammar prefix, as chat templates' tool
// calls use them: free text until a trigger matches, the grammar from the
// match on; a prefix the grammar reads before the output. MTP speculation
// (drafts kept and rejected) chooses exactly what plain decoding does. The
// target continues "123" with "456789:;..."; where the grammar forbids its
// choice, every allowed token ties at 0 and the lowest id wins: </s> (id 2)
// once the grammar may end, else the lowest character.
TEST(GrammarModes, ALazyGrammarStartsAtItsTriggerAndAPrefixIsReadFirst) {
    auto model = load_model(mtp_target());
    const std::vector<std::vector<llama_token>> prompt = {{20, 21, 22}}; // "123"
    const auto both = [&](const generate_params & gp) { return plain_equals_mtp(model.get(), prompt, gp); };
    generate_params base = specdec_generate_default_params();
    base.n_predict = 12;
    const char * seven[] = {"7"};

    generate_params lazy = base;
    lazy.grammar = "root ::= \"7\" \"z\"+";
    lazy.grammar_triggers = seven;
    lazy.n_grammar_triggers = 1;
    sequence_result r = both(lazy);
    EXPECT_EQ(r.text, "4567z") << "free until the trigger, then the grammar";
    EXPECT_EQ(r.stop, SPECDEC_STOP_EOG);
    generate_params eager = lazy;
    eager.n_grammar_triggers = 0;
    EXPECT_EQ(both(eager).text, "7z") << "without triggers the grammar holds from the first token";

    generate_params prefixed = base;
    prefixed.grammar = "root ::= \"12\" [0-9]+";
    prefixed.grammar_prefix = "12";
    r = both(prefixed);
    EXPECT_EQ(r.text, "456789") << "the prefix is read, the digits follow";
    EXPECT_EQ(r.stop, SPECDEC_STOP_EOG);
    prefixed.grammar_prefix = nullptr;
    EXPECT_EQ(both(prefixed).text.substr(0, 2), "12") << "without it the output spells it";

    // A trigger whose text the grammar refuses ends the request there.
    generate_params leaving = base;
    leaving.grammar = "root ::= \"x\"+";
    const char * six[] = {"6"};
    leaving.grammar_triggers = six;
    leaving.n_grammar_triggers = 1;
    r = both(leaving);
    EXPECT_EQ(r.text, "456");
    EXPECT_EQ(r.stop, SPECDEC_STOP_ERROR);

    // Refused before anything runs: a prefix the grammar refuses, triggers with a prefix or without a grammar.
    auto ctx = make_context(model.get(), {});
    generate_params bad = prefixed;
    bad.grammar_prefix = "ab";
    EXPECT_EQ(status_of([&] { generate_plain(ctx.get(), prompt, bad); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    bad = lazy;
    bad.grammar_prefix = "7";
    EXPECT_EQ(status_of([&] { generate_plain(ctx.get(), prompt, bad); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    bad = lazy;
    bad.grammar = nullptr;
    EXPECT_EQ(status_of([&] { generate_plain(ctx.get(), prompt, bad); }), SPECDEC_STATUS_INVALID_ARGUMENT);
}

// A reasoning budget (issue 44), as llama.cpp's: the fixture's target
// continues "123" with "456789:;<=>?@ABC..."; with "<=>" opening a block and
// "[\]" closing it, a budget of 5 lets "?@ABC" through, then forces "[\]"
// (after a message, when there is one); the target continues from ']' with
// "^_`". A block opened by reasoning_prefix counts from the first token. A
// lazy grammar does not apply inside a block: its trigger "?" starts
// nothing there, and "^" after the block does (its grammar then ends the
// output as in GrammarModes). MTP speculation, its drafts
// rejected where tokens are forced, writes what plain decoding writes.
TEST(ReasoningBudget, ForcesTheEndOnceSpentAsPlainDecodingDoes) {
    auto model = load_model(mtp_target());
    const std::vector<std::vector<llama_token>> prompt = {{20, 21, 22}}; // "123"
    const auto both = [&](const generate_params & gp) { return plain_equals_mtp(model.get(), prompt, gp); };
    generate_params p = specdec_generate_default_params();
    p.n_predict = 22;
    EXPECT_EQ(both(p).text, "456789:;<=>?@ABCDEFGHI") << "unconstrained";
    p.reasoning_start = "<=>";
    p.reasoning_end = "[\\]";
    EXPECT_EQ(both(p).text, "456789:;<=>?@ABCDEFGHI") << "markers without a budget change nothing";
    p.reasoning_budget = 5;
    EXPECT_EQ(both(p).text, "456789:;<=>?@ABC[\\]^_`") << "5 tokens of reasoning, then the end forced";
    p.reasoning_budget = 0;
    EXPECT_EQ(both(p).text, "456789:;<=>[\\]^_`abcde") << "closed at once";
    p.reasoning_budget = 2;
    p.reasoning_budget_message = "xy";
    EXPECT_EQ(both(p).text, "456789:;<=>?@xy[\\]^_`a") << "the message, then the end";
    p.reasoning_budget_message = nullptr;
    p.reasoning_prefix = "<=>"; // the block opened before the output
    p.reasoning_budget = 3;
    EXPECT_EQ(both(p).text, "456[\\]^_`abcdefghijklm");
    p.reasoning_prefix = nullptr;
    p.reasoning_budget = -1;
    // A lazy grammar: its trigger "?" inside the block starts nothing; "^" after it (a second trigger) does.
    const char * triggers[] = {"\\?", "\\^"};
    p.grammar = "root ::= \"^\" \"z\"+";
    p.grammar_triggers = triggers;
    p.n_grammar_triggers = 2;
    p.reasoning_budget = 5;
    EXPECT_EQ(both(p).text, "456789:;<=>?@ABC[\\]^z") << "then the end of generation, which the grammar allows";
    // Refused before anything runs.
    auto ctx = make_context(model.get(), {});
    generate_params bad = specdec_generate_default_params();
    bad.reasoning_budget = 3;
    EXPECT_EQ(status_of([&] { generate_plain(ctx.get(), prompt, bad); }), SPECDEC_STATUS_INVALID_ARGUMENT) << "a budget without markers";
    bad.reasoning_start = "<=>";
    EXPECT_EQ(status_of([&] { generate_plain(ctx.get(), prompt, bad); }), SPECDEC_STATUS_INVALID_ARGUMENT) << "one marker";
    bad.reasoning_end = "[\\]";
    bad.reasoning_budget = -2;
    EXPECT_EQ(status_of([&] { generate_plain(ctx.get(), prompt, bad); }), SPECDEC_STATUS_INVALID_ARGUMENT);
}

// Issue 43: a grammar nested 100,000 deep (200 KB) overflowed the stack in
// llama.cpp's recursive parser. specdec_logit_shaping_validate refuses it
// with a status, and at the limits llama.cpp parses on this thread's stack:
// groups nested SPECDEC_MAX_GRAMMAR_NESTING deep, and a chain of rules each
// beginning with the next (its parser, left-recursion check and matcher
// recurse once per rule) as long as SPECDEC_MAX_GRAMMAR_RULES allows.
TEST(GrammarLimits, TheCAbiRefusesDeepGrammarsAndParsesAtTheLimits) {
    auto model = load_model(mtp_target());
    const llama_vocab * vocab = llama_model_get_vocab(model.get());
    const auto status = [&](const std::string & grammar) {
        specdec_generate_params p = specdec_generate_default_params();
        p.grammar = grammar.c_str();
        return specdec_logit_shaping_validate(vocab, &p);
    };
    const auto groups = [](size_t depth) { return "root ::= " + std::string(depth, '(') + "\"1\"" + std::string(depth, ')'); };
    const auto chain = [](size_t n) {
        std::string g = "root ::= r1\n";
        for (size_t i = 1; i < n; ++i) {
            g += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
        }
        return g + "r" + std::to_string(n) + " ::= \"1\"\n";
    };
    EXPECT_EQ(status(groups(SPECDEC_MAX_GRAMMAR_NESTING)), SPECDEC_STATUS_OK) << specdec_last_error();
    EXPECT_EQ(status(chain(SPECDEC_MAX_GRAMMAR_RULES - 1)), SPECDEC_STATUS_OK) << specdec_last_error();
    EXPECT_EQ(status(groups(50000)), SPECDEC_STATUS_INVALID_ARGUMENT); // 100 KB: under the size limit
    EXPECT_NE(std::string(specdec_last_error()).find("deeper than"), std::string::npos) << specdec_last_error();
    EXPECT_EQ(status(chain(6000)), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(specdec_last_error()).find("rules"), std::string::npos) << specdec_last_error();
    EXPECT_EQ(status(groups(100000)), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_NE(std::string(specdec_last_error()).find("bytes"), std::string::npos) << specdec_last_error();
    EXPECT_EQ(status("root ::= \"1\" (((("), SPECDEC_STATUS_INVALID_ARGUMENT) << "does not parse";
    EXPECT_EQ(specdec_logit_shaping_validate(nullptr, nullptr), SPECDEC_STATUS_INVALID_ARGUMENT);

    // The longest chain still constrains generation: it allows "1" only (the target would write "4").
    auto ctx = make_context(model.get(), {});
    const std::string g = chain(SPECDEC_MAX_GRAMMAR_RULES - 1);
    generate_params p = specdec_generate_default_params();
    p.n_predict = 1;
    p.grammar = g.c_str();
    const std::vector<std::vector<llama_token>> prompt = {{20, 21, 22}}; // "123"
    EXPECT_EQ(generate_plain(ctx.get(), prompt, p).sequences[0].text, "1");
}

// What a C engine callback saw.
struct c_engine_log {
    bool *                                            abort_at_ten = nullptr; // raised at request 1's 10th token
    std::map<specdec_request_id, int>                 n_tokens;
    std::map<specdec_request_id, std::vector<llama_token>> tokens;
    std::map<specdec_request_id, specdec_stop_reason> stop;
};

bool log_c_event(const specdec_engine_event * e, void * user_data) {
    auto * log = static_cast<c_engine_log *>(user_data);
    if (e->type == SPECDEC_ENGINE_EVENT_TOKEN) {
        if (++log->n_tokens[e->id] == 10 && e->id == 1 && log->abort_at_ten != nullptr) {
            *log->abort_at_ten = true;
        }
    } else {
        log->tokens[e->id].assign(e->tokens, e->tokens + e->n_tokens);
        log->stop[e->id] = e->stop;
    }
    return true;
}

TEST(EngineCApi, RequestsJoinFailAndRunAgainThroughTheCAbi) {
    aborting_mtp m;
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = 40;
    const generation_result ref = m.reference(gp);
    specdec_session * s = nullptr;
    ASSERT_EQ(specdec_session_init(m.target.get(), m.draft.get(), &m.sp, &s), SPECDEC_STATUS_OK);
    specdec_engine_params ep = specdec_engine_default_params();
    ep.max_waiting = 1;
    c_engine_log log;
    specdec_engine * e = nullptr;
    ASSERT_EQ(specdec_engine_init(s, nullptr, &ep, log_c_event, &log, &e), SPECDEC_STATUS_OK);

    // Joining: request 2 comes two steps after request 1.
    specdec_request_id id[2] = {0, 0};
    ASSERT_EQ(specdec_engine_add(e, prompts[0].data(), prompts[0].size(), &gp, &id[0]), SPECDEC_STATUS_OK);
    EXPECT_EQ(specdec_engine_step(e), SPECDEC_STATUS_OK);
    EXPECT_EQ(specdec_engine_step(e), SPECDEC_STATUS_OK);
    ASSERT_EQ(specdec_engine_add(e, prompts[1].data(), prompts[1].size(), &gp, &id[1]), SPECDEC_STATUS_OK);
    EXPECT_EQ(specdec_engine_step(e), SPECDEC_STATUS_OK);
    // Both slots taken: one request may wait (max_waiting 1), the next is refused.
    specdec_request_id waiting = 0, refused = 0;
    ASSERT_EQ(specdec_engine_add(e, prompts[0].data(), prompts[0].size(), &gp, &waiting), SPECDEC_STATUS_OK);
    EXPECT_EQ(specdec_engine_add(e, prompts[1].data(), prompts[1].size(), &gp, &refused), SPECDEC_STATUS_QUEUE_FULL);
    EXPECT_EQ(specdec_engine_cancel(e, waiting), SPECDEC_STATUS_OK); // it never runs
    EXPECT_EQ(specdec_engine_run_until_idle(e), SPECDEC_STATUS_OK);
    EXPECT_EQ(log.stop[waiting], SPECDEC_STOP_CANCELLED);
    EXPECT_TRUE(log.tokens[waiting].empty());
    EXPECT_FALSE(specdec_engine_has_work(e));
    for (size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(log.tokens[id[i]], ref.sequences[i].tokens) << "request " << i;
        EXPECT_EQ(log.stop[id[i]], SPECDEC_STOP_BUDGET);
    }
    EXPECT_EQ(specdec_engine_cancel(e, waiting + 1), SPECDEC_STATUS_UNKNOWN_REQUEST);
    EXPECT_EQ(specdec_engine_cancel(e, id[0]), SPECDEC_STATUS_OK); // finished: nothing happens
    specdec_engine_free(e); // the next engine takes the same slots

    // A step whose decode is aborted fails the running requests; the next run works.
    c_engine_log failing;
    failing.abort_at_ten = &m.abort;
    specdec_engine * f = nullptr;
    ASSERT_EQ(specdec_engine_init(s, nullptr, &ep, log_c_event, &failing, &f), SPECDEC_STATUS_OK);
    specdec_request_id fid = 0;
    ASSERT_EQ(specdec_engine_add(f, prompts[0].data(), prompts[0].size(), &gp, &fid), SPECDEC_STATUS_OK);
    EXPECT_EQ(specdec_engine_run_until_idle(f), SPECDEC_STATUS_DECODE_FAILED);
    EXPECT_EQ(failing.stop[fid], SPECDEC_STOP_ERROR);
    EXPECT_TRUE(is_prefix(failing.tokens[fid], ref.sequences[0].tokens));
    EXPECT_GE(failing.tokens[fid].size(), 10u);
    EXPECT_TRUE(specdec_session_is_quiescent(s));
    EXPECT_TRUE(m.sequences_empty());
    m.abort = false;
    failing.abort_at_ten = nullptr;
    ASSERT_EQ(specdec_engine_add(f, prompts[0].data(), prompts[0].size(), &gp, &fid), SPECDEC_STATUS_OK);
    EXPECT_EQ(specdec_engine_run_until_idle(f), SPECDEC_STATUS_OK);
    EXPECT_EQ(failing.tokens[fid], ref.sequences[0].tokens);
    specdec_engine_free(f);
    specdec_session_free(s);
}

} // namespace
} // namespace specdec::test
