// The forward passes llama.cpp makes of a multi-sequence batch, counted in
// the target's own graph computations (an eval callback sees the first
// block's input norm once a pass, with that pass's rows), against what the
// adaptive controller predicts from the backend's description of the
// context (forward_passes, generation_backend::split), for a cache with a
// stream per sequence and a unified one.
#include "draft-length.h"
#include "fixtures.h"
#include "generation-backend.h"

#include "llama-cpp.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

namespace specdec::test {
namespace {

// Rows of every pass the target computed since the last clear().
struct pass_counter {
    std::vector<int32_t> rows;
    static bool observe(ggml_tensor * t, bool ask, void * self) {
        if (std::strcmp(t->name, "attn_norm-0") != 0) {
            return !ask; // a tensor not asked for: keep computing
        }
        if (!ask) {
            static_cast<pass_counter *>(self)->rows.push_back(static_cast<int32_t>(t->ne[1]));
        }
        return true;
    }
};

class ForwardPasses : public ::testing::TestWithParam<bool> {};

TEST_P(ForwardPasses, AreThoseTheControllerPredicts) {
    const bool unified = GetParam();
    char path[] = "/tmp/specdec-test-passes-XXXXXX";
    close(mkstemp(path));
    fixtures::write_llama_target(path, {});
    llama_model_ptr model(llama_model_load_from_file(path, llama_model_default_params()));
    unlink(path);
    ASSERT_NE(model, nullptr);
    pass_counter counter;
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = 8 * 64;
    cp.n_batch = 64;
    cp.n_ubatch = 16; // small enough that one shape below needs two passes of a run
    cp.n_seq_max = 8;
    cp.kv_unified = unified;
    cp.n_threads = 1;
    cp.n_threads_batch = 1;
    cp.cb_eval = pass_counter::observe;
    cp.cb_eval_user_data = &counter;
    llama_context_ptr ctx(llama_init_from_model(model.get(), cp));
    ASSERT_NE(ctx, nullptr);
    const detail::batch_split split = detail::make_plain_backend(ctx.get())->split();
    EXPECT_EQ(split.by_sequence_runs, !unified);
    EXPECT_EQ(split.n_ubatch, 16);

    llama_batch batch = llama_batch_init(64, 0, 1);
    std::vector<llama_pos> n_past(8, 0);
    const std::vector<std::vector<int32_t>> shapes = {
        {1, 1, 1, 1, 0, 0, 0, 0}, // a plain step of four consecutive sequences
        {1, 0, 1, 0, 1, 0, 1, 0}, // ... with gaps between their ids
        {2, 2, 2, 2, 0, 0, 0, 0}, // each drafting one
        {2, 1, 1, 2, 0, 0, 0, 0}, // unequal drafts
        {9, 1, 1, 1, 1, 1, 1, 1}, // one sequence drafting eight
        {5, 5, 5, 5, 0, 0, 0, 0}, // more rows than one pass holds
    };
    for (const std::vector<int32_t> & rows : shapes) {
        batch.n_tokens = 0;
        for (size_t s = 0; s < rows.size(); ++s) {
            for (int32_t k = 0; k < rows[s]; ++k) {
                const int32_t i = batch.n_tokens++;
                batch.token[i] = 1 + k;
                batch.pos[i] = n_past[s]++;
                batch.n_seq_id[i] = 1;
                batch.seq_id[i][0] = static_cast<llama_seq_id>(s);
                batch.logits[i] = true;
            }
        }
        counter.rows.clear();
        ASSERT_EQ(llama_decode(ctx.get(), batch), 0);
        EXPECT_EQ(counter.rows, detail::forward_passes(rows, split)) << ::testing::PrintToString(rows);
    }
    llama_batch_free(batch);
}

INSTANTIATE_TEST_SUITE_P(Caches, ForwardPasses, ::testing::Values(false, true),
                         [](const auto & p) { return p.param ? "Unified" : "StreamPerSequence"; });

} // namespace
} // namespace specdec::test
