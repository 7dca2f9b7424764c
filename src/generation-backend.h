// What the engine needs from a target and its drafter. The library
// implements it over a session (speculative) or a bare context (plain); the
// unit tests implement it with a scripted fake, so the engine's logic is
// checked without a model.
#pragma once

#include "specdec/specdec.hpp"

#include <memory>
#include <span>
#include <string>

namespace specdec::detail {

class generation_backend {
public:
    virtual ~generation_backend() = default;

    virtual int32_t n_vocab() const = 0;
    // Positions each of the sequences [0, n_seq) can fill once emptied: the
    // context's per-sequence size, or, when all sequences share one cache
    // (kv_unified), an equal share of what the other sequences leave free.
    virtual int32_t n_ctx(uint32_t n_seq) const = 0;
    virtual int32_t n_batch() const = 0;     // tokens per decode
    virtual uint32_t n_seq() const = 0;      // sequences that can run at once
    virtual int32_t n_draft_max() const = 0; // 0: no drafter
    virtual int32_t n_draft_min() const = 0; // shorter proposals are dropped
    // Throws error(UNAVAILABLE) where exact kernels are on and n_seq
    // sequences decoded together would not each get the tokens it gets
    // alone: all sequences share one KV cache (kv_unified), so a sequence's
    // cells lie among the others' and attention sums its keys in an order
    // that depends on them.
    virtual void check_exact_batching(uint32_t n_seq) const = 0;

    // Empties a sequence before its prompt.
    virtual void clear(llama_seq_id seq) = 0;
    // After a failure: completes a pending proposal of `seq` with nothing
    // accepted, then empties the sequence; best effort, never throws.
    virtual void reset(llama_seq_id seq) noexcept = 0;
    // The prompt of `seq` is in the contexts (its last row's logits just
    // computed): the drafter begins, and a memory that cannot be cut back to
    // any position (recurrent or sliding-window state) records this point as
    // one keep() may restore.
    virtual void begin(llama_seq_id seq, std::span<const llama_token> prompt) = 0;
    // `seq` holds positions [0, held) and no proposal is pending: keeps
    // [0, n) (n <= held) and drops the rest from the target, the drafter and
    // its context. A memory that cannot be cut back to n restores the latest
    // point begin() recorded at or below n, or empties the sequence. Returns
    // the positions kept, <= n. Throws specdec::error.
    virtual int32_t keep(llama_seq_id seq, int32_t n, int32_t held) = 0;
    // Whether move() may be called, and is worth it: every sequence has a KV
    // stream of its own, so llama.cpp decodes a batch in one forward pass per
    // run of consecutive sequence ids, and the drafter's state can be moved.
    virtual bool moves_sequences() const = 0;
    // Moves everything of `from` (no proposal pending) into the empty
    // sequence `to`; `from` is empty afterwards. Throws specdec::error.
    virtual void move(llama_seq_id from, llama_seq_id to) = 0;
    // Whether copy() may be called: the drafter's state of a sequence can be
    // copied to another (plain decoding: always).
    virtual bool copies_sequences() const = 0;
    // Copies everything of `from` (no proposal pending) into the empty
    // sequence `to`; `from` is unchanged. Throws specdec::error.
    virtual void copy(llama_seq_id from, llama_seq_id to) = 0;
    // A sequence's whole state in host memory, for the engine's prompt
    // cache: save() reads it (no proposal pending; the sequence is left as
    // it was) and load() writes it into an empty sequence (where
    // copies_sequences(), any; else only the one it was saved from, and
    // error(STATE_SEQUENCE) for another), which then holds what the saved one
    // held, its restore points included, or a prefix of it: load() returns
    // the positions it holds (a drafter whose state llama.cpp does not export,
    // the last row it deferred, resumes from the position before; 0:
    // nothing). Throws specdec::error.
    class saved_sequence {
    public:
        virtual ~saved_sequence() = default;
        virtual size_t bytes() const = 0; // host memory it holds
    };
    virtual std::unique_ptr<saved_sequence> save(llama_seq_id seq) = 0;
    virtual int32_t load(llama_seq_id seq, const saved_sequence & saved) = 0;
    // A saved sequence as bytes, for a file (a server's slot files), and
    // back: read() takes only what write() of a backend over the same
    // target model and drafter wrote, and throws error(STATE_CONFIG) for
    // another's, error(STATE_MALFORMED) for bytes that are not one.
    virtual std::vector<uint8_t> write(const saved_sequence & saved) const = 0;
    virtual std::unique_ptr<saved_sequence> read(std::span<const uint8_t> bytes) const = 0;
    // Host memory the restore points of every sequence hold (see begin()).
    virtual size_t restore_bytes() const = 0;
    // Target decode of a validated batch; throws specdec::error.
    virtual void decode(const llama_batch & batch) = 0;
    // The drafter's processing of the batch decode() just ran.
    virtual void process(const llama_batch & batch) = 0;
    // Logits of batch row i of the last decode.
    virtual const float * logits(int32_t i) = 0;

    virtual void draft(std::span<const draft_request> requests) = 0;
    virtual std::span<const llama_token> proposal(llama_seq_id seq) = 0;
    // The distribution token k of the proposal was drawn from; empty when
    // not sampled (a point mass on the token). Valid until accept().
    virtual std::span<const specdec_token_prob> proposal_probs(llama_seq_id seq, size_t k) = 0;
    virtual void accept(llama_seq_id seq, uint16_t n_accepted) = 0;
    // Drops positions >= p0 of the target sequence (rejected drafts).
    virtual void truncate(llama_seq_id seq, llama_pos p0) = 0;

    virtual bool is_eog(llama_token token) const = 0;
    // The target's vocabulary, for grammars; null where there is none (tests).
    virtual const llama_vocab * vocab() const = 0;
    virtual std::string piece(llama_token token) const = 0;
};

// The library's two backends (backends.cpp); both borrow their argument.
std::unique_ptr<generation_backend> make_session_backend(session & s);
std::unique_ptr<generation_backend> make_plain_backend(llama_context * target);

// generate(): an engine (engine.h) with one slot per prompt, every prompt
// added first, run until idle. Throws specdec::error for bad input before
// anything runs, and generation_error (with the partial result) when a
// later step fails.
generation_result run_generation(generation_backend & backend, std::span<const std::vector<llama_token>> prompts,
                                 const generate_params & params, const token_callback & on_token);

} // namespace specdec::detail
