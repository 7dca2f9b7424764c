// The C ABI: thin wrappers that turn every exception into a status code.
#include "specdec/specdec.h"
#include "specdec/specdec.hpp"

#include "error.h"
#include "gguf-inspect.h"
#include "logit-shaping.h"
#include "params.h"

#include <algorithm>
#include <new>
#include <memory>
#include <string>
#include <utility>
#include <vector>

struct specdec_session {
    specdec::session session;
};

struct specdec_generation {
    specdec::generation_result result;
};

struct specdec_engine {
    template <typename Over>
    specdec_engine(Over && over, const specdec_engine_params & params, specdec_engine_callback callback, void * user_data)
        : engine(std::forward<Over>(over), params, forward_to(callback, user_data)) {}

    // Each C++ event as a C event, pointing into it.
    static specdec::event_callback forward_to(specdec_engine_callback callback, void * user_data) {
        if (callback == nullptr) {
            return {};
        }
        return [callback, user_data](const specdec::engine_event & e) {
            static const llama_token no_tokens[1] = {LLAMA_TOKEN_NULL};
            specdec_engine_event c{};
            c.type = e.type;
            c.id = e.id;
            c.seq_id = e.seq_id;
            c.token = e.token;
            c.piece = e.piece.empty() ? "" : e.piece.data();
            c.n_piece = e.piece.size();
            c.logprob = e.logprob;
            c.top_logprobs = e.top_logprobs.empty() ? nullptr : e.top_logprobs.data();
            c.n_top_logprobs = e.top_logprobs.size();
            c.stop = SPECDEC_STOP_INVALID;
            c.tokens = no_tokens;
            c.text = "";
            if (e.result != nullptr) {
                const specdec::sequence_result & out = e.result->output;
                c.n_prompt_cached = e.result->n_prompt_cached;
                c.stop = out.stop;
                c.stats = out.stats;
                c.times = e.result->times;
                c.tokens = out.tokens.empty() ? no_tokens : out.tokens.data();
                c.n_tokens = out.tokens.size();
                c.text = out.text.c_str();
                c.n_text = out.text.size();
                c.logprobs = out.logprobs.empty() ? nullptr : out.logprobs.data();
                c.prompt_logprobs = out.prompt_logprobs.empty() ? nullptr : out.prompt_logprobs.data();
                c.n_prompt_logprobs = out.prompt_logprobs.size();
                c.prompt_top_logprobs = out.prompt_top_logprobs.empty() ? nullptr : out.prompt_top_logprobs.data();
                c.n_prompt_top_logprobs = out.prompt_top_logprobs.size();
                c.top_logprobs = out.top_logprobs.empty() ? nullptr : out.top_logprobs.data();
                c.n_top_logprobs = out.top_logprobs.size();
            }
            return callback(&c, user_data);
        };
    }

    specdec::engine engine;
};

namespace {

void record(const char * message) noexcept {
    try {
        specdec::detail::set_last_error(message);
    } catch (...) {
        // Nothing sensible is left to do when even the message cannot be stored.
    }
}

template <typename F>
specdec_status guard(F && body) noexcept {
    try {
        body();
        return SPECDEC_STATUS_OK;
    } catch (const specdec::error & e) {
        record(e.what());
        return e.code();
    } catch (const std::bad_alloc &) {
        record("out of memory");
        return SPECDEC_STATUS_OUT_OF_MEMORY;
    } catch (const std::exception & e) {
        record(e.what());
        return SPECDEC_STATUS_NATIVE_FAILURE;
    } catch (...) {
        record("unknown exception");
        return SPECDEC_STATUS_NATIVE_FAILURE;
    }
}

template <typename T>
void require(const T * p, const char * what) {
    if (p == nullptr) {
        specdec::detail::fail(SPECDEC_STATUS_INVALID_ARGUMENT, what, " must not be NULL");
    }
}

// A caller's output buffer: NULL only with capacity 0 (a size query).
template <typename T>
void require_buffer(const T * dst, size_t capacity, const char * what) {
    if (dst == nullptr && capacity > 0) {
        specdec::detail::fail(SPECDEC_STATUS_INVALID_ARGUMENT, what, " is NULL but its capacity is ", capacity);
    }
}

// Copies a result to the caller's buffer of `capacity` elements when it
// fits; *n is the result's size either way. A NULL buffer with capacity 0
// asks for the size alone; a buffer too small fails with BUFFER_TOO_SMALL
// (*n still set).
template <typename Result, typename T>
void copy_out(const Result & result, T * dst, size_t capacity, size_t * n) {
    *n = result.size();
    require_buffer(dst, capacity, "dst");
    if (dst == nullptr) {
        return;
    }
    if (capacity < result.size()) {
        specdec::detail::fail(SPECDEC_STATUS_BUFFER_TOO_SMALL, "the buffer holds ", capacity, "; ", result.size(),
                              " are needed");
    }
    std::copy(result.begin(), result.end(), dst);
}

// What a getter given a NULL or out-of-range argument returns, after saying why.
template <typename T>
T invalid(T value, const char * message) noexcept {
    record(message);
    return value;
}

std::span<const uint8_t> bytes_in(const uint8_t * src, size_t size) {
    if (size > 0) {
        require(src, "src");
    }
    return {src, size};
}

} // namespace

