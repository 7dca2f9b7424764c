#include "serve-scheduler.h"

#include <algorithm>
#include <utility>

namespace cli::serve {

namespace {

double seconds_between(clock_type::time_point a, clock_type::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

} // namespace

request_channel::request_channel(std::vector<llama_token> prompt, specdec::request_params params, std::vector<std::string> stops)
    : prompt_(std::move(prompt)), params_(params), stops_(std::move(stops)) {
    for (const auto & s : stops_) {
        stop_ptrs_.push_back(s.c_str());
    }
    params_.stop_strings = stop_ptrs_.data();
    params_.n_stop_strings = stop_ptrs_.size();
}

request_channel::state request_channel::wait_admission(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait_for(lock, timeout, [this] { return state_ != state::pending; });
    return state_;
}

bool request_channel::wait_output(std::chrono::milliseconds timeout, std::string & text, specdec::sequence_result * logprobs) {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait_for(lock, timeout, [this] {
        return !text_.empty() || !logprobs_.tokens.empty() || state_ == state::finished || state_ == state::rejected;
    });
    text += text_;
    text_.clear();
    if (logprobs != nullptr) {
        logprobs->tokens.insert(logprobs->tokens.end(), logprobs_.tokens.begin(), logprobs_.tokens.end());
        logprobs->logprobs.insert(logprobs->logprobs.end(), logprobs_.logprobs.begin(), logprobs_.logprobs.end());
        logprobs->top_logprobs.insert(logprobs->top_logprobs.end(), logprobs_.top_logprobs.begin(), logprobs_.top_logprobs.end());
    }
    logprobs_.tokens.clear();
    logprobs_.logprobs.clear();
    logprobs_.top_logprobs.clear();
    return state_ == state::finished;
}

specdec_status request_channel::status() const {
    std::lock_guard<std::mutex> lock(m_);
    return status_;
}

std::string request_channel::message() const {
    std::lock_guard<std::mutex> lock(m_);
    return message_;
}

const specdec::request_result & request_channel::result() const {
    return result_; // written once, before state_ became finished under m_
}

void request_channel::on_admitted(specdec::request_id id) {
    std::lock_guard<std::mutex> lock(m_);
    id_ = id;
    state_ = state::admitted;
    cv_.notify_all();
    if (notify_) {
        notify_();
    }
}

bool request_channel::on_rejected(specdec_status code, std::string message) {
    std::function<void()> last; // the final change's notification, destroyed unlocked (what it holds may own this channel)
    std::lock_guard<std::mutex> lock(m_);
    const bool was_paused = std::exchange(paused_, false);
    status_ = code;
    message_ = std::move(message);
    state_ = state::rejected;
    cv_.notify_all();
    if (notify_) {
        notify_();
    }
    last = std::exchange(notify_, nullptr);
    return was_paused;
}

void request_channel::on_token(const specdec::engine_event & e, clock_type::time_point now) {
    if (!t_first_) {
        t_first_ = now;
    }
    t_last_ = now;
    ++n_token_events_;
    if (e.piece.empty() && e.logprob == nullptr) {
        return;
    }
    std::lock_guard<std::mutex> lock(m_);
    text_.append(e.piece);
    if (e.logprob != nullptr) {
        logprobs_.tokens.push_back(e.logprob->token);
        logprobs_.logprobs.push_back(e.logprob->logprob);
        logprobs_.top_logprobs.insert(logprobs_.top_logprobs.end(), e.top_logprobs.begin(), e.top_logprobs.end());
    }
    cv_.notify_all();
    if (notify_) {
        notify_();
    }
}

bool request_channel::on_finished(const specdec::request_result & r) {
    std::function<void()> last; // the final change's notification, destroyed unlocked (what it holds may own this channel)
    std::lock_guard<std::mutex> lock(m_);
    const bool was_paused = std::exchange(paused_, false);
    result_ = r;
    state_ = state::finished;
    cv_.notify_all();
    if (notify_) {
        notify_();
    }
    last = std::exchange(notify_, nullptr);
    return was_paused;
}

void request_channel::set_notify(std::function<void()> fn) {
    std::function<void()> old; // destroyed unlocked: what it holds may own this channel
    std::lock_guard<std::mutex> lock(m_);
    old = std::exchange(notify_, std::move(fn));
}

specdec::request_id request_channel::mark_cancelled() {
    std::lock_guard<std::mutex> lock(m_);
    cancel_requested_.store(true);
    return id_;
}

scheduler::scheduler(specdec::session * s, llama_context * target, const specdec::engine_params & params, metrics & m,
                     std::function<void(const std::string &)> log, engine_hooks hooks)
    : metrics_(m), log_(std::move(log)), hooks_(std::move(hooks)),
      n_slots_(params.n_seq > 0 ? params.n_seq : s != nullptr ? s->params().n_seq : llama_n_seq_max(target)), slots_(n_slots_) {
    auto cb = [this](const specdec::engine_event & e) { return on_event(e); };
    engine_ = s != nullptr ? std::make_unique<specdec::engine>(*s, params, cb) : std::make_unique<specdec::engine>(target, params, cb);
}

scheduler::~scheduler() {
    shutdown(std::chrono::milliseconds(0));
}

bool scheduler::submit(std::vector<std::shared_ptr<request_channel>> group) {
    std::lock_guard<std::mutex> lock(m_);
    if (!accepting_) {
        return false;
    }
    n_inbox_ += group.size();
    inbox_.push_back(std::move(group));
    wake_.notify_one();
    return true;
}

void scheduler::cancel(const std::shared_ptr<request_channel> & c) {
    const specdec::request_id id = c->mark_cancelled();
    if (id != 0) {
        engine_->cancel(id); // thread-safe; a finished request is left alone
    }
    // Not admitted yet: admit() sees the mark and cancels it right after add().
    kick();
}

void scheduler::pause(const std::shared_ptr<request_channel> & c, bool paused) {
    // Not admitted yet: admit() applies the mark right after add().
    if (c->mark_paused(paused, [this](specdec::request_id id, bool p) { engine_->pause(id, p); })) {
        paused ? n_paused_.fetch_add(1) : n_paused_.fetch_sub(1);
        kick();
    }
}

void scheduler::kick() {
    std::lock_guard<std::mutex> lock(m_);
    kicked_ = true;
    wake_.notify_one();
}

std::vector<slot_view> scheduler::slots() const {
    std::lock_guard<std::mutex> lock(slots_m_);
    return slots_;
}

size_t scheduler::n_in_flight() const {
    std::lock_guard<std::mutex> lock(m_);
    return n_inbox_ + n_taken_ + live_.size();
}

size_t scheduler::shutdown(std::chrono::milliseconds deadline) {
    std::unique_lock<std::mutex> lock(m_);
    if (stop_) {
        return 0;
    }
    accepting_ = false;
    const auto until = clock_type::now() + deadline;
    const auto none_left = [this] { return n_inbox_ == 0 && n_taken_ == 0 && live_.empty(); };
    idle_.wait_until(lock, until, none_left);
    size_t n_cancelled = 0;
    // The inbox and what the engine thread took from it empty within a
    // step: what they hold is added to the engine, then cancelled here.
    while (!none_left()) {
        for (specdec::request_id id : live_) {
            engine_->cancel(id);
        }
        kicked_ = true; // the engine may be idle with paused requests only
        wake_.notify_one();
        n_cancelled += live_.size();
        live_.clear(); // their finished events still come; on_event tolerates the missing entry
        idle_.wait_for(lock, std::chrono::milliseconds(50));
    }
    stop_ = true;
    wake_.notify_one();
    idle_.wait(lock, [this] { return !running_; });
    return n_cancelled;
}

void scheduler::settle_taken(specdec::request_id first, size_t n) {
    std::lock_guard<std::mutex> lock(m_);
    n_taken_ -= n;
    for (size_t i = 0; first != 0 && i < n; ++i) {
        live_.insert(first + i);
    }
    idle_.notify_all();
}

void scheduler::admit(const std::vector<std::shared_ptr<request_channel>> & group) {
    const request_channel & c0 = *group.front();
    specdec::request_id first = 0;
    const auto refuse = [&](specdec_status code, const std::string & message) {
        settle_taken(0, group.size());
        for (const auto & c : group) {
            if (c->on_rejected(code, message)) {
                n_paused_.fetch_sub(1);
            }
        }
    };
    try {
        first = engine_->add_n(c0.prompt_, c0.params_, static_cast<uint32_t>(group.size()));
    } catch (const specdec::error & e) {
        if (e.code() == SPECDEC_STATUS_QUEUE_FULL) {
            metrics_.add_rejected();
        }
        refuse(e.code(), e.what());
        return;
    } catch (const std::exception & e) {
        refuse(SPECDEC_STATUS_NATIVE_FAILURE, e.what());
        return;
    }
    for (size_t i = 0; i < group.size(); ++i) {
        by_id_[first + i] = group[i];
    }
    settle_taken(first, group.size());
    for (size_t i = 0; i < group.size(); ++i) {
        request_channel & c = *group[i];
        const specdec::request_id id = first + i;
        {
            // Admitted and told the engine under the channel's lock: a pause
            // marked before it is applied here, one marked after by pause().
            std::lock_guard<std::mutex> lock(c.m_);
            c.id_ = id;
            if (c.paused_) {
                engine_->pause(id, true);
            }
        }
        c.on_admitted(id);
        if (c.cancel_requested()) {
            engine_->cancel(id);
        }
    }
}

void scheduler::call(const std::function<void(specdec::engine &)> & f) {
    std::promise<void> done;
    std::future<void> result = done.get_future();
    {
        std::lock_guard<std::mutex> lock(m_);
        if (!accepting_ || stop_) {
            throw specdec::error(SPECDEC_STATUS_INVALID_ARGUMENT, "the server is shutting down");
        }
        calls_.push_back({&f, &done});
    }
    wake_.notify_all();
    result.get();
}

std::pair<size_t, size_t> scheduler::load() const {
    const size_t paused = std::min(n_paused_.load(), by_id_.size());
    return {by_id_.size() - paused, paused};
}

void scheduler::publish_load() {
    const auto [live, paused] = load();
    const size_t running = std::min(live, n_slots_);
    metrics_.set_load(running, live - running, paused);
    const specdec::engine::prompt_cache_use cache = engine_->prompt_cache();
    metrics_.set_prompt_cache(cache.n_sequences, cache.n_bytes);
}

bool scheduler::on_event(const specdec::engine_event & e) {
    const auto it = by_id_.find(e.id);
    if (it == by_id_.end()) {
        return true;
    }
    const std::shared_ptr<request_channel> & c = it->second;
    if (e.seq_id >= 0 && static_cast<size_t>(e.seq_id) < n_slots_) {
        std::lock_guard<std::mutex> lock(slots_m_);
        slot_view & v = slots_[static_cast<size_t>(e.seq_id)];
        if (v.id_task != e.id) { // its first event in this slot (it may have moved down from another)
            for (slot_view & other : slots_) {
                other.processing = other.id_task == e.id ? false : other.processing;
            }
            v = slot_view{};
            v.id_task = e.id;
            v.n_prompt = c->n_prompt();
            v.params = c->params_;
            v.params.stop_strings = nullptr;
            v.params.n_stop_strings = 0;
            v.params.logit_bias = nullptr;
            v.params.n_logit_bias = 0;
            v.params.grammar = nullptr;
            v.params.grammar_triggers = nullptr;
            v.params.n_grammar_triggers = 0;
            v.params.grammar_prefix = nullptr;
            v.params.reasoning_start = nullptr;
            v.params.reasoning_end = nullptr;
            v.params.reasoning_budget_message = nullptr;
            v.params.reasoning_prefix = nullptr;
        }
        if (e.type == SPECDEC_ENGINE_EVENT_TOKEN) {
            v.processing = true;
            v.n_decoded += e.token != LLAMA_TOKEN_NULL ? 1 : 0;
        } else {
            v.processing = false;
            v.n_decoded = e.result->output.tokens.size();
            v.n_prompt_cached = e.result->n_prompt_cached;
        }
    }
    if (e.type == SPECDEC_ENGINE_EVENT_TOKEN) {
        c->on_token(e, clock_type::now());
        if (e.token != LLAMA_TOKEN_NULL) {
            metrics_.add_generated(1);
        }
        return true;
    }
    request_metrics rm;
    rm.n_prompt = c->n_prompt();
    rm.n_prompt_cached = e.result->n_prompt_cached;
    rm.stop = e.result->output.stop;
    rm.rejection = accept_ran(c->params_) == SPECDEC_ACCEPT_REJECTION;
    rm.stats = e.result->output.stats;
    rm.n_predicted = e.result->output.tokens.size();
    const specdec_request_times & t = e.result->times;
    if (t.t_first_token_us >= 0) {
        rm.prompt_s = static_cast<double>(t.t_first_token_us) / 1e6;
        rm.predicted_s = static_cast<double>(std::max<int64_t>(t.t_total_us - t.t_first_token_us, 0)) / 1e6;
    }
    if (c->t_first_) {
        rm.ttft_s = seconds_between(c->t_submit_, *c->t_first_);
        const size_t n = e.result->output.tokens.size();
        if (n >= 2) {
            rm.itl_s = seconds_between(*c->t_first_, *c->t_last_) / static_cast<double>(n - 1);
        }
    }
    metrics_.add_finished(rm);
    if (hooks_.finished) {
        hooks_.finished(e.result->output.tokens);
    }
    if (c->on_finished(*e.result)) {
        n_paused_.fetch_sub(1);
    }
    const specdec::request_id id = e.id;
    by_id_.erase(it);
    {
        std::lock_guard<std::mutex> lock(m_);
        live_.erase(id);
        idle_.notify_all();
    }
    return true;
}

void scheduler::run() {
    std::unique_lock<std::mutex> lock(m_);
    if (stop_ || running_) {
        return;
    }
    running_ = true;
    bool busy = false;
    for (;;) {
        wake_.wait(lock, [&] { return busy || kicked_ || !inbox_.empty() || !calls_.empty() || stop_; });
        kicked_ = false;
        std::deque<std::vector<std::shared_ptr<request_channel>>> arrived;
        arrived.swap(inbox_);
        std::deque<engine_call> calls;
        calls.swap(calls_);
        n_taken_ = std::exchange(n_inbox_, 0); // shutdown() sees them until admit() settles each
        lock.unlock();
        for (const engine_call & c : calls) {
            try {
                (*c.f)(*engine_);
                c.done->set_value();
            } catch (...) {
                c.done->set_exception(std::current_exception());
            }
        }
        for (const auto & group : arrived) {
            admit(group);
        }
        if (engine_->has_work()) {
            metrics_.add_step(std::min(load().first, n_slots_));
            try {
                engine_->step();
            } catch (const std::exception & e) {
                // The requests in slots finished with SPECDEC_STOP_ERROR (their events came); the engine stays usable.
                if (log_) {
                    log_(std::string("a step failed: ") + e.what());
                }
            }
            if (hooks_.between_steps) {
                hooks_.between_steps();
            }
        }
        busy = engine_->has_work();
        publish_load();
        lock.lock();
        if (!arrived.empty() || !busy) {
            idle_.notify_all(); // shutdown watches the inbox empty
        }
        if (stop_ && !busy && inbox_.empty() && calls_.empty()) {
            break;
        }
    }
    running_ = false;
    idle_.notify_all();
}

} // namespace cli::serve
