// specdec's driver of a single trained MTP (NextN) head, used by the MTP
// strategy in place of llama.cpp's when the model has one head with a cache
// of its own (every architecture of pair-rules' single-block list).
//
// Why not llama.cpp's: its v0.5.0 driver drafts its configured maximum
// whatever a step asks (a one-token probe costs n_draft_max head passes,
// each with the full-vocabulary output), runs the head over every verified
// token, rejected ones included, even on steps that draft nothing, and keeps
// the hidden row it carries between steps private (no checkpoint holds it).
//
// How the head is fed: its cache holds, at target position j, the pair
// (token x_j, the target's NextN hidden row h_{j-1}); h_{-1} is zero. After
// every target decode the rows of the batch are only recorded (token,
// position, h). They reach the head's cache lazily, in one batch, right
// before the sequence drafts again, so that
//  - a sequence that drafts nothing pays a copy of n_embd floats per token
//    (its "off" state costs close to nothing), and catches up when it
//    drafts again: the cache ends up as if every token had been run (after
//    a long stretch, every token kept: see below);
//  - rejected tokens, cut by truncate(), are never run;
//  - the catch-up rows and the first draft row share one decode.
// A sequence that records 2 * kept_rows rows without drafting drops the
// oldest of them down to kept_rows, so memory stays bounded, and its
// positions in the head's cache, which llama.cpp extends only in order: the
// head then attends to the kept positions onwards (drafts may degrade, the
// output never changes). Running the rows instead costs one head block per
// token whatever is drafted (16 sequences drafting nothing, AMD EPYC: 0.95-
// 0.96 of plain decoding against 0.99-1.00 without it, one pair of runs;
// docs/results/2026-12-07-epyc-mtp-off-state-kept-rows.md).
//
// Single-threaded, like the session that owns it. Errors: specdec::error
// (NATIVE_FAILURE when a decode of the draft context fails).
#pragma once

#include "draft-vocab.h"
#include "specdec/specdec.hpp"

#include <memory>
#include <span>
#include <vector>

namespace specdec::detail {

class mtp_drafter {
public:
    // Rows a sequence that drafts nothing keeps recorded, at least (see above).
    static constexpr size_t kept_rows = 128;
    // Draft candidates the confidence of the top one is measured against (as
    // llama.cpp's MTP driver: the top-k 10 distribution).
    static constexpr int top_k = 10;

    // Whether this driver handles the pair: one NextN head, and a draft
    // context with a cache of its own (not sharing the target's).
    static bool handles(llama_context * target, llama_context * draft);

    // Borrows both contexts; turns on the NextN hidden-row outputs of both.
    // With `vocab` (a restricted draft vocabulary over the head's output
    // matrix), the head's decodes request no logits (llama.cpp then skips its
    // projection onto the whole vocabulary), read the head's hidden row of
    // every batch row instead, and project the drafting rows onto the subset.
    mtp_drafter(llama_context * target, llama_context * draft, uint32_t n_seq, float p_min, int32_t n_min,
                std::unique_ptr<draft_vocab> vocab = nullptr);

    // The restricted vocabulary in use, or null (the whole vocabulary).
    const draft_vocab * vocab() const { return vocab_.get(); }
    draft_vocab *       vocab() { return vocab_.get(); }

    // After the target decoded `batch` (validated by the session: one
    // sequence per token, contiguous positions per sequence): records its rows.
    void observe(const llama_batch & batch);

    // The target dropped positions >= p0 of `seq` (p0 <= 0: all of them).
    void truncate(llama_seq_id seq, llama_pos p0);

    // The target holds positions [0, n) of `seq`, decoded elsewhere: rows
    // not observed leave holes in the head's cache (drafts may degrade).
    void begin(llama_seq_id seq, llama_pos n);