extern "C" {

specdec_status specdec_logit_shaping_validate(const llama_vocab * vocab, const specdec_generate_params * params) {
    return guard([&] {
        require(vocab, "vocab");
        require(params, "params");
        const int32_t n_vocab = llama_vocab_n_tokens(vocab);
        specdec::detail::logit_shaper::validate(*params, vocab, n_vocab);
        if (specdec::detail::logit_shaper::needed(*params)) {
            specdec::detail::grammar_memo unused; // nothing is masked here
            specdec::detail::logit_shaper parsed(*params, vocab, n_vocab, unused); // parses the grammar, reads its prefix
        }
    });
}

specdec_status specdec_session_params_validate(const specdec_session_params * params) {
    return guard([&] {
        require(params, "params");
        specdec::detail::validate_params(*params);
    });
}

specdec_status specdec_session_init(llama_context * target, llama_context * draft,
                                    const specdec_session_params * params, specdec_session ** out) {
    return guard([&] {
        require(params, "params");
        require(out, "out");
        *out = nullptr;
        *out = new specdec_session{specdec::session(target, draft, *params)};
    });
}

specdec_status specdec_draft_context_init(llama_context * target, llama_model * draft_model,
                                          const specdec_session_params * params, llama_context_params cparams,
                                          llama_context ** out) {
    return guard([&] {
        require(params, "params");
        require(out, "out");
        *out = nullptr;
        *out = specdec::make_draft_context(target, draft_model, *params, cparams).release();
    });
}

void specdec_session_free(specdec_session * session) {
    delete session;
}

constexpr const char * null_session = "session is NULL";

specdec_session_params specdec_session_get_params(const specdec_session * session) {
    return session != nullptr ? session->session.params() : invalid(specdec_session_params{}, null_session);
}

specdec_status specdec_session_rank_draft_vocab(specdec_session * session, const uint64_t * counts, size_t n_counts,
                                                int32_t * n_entered) {
    return guard([&] {
        require(session, "session");
        require(counts, "counts");
        const int32_t n = session->session.rank_draft_vocab({counts, n_counts});
        if (n_entered != nullptr) {
            *n_entered = n;
        }
    });
}

bool specdec_session_is_quiescent(const specdec_session * session) {
    return session != nullptr ? session->session.is_quiescent() : invalid(false, null_session);
}

bool specdec_session_reads_target_features(const specdec_session * session) {
    return session != nullptr ? session->session.reads_target_features() : invalid(false, null_session);
}

specdec_status specdec_session_begin(specdec_session * session, llama_seq_id seq_id, const llama_token * prompt,
                                     size_t n_prompt) {
    return guard([&] {
        require(session, "session");
        if (n_prompt > 0) {
            require(prompt, "prompt");
        }
        session->session.begin(seq_id, {prompt, n_prompt});
    });
}

specdec_status specdec_session_process(specdec_session * session, const llama_batch * batch) {
    return guard([&] {
        require(session, "session");
        require(batch, "batch");
        session->session.process(*batch);
    });
}

specdec_status specdec_session_decode_target(specdec_session * session, const llama_batch * batch) {
    return guard([&] {
        require(session, "session");
        require(batch, "batch");
        session->session.decode_target(*batch);
    });
}

specdec_status specdec_session_decode_target_and_process(specdec_session * session, const llama_batch * batch) {
    return guard([&] {
        require(session, "session");
        require(batch, "batch");
        session->session.decode_target_and_process(*batch);
    });
}

specdec_status specdec_session_draft(specdec_session * session, const specdec_draft_request * requests,
                                     size_t n_requests) {
    return guard([&] {
        require(session, "session");
        if (n_requests > 0) {
            require(requests, "requests");
        }
        session->session.draft({requests, n_requests});
    });
}

specdec_status specdec_session_proposal(const specdec_session * session, llama_seq_id seq_id,
                                        const llama_token ** tokens, size_t * n_tokens) {
    return guard([&] {
        require(session, "session");
        require(tokens, "tokens");
        require(n_tokens, "n_tokens");
        const auto p = session->session.proposal(seq_id);
        *tokens = p.data();
        *n_tokens = p.size();
    });
}

specdec_status specdec_session_proposal_probs(const specdec_session * session, llama_seq_id seq_id, size_t index,
                                              const specdec_token_prob ** probs, size_t * n_probs) {
    return guard([&] {
        require(session, "session");
        require(probs, "probs");
        require(n_probs, "n_probs");
        const auto q = session->session.proposal_probs(seq_id, index);
        *probs = q.empty() ? nullptr : q.data();
        *n_probs = q.size();
    });
}

specdec_status specdec_session_accept(specdec_session * session, llama_seq_id seq_id, uint16_t n_accepted) {
    return guard([&] {
        require(session, "session");
        session->session.accept(seq_id, n_accepted);
    });
}

int32_t specdec_session_n_nextn_heads(const specdec_session * session) {
    return session != nullptr ? session->session.n_nextn_heads() : invalid(int32_t{-1}, null_session);
}

specdec_status specdec_session_set_nextn_head(specdec_session * session, int32_t head) {
    return guard([&] {
        require(session, "session");
        session->session.set_nextn_head(head);
    });
}

specdec_status specdec_session_state_get(const specdec_session * session, llama_seq_id seq_id, uint8_t * dst,
                                         size_t capacity, size_t * n_written) {
    return guard([&] {
        require(session, "session");
        require(n_written, "n_written");
        copy_out(session->session.state(seq_id), dst, capacity, n_written);
    });
}

specdec_status specdec_session_state_set(specdec_session * session, llama_seq_id seq_id, const uint8_t * src,
                                         size_t size) {
    return guard([&] {
        require(session, "session");
        session->session.restore_state(seq_id, bytes_in(src, size));
    });
}

specdec_status specdec_session_remove_range(specdec_session * session, specdec_context_role role,
                                            llama_seq_id seq_id, llama_pos p0, llama_pos p1) {
    return guard([&] {
        require(session, "session");
        session->session.remove_range(role, seq_id, p0, p1);
    });
}

specdec_status specdec_session_move_sequence(specdec_session * session, llama_seq_id from, llama_seq_id to) {
    return guard([&] {
        require(session, "session");
        session->session.move_sequence(from, to);
    });
}

specdec_status specdec_session_copy_sequence(specdec_session * session, llama_seq_id from, llama_seq_id to) {
    return guard([&] {
        require(session, "session");
        session->session.copy_sequence(from, to);
    });
}

bool specdec_session_can_move_sequences(const specdec_session * session) {
    return session != nullptr ? session->session.can_move_sequences() : invalid(false, null_session);
}

specdec_status specdec_session_context_state_get(specdec_session * session, specdec_context_role role,
                                                 llama_seq_id seq_id, uint32_t flags, uint8_t * dst,
                                                 size_t capacity, size_t * n_written) {
    return guard([&] {
        require(session, "session");
        require(n_written, "n_written");
        copy_out(session->session.context_state(role, seq_id, flags), dst, capacity, n_written);
    });
}

specdec_status specdec_session_context_state_set(specdec_session * session, specdec_context_role role,
                                                 llama_seq_id seq_id, uint32_t flags, const uint8_t * src,
                                                 size_t size) {
    return guard([&] {
        require(session, "session");
        session->session.restore_context_state(role, seq_id, flags, bytes_in(src, size));
    });
}

specdec_session_stats specdec_session_get_stats(const specdec_session * session) {
    return session != nullptr ? session->session.stats() : invalid(specdec_session_stats{}, null_session);
}

specdec_status specdec_generate(specdec_session * session, llama_context * target, const llama_token * const * prompts,
                                const size_t * n_prompt_tokens, size_t n_prompts, const specdec_generate_params * params,
                                specdec_token_callback callback, void * user_data, specdec_generation ** out) {
    return guard([&] {
        require(out, "out");
        *out = nullptr;
        require(params, "params");
        if (n_prompts > SPECDEC_MAX_SEQ) {
            specdec::detail::fail(SPECDEC_STATUS_SEQ_CAPACITY, n_prompts, " prompts; at most SPECDEC_MAX_SEQ = ",
                                  SPECDEC_MAX_SEQ, " sequences run at once");
        }
        if (n_prompts > 0) {
            require(prompts, "prompts");
            require(n_prompt_tokens, "n_prompt_tokens");
        }
        // Every size and pointer before any token is read.
        for (size_t i = 0; i < n_prompts; ++i) {
            if (n_prompt_tokens[i] > SPECDEC_MAX_PROMPT_TOKENS) {
                specdec::detail::fail(SPECDEC_STATUS_PROMPT_TOO_LONG, "prompt ", i, " has ", n_prompt_tokens[i],
                                      " tokens, above SPECDEC_MAX_PROMPT_TOKENS = ", SPECDEC_MAX_PROMPT_TOKENS);
            }
            if (n_prompt_tokens[i] > 0 && prompts[i] == nullptr) {
                specdec::detail::fail(SPECDEC_STATUS_INVALID_ARGUMENT, "prompts[", i, "] is NULL but n_prompt_tokens[", i,
                                      "] is ", n_prompt_tokens[i]);
            }
        }
        std::vector<std::vector<llama_token>> copies(n_prompts);
        for (size_t i = 0; i < n_prompts; ++i) {
            copies[i].assign(prompts[i], prompts[i] + n_prompt_tokens[i]);
        }
        specdec::token_callback on_token;
        if (callback != nullptr) {
            on_token = [&](llama_seq_id seq, llama_token token, std::string_view piece) {
                return callback(seq, token, piece.empty() ? "" : piece.data(), piece.size(), user_data);
            };
        }
        auto generation = std::make_unique<specdec_generation>();
        try {
            generation->result = session != nullptr ? specdec::generate(session->session, copies, *params, on_token)
                                                     : specdec::generate_plain(target, copies, *params, on_token);
        } catch (const specdec::generation_error & e) {
            generation->result = e.partial(); // handed out with the status
            *out = generation.release();
            throw;
        }
        *out = generation.release();
    });
}

void specdec_generation_free(specdec_generation * generation) {
    delete generation;
}

size_t specdec_generation_n_sequences(const specdec_generation * generation) {
    return generation != nullptr ? generation->result.sequences.size() : invalid(size_t{0}, "generation is NULL");
}

// Sequence i, or nullptr after recording why there is none.
static const specdec::sequence_result * sequence_at(const specdec_generation * g, size_t i) noexcept {
    if (g == nullptr) {
        return invalid<const specdec::sequence_result *>(nullptr, "generation is NULL");
    }
    if (i >= g->result.sequences.size()) {
        return invalid<const specdec::sequence_result *>(nullptr, "sequence index is out of range");
    }
    return &g->result.sequences[i];
}

const llama_token * specdec_generation_tokens(const specdec_generation * generation, size_t i, size_t * n_tokens) {
    static const llama_token no_tokens[1] = {LLAMA_TOKEN_NULL}; // non-NULL for a sequence without tokens
    const specdec::sequence_result * r = sequence_at(generation, i);
    if (n_tokens != nullptr) {
        *n_tokens = r != nullptr ? r->tokens.size() : 0;
    }
    if (r == nullptr) {
        return nullptr;
    }
    return r->tokens.empty() ? no_tokens : r->tokens.data();
}

const char * specdec_generation_text(const specdec_generation * generation, size_t i, size_t * n_bytes) {
    const specdec::sequence_result * r = sequence_at(generation, i);
    if (n_bytes != nullptr) {
        *n_bytes = r != nullptr ? r->text.size() : 0;
    }
    return r != nullptr ? r->text.c_str() : nullptr;
}

const float * specdec_generation_logprobs(const specdec_generation * generation, size_t i, size_t * n) {
    const specdec::sequence_result * r = sequence_at(generation, i);
    if (n != nullptr) {
        *n = r != nullptr ? r->logprobs.size() : 0;
    }
    return r != nullptr && !r->logprobs.empty() ? r->logprobs.data() : nullptr;
}

const specdec_token_logprob * specdec_generation_top_logprobs(const specdec_generation * generation, size_t i, size_t * n) {
    const specdec::sequence_result * r = sequence_at(generation, i);
    if (n != nullptr) {
        *n = r != nullptr ? r->top_logprobs.size() : 0;
    }
    return r != nullptr && !r->top_logprobs.empty() ? r->top_logprobs.data() : nullptr;
}

const float * specdec_generation_prompt_logprobs(const specdec_generation * generation, size_t i, size_t * n,
                                                 const specdec_token_logprob ** top, size_t * n_top) {
    const specdec::sequence_result * r = sequence_at(generation, i);
    if (n != nullptr) {
        *n = r != nullptr ? r->prompt_logprobs.size() : 0;
    }
    if (top != nullptr) {
        *top = r != nullptr && !r->prompt_top_logprobs.empty() ? r->prompt_top_logprobs.data() : nullptr;
    }
    if (n_top != nullptr) {
        *n_top = r != nullptr ? r->prompt_top_logprobs.size() : 0;
    }
    return r != nullptr && !r->prompt_logprobs.empty() ? r->prompt_logprobs.data() : nullptr;
}

specdec_stop_reason specdec_generation_stop_reason(const specdec_generation * generation, size_t i) {
    const specdec::sequence_result * r = sequence_at(generation, i);
    return r != nullptr ? r->stop : SPECDEC_STOP_INVALID;
}

specdec_sequence_stats specdec_generation_sequence_stats(const specdec_generation * generation, size_t i) {
    const specdec::sequence_result * r = sequence_at(generation, i);
    return r != nullptr ? r->stats : specdec_sequence_stats{};
}

specdec_generation_times specdec_generation_get_times(const specdec_generation * generation) {
    return generation != nullptr ? generation->result.times : invalid(specdec_generation_times{}, "generation is NULL");
}

} // extern "C"

