// Session rules on real contexts: compatibility checks, lifecycle errors,
// malformed batches, and exact checkpoint/restore. Every failing call must
// leave the session and its contexts usable.
#include "drafter-model.h"
#include "harness.h"

#include <gtest/gtest.h>

namespace specdec::test {
namespace {

using fixtures::drafter_kind;

const std::vector<llama_token> prompt = {20, 21, 22, 23, 24};
constexpr uint32_t n_vocab = 128;

std::string qwen35_exact() {
    return fixture("qwen35-mtp-exact", [](const std::string & p) { fixtures::write_qwen35_mtp(p, {}); });
}

std::string glm4moe_exact() {
    return fixture("glm4moe-mtp-exact", [](const std::string & p) { fixtures::write_glm4moe_mtp(p, {}); });
}

session_params mtp_params(int n_draft, uint32_t n_seq = 1) {
    session_params sp = specdec_session_default_params();
    sp.strategy = SPECDEC_STRATEGY_MTP;
    sp.n_draft_max = n_draft;
    sp.n_seq = n_seq;
    return sp;
}

struct mtp_setup {
    explicit mtp_setup(const std::string & path, context_options t = {}, context_options d = {}) : model(load_model(path)) {
        target = make_context(model.get(), t);
        d.type = LLAMA_CONTEXT_TYPE_MTP;
        d.other = target.get();
        draft = make_context(model.get(), d);
    }
    llama_model_ptr   model;
    llama_context_ptr target;
    llama_context_ptr draft;
};

context_options with_rs(uint32_t n_rs, uint32_t n_seq = 1) {
    context_options o;
    o.n_rs_seq = n_rs;
    o.n_seq_max = n_seq;
    return o;
}

// Greedy generation of `n` tokens after `prompt` through the library's loop
// with an exact drafter: every draft accepted, as many steps as the
// construction implies.
void expect_exact_generation(session & s, int n_draft, int n) {
    generate_params gp = specdec_generate_default_params();
    gp.n_predict = n;
    const std::vector<std::vector<llama_token>> prompts = {prompt};
    const generation_result out = generate(s, prompts, gp);
    EXPECT_EQ(out.sequences.at(0).tokens, expected_cycle(prompt.back(), n, n_vocab));
    const fixtures::fixture_options exact;
    const specdec_sequence_stats want = reference_generation(exact, prompt[prompt.size() - 2], prompt.back(), n_draft, n, false);
    EXPECT_EQ(want.n_accepted, want.n_drafted);
    expect_stats_eq(out.sequences.at(0).stats, want);
}

// After a rejected construction the same contexts must still serve a
// session, step by step and through the library's loop.
void expect_contexts_usable(llama_context * target, llama_context * draft, int n_draft) {
    {
        session s(target, draft, mtp_params(n_draft));
        const spec_run run = spec_greedy(s, prompt, 12);
        EXPECT_EQ(run.tokens, expected_cycle(prompt.back(), 12, n_vocab));
    }
    session s(target, draft, mtp_params(n_draft));
    expect_exact_generation(s, n_draft, 12);
}

// --- compatibility --------------------------------------------------------------

TEST(Compatibility, MtpDraftContextMustBeOfMtpType) {
    auto model = load_model(glm4moe_exact());
    auto target = make_context(model.get(), {});
    auto draft = make_context(model.get(), {}); // default type
    EXPECT_EQ(status_of([&] { session s(target.get(), draft.get(), mtp_params(2)); }), SPECDEC_STATUS_WRONG_CONTEXT_TYPE);
}

TEST(Compatibility, TargetContextMustBeOfDefaultType) {
    mtp_setup m(glm4moe_exact());
    context_options o;
    o.type = LLAMA_CONTEXT_TYPE_MTP;
    auto mtp_as_target = make_context(m.model.get(), o);
    EXPECT_EQ(status_of([&] { session s(mtp_as_target.get(), m.draft.get(), mtp_params(2)); }),
              SPECDEC_STATUS_WRONG_CONTEXT_TYPE);
    expect_contexts_usable(m.target.get(), m.draft.get(), 2);
}

TEST(Compatibility, SequenceCapacity) {
    mtp_setup m(glm4moe_exact());
    EXPECT_EQ(status_of([&] { session s(m.target.get(), m.draft.get(), mtp_params(2, 2)); }), SPECDEC_STATUS_SEQ_CAPACITY);
    expect_contexts_usable(m.target.get(), m.draft.get(), 2);
}

TEST(Compatibility, BatchMustHoldTheVerification) {
    context_options small;
    small.n_batch = 4;
    small.n_ubatch = 4;
    mtp_setup m(glm4moe_exact(), small, small);
    EXPECT_EQ(status_of([&] { session s(m.target.get(), m.draft.get(), mtp_params(4)); }), SPECDEC_STATUS_BATCH_CAPACITY);
    expect_contexts_usable(m.target.get(), m.draft.get(), 3);
}

TEST(Compatibility, RecurrentTargetNeedsRollbackSlots) {
    mtp_setup m(qwen35_exact(), with_rs(1), with_rs(1));
    EXPECT_EQ(status_of([&] { session s(m.target.get(), m.draft.get(), mtp_params(2)); }), SPECDEC_STATUS_RECURRENT_SLOTS);
    expect_contexts_usable(m.target.get(), m.draft.get(), 1);
}

TEST(Compatibility, MtpDraftMustRunOnTheTargetModel) {
    mtp_setup a(glm4moe_exact());
    mtp_setup b(glm4moe_exact());
    EXPECT_EQ(status_of([&] { session s(a.target.get(), b.draft.get(), mtp_params(2)); }), SPECDEC_STATUS_MODEL_UNSUPPORTED);
}

TEST(Compatibility, DraftContextArguments) {
    mtp_setup m(glm4moe_exact());
    EXPECT_EQ(status_of([&] { session s(m.target.get(), nullptr, mtp_params(2)); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { session s(nullptr, m.draft.get(), mtp_params(2)); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    EXPECT_EQ(status_of([&] { session s(m.target.get(), m.target.get(), mtp_params(2)); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    session_params ngram = mtp_params(2);
    ngram.strategy = SPECDEC_STRATEGY_NGRAM_SIMPLE;
    EXPECT_EQ(status_of([&] { session s(m.target.get(), m.draft.get(), ngram); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    session_params bad = mtp_params(0);
    EXPECT_EQ(status_of([&] { session s(m.target.get(), m.draft.get(), bad); }), SPECDEC_STATUS_INVALID_CONFIG);
    expect_contexts_usable(m.target.get(), m.draft.get(), 2);
}

// --- lifecycle ------------------------------------------------------------------

class Lifecycle : public ::testing::Test {
protected:
    Lifecycle() : m(glm4moe_exact(), with_rs(0, 2), with_rs(0, 2)), s(m.target.get(), m.draft.get(), mtp_params(3, 2)) {}

    // Prefills seq 0 and drafts once, leaving a pending 3-token proposal.
    void prefill_and_draft() {
        run = spec_greedy(s, prompt, 4);
        const draft_request r{0, run.n_past, run.id_last, -1, nullptr};
        s.draft({&r, 1});
        ASSERT_EQ(s.proposal(0).size(), 3u);
    }

    mtp_setup m;
    session s;
    spec_run run;
};

TEST_F(Lifecycle, DraftWhilePendingIsRefused) {
    prefill_and_draft();
    const draft_request r{0, run.n_past, run.id_last, -1, nullptr};
    EXPECT_EQ(status_of([&] { s.draft({&r, 1}); }), SPECDEC_STATUS_PROPOSAL_PENDING);
    EXPECT_FALSE(s.is_quiescent());
    EXPECT_EQ(status_of([&] { s.begin(0, prompt); }), SPECDEC_STATUS_PROPOSAL_PENDING);
    EXPECT_EQ(status_of([&] { (void) s.state(0); }), SPECDEC_STATUS_PROPOSAL_PENDING);
    EXPECT_EQ(status_of([&] { s.remove_range(SPECDEC_CONTEXT_TARGET, 0, 0, -1); }), SPECDEC_STATUS_PROPOSAL_PENDING);
}

TEST_F(Lifecycle, AcceptNeedsAProposalAndAtMostItsLength) {
    EXPECT_EQ(status_of([&] { s.accept(0, 0); }), SPECDEC_STATUS_NO_PROPOSAL);
    prefill_and_draft();
    EXPECT_EQ(status_of([&] { s.accept(0, 4); }), SPECDEC_STATUS_ACCEPTED_TOO_MANY);
    EXPECT_EQ(status_of([&] { s.accept(1, 0); }), SPECDEC_STATUS_NO_PROPOSAL);
    s.accept(0, 0); // still pending after the refusals
    EXPECT_TRUE(s.is_quiescent());
    EXPECT_EQ(status_of([&] { s.accept(0, 0); }), SPECDEC_STATUS_NO_PROPOSAL);
}

TEST_F(Lifecycle, SequenceIdsAreRangeChecked) {
    const draft_request r{2, 0, 5, -1, nullptr};
    EXPECT_EQ(status_of([&] { s.draft({&r, 1}); }), SPECDEC_STATUS_BAD_SEQ_ID);
    EXPECT_EQ(status_of([&] { s.accept(-1, 0); }), SPECDEC_STATUS_BAD_SEQ_ID);
    EXPECT_EQ(status_of([&] { s.begin(7, prompt); }), SPECDEC_STATUS_BAD_SEQ_ID);
    EXPECT_EQ(status_of([&] { (void) s.proposal(2); }), SPECDEC_STATUS_BAD_SEQ_ID);
    EXPECT_EQ(status_of([&] { (void) s.state(2); }), SPECDEC_STATUS_BAD_SEQ_ID);
    EXPECT_EQ(status_of([&] { s.remove_range(SPECDEC_CONTEXT_DRAFT, 3, 0, -1); }), SPECDEC_STATUS_BAD_SEQ_ID);
}

TEST_F(Lifecycle, DraftRequestsAreValidatedBeforeDrafting) {
    run = spec_greedy(s, prompt, 4);
    const draft_request dup[2] = {{0, run.n_past, run.id_last, -1, nullptr}, {0, run.n_past, run.id_last, -1, nullptr}};
    EXPECT_EQ(status_of([&] { s.draft(dup); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    const draft_request bad_token{0, run.n_past, static_cast<llama_token>(n_vocab), -1, nullptr};
    EXPECT_EQ(status_of([&] { s.draft({&bad_token, 1}); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    const draft_request too_long{0, run.n_past, run.id_last, 4, nullptr};
    EXPECT_EQ(status_of([&] { s.draft({&too_long, 1}); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    const draft_request wrong_past{0, run.n_past - 1, run.id_last, -1, nullptr};
    EXPECT_EQ(status_of([&] { s.draft({&wrong_past, 1}); }), SPECDEC_STATUS_POSITION_MISMATCH);
    EXPECT_TRUE(s.is_quiescent());
    EXPECT_EQ(s.stats().n_draft, run.proposed.size()); // nothing was drafted by the refused calls
    // The session goes on as if nothing happened.
    const spec_run more = spec_continue(s, run.n_past, run.id_last, 8);
    EXPECT_EQ(more.tokens, expected_cycle(run.id_last, 8, n_vocab));
}

TEST_F(Lifecycle, ACappedRequestProposesAtMostItsCap) {
    run = spec_greedy(s, prompt, 4);
    const draft_request one{0, run.n_past, run.id_last, 1, nullptr};
    s.draft({&one, 1});
    EXPECT_EQ(s.proposal(0).size(), 1u);
    s.accept(0, 1);
}

TEST_F(Lifecycle, MalformedBatchesAreRefusedBeforeDecoding) {
    {
        test_batch bf(4, 2);
        bf.add(20, 0, 0, true);
        bf.add(21, 2, 0, true); // position jump
        EXPECT_EQ(status_of([&] { s.decode_target_and_process(bf.b); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    }
    {
        test_batch bf(4, 2);
        bf.add(20, 0, 0, true);
        bf.add(20, 0, 1, true);
        bf.add(21, 1, 0, true); // sequence 0 not contiguous
        EXPECT_EQ(status_of([&] { s.decode_target_and_process(bf.b); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    }
    {
        test_batch bf(4, 2);
        bf.add(20, 0, 0, true);
        bf.b.n_seq_id[0] = 2; // a token in two sequences
        bf.b.seq_id[0][1] = 1;
        EXPECT_EQ(status_of([&] { s.decode_target_and_process(bf.b); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    }
    {
        test_batch bf(4, 2);
        bf.add(static_cast<llama_token>(n_vocab), 0, 0, true);
        EXPECT_EQ(status_of([&] { s.decode_target_and_process(bf.b); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    }
    {
        test_batch bf(4, 2);
        bf.add(20, 0, 5, true);
        EXPECT_EQ(status_of([&] { s.decode_target_and_process(bf.b); }), SPECDEC_STATUS_BAD_SEQ_ID);
    }
    {
        test_batch bf(4, 2);
        bf.add(20, 3, 0, true); // the session has seen no token of sequence 0
        EXPECT_EQ(status_of([&] { s.decode_target_and_process(bf.b); }), SPECDEC_STATUS_POSITION_MISMATCH);
    }
    {
        llama_token t = 20;
        llama_batch one = llama_batch_get_one(&t, 1); // no positions
        EXPECT_EQ(status_of([&] { s.process(one); }), SPECDEC_STATUS_INVALID_ARGUMENT);
    }
    {
        test_batch bf(80, 2);
        for (int i = 0; i < 65; ++i) {
            bf.add(20, i, 0, true);
        }
        EXPECT_EQ(status_of([&] { s.decode_target_and_process(bf.b); }), SPECDEC_STATUS_BATCH_CAPACITY);
    }
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(m.target.get()), 0), -1); // nothing reached the target
    const spec_run ok = spec_greedy(s, prompt, 8);
    EXPECT_EQ(ok.tokens, expected_cycle(prompt.back(), 8, n_vocab));
}

TEST(ContextLimit, DraftIsCappedThenRefusedAtTheEnd) {
    mtp_setup m(glm4moe_exact());
    session s(m.target.get(), m.draft.get(), mtp_params(4));
    const llama_pos n_ctx = static_cast<llama_pos>(llama_n_ctx_seq(m.target.get()));
    // A prompt that leaves room for id_last and two drafted tokens.
    std::vector<llama_token> long_prompt;
    for (llama_pos i = 0; i < n_ctx - 2; ++i) {
        long_prompt.push_back(fixtures::successor(i == 0 ? 10 : long_prompt.back(), n_vocab));
    }
    const llama_pos n_past = static_cast<llama_pos>(long_prompt.size()) - 1;
    spec_greedy(s, long_prompt, 0);
    const draft_request r{0, n_past, long_prompt.back(), -1, nullptr};
    s.draft({&r, 1});
    EXPECT_EQ(static_cast<llama_pos>(s.proposal(0).size()), n_ctx - n_past - 1); // 1 token of room
    s.accept(0, 0);
    // A sequence that fills the context cannot decode id_last.
    s.remove_range(SPECDEC_CONTEXT_TARGET, 0, -1, -1);
    s.remove_range(SPECDEC_CONTEXT_DRAFT, 0, -1, -1);
    for (int i = 0; i < 3; ++i) {
        long_prompt.push_back(fixtures::successor(long_prompt.back(), n_vocab));
    }
    spec_greedy(s, long_prompt, 0); // n_ctx tokens decoded, id_last has no position left
    const draft_request full{0, n_ctx, 5, -1, nullptr};
    EXPECT_EQ(status_of([&] { s.draft({&full, 1}); }), SPECDEC_STATUS_CONTEXT_FULL);
}

// --- checkpoint / restore -------------------------------------------------------

class Checkpoint : public ::testing::TestWithParam<drafter_kind> {};

TEST_P(Checkpoint, RestoreThenContinueRepeatsTokensAndAcceptance) {
    fixtures::fixture_options opt;
    opt.drafter = GetParam();
    const std::string kind = GetParam() == drafter_kind::hidden_only ? "hidden" : "wrong";
    for (const std::string arch : {"glm4moe", "qwen35"}) {
        SCOPED_TRACE(arch);
        const std::string path = fixture(arch + "-mtp-" + kind, [&](const std::string & p) {
            arch == "qwen35" ? fixtures::write_qwen35_mtp(p, opt) : fixtures::write_glm4moe_mtp(p, opt);
        });
        mtp_setup m(path, with_rs(3, 2), with_rs(3, 2));
        session s(m.target.get(), m.draft.get(), mtp_params(3, 2));
        const spec_run head = spec_greedy(s, prompt, 9);

        const std::vector<uint8_t> blob = s.state(0);
        const std::vector<uint8_t> tgt = s.context_state(SPECDEC_CONTEXT_TARGET, 0, 0);
        const std::vector<uint8_t> dft = s.context_state(SPECDEC_CONTEXT_DRAFT, 0, 0);

        const spec_run first = spec_continue(s, head.n_past, head.id_last, 20);

        s.remove_range(SPECDEC_CONTEXT_TARGET, 0, -1, -1);
        s.remove_range(SPECDEC_CONTEXT_DRAFT, 0, -1, -1);
        s.restore_context_state(SPECDEC_CONTEXT_TARGET, 0, 0, tgt);
        s.restore_context_state(SPECDEC_CONTEXT_DRAFT, 0, 0, dft);
        s.restore_state(0, blob);
        const spec_run second = spec_continue(s, head.n_past, head.id_last, 20);

        // Restored into the other sequence, as a prompt cache loads a
        // conversation into whichever slot is free: the same run.
        ASSERT_TRUE(s.can_move_sequences());
        s.restore_context_state(SPECDEC_CONTEXT_TARGET, 1, 0, tgt);
        s.restore_context_state(SPECDEC_CONTEXT_DRAFT, 1, 0, dft);
        s.restore_state(1, blob);
        const spec_run moved = spec_continue(s, head.n_past, head.id_last, 20, 1);
        EXPECT_EQ(moved.tokens, first.tokens);
        EXPECT_EQ(moved.proposed, first.proposed);
        EXPECT_EQ(moved.accepted, first.accepted);

        EXPECT_EQ(first.tokens, second.tokens);
        EXPECT_EQ(first.tokens, expected_cycle(head.id_last, 20, n_vocab));
        // The checkpoint carries the MTP hidden row the next draft starts
        // from, so the restored run drafts and accepts exactly as the first.
        EXPECT_EQ(first.proposed, second.proposed);
        EXPECT_EQ(first.accepted, second.accepted);
        if (GetParam() == drafter_kind::hidden_only) {
            // This drafter is right only when fed the carried row.
            ASSERT_FALSE(second.accepted.empty());
            EXPECT_EQ(second.accepted, std::vector<int>(second.accepted.size(), 1));
        }
    }
}

// wrong_every_k drafts from token embeddings, hidden_only from the target's
// hidden row carried over from the step before the checkpoint.
INSTANTIATE_TEST_SUITE_P(Drafters, Checkpoint, ::testing::Values(drafter_kind::wrong_every_k, drafter_kind::hidden_only),
                         [](const auto & tc) { return std::string(tc.param == drafter_kind::hidden_only ? "hidden" : "wrong"); });

TEST(CheckpointBlob, MismatchedBlobsAreRejectedAndChangeNothing) {
    mtp_setup m(glm4moe_exact(), with_rs(0, 2), with_rs(0, 2));
    session s(m.target.get(), m.draft.get(), mtp_params(3, 2));
    const spec_run head = spec_greedy(s, prompt, 6);
    const std::vector<uint8_t> blob = s.state(0);

    std::vector<uint8_t> truncated(blob.begin(), blob.end() - 1);
    EXPECT_EQ(status_of([&] { s.restore_state(0, truncated); }), SPECDEC_STATUS_STATE_MALFORMED);
    std::vector<uint8_t> oversized(static_cast<size_t>(SPECDEC_MAX_STATE_BYTES) + 1);
    EXPECT_EQ(status_of([&] { s.restore_state(0, oversized); }), SPECDEC_STATUS_STATE_TOO_LARGE);

    // A blob from a session with another configuration or strategy.
    mtp_setup other(glm4moe_exact(), with_rs(0, 2), with_rs(0, 2));
    session s2(other.target.get(), other.draft.get(), mtp_params(2, 2));
    spec_greedy(s2, prompt, 6);
    EXPECT_EQ(status_of([&] { s.restore_state(0, s2.state(0)); }), SPECDEC_STATUS_STATE_CONFIG);
    session_params ngram = mtp_params(3, 2);
    ngram.strategy = SPECDEC_STRATEGY_NGRAM_SIMPLE;
    auto plain_ctx = make_context(other.model.get(), with_rs(0, 2));
    session s3(plain_ctx.get(), nullptr, ngram);
    EXPECT_EQ(status_of([&] { s.restore_state(0, s3.state(0)); }), SPECDEC_STATUS_STATE_STRATEGY);
    // A drafter whose per-sequence state llama.cpp keeps to itself restores
    // a blob only into the sequence it was captured from.
    session_params map_k = ngram;
    map_k.strategy = SPECDEC_STRATEGY_NGRAM_MAP_K;
    auto map_ctx = make_context(other.model.get(), with_rs(0, 2));
    session s4(map_ctx.get(), nullptr, map_k);
    ASSERT_FALSE(s4.can_move_sequences());
    spec_greedy(s4, prompt, 6);
    const std::vector<uint8_t> map_blob = s4.state(0);
    EXPECT_EQ(status_of([&] { s4.restore_state(1, map_blob); }), SPECDEC_STATUS_STATE_SEQUENCE);
    EXPECT_EQ(status_of([&] { s4.restore_state(0, map_blob); }), SPECDEC_STATUS_OK);

    // Unchanged: the session continues exactly where it was.
    const spec_run more = spec_continue(s, head.n_past, head.id_last, 10);
    EXPECT_EQ(more.tokens, expected_cycle(head.id_last, 10, n_vocab));
    EXPECT_EQ(more.total_accepted(), more.total_proposed());
    // and its library loop still accepts every draft
    expect_exact_generation(s, 3, 10);
}

} // namespace
} // namespace specdec::test
