// Session internals that no greedy run exercises: drafter bytes in a
// checkpoint, the upstream logger level under concurrent session creation,
// a recurrent draft context that refuses to drop positions, and the
// feature outputs a session gives back to the contexts it borrowed.
#include "harness.h"

#include "llama-ext.h"
#include "log.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

namespace specdec::test {
namespace {

std::string llama_file() {
    return fixture("llama-target-2-256", [](const std::string & p) { fixtures::write_llama_target(p, {}); });
}
std::string qwen35_file() {
    return fixture("qwen35-mtp-exact", [](const std::string & p) { fixtures::write_qwen35_mtp(p, {}); });
}

session_params ngram_params() {
    session_params sp = specdec_session_default_params();
    sp.strategy = SPECDEC_STRATEGY_NGRAM_SIMPLE;
    return sp;
}

// Creates `n` sessions at once, each on its own thread and context.
void create_sessions_concurrently(llama_model * model, int n) {
    std::vector<std::thread> threads;
    std::vector<specdec_status> statuses(static_cast<size_t>(n), SPECDEC_STATUS_OK);
    for (int k = 0; k < n; ++k) {
        threads.emplace_back([&, k] {
            statuses[static_cast<size_t>(k)] = status_of([&] {
                llama_context_ptr ctx = make_context(model, {});
                session s(ctx.get(), nullptr, ngram_params());
            });
        });
    }
    for (auto & t : threads) {
        t.join();
    }
    for (specdec_status st : statuses) {
        EXPECT_EQ(st, SPECDEC_STATUS_OK);
    }
}

// Each test runs in its own process under ctest; the first session of the
// process silences the common logger, later ones leave the level alone.
TEST(UpstreamLog, SessionsSetTheLevelOnceAndKeepTheHostsLevel) {
    llama_model_ptr model = load_model(llama_file());
    create_sessions_concurrently(model.get(), 4);
    EXPECT_EQ(common_log_get_verbosity_thold(), -1);
    common_log_set_verbosity_thold(3); // the host's own logger, set after specdec's first session
    create_sessions_concurrently(model.get(), 4);
    EXPECT_EQ(common_log_get_verbosity_thold(), 3);
}

TEST(UpstreamLog, AChoiceMadeBeforeTheFirstSessionStays) {
    specdec_set_upstream_log_level(2);
    llama_model_ptr model = load_model(llama_file());
    create_sessions_concurrently(model.get(), 4);
    EXPECT_EQ(common_log_get_verbosity_thold(), 2);
}

// Replaces the drafter bytes at the end of a checkpoint (format in state-codec.h).
std::vector<uint8_t> with_drafter_bytes(std::vector<uint8_t> blob, size_t n) {
    uint64_t n_impl = 0;
    std::memcpy(&n_impl, blob.data() + blob.size() - 8, 8);
    EXPECT_EQ(n_impl, 0u); // the n-gram drafter keeps no state of its own
    blob.resize(blob.size() + n, 0xab);
    const uint64_t v = n;
    std::memcpy(blob.data() + blob.size() - n - 8, &v, 8);
    return blob;
}

// The MTP drafter has the target copy out every row's NextN hidden state;
// once its session ends, a decode copies none unless the host had asked for
// them before the session began.
TEST(FeatureOutputs, ASessionGivesTheTargetsOutputsBackAsItFoundThem) {
    llama_model_ptr model = load_model(qwen35_file());
    for (const bool host_asked : {false, true}) {
        context_options t;
        t.n_rs_seq = 2;
        llama_context_ptr target = make_context(model.get(), t);
        context_options d = t;
        d.type = LLAMA_CONTEXT_TYPE_MTP;
        d.other = target.get();
        llama_context_ptr draft = make_context(model.get(), d);
        if (host_asked) {
            llama_set_embeddings_nextn(target.get(), true, /*masked=*/false);
        }
        test_batch b(1);
        {
            session_params sp = specdec_session_default_params();
            sp.strategy = SPECDEC_STRATEGY_MTP;
            sp.n_draft_max = 2;
            session s(target.get(), draft.get(), sp);
            b.add(20, 0, 0, true);
            s.decode_target(b.b);
            EXPECT_NE(llama_get_embeddings_nextn(target.get()), nullptr) << "host asked: " << host_asked;
        }
        b.clear();
        b.add(21, 1, 0, true);
        ASSERT_EQ(llama_decode(target.get(), b.b), 0);
        EXPECT_EQ(llama_get_embeddings_nextn(target.get()) != nullptr, host_asked) << "host asked: " << host_asked;
    }
}

TEST(CheckpointBlob, DrafterBytesOfAnotherSizeAreRefused) {
    llama_model_ptr model = load_model(llama_file());
    llama_context_ptr ctx = make_context(model.get(), {});
    session s(ctx.get(), nullptr, ngram_params());
    const std::vector<llama_token> prompt = {10, 11, 12, 13};
    s.begin(0, prompt);
    const std::vector<uint8_t> good = s.state(0);
    s.begin(0, std::vector<llama_token>{20, 21});
    const std::vector<uint8_t> other = s.state(0);

    // llama.cpp would ignore these bytes and the restore would look fine.
    EXPECT_EQ(status_of([&] { s.restore_state(0, with_drafter_bytes(good, 12)); }), SPECDEC_STATUS_STATE_MALFORMED);
    EXPECT_EQ(s.state(0), other); // unchanged
    EXPECT_EQ(status_of([&] { s.restore_state(0, good); }), SPECDEC_STATUS_OK);
    EXPECT_EQ(s.state(0), good);
}

// A classic draft model with recurrent state (qwen35, hybrid) rolls back at
// most n_rs_seq tokens of its context. A processed batch that runs past the
// proposal by more than that cannot be cut back in accept(): a typed status,
// and the sequence is forgotten rather than left out of step with its drafter.
// (An MTP draft context never refuses: the NextN block is attention only.)
struct recurrent_draft_pair {
    static constexpr int n_draft = 2;
    llama_model_ptr   target_model = load_model(llama_file());
    llama_model_ptr   draft_model = load_model(qwen35_file());
    llama_context_ptr target = make_context(target_model.get(), {});
    llama_context_ptr draft = make_context(draft_model.get(), [] {
        context_options d;
        d.n_rs_seq = n_draft;
        return d;
    }());
    session s{target.get(), draft.get(), [] {
        session_params sp = specdec_session_default_params();
        sp.strategy = SPECDEC_STRATEGY_DRAFT;
        sp.n_draft_max = n_draft;
        return sp;
    }()};