extern "C" {

specdec_status specdec_inspect(const char * path, specdec_model_info * out) {
    return guard([&] {
        require(path, "path");
        require(out, "out");
        *out = specdec::detail::inspect_file(path).info;
    });
}

specdec_status specdec_inspect_buffer(const void * data, size_t size, specdec_model_info * out) {
    return guard([&] {
        require(out, "out");
        *out = specdec::detail::inspect_bytes(data, size).info;
    });
}

specdec_status specdec_check_exact(const char * path) {
    return guard([&] {
        require(path, "path");
        specdec::detail::check_exact(specdec::detail::inspect_file(path));
    });
}

specdec_status specdec_check_pair(const char * target_path, const char * draft_path, specdec_strategy strategy) {
    return guard([&] {
        require(target_path, "target_path");
        if (specdec_strategy_name(strategy) == nullptr) {
            specdec::detail::fail(SPECDEC_STATUS_INVALID_ARGUMENT, "strategy ", static_cast<int>(strategy), " is unknown");
        }
        const auto target = specdec::detail::inspect_file(target_path);
        if (draft_path == nullptr) {
            specdec::detail::check_pair(target, nullptr, strategy);
            return;
        }
        const auto draft = specdec::detail::inspect_file(draft_path);
        specdec::detail::check_pair(target, &draft, strategy);
    });
}

specdec_status specdec_detect_strategy(const char * target_path, const char * draft_path, specdec_strategy * out) {
    return guard([&] {
        require(target_path, "target_path");
        require(out, "out");
        const auto target = specdec::detail::inspect_file(target_path);
        if (draft_path == nullptr) {
            *out = specdec::detail::detect_strategy(target, nullptr);
            return;
        }
        const auto draft = specdec::detail::inspect_file(draft_path);
        *out = specdec::detail::detect_strategy(target, &draft);
    });
}

specdec_status specdec_tokenize(const llama_vocab * vocab, const char * text, size_t n_text, bool add_special,
                                bool parse_special, llama_token * tokens, size_t capacity, size_t * n_tokens) {
    return guard([&] {
        require(n_tokens, "n_tokens");
        require_buffer(tokens, capacity, "tokens");
        if (n_text > 0) {
            require(text, "text");
        }
        copy_out(specdec::tokenize(vocab, {text, n_text}, add_special, parse_special), tokens, capacity, n_tokens);
    });
}

specdec_status specdec_detokenize(const llama_vocab * vocab, const llama_token * tokens, size_t n_tokens,
                                  bool remove_special, bool unparse_special, char * text, size_t capacity,
                                  size_t * n_bytes) {
    return guard([&] {
        require(n_bytes, "n_bytes");
        require_buffer(text, capacity, "text");
        if (n_tokens > 0) {
            require(tokens, "tokens");
        }
        copy_out(specdec::detokenize(vocab, {tokens, n_tokens}, remove_special, unparse_special), text, capacity, n_bytes);
    });
}

specdec_status specdec_token_to_piece(const llama_vocab * vocab, llama_token token, int32_t lstrip, bool special,
                                      char * piece, size_t capacity, size_t * n_bytes) {
    return guard([&] {
        require(n_bytes, "n_bytes");
        require_buffer(piece, capacity, "piece");
        copy_out(specdec::token_to_piece(vocab, token, lstrip, special), piece, capacity, n_bytes);
    });
}

specdec_status specdec_rpc_add_servers(const char * servers) {
    return guard([&] {
        require(servers, "servers");
        specdec::rpc_add_servers(servers);
    });
}

} // extern "C"

