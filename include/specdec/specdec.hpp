// specdec: lossless speculative decoding on llama.cpp, C++ API.
//
// The same operations as the C ABI in specdec.h, with RAII and exceptions:
// every failure throws specdec::error carrying a specdec_status and a message
// that says what to change. A failed call leaves the session as it was,
// unless a comment says otherwise.
//
// Threads: a session and the contexts it borrows are single-threaded. Models
// may be shared by sessions on different threads.
#pragma once

#include "specdec/specdec.h"

#include "llama-cpp.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace specdec {

// The one exception type of the library.
class SPECDEC_API error : public std::runtime_error {
public:
    error(specdec_status code, const std::string & message);

    specdec_status      code() const noexcept { return code_; }
    specdec_status_kind kind() const noexcept { return specdec_status_kind_of(code_); }

private:
    specdec_status code_;
};

using session_params = specdec_session_params; // defaults: specdec_session_default_params()
using draft_request  = specdec_draft_request;
using session_stats  = specdec_session_stats;
using context_role   = specdec_context_role;

// Creates the draft context `params.strategy` needs (see
// specdec_draft_context_init); the caller owns it and must keep `target`
// alive as long as it.
SPECDEC_API llama_context_ptr make_draft_context(llama_context * target, llama_model * draft_model,
                                                 const session_params & params, llama_context_params cparams);

// Drafter + bookkeeping for one target context. Move-only; borrows `target`
// and `draft` for its whole lifetime (they must outlive it, and nothing else
// may decode on them while it lives, except through this session); the
// hidden-state outputs its drafter turns on over them are set back as found
// when it is destroyed (see specdec_session_init). A moved-from session may
// be destroyed or assigned to; every other member throws specdec::error
// (INVALID_ARGUMENT).
class SPECDEC_API session {
public:
    // Validates `params` and every compatibility rule of the strategy before
    // any llama.cpp call, then creates the drafter. `draft` is nullptr for the
    // n-gram strategies. See specdec_session_init for the rules.
    session(llama_context * target, llama_context * draft, const session_params & params);
    ~session();
    session(session &&) noexcept;
    session & operator=(session &&) noexcept;
    session(const session &) = delete;
    session & operator=(const session &) = delete;

    // Parameters in effect (n_draft_max may be lowered by the drafter).
    const session_params & params() const;
    bool is_quiescent() const;
    bool reads_target_features() const;
    llama_context * target_context() const;
    llama_context * draft_context() const; // nullptr for n-gram strategies
    // Re-ranks the restricted draft vocabulary by `counts` (one per token of
    // the vocabulary); returns how many tokens entered it (see
    // specdec_session_rank_draft_vocab).
    int32_t rank_draft_vocab(std::span<const uint64_t> counts);

    // Replaces the history of `seq_id` with `prompt` (tokens already in the
    // target) and tells the drafter a generation starts. Needs quiescence.
    void begin(llama_seq_id seq_id, std::span<const llama_token> prompt);
    // Decodes `batch` on the target (validated first). While a proposal is
    // pending this is the verification step.
    void decode_target(const llama_batch & batch);
    // Hands the drafter the batch just decoded (see specdec_session_process).
    void process(const llama_batch & batch);
    // decode_target, then process; a failed decode is never processed.
    void decode_target_and_process(const llama_batch & batch);

    // Drafts for the requested sequences in one drafter pass.
    void draft(std::span<const draft_request> requests);
    // Latest proposal of `seq_id`; valid until the next draft/accept.
    std::span<const llama_token> proposal(llama_seq_id seq_id) const;
    // The distribution token `index` of it was drawn from (see
    // specdec_session_proposal_probs); empty when not sampled. Same validity.
    std::span<const specdec_token_prob> proposal_probs(llama_seq_id seq_id, size_t index) const;
    // Completes the pending proposal of `seq_id` with its accepted prefix length.
    void accept(llama_seq_id seq_id, uint16_t n_accepted);

    int32_t n_nextn_heads() const;
    void    set_nextn_head(int32_t head);

    // Versioned checkpoint of one sequence (needs quiescence).
    std::vector<uint8_t> state(llama_seq_id seq_id) const;
    // Validates the whole blob, then restores it into seq_id (another
    // sequence than its own only where can_move_sequences()); unchanged on failure.
    void restore_state(llama_seq_id seq_id, std::span<const uint8_t> blob);

    // Moves sequence `from` into the empty sequence `to` (see
    // specdec_session_move_sequence), or copies it, `from` unchanged (see
    // specdec_session_copy_sequence); can_move_sequences: whether the
    // drafter allows either.
    void move_sequence(llama_seq_id from, llama_seq_id to);
    void copy_sequence(llama_seq_id from, llama_seq_id to);
    bool can_move_sequences() const;

