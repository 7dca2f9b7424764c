// The continuous-batching engine over a generation_backend: requests wait in
// a bounded FIFO, take free sequence slots, have their prompts decoded in
// chunks, and then share one verification batch per step with every other
// running request until they finish and leave. specdec::engine wraps it over
// a real backend; generate() is a run of it with every prompt added first;
// the unit tests drive it with a scripted backend.
#pragma once

#include "generation-backend.h"

#include "draft-length.h"
#include "grammar-memo.h"
#include "rejection-sampler.h"

#include <atomic>
#include <deque>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace specdec::detail {

// Throws error(INVALID_ARGUMENT) for generation parameters out of range.
void validate_request(const generation_backend & backend, const request_params & params);

struct request_state; // one request, from add to its finished event (engine.cpp)

class engine_core {
public:
    // Validates `params` against the backend; throws error (see specdec_engine_init).
    engine_core(generation_backend & backend, const engine_params & params, event_callback on_event);
    ~engine_core();
    engine_core(const engine_core &) = delete;
    engine_core & operator=(const engine_core &) = delete;

    request_id add(std::span<const llama_token> prompt, const request_params & params) { return add_n(prompt, params, 1); }
    // n requests of one prompt, decoded once (see specdec_engine_add_n); returns the first id.
    request_id add_n(std::span<const llama_token> prompt, const request_params & params, uint32_t n);
    void       cancel(request_id id); // any thread
    void       pause(request_id id, bool paused); // any thread; see specdec_engine_pause
    void       step();
    bool       has_work() const;
    const specdec_generation_times & times() const { return times_; }
    uint32_t   n_slots() const { return static_cast<uint32_t>(slots_.size()); }
    // The prompt cache's sequences and the host bytes they hold.
    size_t     n_cached() const { return cache_.size(); }
    size_t     cached_bytes() const { return cache_bytes_; }
    // Slot files (specdec::engine::export_slot and the others).
    std::vector<uint8_t> export_slot(uint32_t slot, size_t & n_tokens);
    size_t               import_slot(uint32_t slot, std::span<const uint8_t> blob);
    size_t               erase_slot(uint32_t slot);

private:
    struct step_plan; // per slot: draft cap, asked length, proposal, batch row (engine.cpp)

    // The phases of a step, in order.
    void apply_cancellations();
    void apply_pauses();
    void admit();
    bool evict_paused();
    void take_slot(std::unique_ptr<request_state> r);
    std::pair<size_t, size_t> choose_slot(std::span<const llama_token> prompt) const; // a free slot, and its common prefix
    size_t load_cached(std::span<const llama_token> prompt, size_t s, size_t prefix);
    void   require_free_slot(uint32_t slot) const;
    void   save_slot(size_t s);
    void   vacate(size_t s);
    size_t load_slot(size_t s, std::vector<llama_token> tokens, const generation_backend::saved_sequence & state);
    void compact();
    void prefill();
    void start(request_state & r, int32_t row);
    void start_followers(const request_state & leader, int32_t row);
    step_plan plan_lengths();
    void draft(step_plan & plan);
    void verify(step_plan & plan);
    void accept(step_plan & plan);
    void retire();
    // After a failed phase: see specdec_engine_step.
    void fail_running() noexcept;

    int32_t accept_one(request_state & r, const std::vector<llama_token> & proposal, int32_t row0);
    std::optional<verdict> choose(request_state & r, const float * logits, llama_pos pos, const llama_token * drafted,
                                  std::span<const specdec_token_prob> q);
    bool    keep_synthetic(request_state & r, llama_token drafted);
    void    emit(request_state & r, llama_token x, llama_pos pos, const float * logits);
    bool    deliver(const engine_event & e);
    void    finish(request_state & r, specdec_stop_reason stop);
    void    hand_out(request_state & r);
    bool    decoding(const request_state * r) const;
    bool    admissible(const request_state & r) const;

    generation_backend & b_;
    const engine_params  p_;
    const event_callback on_event_;
    const int32_t        n_ctx_; // positions per slot
    std::optional<adaptive_draft_length> adaptive_; // one for all slots: lengths are planned for the whole batch

    // The tokens grammar states allow, for every request's grammar on the
    // target's vocabulary (grammar-memo.h). Before the requests, which
    // borrow it.
    grammar_memo grammar_memo_;

    std::vector<std::unique_ptr<request_state>> slots_;   // [seq]: the request holding it, or null
    std::vector<std::vector<llama_token>>       held_;    // [seq]: the tokens at its positions [0, size) in the target
    std::deque<std::unique_ptr<request_state>>  waiting_; // FIFO, at most p_.max_waiting + free slots

    // The prompt cache (p_.prompt_cache_bytes): what slots held before
    // another prompt took them, most recently saved first.
    struct cached_sequence {
        std::vector<llama_token>                                 tokens;
        size_t                                                   slot; // saved from; loads elsewhere only where b_.copies_sequences()
        std::unique_ptr<generation_backend::saved_sequence> state;
    };
    std::list<cached_sequence> cache_;
    size_t                     cache_bytes_ = 0;

    std::atomic<request_id>  next_id_{1};
    mutable std::mutex       cancel_mutex_; // guards cancelled_ and pauses_, the only state other threads touch
    std::vector<request_id>  cancelled_;
    std::vector<std::pair<request_id, bool>> pauses_; // in the order asked

    struct token_batch;
    std::unique_ptr<token_batch> batch_;
    specdec_generation_times     times_{};
};

} // namespace specdec::detail
