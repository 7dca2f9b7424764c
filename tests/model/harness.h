// Shared helpers of the model tier: generated fixtures, contexts, and a
// minimal greedy speculative loop used to observe a session's behaviour.
#pragma once

#include "fixtures.h"
#include "specdec/specdec.hpp"

#include "llama-cpp.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace specdec::test {

// Path of a generated fixture in the build's fixture directory, written on
// first use by any test process. `name` must identify the writer and its
// options.
std::string fixture(const std::string & name, const std::function<void(const std::string &)> & writer);

// Writes an MTP target of `arch` ("qwen35": the hybrid; else glm4moe) with `opt` to `path`.
void write_mtp_target(const std::string & arch, const std::string & path, const fixtures::fixture_options & opt);

llama_model_ptr load_model(const std::string & path);

struct context_options {
    uint32_t           n_ctx     = 256;
    uint32_t           n_batch   = 64;
    uint32_t           n_ubatch  = 64;
    uint32_t           n_seq_max = 1;
    uint32_t           n_rs_seq  = 0;
    uint32_t           n_outputs_max_per_seq = 0; // 0: no limit below n_outputs_max
    bool               kv_unified = false; // one KV cache shared by every sequence
    ggml_type          type_k    = GGML_TYPE_F16; // the KV cache's types (-ctk, -ctv): a quantized V needs flash attention, on by default (auto)
    ggml_type          type_v    = GGML_TYPE_F16;
    llama_context_type type      = LLAMA_CONTEXT_TYPE_DEFAULT;
    llama_context *    other     = nullptr; // ctx_other (e.g. the target of a draft context)
    int32_t            n_threads = 1;       // decoding threads (n_threads and n_threads_batch)
};

// Exact kernels off (specdec_set_exact_kernels) while it lives, then as
// they were: for what exact kernels refuse, such as several sequences on a
// unified KV cache.
class fast_kernels {
public:
    fast_kernels() : was_(specdec_exact_kernels()) { specdec_set_exact_kernels(false); }
    ~fast_kernels() { specdec_set_exact_kernels(was_); }
    fast_kernels(const fast_kernels &) = delete;
    fast_kernels & operator=(const fast_kernels &) = delete;

private:
    bool was_;
};

// Throws std::runtime_error when llama.cpp refuses the parameters.
llama_context_ptr make_context(llama_model * model, const context_options & opt);

// A llama_batch the test owns; add() appends one token of one sequence.
class test_batch {
public:
    explicit test_batch(int32_t capacity, int32_t n_seq_max = 1) : b(llama_batch_init(capacity, 0, n_seq_max)) {}
    ~test_batch() { llama_batch_free(b); }
    test_batch(const test_batch &) = delete;
    test_batch & operator=(const test_batch &) = delete;

    void clear() { b.n_tokens = 0; }
    void add(llama_token t, llama_pos pos, llama_seq_id seq, bool logits) {
        const int32_t i = b.n_tokens++;
        b.token[i] = t;
        b.pos[i] = pos;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = seq;
        b.logits[i] = logits;
    }
    llama_batch b;
};

int32_t argmax(const float * logits, int32_t n_vocab);

// Plain greedy decoding by the target alone: `n_predict` tokens after `prompt`.
std::vector<llama_token> plain_greedy(llama_context * ctx, const std::vector<llama_token> & prompt, int n_predict);

// The tokens `successor` predicts after `prompt`.
std::vector<llama_token> expected_cycle(llama_token last, int n, uint32_t n_vocab);

struct spec_run {
    std::vector<llama_token> tokens;          // exactly n_predict tokens
    std::vector<int>         proposed;        // per step: proposal length
    std::vector<int>         accepted;        // per step: accepted prefix length
    std::vector<std::vector<llama_token>> proposals; // per step: the proposal
    llama_pos                n_past  = 0;     // after the last step (tokens may run past n_predict)
    llama_token              id_last = 0;     // next token to decode after the last step
    int total_proposed() const;
    int total_accepted() const;
};

// Greedy speculative decoding of one sequence through `s`: prefill,
// then draft -> verify in one target batch -> accept -> drop rejected
// positions, until n_predict tokens exist.
spec_run spec_greedy(session & s, const std::vector<llama_token> & prompt, int n_predict, llama_seq_id seq = 0);

// Continues a run from a quiescent point: n_past tokens are in the target,
// id_last is the next token to decode.
spec_run spec_continue(session & s, llama_pos n_past, llama_token id_last, int n_predict, llama_seq_id seq = 0);

// Runs `f` and returns the specdec status it throws (SPECDEC_STATUS_OK if none).
specdec_status status_of(const std::function<void()> & f);

} // namespace specdec::test