extern "C" {

specdec_status specdec_engine_init(specdec_session * session, llama_context * target, const specdec_engine_params * params,
                                   specdec_engine_callback callback, void * user_data, specdec_engine ** out) {
    return guard([&] {
        require(out, "out");
        *out = nullptr;
        require(params, "params");
        if (session != nullptr) {
            *out = new specdec_engine(session->session, *params, callback, user_data);
        } else {
            require(target, "target (with session NULL)");
            *out = new specdec_engine(target, *params, callback, user_data);
        }
    });
}

void specdec_engine_free(specdec_engine * engine) {
    delete engine;
}

specdec_status specdec_engine_add(specdec_engine * engine, const llama_token * prompt, size_t n_prompt,
                                  const specdec_generate_params * params, specdec_request_id * id) {
    return specdec_engine_add_n(engine, prompt, n_prompt, params, 1, id);
}

specdec_status specdec_engine_add_n(specdec_engine * engine, const llama_token * prompt, size_t n_prompt,
                                    const specdec_generate_params * params, uint32_t n, specdec_request_id * first_id) {
    return guard([&] {
        require(engine, "engine");
        require(params, "params");
        require(first_id, "id");
        if (n_prompt > SPECDEC_MAX_PROMPT_TOKENS) {
            specdec::detail::fail(SPECDEC_STATUS_PROMPT_TOO_LONG, "the prompt has ", n_prompt,
                                  " tokens, above SPECDEC_MAX_PROMPT_TOKENS = ", SPECDEC_MAX_PROMPT_TOKENS);
        }
        if (n_prompt > 0) {
            require(prompt, "prompt");
        }
        *first_id = engine->engine.add_n(std::span<const llama_token>(prompt, n_prompt), *params, n);
    });
}

specdec_status specdec_engine_cancel(specdec_engine * engine, specdec_request_id id) {
    return guard([&] {
        require(engine, "engine");
        engine->engine.cancel(id);
    });
}

specdec_status specdec_engine_pause(specdec_engine * engine, specdec_request_id id, bool paused) {
    return guard([&] {
        require(engine, "engine");
        engine->engine.pause(id, paused);
    });
}

specdec_status specdec_engine_step(specdec_engine * engine) {
    return guard([&] {
        require(engine, "engine");
        engine->engine.step();
    });
}

specdec_status specdec_engine_run_until_idle(specdec_engine * engine) {
    return guard([&] {
        require(engine, "engine");
        engine->engine.run_until_idle();
    });
}

bool specdec_engine_has_work(const specdec_engine * engine) {
    return engine != nullptr && engine->engine.has_work();
}

} // extern "C"