    // Drops [p0, p1) of `seq_id` from one context (negative = open end).
    void remove_range(context_role role, llama_seq_id seq_id, llama_pos p0, llama_pos p1);
    // Per-sequence context bytes (llama_state_seq_*_ext with `flags`).
    std::vector<uint8_t> context_state(context_role role, llama_seq_id seq_id, uint32_t flags);
    void restore_context_state(context_role role, llama_seq_id seq_id, uint32_t flags,
                               std::span<const uint8_t> bytes);

    session_stats stats() const;

private:
    struct impl;
    impl & live() const; // throws error(INVALID_ARGUMENT) when moved from
    std::unique_ptr<impl> impl_;
};

using generate_params = specdec_generate_params; // defaults: specdec_generate_default_params()

struct sequence_result {
    std::vector<llama_token> tokens;  // emitted tokens (no end-of-generation token); with a stop string
                                      // they end with the token that completed it
    std::string              text;    // their text, cut right before a stop string (bytes; not
                                      // necessarily valid UTF-8 when a budget ends inside a character)
    specdec_stop_reason      stop = SPECDEC_STOP_BUDGET;
    specdec_sequence_stats   stats{};
    // With n_top_logprobs >= 0 (else empty): one log-probability per token,
    // and n_top_logprobs most likely tokens per token, position after position.
    std::vector<float>                 logprobs;
    std::vector<specdec_token_logprob> top_logprobs;
    // With prompt_logprobs (else empty): the same for prompt tokens 1, 2, ...
    std::vector<float>                 prompt_logprobs;
    std::vector<specdec_token_logprob> prompt_top_logprobs;
};

struct generation_result {
    std::vector<sequence_result> sequences; // one per prompt, in order
    specdec_generation_times     times{};
};

// Thrown by generate() and generate_plain() when generation fails after the
// input was accepted (a decode failed or was aborted, the drafter failed,
// NaN logits, or on_token threw a specdec::error): code() and what() say
// why, partial() holds each sequence's output until then (the start of what
// a run without the failure emits; stop == SPECDEC_STOP_ERROR for sequences
// still running). The session is quiescent and every sequence of the call
// emptied (see specdec_generate). Bad input throws a plain error instead,
// before anything runs; an exception of another type from on_token passes
// through unchanged, after the same clean-up.
class SPECDEC_API generation_error : public error {
public:
    generation_error(specdec_status code, const std::string & message, generation_result partial);

    // Valid while the exception lives (copy it to keep it).
    const generation_result & partial() const noexcept { return *partial_; }

private:
    std::shared_ptr<const generation_result> partial_; // shared: copying an exception must not throw
};

// Streams text per emitted token; return false to stop that sequence. `piece`
// is the text this token releases, held back as specdec_token_callback says
// (token == LLAMA_TOKEN_NULL for the rest after an end-of-generation token).
using token_callback = std::function<bool(llama_seq_id seq_id, llama_token token, std::string_view piece)>;

// The complete speculative loop over one sequence per prompt (see
// specdec_generate). Throws error for bad input, generation_error when a
// step fails.
SPECDEC_API generation_result generate(session & s, std::span<const std::vector<llama_token>> prompts,
                                       const generate_params & params, const token_callback & on_token = {});

// Plain decoding of `target` alone, through the same loop with no drafter.
SPECDEC_API generation_result generate_plain(llama_context * target, std::span<const std::vector<llama_token>> prompts,
                                             const generate_params & params, const token_callback & on_token = {});

// --- Engine: continuous batching (see the engine section of specdec.h) ---------

using engine_params  = specdec_engine_params;  // defaults: specdec_engine_default_params()
using request_params = generate_params;        // per request; its seed is used as given
using request_id     = specdec_request_id;
using request_times  = specdec_request_times;

// What a request produced, handed out in its finished event.
struct request_result {
    request_id      id = 0;
    llama_seq_id    seq_id = -1;                   // its slot; -1 when cancelled while waiting
    size_t          n_prompt_cached = 0;           // prompt tokens reused from its slot, not decoded
    sequence_result output;                        // tokens, text, stop reason, statistics
    request_times   times{-1, 0};
};

struct engine_event {
    specdec_engine_event_type type = SPECDEC_ENGINE_EVENT_TOKEN;
    request_id                id = 0;
    llama_seq_id              seq_id = -1;
    llama_token               token = LLAMA_TOKEN_NULL; // token events
    std::string_view          piece;                    // token events: the text it releases
    const request_result *    result = nullptr;         // finished events
    // Token events of a request that asked (n_top_logprobs >= 0): the token
    // and its log-probability; else null. And the most likely tokens there.
    const specdec_token_logprob *          logprob = nullptr;
    std::span<const specdec_token_logprob> top_logprobs;
};

// Receives every event on the engine's thread; the event and what it points
// to are valid during the call. A token event's false return stops that
// request at once (SPECDEC_STOP_CALLBACK); a finished event's is ignored. A
// specdec::error thrown here fails the step like a failed decode.
using event_callback = std::function<bool(const engine_event & event)>;