    // Sequence `to` takes over what `from` recorded and carries, once the
    // caller has copied `from`'s cells of the head's cache into `to`;
    // `from` is left as never observed.
    void move(llama_seq_id from, llama_seq_id to);
    // The same, `from` keeping what it had: both go on from the same point.
    void copy(llama_seq_id from, llama_seq_id to);

    struct request {
        llama_seq_id seq;
        llama_pos    pos0;    // position of id_last: every position before it observed
        llama_token  id_last;
        int32_t      n_max;   // >= 1
        const specdec_draft_sampling * sampling; // null: greedy (validated, borrowed for the call)
    };
    // Drafts each request, stopping at n_max tokens or when the top
    // candidate's probability (within the top_k, at temperature 1) falls
    // below p_min; proposals shorter than n_min are emptied. A greedy request
    // drafts the top candidate; a sampling one draws from the top_k
    // candidates under its transforms, with the draw of its seed at the
    // token's position (rejection-sampler.h). out[r] receives request r's
    // tokens, probs[r][k] the distribution token k was drawn from (probs[r]
    // empty when greedy). With a restricted vocabulary, the candidates are
    // the subset's: q is the subset's distribution, renormalised. Leaves the drafted positions (pos0 onwards) in the
    // draft cache: the caller drops them.
    void draft(std::span<const request> requests, std::vector<std::vector<llama_token>> & out,
               std::vector<std::vector<std::vector<specdec_token_prob>>> & probs);

    // Runs every recorded row of `seq` into the head's cache.
    void flush(llama_seq_id seq);

    // The carried hidden row (the one the next draft starts from) with the
    // position it belongs to; state_size() bytes.
    std::vector<uint8_t> state(llama_seq_id seq) const;
    // Restores what state() wrote when the target holds `n_positions`
    // positions and the draft cache was restored to match them.
    void set_state(llama_seq_id seq, std::span<const uint8_t> bytes, llama_pos n_positions);
    size_t state_size() const;

private:
    struct sequence {
        llama_pos          n_run = 0;  // positions [0, n_run) have been offered to the head's cache
        std::vector<float> h_prev;     // target row h_{n_run - 1} (zero at the start)
        std::vector<llama_token> tokens; // recorded, not run: positions n_run, n_run + 1, ...
        std::vector<float> h;          // their target rows, n_embd each
        llama_pos end() const { return n_run + static_cast<llama_pos>(tokens.size()); }
    };

    // The batch under construction (token and embedding rows together).
    void clear_batch();
    void add_row(llama_token token, llama_pos pos, llama_seq_id seq, const float * embd, bool output);
    void decode_batch(const char * what);
    // Appends the first `count` recorded rows of `seq` (all, when fewer) to
    // the batch and marks them run.
    void add_recorded(sequence & s, llama_seq_id seq, size_t count);
    // The first `count` (>= 1, at most all) recorded rows of `s` leave the
    // record: n_run moves past them, h_prev becomes the last one's row.
    void pass_recorded(sequence & s, size_t count);
    // Drops any cells of `seq` from position p onwards in the draft cache.
    void drop_cells(llama_seq_id seq, llama_pos p);

    llama_context * target_;
    llama_context * draft_;
    int32_t         n_embd_;
    int32_t         n_vocab_;
    int32_t         n_batch_;
    float           p_min_;
    int32_t         n_min_;
    std::vector<sequence> seqs_;
    std::unique_ptr<draft_vocab> vocab_;
    std::vector<float>    v_h_;      // hidden rows of the drafting requests (restricted vocabulary)
    std::vector<float>    v_logits_; // their logits over the subset

    std::vector<llama_token>    b_token_;
    std::vector<float>          b_embd_;
    std::vector<llama_pos>      b_pos_;
    std::vector<int32_t>        b_n_seq_;
    std::vector<llama_seq_id>   b_seq_;
    std::vector<llama_seq_id *> b_seq_ptr_;
    std::vector<int8_t>         b_logits_;
};

} // namespace specdec::detail
