// `specdec serve`, the bridge between the HTTP layer and the engine: one
// engine thread (whichever calls run()) owns the specdec::engine (add and
// step run there only); the HTTP layer puts requests into a mutex-guarded
// inbox and reads the request's own channel, which the engine's event
// callback feeds, either waiting on it or told by its notification.
// cancel() is the engine's, callable from any thread.
// Nothing here knows HTTP or speculation.
#pragma once

#include "serve-metrics.h"

#include "specdec/specdec.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace cli::serve {

using clock_type = std::chrono::steady_clock;

// The mode a request's drafts are decided by, as the engine applies it:
// rejection when it asks for it, samples and drafts (n_draft != 0), else
// exact (greedy requests and plain decoding are exact in both). What the
// response and /metrics report.
inline specdec_accept_mode accept_ran(const specdec::request_params & p) {
    const bool rejection = p.accept == SPECDEC_ACCEPT_REJECTION && p.temperature >= SPECDEC_MIN_SAMPLING_TEMPERATURE && p.n_draft != 0;
    return rejection ? SPECDEC_ACCEPT_REJECTION : SPECDEC_ACCEPT_EXACT;
}

// One request on its way through the engine, shared by the HTTP thread that
// waits for it and the engine thread that feeds it. Thread-safe.
class request_channel {
public:
    enum class state {
        pending,  // in the inbox, not yet handed to the engine
        admitted, // the engine took it (waiting for a slot or running)
        rejected, // the engine refused it (see status(), message())
        finished, // its finished event came (see result())
    };

    // The prompt (at least one token) and parameters; params.stop_strings is
    // ignored and set from `stops`, which the channel owns.
    request_channel(std::vector<llama_token> prompt, specdec::request_params params, std::vector<std::string> stops);

    // HTTP side. Waits until the engine took or refused it (or `timeout`);
    // returns the state then.
    state wait_admission(std::chrono::milliseconds timeout);
    // Waits up to `timeout` for text or the end; appends the text released
    // since the last call to `text`, and, when the request asked for
    // log-probabilities, its tokens since the last call with theirs to
    // `logprobs` (tokens, logprobs, top_logprobs; optional); true once
    // finished (result() is then valid and everything has been handed out).
    bool wait_output(std::chrono::milliseconds timeout, std::string & text, specdec::sequence_result * logprobs = nullptr);
    specdec_status      status() const;            // when rejected
    std::string         message() const;           // when rejected
    const specdec::request_result & result() const; // when finished (stable from then on)
    bool                cancel_requested() const { return cancel_requested_.load(); }
    // Any thread: `fn` is called on the engine thread after each change
    // (admitted, rejected, text or log-probabilities released, finished),
    // with the channel's lock held: keep it short (hand the work to another
    // thread) and do not call the channel from it. Set it before submit;
    // nullptr drops it (and what it holds). The channel drops it itself
    // after the last change (finished or rejected) has been notified.
    void                set_notify(std::function<void()> fn);
    size_t              n_prompt() const { return prompt_.size(); }

private:
    friend class scheduler;

    // Engine side (the scheduler's engine thread).
    void on_admitted(specdec::request_id id);
    // These two return whether it was marked paused (the mark is cleared with the state's change).
    bool on_rejected(specdec_status code, std::string message);
    void on_token(const specdec::engine_event & e, clock_type::time_point now);
    bool on_finished(const specdec::request_result & r);
    // Any thread: marks it cancelled; returns its engine id (0: not admitted yet).
    specdec::request_id mark_cancelled();
    // Any thread: marks it paused or not and, once admitted, has `apply`
    // tell the engine, under the channel's lock (so that the engine hears
    // the marks in the order they were made).
    // Returns whether the mark changed (never once finished or rejected).
    template <class F> bool mark_paused(bool paused, F apply) {
        std::lock_guard<std::mutex> lock(m_);
        if (paused_ == paused || state_ == state::finished || state_ == state::rejected) {
            return false;
        }
        paused_ = paused;
        if (id_ != 0 && state_ == state::admitted) {
            apply(id_, paused);
        }
        return true;
    }

    const std::vector<llama_token>  prompt_;
    specdec::request_params         params_;
    const std::vector<std::string>  stops_;
    std::vector<const char *>       stop_ptrs_;
    const clock_type::time_point    t_submit_ = clock_type::now();

    mutable std::mutex              m_;
    std::condition_variable         cv_;
    state                           state_ = state::pending;
    specdec::request_id             id_ = 0;
    specdec_status                  status_ = SPECDEC_STATUS_OK;
    std::string                     message_;
    std::string                     text_;      // released and not yet handed out
    specdec::sequence_result        logprobs_;  // tokens with log-probabilities not yet handed out
    specdec::request_result         result_;
    std::atomic<bool>               cancel_requested_{false};
    bool                            paused_ = false; // under m_
    std::function<void()>           notify_;    // under m_
    // Engine thread only.
    std::optional<clock_type::time_point> t_first_, t_last_;
    uint64_t                        n_token_events_ = 0;
};

// What one slot is doing, as far as the engine's events tell (GET /slots):
// a request is seen in its slot from its first token on (not while its
// prompt is read), and stays listed there, finished, until another's
// first token.
struct slot_view {
    bool                    processing = false; // a request in it is generating
    specdec::request_id     id_task = 0;        // the last request seen in it (0: none yet)
    size_t                  n_prompt = 0;       // that request's prompt tokens
    size_t                  n_prompt_cached = 0; // of them taken from the slot's memory (known once it finished)
    size_t                  n_decoded = 0;      // tokens it emitted so far
    specdec::request_params params{};           // its parameters (the pointers in them cleared)
};