    // Decodes and processes tokens first..first+n-1 (ids 20 + position) of sequence 0.
    void feed(llama_pos first, int n) {
        test_batch b(16);
        for (llama_pos p = first; p < first + n; ++p) {
            b.add(20 + p, p, 0, true);
        }
        s.decode_target_and_process(b.b);
    }
};

TEST(DraftMemory, ARefusedRollbackIsATypedStatusAndForgetsTheSequence) {
    recurrent_draft_pair pair;
    session & s = pair.s;
    llama_context_ptr & draft = pair.draft;
    pair.feed(0, 5);
    const draft_request req = {0, 5, 25, -1, nullptr};
    s.draft({&req, 1});
    ASSERT_FALSE(s.is_quiescent());
    // id_last and five more tokens: the drafter replays all six on its context.
    pair.feed(5, 6);
    EXPECT_EQ(status_of([&] { s.accept(0, 0); }), SPECDEC_STATUS_RECURRENT_SLOTS);
    EXPECT_TRUE(s.is_quiescent());
    const draft_request again = {0, 6, 26, -1, nullptr};
    EXPECT_EQ(status_of([&] { s.draft({&again, 1}); }), SPECDEC_STATUS_POSITION_MISMATCH);
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(draft.get()), 0), -1); // nothing left of it in the draft context
    EXPECT_EQ(status_of([&] { s.begin(0, std::vector<llama_token>{20, 21, 22, 23, 24, 25}); }), SPECDEC_STATUS_OK);
}

// The target's positions dropped, the draft context's not: drafting from the
// earlier position cannot cut the draft context back, which is a typed status
// with no proposal left, not a silent desynchronisation.
TEST(DraftMemory, DraftingBehindTheDraftContextIsATypedStatus) {
    recurrent_draft_pair pair;
    session & s = pair.s;
    pair.feed(0, 5);
    pair.feed(5, 6);
    s.remove_range(SPECDEC_CONTEXT_TARGET, 0, 6, -1);
    const draft_request req = {0, 6, 26, -1, nullptr};
    EXPECT_EQ(status_of([&] { s.draft({&req, 1}); }), SPECDEC_STATUS_RECURRENT_SLOTS);
    EXPECT_TRUE(s.is_quiescent());
    EXPECT_TRUE(s.proposal(0).empty());
    EXPECT_EQ(llama_memory_seq_pos_max(llama_get_memory(pair.draft.get()), 0), -1);
    EXPECT_EQ(status_of([&] { s.draft({&req, 1}); }), SPECDEC_STATUS_POSITION_MISMATCH);
}

} // namespace
} // namespace specdec::test