// A continuous-batching engine over a session (speculative) or a bare target
// context (plain decoding). Events are pushed through the callback rather
// than polled: the step already holds each token's text, a callback sees it
// without a copy or a queue, and a server forwards it to its own queue.
// Threads: cancel() and pause() from any thread; everything else on one thread at a time,
// add() also from inside the callback. Neither copyable nor movable (other
// threads may hold a reference for cancel()).
class SPECDEC_API engine {
public:
    // Borrows `s` (or `target`) for its whole lifetime. Throws error:
    // INVALID_ARGUMENT, SEQ_CAPACITY, BATCH_CAPACITY, UNAVAILABLE (see
    // specdec_engine_init).
    engine(session & s, const engine_params & params, event_callback on_event);
    engine(llama_context * target, const engine_params & params, event_callback on_event);
    ~engine();
    engine(const engine &) = delete;
    engine & operator=(const engine &) = delete;

    // Queues a request; see specdec_engine_add for the errors (thrown).
    request_id add(std::span<const llama_token> prompt, const request_params & params);
    // Queues n requests sharing one prompt (see specdec_engine_add_n);
    // returns the first id, the others follow it: id + 1 ... id + n - 1.
    request_id add_n(std::span<const llama_token> prompt, const request_params & params, uint32_t n);
    // Any thread. Throws error(UNKNOWN_REQUEST) for an id never issued here;
    // a finished request is left as it is.
    void cancel(request_id id);
    // Any thread: holds a request (paused) or lets it go on; see
    // specdec_engine_pause. Throws error(UNKNOWN_REQUEST) as cancel() does.
    void pause(request_id id, bool paused);
    // One step; see specdec_engine_step. Throws the failure's error after
    // failing the requests in slots; the engine stays usable.
    void step();
    // step() until has_work() is false.
    void run_until_idle();
    // Whether a step would do anything; see specdec_engine_has_work.
    bool has_work() const;
    // Sums over every step so far (t_total_us: time inside step()).
    specdec_generation_times times() const;
    // The prompt cache (engine_params.prompt_cache_bytes): the sequence
    // states it holds and their host bytes. The engine's thread.
    struct prompt_cache_use {
        size_t n_sequences = 0;
        size_t n_bytes = 0;
    };
    prompt_cache_use prompt_cache() const;
    // Slot files (a server's llama-server-style /slots save, restore and
    // erase). The engine's thread, between steps; `slot` (a sequence, [0,
    // n_seq)) must hold no running request (else error(INVALID_ARGUMENT);
    // error(BAD_SEQ_ID) outside the range), with reuse_prompts on.
    // export_slot: what the slot holds (the tokens at its positions and
    // both contexts' state there, as the prompt cache saves it) as a blob
    // the caller owns; `n_tokens` gets their count. import_slot: puts such
    // a blob back into the slot, dropping what it held; the next prompt
    // that shares its tokens reuses them. Returns the tokens it holds then.
    // Throws error(STATE_MALFORMED) for bytes that are not a slot file,
    // error(STATE_VERSION) for another format version, and
    // error(STATE_CONFIG) for one written for another target model or
    // drafter (the slot is then left as it was, or empty when llama.cpp
    // refused the state), and error(STATE_SEQUENCE) for one exported from
    // another slot where the drafter's state cannot move (see
    // session::can_move_sequences; the slot is then empty). erase_slot:
    // drops what the slot holds; returns the tokens it held.
    std::vector<uint8_t> export_slot(uint32_t slot, size_t & n_tokens);
    size_t               import_slot(uint32_t slot, std::span<const uint8_t> blob);
    size_t               erase_slot(uint32_t slot);

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

// --- Tokenizer: llama.cpp's behind checks (see the tokenizer section of specdec.h) ---
// `vocab` is borrowed for the call. Each throws error with the statuses its C
// function returns (never BUFFER_TOO_SMALL: the result is sized to fit), and
// nothing of llama.cpp's own exceptions.

// Text to token ids; UNREPRESENTABLE_TEXT for a byte the vocabulary has no token for.
SPECDEC_API std::vector<llama_token> tokenize(const llama_vocab * vocab, std::string_view text, bool add_special,
                                              bool parse_special);
// Token ids to text (bytes, not necessarily valid UTF-8); INVALID_ARGUMENT for an id outside the vocabulary.
SPECDEC_API std::string detokenize(const llama_vocab * vocab, std::span<const llama_token> tokens, bool remove_special,
                                   bool unparse_special);
// The text of one token, `lstrip` (>= 0) leading spaces skipped; `special`: a special token's text, else "".
SPECDEC_API std::string token_to_piece(const llama_vocab * vocab, llama_token token, int32_t lstrip = 0,
                                       bool special = true);

// Adds RPC servers as ggml devices (see specdec_rpc_add_servers).
SPECDEC_API void rpc_add_servers(const std::string & servers);

} // namespace specdec