// What the engine thread does besides decoding; either may be empty.
struct engine_hooks {
    // At each request's end (inside the step's callback): its output tokens.
    std::function<void(std::span<const llama_token>)> finished;
    // After each step, between steps: the session may be changed here.
    std::function<void()> between_steps;
};

// Owns the engine. Construct, call run() on the thread that is to decode,
// submit from any thread; shutdown() (or the destructor) makes run() return.
// Every member is thread-safe.
class scheduler {
public:
    // `s` (speculative) or `target` (plain, when s is null) must outlive the
    // scheduler; so must `m`. params.n_seq is the number of slots (0: the
    // session's). `log` receives one-line messages from the engine thread (may
    // be empty). Throws specdec::error from the engine's constructor.
    scheduler(specdec::session * s, llama_context * target, const specdec::engine_params & params, metrics & m,
              std::function<void(const std::string &)> log, engine_hooks hooks = {});
    ~scheduler();
    scheduler(const scheduler &) = delete;
    scheduler & operator=(const scheduler &) = delete;

    // Queues `group` (one channel or more) for the engine thread, which adds it to the engine and
    // reports on each through its channel; the scheduler keeps a reference
    // to each until it finished. A group of several is n completions of one
    // prompt (specdec_engine_add_n): every channel holds the same prompt and
    // parameters but the seed, which is channel 0's + i, and they are added
    // (or refused) together. false (nothing queued) once shutdown has begun.
    bool submit(std::vector<std::shared_ptr<request_channel>> group);
    // Cancels a request wherever it is (inbox, waiting, running); its
    // finished event follows with SPECDEC_STOP_CANCELLED. Idempotent.
    void cancel(const std::shared_ptr<request_channel> & c);
    // Holds a request (paused) or lets it go on, wherever it is: a paused
    // one keeps its slot and is not decoded (specdec_engine_pause). For a
    // client that is not reading its stream. The last call wins.
    void pause(const std::shared_ptr<request_channel> & c, bool paused);
    // Stops accepting, lets the requests in flight (every one handed in:
    // in the inbox, being added, waiting, running) finish until `deadline`
    // from now, cancels the rest (their channels finish with
    // SPECDEC_STOP_CANCELLED), waits for them to leave and for run() to
    // return. Returns the number cancelled. Idempotent (later calls return 0).
    // Requests in flight need run() running (or called later) to leave.
    size_t shutdown(std::chrono::milliseconds deadline);
    // The engine loop: adds what was submitted, steps while there is work,
    // sleeps while there is none; returns once shutdown() has begun and no
    // request is left (at once if it already has). Call it once, on the
    // thread that should decode: llama.cpp's OpenMP build keeps a thread
    // team per calling thread (see cmd-serve.cpp).
    void run();
    // Requests handed in and not finished (inbox, being added, waiting, running).
    size_t n_in_flight() const;
    // A copy of what each slot is doing, [0, slots); the engine thread updates it at each event.
    std::vector<slot_view> slots() const;
    // Any thread: runs `f` on the engine thread between two steps, waits for
    // it, and rethrows what it threw. Throws specdec::error(INVALID_ARGUMENT)
    // without running it once shutdown has begun (for the slot files'
    // export, import and erase).
    void call(const std::function<void(specdec::engine &)> & f);

private:
    bool on_event(const specdec::engine_event & e);
    void admit(const std::vector<std::shared_ptr<request_channel>> & group);
    // The n requests of a group taken from the inbox are added (ids first .. first + n - 1) or refused (first 0).
    void settle_taken(specdec::request_id first, size_t n);
    // Engine thread: the admitted requests not paused, and the paused ones.
    std::pair<size_t, size_t> load() const;
    void publish_load();
    // Wakes the engine thread for a step (a cancellation or pause to apply).
    void kick();

    metrics &                                    metrics_;
    std::function<void(const std::string &)>     log_;
    const engine_hooks                           hooks_;
    const size_t                                 n_slots_;
    std::unique_ptr<specdec::engine>             engine_;

    mutable std::mutex                           m_;
    std::condition_variable                      wake_;   // the engine thread: inbox, stop
    std::condition_variable                      idle_;   // shutdown: a request finished, run() returned
    std::deque<std::vector<std::shared_ptr<request_channel>>> inbox_;
    // call()'s functions, in order, each with where its caller waits for it.
    struct engine_call {
        const std::function<void(specdec::engine &)> * f;
        std::promise<void> *                           done;
    };
    std::deque<engine_call>                      calls_;
    size_t                                       n_inbox_ = 0; // requests in the inbox
    size_t                                       n_taken_ = 0; // requests taken from the inbox by the engine thread, not yet added or refused
    std::set<specdec::request_id>                live_;   // admitted, not finished
    bool                                         accepting_ = true;
    bool                                         stop_ = false;    // set by shutdown() once nothing is left: run() returns, later shutdowns return 0
    bool                                         running_ = false; // run() is looping
    bool                                         kicked_ = false;  // a cancellation or pause for the engine: step even if it was idle
    std::atomic<size_t>                          n_paused_{0};     // channels marked paused and not finished
    mutable std::mutex                           slots_m_; // guards slots_
    std::vector<slot_view>                       slots_;
    // Engine thread only.
    std::unordered_map<specdec::request_id, std::shared_ptr<request_channel>> by_id_;
};

} // namespace cli::serve
