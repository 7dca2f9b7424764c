// A restricted draft vocabulary: a drafter scores only the N tokens a
// ranking puts first (FR-Spec's frequency-ranked draft head), through a copy
// of those rows of its output matrix, gathered once.
//
// Why: a drafting pass of an MTP head is one decoder block and a projection
// onto the whole vocabulary; at 151,936 tokens (Qwen3) or 248,320 (Qwen3.5)
// the projection is most of the pass. The subset's projection costs N / V
// of it. What the drafter proposes changes (a token outside the subset is
// never proposed); verification still covers the whole vocabulary, so the
// output does not.
//
// Errors: specdec::error (INVALID_CONFIG for a bad ranking or size).
#pragma once

#include "llama.h"

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

struct ggml_tensor;

namespace specdec::detail {

// The subset size SPECDEC_DRAFT_VOCAB_AUTO stands for at this vocabulary size.
int32_t auto_draft_vocab(int32_t n_vocab);

// The default ranking, derived from the tokenizer (all n_vocab ids, each
// once): the end-of-generation tokens first (a handful: the drafter can
// propose the end); then the user-defined (added) tokens; then the normal
// and byte tokens, by score for SentencePiece and Unigram vocabularies (the
// score is the piece's log probability or merge priority; a SentencePiece
// BPE file such as LLaMA's gives its single characters the lowest scores,
// so there they come last), else by id (BPE vocabularies number their
// tokens in merge order); then every other token (control, unused) by id.
// On real text this ranking is a rough guess: its first 32,768 of Qwen3's
// ids hold 88-95% of code and English text's tokens, where a ranking counted
// from similar text holds 98-99.9%
// (docs/results/2026-12-06-epyc-draft-vocab-ranking-coverage.md).
std::vector<llama_token> tokenizer_ranking(const llama_vocab * vocab);

// The n tokens with the highest counts (counts[t] for every token t of the
// vocabulary), ties and tokens never counted in `fallback`'s order (a
// ranking of the whole vocabulary, as tokenizer_ranking gives); n <=
// counts.size() == fallback.size().
std::vector<llama_token> top_by_count(std::span<const uint64_t> counts, std::span<const llama_token> fallback, int32_t n);

// Throws INVALID_CONFIG unless `ranking` is non-empty and holds distinct ids
// within [0, n_vocab); the message names the first bad entry.
void check_ranking(std::span<const llama_token> ranking, int32_t n_vocab);

class draft_vocab {
public:
    // Copies rows ids[k] of `head` ([n_embd, n_vocab], a matrix that
    // llama-internal.h's mtp_head_matrix accepts, read with head_matrix_row)
    // into a matrix of its own, in the head's type, unrepacked; scores are
    // computed on the CPU with n_threads.
    draft_vocab(const ggml_tensor * head, std::vector<llama_token> ids, int32_t n_threads);
    ~draft_vocab();
    draft_vocab(const draft_vocab &) = delete;
    draft_vocab & operator=(const draft_vocab &) = delete;

    // Makes `ids` (size() distinct ids within the head's vocabulary, checked)
    // the subset in place: the rows of the tokens that leave it are
    // overwritten with those of the tokens that enter it, each in a slot a
    // leaving token held. Returns how many entered (0: nothing was copied).
    // The head passed to the constructor must still be alive.
    int32_t replace(std::span<const llama_token> ids);

    // The subset: score k is token ids()[k]'s (the ranking's order until
    // replace() moves tokens in).
    const std::vector<llama_token> & ids() const { return ids_; }
    int32_t size() const { return static_cast<int32_t>(ids_.size()); }
    int32_t n_embd() const { return n_embd_; }

    // The logits of the subset for `n_rows` hidden rows (n_embd floats each,
    // contiguous): out[r * size() + k] is what the head's projection gives
    // token ids()[k] at row r, computed by the same ggml kernel (a repacked
    // head's own kernel differs: there the last bits may differ).
    void score(const float * h, int32_t n_rows, std::vector<float> & out);

private:
    struct impl;
    std::unique_ptr<impl>    impl_;
    const ggml_tensor *      head_;
    std::vector<llama_token> ids_;
    int32_t                  n_embd_;
};

} // namespace specdec::detail
