// The engine's step, phase by phase: cancellations, admission, chunked
// prefill, draft lengths for the whole running set, drafting, one
// verification batch, acceptance (emitting tokens, learning lengths and
// costs), retirement. Every request's text goes through its own text_stream
// (stop strings, held-back streaming).
#include "engine.h"

#include "error.h"
#include "logit-shaping.h"
#include "logprobs.h"
#include "sampler.h"
#include "state-codec.h"
#include "text-stream.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <tuple>

namespace specdec::detail {

namespace {

using clock_type = std::chrono::steady_clock;

int64_t since_us(clock_type::time_point t0) {
    return std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - t0).count();
}

size_t common_prefix(std::span<const llama_token> a, std::span<const llama_token> b) {
    const size_t n = std::min(a.size(), b.size());
    return static_cast<size_t>(std::mismatch(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), b.begin()).first - a.begin());
}

std::vector<std::string> stop_strings(const request_params & p) {
    std::vector<std::string> out;
    for (size_t i = 0; i < p.n_stop_strings; ++i) {
        out.emplace_back(p.stop_strings[i]);
    }
    return out;
}

} // namespace

void validate_request(const generation_backend & backend, const request_params & p) {
    if (p.n_predict < 0) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "n_predict is ", p.n_predict, "; it must be >= 0");
    }
    if ((p.n_draft < -1 && p.n_draft != SPECDEC_N_DRAFT_AUTO) || p.n_draft > backend.n_draft_max()) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "n_draft is ", p.n_draft, "; it must be within [-1, ", backend.n_draft_max(),
             "] or SPECDEC_N_DRAFT_AUTO");
    }
    if (!(p.synthetic_acceptance < 0.0f) && !(p.synthetic_acceptance >= 0.0f && p.synthetic_acceptance <= 1.0f)) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "synthetic_acceptance is ", p.synthetic_acceptance,
             "; it must be negative (off) or within [0, 1]");
    }
    if (p.n_stop_strings > 0 && p.stop_strings == nullptr) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "stop_strings must not be NULL when n_stop_strings > 0");
    }
    for (size_t i = 0; i < p.n_stop_strings; ++i) {
        if (p.stop_strings[i] == nullptr || p.stop_strings[i][0] == '\0') {
            fail(SPECDEC_STATUS_INVALID_ARGUMENT, "stop string ", i, " is empty");
        }
    }
    if (p.n_top_logprobs > SPECDEC_MAX_TOP_LOGPROBS) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "n_top_logprobs is ", p.n_top_logprobs, "; it must be at most ",
             SPECDEC_MAX_TOP_LOGPROBS, " (or negative: none)");
    }
    validate_sampling(p.temperature, p.top_p, p.min_p);
    if (p.accept != SPECDEC_ACCEPT_EXACT && p.accept != SPECDEC_ACCEPT_REJECTION) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "accept is ", static_cast<int>(p.accept), "; it must be SPECDEC_ACCEPT_EXACT or SPECDEC_ACCEPT_REJECTION");
    }
    if (logit_shaper::needed(p) && p.synthetic_acceptance >= 0.0f) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "synthetic_acceptance emits drafted tokens unchosen: it cannot be combined with "
             "logit biases, penalties or a grammar");
    }
    logit_shaper::validate(p, backend.vocab(), backend.n_vocab());
}

// A batch the engine owns, with every token in one sequence.
struct engine_core::token_batch {
    explicit token_batch(int32_t n) : b(llama_batch_init(n, 0, 1)), capacity(n) {}
    ~token_batch() { llama_batch_free(b); }
    token_batch(const token_batch &) = delete;
    token_batch & operator=(const token_batch &) = delete;

    void clear() { b.n_tokens = 0; }
    int32_t size() const { return b.n_tokens; }
    int32_t room() const { return capacity - b.n_tokens; }
    void add(llama_token t, llama_pos pos, llama_seq_id seq, bool logits) {
        const int32_t i = b.n_tokens++;
        b.token[i] = t;
        b.pos[i] = pos;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = seq;
        b.logits[i] = logits;
    }

    llama_batch b;
    int32_t     capacity;
};

struct request_state {
    request_state(request_id id, std::span<const llama_token> tokens, const request_params & params, const llama_vocab * vocab,
                  int32_t n_vocab, int32_t n_draft_max, grammar_memo & memo)
        : prompt(tokens.begin(), tokens.end()), p(params), n_draft(params.n_draft < 0 ? n_draft_max : params.n_draft),
          adaptive(params.n_draft == SPECDEC_N_DRAFT_AUTO && n_draft > 0), synthetic(params.synthetic_acceptance >= 0.0f),
          stops(stop_strings(params)), sampler(params, params.seed, n_vocab), synthetic_draws(params.seed), text(stops) {
        if (logit_shaper::needed(params)) {
            shaper = std::make_unique<logit_shaper>(params, vocab, n_vocab, memo);
        }
        // Borrowed for add() only: `stops` and `shaper` hold copies.
        p.stop_strings = nullptr;
        p.n_stop_strings = 0;
        p.logit_bias = nullptr;
        p.n_logit_bias = 0;
        p.grammar = nullptr;
        p.grammar_triggers = nullptr;
        p.n_grammar_triggers = 0;
        p.grammar_prefix = nullptr;
        p.reasoning_start = nullptr;
        p.reasoning_end = nullptr;
        p.reasoning_budget_message = nullptr;
        p.reasoning_prefix = nullptr;
        result.id = id;
    }

    const std::vector<llama_token> prompt;
    request_params       p;
    const int32_t        n_draft;   // the most it drafts a step
    const bool           adaptive;  // lengths chosen per step by the engine's adaptive_draft_length
    const bool           synthetic; // the synthetic-acceptance benchmark mode
    const stop_matcher   stops;     // before `text`, which refers to it
    token_sampler        sampler;
    std::unique_ptr<logit_shaper> shaper; // null: the logits are used as they are
    // Speculative sampling (SPECDEC_ACCEPT_REJECTION when the request
    // samples and a drafter drafts): the drafter samples under the request's
    // transforms, and the verifier decides with the request's seed
    // (rejection-sampler.h). Plain decoding draws as plain decoding does, and
    // synthetic acceptance keeps drafts without the target in either mode.
    const bool           rejection = p.accept == SPECDEC_ACCEPT_REJECTION && sampler.samples() && n_draft > 0 && !synthetic;
    const specdec_draft_sampling draft_sampling{p.temperature, p.top_k, p.top_p, p.min_p, p.seed};
    std::vector<specdec_token_prob> dist, residual; // the verifier's p and scratch
    // Its prompt's rows are scored the first time it is read (not when it is read again after an eviction).
    bool scores_prompt() const { return p.prompt_logprobs && p.n_top_logprobs >= 0 && resumed.empty(); }
    // What its slot is to hold before it decodes: the prompt, or after an
    // eviction the prompt and every emitted token but the last (which is id_last).
    const std::vector<llama_token> & input() const { return resumed.empty() ? prompt : resumed; }
    std::mt19937         synthetic_draws;
    text_stream          text;      // becomes result.output.text as it leaves
    specdec_token_logprob logprob{}; // the last emitted token's, for its event
    const clock_type::time_point t_added = clock_type::now();

    request_id  leader = 0;         // one of add_n's requests: the request whose decoded prompt it copies; 0: none
    size_t      n_prefilled = 0;    // prompt tokens decoded
    bool        prefilled = false;  // its prompt is in the contexts, the drafter began, its first token is drawn
    llama_pos   n_past = 0;         // tokens in the target
    llama_token id_last = 0;        // next token to decode
    bool        done = false;       // finished; leaves at the end of the step
    bool        paused = false;     // neither prefilled nor decoded, nor admitted from the queue (see specdec_engine_pause)
    std::vector<llama_token> resumed; // set when evicted with output: input() (empty: never evicted, or evicted before its first token)
    request_result result;
};

struct engine_core::step_plan {
    explicit step_plan(size_t n) : caps(n, -1), asked(n, 0), shadow(n, false), proposals(n), guesses(n), row0(n, -1) {}

    std::vector<int32_t> caps;   // the most each slot may draft now; -1: not decoding
    std::vector<int32_t> asked;  // what it drafts
    std::vector<bool>    shadow; // an unverified adaptive probe (see adaptive_draft_length::observe)
    std::vector<std::vector<llama_token>> proposals;
    std::vector<std::vector<llama_token>> guesses; // shadow proposals, not verified
    std::vector<int32_t> row0;   // batch row of its id_last; -1: not in the batch
    int32_t n_active = 0;
};

engine_core::engine_core(generation_backend & backend, const engine_params & params, event_callback on_event)
    : b_(backend), p_(params), on_event_(std::move(on_event)),
      n_ctx_(backend.n_ctx(params.n_seq > 0 ? params.n_seq : backend.n_seq())) {
    const uint32_t n_seq = p_.n_seq > 0 ? p_.n_seq : b_.n_seq();
    if (p_.n_prefill_chunk < 0) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "n_prefill_chunk is ", p_.n_prefill_chunk, "; it must be >= 0");
    }
    if (p_.max_waiting == 0) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "max_waiting is 0; at least one request must be able to wait");
    }
    if (n_seq > b_.n_seq() || n_seq > SPECDEC_MAX_SEQ) {
        fail(SPECDEC_STATUS_SEQ_CAPACITY, n_seq, " slots need as many sequences, but only ",
             std::min<uint32_t>(b_.n_seq(), SPECDEC_MAX_SEQ), " are available");
    }
    if (n_seq > static_cast<uint32_t>(std::max(b_.n_batch(), 0))) {
        fail(SPECDEC_STATUS_BATCH_CAPACITY, n_seq, " slots cannot share a verification batch of n_batch = ", b_.n_batch(),
             " tokens");
    }
    b_.check_exact_batching(n_seq);
    slots_.resize(n_seq);
    held_.resize(n_seq);
    if (b_.n_draft_max() > 0) {
        adaptive_.emplace(n_seq, b_.n_draft_max());
    }
    batch_ = std::make_unique<token_batch>(std::max(b_.n_batch(), 1));
}

engine_core::~engine_core() = default;

request_id engine_core::add_n(std::span<const llama_token> prompt, const request_params & params, uint32_t n) {
    if (n == 0 || n > slots_.size()) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "n is ", n, "; it must be within [1, ", slots_.size(),
             "]: the requests of one prompt run side by side, one per slot");
    }
    validate_request(b_, params);
    if (prompt.empty()) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "the prompt is empty; it needs at least one token");
    }
    if (prompt.size() > static_cast<size_t>(n_ctx_)) {
        fail(SPECDEC_STATUS_CONTEXT_FULL, "the prompt has ", prompt.size(), " tokens; the context holds ", n_ctx_,
             " per sequence here");
    }
    for (llama_token t : prompt) {
        if (t < 0 || t >= b_.n_vocab()) {
            fail(SPECDEC_STATUS_INVALID_ARGUMENT, "the prompt holds token ", t, ", outside the vocabulary [0, ", b_.n_vocab(),
                 ")");
        }
    }
    // Queued requests that the next step's admission puts into free slots do
    // not wait for a slot: a burst that fits the free slots is never refused.
    // Paused requests do not count: they wait for their reader, not for a slot.
    const size_t n_free = static_cast<size_t>(std::count(slots_.begin(), slots_.end(), nullptr));
    const auto n_waiting = static_cast<size_t>(std::count_if(waiting_.begin(), waiting_.end(), [](const auto & r) { return !r->paused; }));
    if (n_waiting + n > n_free + p_.max_waiting) {
        fail(SPECDEC_STATUS_QUEUE_FULL, n_waiting - std::min(n_free, n_waiting),
             " requests wait for a slot already (max_waiting) and too few slots are free; try again after a step");
    }
    // A scored prompt needs every row's logits in each request's own slot.
    const bool shared = b_.copies_sequences() && !(params.prompt_logprobs && params.n_top_logprobs >= 0);
    const request_id first = next_id_.load();
    std::vector<std::unique_ptr<request_state>> added;
    for (uint32_t i = 0; i < n; ++i) {
        request_params p = params;
        p.seed = params.seed + i;
        added.push_back(std::make_unique<request_state>(first + i, prompt, p, b_.vocab(), b_.n_vocab(), b_.n_draft_max(), grammar_memo_));
        if (shared && i > 0) {
            added.back()->leader = first;
        }
    }
    for (auto & r : added) {
        waiting_.push_back(std::move(r));
    }
    next_id_.store(first + n);
    return first;
}

void engine_core::cancel(request_id id) {
    if (id == 0 || id >= next_id_.load()) {
        fail(SPECDEC_STATUS_UNKNOWN_REQUEST, "request ", id, " was never issued by this engine");
    }
    std::lock_guard<std::mutex> lock(cancel_mutex_);
    cancelled_.push_back(id);
}

void engine_core::pause(request_id id, bool paused) {
    if (id == 0 || id >= next_id_.load()) {
        fail(SPECDEC_STATUS_UNKNOWN_REQUEST, "request ", id, " was never issued by this engine");
    }
    std::lock_guard<std::mutex> lock(cancel_mutex_);
    pauses_.emplace_back(id, paused);
}

// Whether a step would do anything: a cancellation or pause to apply, a
// waiting request that is not paused and a slot free or held by a paused
// one, or a request in a slot that is not paused.
bool engine_core::has_work() const {
    {
        std::lock_guard<std::mutex> lock(cancel_mutex_);
        if (!cancelled_.empty() || !pauses_.empty()) {
            return true;
        }
    }
    const bool room = std::any_of(slots_.begin(), slots_.end(), [](const auto & r) { return r == nullptr || (r->paused && !r->done); });
    const bool waits = std::any_of(waiting_.begin(), waiting_.end(), [this](const auto & r) { return admissible(*r); });
    return (waits && room) || std::any_of(slots_.begin(), slots_.end(), [](const auto & r) { return r != nullptr && !r->paused; });
}

// A waiting request admission may take: not paused, and not one of an
// add_n group whose leader waits (paused) before it.
bool engine_core::admissible(const request_state & r) const {
    return !r.paused && (r.leader == 0 || std::none_of(waiting_.begin(), waiting_.end(), [&](const auto & w) { return w->result.id == r.leader; }));
}

bool engine_core::decoding(const request_state * r) const {
    return r != nullptr && r->prefilled && !r->done && !r->paused;
}

void engine_core::step() {
    const auto t0 = clock_type::now();
    try {
        apply_cancellations();
        apply_pauses();
        admit();
        compact();
        prefill();
        if (std::any_of(slots_.begin(), slots_.end(), [this](const auto & r) { return decoding(r.get()); })) {
            step_plan plan = plan_lengths();
            draft(plan);
            verify(plan);
            accept(plan);
        }
        retire();
    } catch (...) {
        fail_running();
        times_.t_total_us += since_us(t0);
        throw;
    }
    times_.t_total_us += since_us(t0);
}

// Cancelled requests end before anything else runs: a waiting one never
// takes a slot, a running one frees its slot for this step's admission.
void engine_core::apply_cancellations() {
    std::vector<request_id> ids;
    {
        std::lock_guard<std::mutex> lock(cancel_mutex_);
        ids.swap(cancelled_);
    }
    if (ids.empty()) {
        return;
    }
    const auto listed = [&](request_id id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); };
    for (auto & r : slots_) {
        if (r != nullptr && !r->done && listed(r->result.id)) {
            finish(*r, SPECDEC_STOP_CANCELLED);
        }
    }
    std::vector<std::unique_ptr<request_state>> gone; // taken out first: the callback may add()
    for (auto it = waiting_.begin(); it != waiting_.end();) {
        if (listed((*it)->result.id)) {
            gone.push_back(std::move(*it));
            it = waiting_.erase(it);
        } else {
            ++it;
        }
    }
    for (auto & r : gone) {
        finish(*r, SPECDEC_STOP_CANCELLED);
        hand_out(*r);
    }
    retire();
}

// Pauses and resumptions, in the order they were asked, to the requests
// they name wherever those are (a finished one is gone: nothing happens).
void engine_core::apply_pauses() {
    std::vector<std::pair<request_id, bool>> asked;
    {
        std::lock_guard<std::mutex> lock(cancel_mutex_);
        asked.swap(pauses_);
    }
    for (const auto & [id, paused] : asked) {
        for (auto & r : slots_) {
            if (r != nullptr && r->result.id == id) {
                r->paused = paused;
            }
        }
        for (auto & r : waiting_) {
            if (r->result.id == id) {
                r->paused = paused;
            }
        }
    }
}

// Waiting requests take slots in arrival order (take_slot), paused ones
// passed over; where none is free, a paused request's slot is taken
// (evict_paused). The requests of one add_n are admitted together, when as
// many slots are free, and only the first reads the prompt: the others wait
// in their slots for a copy of it (start_followers).
void engine_core::admit() {
    for (;;) {
        auto next = std::find_if(waiting_.begin(), waiting_.end(), [this](const auto & r) { return admissible(*r); });
        if (next == waiting_.end()) {
            return;
        }
        request_state & front = **next;
        if (front.leader != 0) {
            // Its leader left while waiting: the first left leads the others.
            const request_id gone = front.leader;
            for (auto & w : waiting_) {
                if (w->leader == gone) {
                    w->leader = front.result.id;
                }
            }
            front.leader = 0;
        }
        // Its group: the requests after it that copy its prompt.
        const request_id id = front.result.id;
        size_t n_group = 1;
        for (auto it = next + 1; it != waiting_.end() && (*it)->leader == id; ++it) {
            ++n_group;
        }
        while (static_cast<size_t>(std::count(slots_.begin(), slots_.end(), nullptr)) < n_group) {
            if (!evict_paused()) {
                return;
            }
        }
        // Evictions put requests at the queue's head: find the group again.
        auto at = std::find_if(waiting_.begin(), waiting_.end(), [id](const auto & w) { return w->result.id == id; });
        for (size_t i = 0; i < n_group; ++i) {
            std::unique_ptr<request_state> r = std::move(*at);
            at = waiting_.erase(at);
            take_slot(std::move(r));
        }
    }
}

// A request waits and no slot is free: a paused request gives up its slot
// (the lowest such) and waits at the queue's head. Its positions stay in the
// slot for whoever takes it; when it goes on, it reads its prompt and output
// so far again (input()) and continues from its last token, its sampler,
// grammar and text where they were. false: none is paused.
bool engine_core::evict_paused() {
    const auto it = std::find_if(slots_.begin(), slots_.end(), [](const auto & r) { return r != nullptr && r->paused && !r->done; });
    if (it == slots_.end()) {
        return false;
    }
    std::unique_ptr<request_state> r = std::move(*it);
    const std::vector<llama_token> & out = r->result.output.tokens;
    if (r->prefilled && !out.empty()) {
        std::vector<llama_token> input = r->prompt;
        input.insert(input.end(), out.begin(), out.end() - 1);
        r->resumed = std::move(input);
    }
    r->prefilled = false;
    r->n_prefilled = 0;
    r->result.seq_id = -1;
    waiting_.push_front(std::move(r));
    return true;
}

// A request takes a free slot (see choose_slot). With prompt reuse it keeps
// what its slot holds of its input, as far as the backend can cut the
// slot's memory back, and decodes only the rest; a follower starts empty.
void engine_core::take_slot(std::unique_ptr<request_state> r) {
    // A scored prompt needs every row's logits: it reuses nothing.
    const bool reuse = p_.reuse_prompts && !r->scores_prompt() && r->leader == 0;
    const std::vector<llama_token> & input = r->input();
    auto [s, prefix] = choose_slot(reuse ? std::span<const llama_token>(input) : std::span<const llama_token>());
    if (reuse) {
        prefix = load_cached(input, s, prefix);
    }
    const auto seq = static_cast<llama_seq_id>(s);
    r->result.seq_id = seq;
    std::vector<llama_token> & held = held_[s];
    if (reuse) {
        // At least the input's last token is decoded: its logits give the first token.
        const size_t n = std::min(prefix, input.size() - 1);
        if (2 * n < held.size()) {
            save_slot(s); // most of what the slot held would be lost: it goes to the prompt cache
        }
        const int32_t kept = b_.keep(seq, static_cast<int32_t>(n), static_cast<int32_t>(held.size()));
        held.resize(static_cast<size_t>(kept));
        r->n_prefilled = static_cast<size_t>(kept);
        if (r->resumed.empty()) {
            r->result.n_prompt_cached = static_cast<size_t>(kept);
        }
    } else {
        vacate(s);
    }
    if (adaptive_) {
        adaptive_->reset(s); // from the drafter's recent acceptance over every request
    }
    slots_[s] = std::move(r);
}

// A free slot and how many of its tokens begin `prompt`. Without prompt
// reuse, the lowest free slot. With it, the free slot whose tokens share
// the longest prefix with the prompt, where that prefix is more than a
// tenth of the prompt (llama-server's default --slot-prompt-similarity);
// else one next to a held slot (or any, when none is held), so that the
// held slots stay one run and compact() moves nothing; among those an
// empty one, so that what another conversation's next turn would reuse
// stays in its slot (a prompt sharing only a BOS with a slot does not take
// it); else the lowest.
std::pair<size_t, size_t> engine_core::choose_slot(std::span<const llama_token> prompt) const {
    const bool none_held = std::all_of(slots_.begin(), slots_.end(), [](const auto & r) { return r == nullptr; });
    const auto beside_held = [&](size_t s) {
        return none_held || (s > 0 && slots_[s - 1] != nullptr) || (s + 1 < slots_.size() && slots_[s + 1] != nullptr);
    };
    size_t best = slots_.size();
    size_t best_prefix = 0;
    const auto rank = [&](size_t s, size_t prefix) { return std::tuple(prefix, beside_held(s), held_[s].empty()); };
    for (size_t s = 0; s < slots_.size(); ++s) {
        if (slots_[s] != nullptr) {
            continue;
        }
        if (!p_.reuse_prompts) {
            return {s, 0};
        }
        size_t prefix = common_prefix(held_[s], prompt);
        if (10 * prefix <= prompt.size()) {
            prefix = 0; // too little to be worth another request's memory
        }
        if (best == slots_.size() || rank(s, prefix) > rank(best, best_prefix)) {
            best = s;
            best_prefix = prefix;
        }
    }
    return {best, best_prefix};
}

// The prompt cache: when the sequence the cache saved (from any slot where
// the backend copies sequences, else from s) that shares the longest
// prefix with `prompt` shares more than free slot `s` (and more
// than a tenth of the prompt, as choose_slot), it is loaded into s, whose
// own contents are saved first; returns the prefix s then shares. A state
// llama.cpp refuses to load leaves s empty (the prompt is decoded whole).
size_t engine_core::load_cached(std::span<const llama_token> prompt, size_t s, size_t prefix) {
    auto best = cache_.end();
    size_t best_prefix = prefix;
    for (auto it = cache_.begin(); it != cache_.end(); ++it) {
        if (it->slot != s && !b_.copies_sequences()) {
            continue; // the drafter's state of that sequence cannot move to s
        }
        const size_t n = common_prefix(it->tokens, prompt);
        if (n > best_prefix && 10 * n > prompt.size()) {
            best = it;
            best_prefix = n;
        }
    }
    if (best == cache_.end()) {
        return prefix;
    }
    cached_sequence c = std::move(*best);
    cache_.erase(best);
    cache_bytes_ -= c.state->bytes();
    save_slot(s);
    try {
        return std::min(best_prefix, load_slot(s, std::move(c.tokens), *c.state));
    } catch (const error &) {
        return 0;
    }
}

// Empties free slot `s`, what it held saved to the prompt cache first
// (see save_slot).
void engine_core::vacate(size_t s) {
    save_slot(s);
    b_.clear(static_cast<llama_seq_id>(s));
    held_[s].clear();
}

// Drops what free slot `s` holds and loads `state`, a sequence that held
// `tokens`, into it; returns the tokens it then holds (the backend may
// resume a position earlier). Throws what the backend throws, the slot then empty.
size_t engine_core::load_slot(size_t s, std::vector<llama_token> tokens, const generation_backend::saved_sequence & state) {
    const auto seq = static_cast<llama_seq_id>(s);
    b_.clear(seq);
    held_[s].clear();
    int32_t loaded = 0;
    try {
        loaded = b_.load(seq, state);
    } catch (...) {
        b_.clear(seq);
        throw;
    }
    tokens.resize(std::min(tokens.size(), static_cast<size_t>(std::max(loaded, 0))));
    held_[s] = std::move(tokens);
    return held_[s].size();
}

// A slot file's blob: magic, version, the tokens the slot held (u64 count,
// then u32 each), then the backend's bytes of its state (u64 size first).
namespace {
constexpr char slot_magic[8] = {'S', 'P', 'D', 'C', 'S', 'L', 'O', 'T'};
constexpr uint32_t slot_format_version = 1;
} // namespace

void engine_core::require_free_slot(uint32_t slot) const {
    if (slot >= slots_.size()) {
        fail(SPECDEC_STATUS_BAD_SEQ_ID, "slot ", slot, " is outside [0, ", slots_.size(), ")");
    }
    if (slots_[slot] != nullptr) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "slot ", slot, " holds a running request");
    }
    if (!p_.reuse_prompts) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "slots keep nothing between requests without reuse_prompts");
    }
}

std::vector<uint8_t> engine_core::export_slot(uint32_t slot, size_t & n_tokens) {
    require_free_slot(slot);
    const std::vector<llama_token> & held = held_[slot];
    const std::vector<uint8_t> state = b_.write(*b_.save(static_cast<llama_seq_id>(slot)));
    byte_writer w;
    w.header(slot_magic, slot_format_version);
    w.u64(held.size());
    for (const llama_token t : held) {
        w.u32(static_cast<uint32_t>(t));
    }
    w.sized(state);
    n_tokens = held.size();
    return w.take();
}

size_t engine_core::import_slot(uint32_t slot, std::span<const uint8_t> blob) {
    require_free_slot(slot);
    byte_reader r(blob);
    r.header(slot_magic, slot_format_version, "slot file");
    const uint64_t n = r.u64("token count");
    if (n >= static_cast<uint64_t>(n_ctx_)) {
        fail(SPECDEC_STATUS_STATE_CONFIG, "the slot file holds ", n, " tokens; a slot holds ", n_ctx_, " positions");
    }
    std::vector<llama_token> tokens(static_cast<size_t>(n));
    for (llama_token & t : tokens) {
        t = static_cast<llama_token>(r.u32("token"));
        if (t < 0 || t >= b_.n_vocab()) {
            fail(SPECDEC_STATUS_STATE_CONFIG, "the slot file holds the token ", t, ", outside the vocabulary [0, ", b_.n_vocab(), ")");
        }
    }
    const std::span<const uint8_t> bytes = r.sized("state");
    if (r.remaining() != 0) {
        fail(SPECDEC_STATUS_STATE_MALFORMED, "the slot file has ", r.remaining(), " bytes after its state");
    }
    return load_slot(slot, std::move(tokens), *b_.read(bytes));
}

size_t engine_core::erase_slot(uint32_t slot) {
    require_free_slot(slot);
    const size_t n = held_[slot].size();
    b_.clear(static_cast<llama_seq_id>(slot));
    held_[slot].clear();
    return n;
}

// Saves what free slot `s` holds into the prompt cache, before a prompt
// that keeps less than half of it takes the slot (one that keeps more
// continues or edits the same text, as a conversation's next turn; one that
// keeps less shares little more than a chat template's opening with it,
// and would cut another conversation away unsaved). A saved sequence that
// begins with another's tokens replaces it; the least recently saved go
// first when the cache's bytes and the backend's restore points would exceed
// p_.prompt_cache_bytes. Nothing is saved that would not fit, nor when the
// backend fails to read the state (the slot is left as it was).
void engine_core::save_slot(size_t s) {
    const std::vector<llama_token> & held = held_[s];
    if (p_.prompt_cache_bytes == 0 || !p_.reuse_prompts || held.empty()) {
        return;
    }
    for (const cached_sequence & c : cache_) {
        if (common_prefix(c.tokens, held) == held.size()) {
            return; // already saved, whole or as the beginning of a longer one
        }
    }
    std::unique_ptr<generation_backend::saved_sequence> state;
    try {
        state = b_.save(static_cast<llama_seq_id>(s));
    } catch (const error &) {
        return;
    }
    const size_t bytes = state->bytes();
    for (auto it = cache_.begin(); it != cache_.end();) {
        if (common_prefix(it->tokens, held) == it->tokens.size()) {
            cache_bytes_ -= it->state->bytes();
            it = cache_.erase(it);
        } else {
            ++it;
        }
    }
    const auto budget = [this] {
        const size_t fixed = b_.restore_bytes();
        return p_.prompt_cache_bytes > fixed ? static_cast<size_t>(p_.prompt_cache_bytes - fixed) : size_t{0};
    };
    while (!cache_.empty() && cache_bytes_ + bytes > budget()) {
        cache_bytes_ -= cache_.back().state->bytes();
        cache_.pop_back();
    }
    if (cache_bytes_ + bytes > budget()) {
        return;
    }
    cache_.push_front({held, s, std::move(state)});
    cache_bytes_ += bytes;
}

// With a KV stream per sequence, llama.cpp decodes a batch in one forward
// pass per run of consecutive sequence ids
// (docs/results/2026-12-02-xeon-batch-splits.md): four sequences
// in slots 0, 2, 4 and 6 cost four passes where slots 0-3 cost one. So once
// admission has filled what it can, the held slots are made one run with
// the fewest moves: of the runs of as many slots as are held, the lowest
// that holds the most of them stays, and each request outside it moves into
// one of its free slots (what that slot kept of an earlier request goes to
// the prompt cache first). Not with keep_finished: a finished request's
// positions stay in its slot until a waiting request takes it.
void engine_core::compact() {
    if (p_.keep_finished || !b_.moves_sequences()) {
        return;
    }
    const size_t n_slots = slots_.size();
    const auto held = [this](size_t s) { return slots_[s] != nullptr ? size_t{1} : size_t{0}; };
    size_t n_held = 0;
    for (size_t s = 0; s < n_slots; ++s) {
        n_held += held(s);
    }
    // The window [a, a + n_held) sliding up: `in` counts the held slots in it.
    size_t in = 0;
    for (size_t s = 0; s < n_held; ++s) {
        in += held(s);
    }
    size_t first = 0;
    size_t most = in;
    for (size_t a = 1; a + n_held <= n_slots; ++a) {
        in += held(a + n_held - 1) - held(a - 1);
        if (in > most) {
            first = a;
            most = in;
        }
    }
    size_t to = first;
    for (size_t from = 0; from < n_slots; ++from) {
        if (!held(from) || (from >= first && from < first + n_held)) {
            continue;
        }
        while (held(to)) {
            ++to;
        }
        vacate(to);
        b_.move(static_cast<llama_seq_id>(from), static_cast<llama_seq_id>(to));
        held_[to] = std::move(held_[from]);
        held_[from].clear();
        if (adaptive_) {
            adaptive_->move(from, to);
        }
        slots_[to] = std::move(slots_[from]);
        slots_[to]->result.seq_id = static_cast<llama_seq_id>(to);
    }
}

// Decodes the next chunk of every prompt still being read, in batches of at
// most n_batch tokens that may mix sequences. A prompt read to the end has
// its last row's logits drawn from at once: its first token is emitted here,
// a prefill's time after it arrived, as plain decoding would, not after a
// draft and its verification. The request then begins its drafter and
// joins this step's verification with that token as id_last.
void engine_core::prefill() {
    const auto t0 = clock_type::now();
    bool any = false;
    std::vector<std::pair<request_state *, int32_t>> ending; // prompts whose last row is in the batch, and that row
    struct scored_row {
        request_state * r;
        int32_t         row;
        llama_token     next; // the prompt token after it
    };
    std::vector<scored_row> scored; // rows of prompts asking for their log-probabilities
    const auto run = [&] {
        b_.decode(batch_->b);
        b_.process(batch_->b);
        for (const scored_row & s : scored) {
            sequence_result & out = s.r->result.output;
            out.prompt_logprobs.push_back(
                log_probability(b_.logits(s.row), b_.n_vocab(), s.next, s.r->p.n_top_logprobs, out.prompt_top_logprobs));
        }
        scored.clear();
        for (const auto & [r, row] : ending) {
            start(*r, row);
        }
        ending.clear();
        batch_->clear();
    };
    batch_->clear();
    for (auto & r : slots_) {
        if (r == nullptr || r->prefilled || r->paused) {
            continue;
        }
        if (r->leader != 0) {
            const request_id leader = r->leader;
            if (std::any_of(slots_.begin(), slots_.end(), [&](const auto & l) {
                    return l != nullptr && l->result.id == leader && !l->prefilled && !l->done;
                })) {
                continue; // it takes a copy of the leader's slot when that prompt is read
            }
            r->leader = 0; // the leader left before reading it: this one reads its own
        }
        any = true;
        const std::vector<llama_token> & input = r->input();
        const size_t end = input.size();
        const size_t until = p_.n_prefill_chunk > 0 ? std::min(end, r->n_prefilled + static_cast<size_t>(p_.n_prefill_chunk)) : end;
        for (; r->n_prefilled < until; ++r->n_prefilled) {
            if (batch_->room() == 0) {
                run();
            }
            const bool last = r->n_prefilled + 1 == end;
            if (last) {
                ending.emplace_back(r.get(), batch_->size());
            } else if (r->scores_prompt()) {
                scored.push_back({r.get(), batch_->size(), input[r->n_prefilled + 1]});
            }
            batch_->add(input[r->n_prefilled], static_cast<llama_pos>(r->n_prefilled), r->result.seq_id,
                        last || r->scores_prompt());
            held_[static_cast<size_t>(r->result.seq_id)].push_back(input[r->n_prefilled]);
        }
    }
    if (batch_->size() > 0) {
        run();
    }
    if (any) {
        times_.t_prefill_us += since_us(t0);
    }
}

// A request whose whole prompt is decoded, its last token at batch row
// `row`: the drafter begins, and the target's first token is drawn (counted
// as a step: one target decode, nothing drafted) and emitted.
void engine_core::start(request_state & r, int32_t row) {
    start_followers(r, row);
    b_.begin(r.result.seq_id, r.input());
    r.prefilled = true;
    r.n_past = static_cast<llama_pos>(r.input().size());
    if (!r.resumed.empty()) {
        r.id_last = r.result.output.tokens.back(); // drawn before its eviction: decoded next, as then
        return;
    }
    if (r.p.n_predict == 0) {
        finish(r, SPECDEC_STOP_BUDGET);
        return;
    }
    const float * logits = b_.logits(row);
    r.result.output.stats.n_steps++;
    const std::optional<verdict> x = choose(r, logits, r.n_past, nullptr, {});
    if (!x) {
        return;
    }
    r.id_last = x->token;
    emit(r, r.id_last, r.n_past, logits);
}

// The requests that wait for `leader`'s prompt (add_n) take a copy of its
// slot, before its drafter begins, and draw their first tokens from the
// same row: their prompt is decoded once.
void engine_core::start_followers(const request_state & leader, int32_t row) {
    for (auto & f : slots_) {
        if (f == nullptr || f->leader != leader.result.id || f->prefilled || f->done || f->paused) {
            continue;
        }
        b_.copy(leader.result.seq_id, f->result.seq_id);
        held_[static_cast<size_t>(f->result.seq_id)] = held_[static_cast<size_t>(leader.result.seq_id)];
        f->n_prefilled = f->prompt.size();
        f->result.n_prompt_cached = f->prompt.size();
        f->leader = 0;
        start(*f, row);
    }
}

// How many tokens each decoding request drafts: within its token budget,
// the context, and its share of the batch; the adaptive controller chooses
// for the requests that asked for it, over the whole running set.
engine_core::step_plan engine_core::plan_lengths() {
    step_plan plan(slots_.size());
    plan.n_active = static_cast<int32_t>(std::count_if(slots_.begin(), slots_.end(), [this](const auto & r) { return decoding(r.get()); }));
    const int64_t share = b_.n_batch() / plan.n_active - 1;
    std::vector<int64_t> left(slots_.size(), 0); // the most tokens each may decode after this step
    for (size_t s = 0; s < slots_.size(); ++s) {
        const request_state * r = slots_[s].get();
        if (decoding(r)) {
            const int64_t budget = r->p.n_predict - static_cast<int64_t>(r->result.output.tokens.size()) - 1;
            const int64_t room = static_cast<int64_t>(n_ctx_) - r->n_past - 1;
            left[s] = std::max<int64_t>(0, std::min(budget, room));
            plan.caps[s] = static_cast<int32_t>(std::clamp<int64_t>(std::min<int64_t>({r->n_draft, left[s], share}), 0, r->n_draft));
        }
    }
    plan.asked = plan.caps;
    if (!adaptive_) {
        return plan;
    }
    // A request that will verify no draft may still draft a "shadow" token,
    // never verified, only compared with the token the target picks: it
    // keeps the acceptance estimate current for the price of drafting alone.
    std::vector<int32_t> adaptive_caps(slots_.size(), -1);
    for (size_t s = 0; s < slots_.size(); ++s) {
        if (plan.caps[s] >= 0 && slots_[s]->adaptive) {
            adaptive_caps[s] = plan.caps[s];
        }
    }
    if (std::all_of(adaptive_caps.begin(), adaptive_caps.end(), [](int32_t c) { return c < 0; })) {
        return plan;
    }
    const std::vector<int32_t> lengths = adaptive_->choose(adaptive_caps, left, b_.n_draft_min());
    for (size_t s = 0; s < slots_.size(); ++s) {
        if (adaptive_caps[s] >= 0) {
            plan.shadow[s] = plan.caps[s] > 0 && lengths[s] == 0 && adaptive_->shadow_due(s);
            plan.asked[s] = plan.shadow[s] ? std::min(plan.caps[s], std::max(1, b_.n_draft_min())) : lengths[s];
        }
    }
    return plan;
}

void engine_core::draft(step_plan & plan) {
    std::vector<draft_request> requests;
    for (size_t s = 0; s < slots_.size(); ++s) {
        if (plan.caps[s] >= 0 && plan.asked[s] > 0) {
            const request_state & r = *slots_[s];
            requests.push_back({r.result.seq_id, r.n_past, r.id_last, plan.asked[s], r.rejection ? &r.draft_sampling : nullptr});
        }
    }
    const auto t = clock_type::now();
    if (!requests.empty()) {
        b_.draft(requests);
    }
    const int64_t draft_us = since_us(t);
    times_.t_draft_us += draft_us;
    int32_t passes = 0; // the longest proposal
    int32_t rows = 0;
    for (const draft_request & q : requests) {
        const auto p = b_.proposal(q.seq_id);
        const size_t s = static_cast<size_t>(q.seq_id);
        (plan.shadow[s] ? plan.guesses[s] : plan.proposals[s]).assign(p.begin(), p.end());
        passes = std::max(passes, static_cast<int32_t>(p.size()));
        rows += static_cast<int32_t>(p.size());
    }
    // Costs are physical: every step measures them, whoever chose its lengths.
    if (adaptive_ && passes > 0) {
        adaptive_->observe_draft(passes, rows, static_cast<double>(draft_us));
    }
}

// One target batch: per decoding request its id_last, then its proposal.
void engine_core::verify(step_plan & plan) {
    batch_->clear();
    for (size_t s = 0; s < slots_.size(); ++s) {
        if (plan.caps[s] < 0) {
            continue;
        }
        const request_state & r = *slots_[s];
        plan.row0[s] = batch_->size();
        batch_->add(r.id_last, r.n_past, r.result.seq_id, true);
        for (size_t k = 0; k < plan.proposals[s].size(); ++k) {
            batch_->add(plan.proposals[s][k], r.n_past + 1 + static_cast<llama_pos>(k), r.result.seq_id, true);
        }
        held_[s].push_back(r.id_last);
        held_[s].insert(held_[s].end(), plan.proposals[s].begin(), plan.proposals[s].end());
    }
    const auto t0 = clock_type::now();
    b_.decode(batch_->b);
    const int64_t decode_us = since_us(t0);
    times_.t_verify_us += decode_us;
    const auto t1 = clock_type::now();
    b_.process(batch_->b);
    const int64_t process_us = since_us(t1);
    times_.t_draft_us += process_us;
    if (adaptive_) {
        adaptive_->observe_verify(plan.n_active, batch_->size(), static_cast<double>(decode_us + process_us));
    }
}

// Each request keeps its agreeing prefix plus the target's token; the
// adaptive controller learns from what was kept and what the step cost.
void engine_core::accept(step_plan & plan) {
    for (size_t s = 0; s < slots_.size(); ++s) {
        if (plan.row0[s] < 0) {
            continue;
        }
        request_state & r = *slots_[s];
        const int32_t kept = accept_one(r, plan.proposals[s], plan.row0[s]);
        if (!plan.guesses[s].empty()) {
            // The target's token is id_last now; nothing of the guess was
            // decoded. (Synthetic acceptance decides shadows as it decides drafts.)
            const bool hit = r.synthetic ? keep_synthetic(r, plan.guesses[s][0]) : plan.guesses[s][0] == r.id_last;
            adaptive_->observe(s, 1, hit ? 1 : 0);
            b_.accept(r.result.seq_id, 0);
        } else if (r.adaptive) {
            adaptive_->observe(s, static_cast<int32_t>(plan.proposals[s].size()), kept);
        }
    }
}

// Draws the target's token at each position in turn and keeps going while
// the draw equals the drafted token: each emitted token is exactly what the
// target alone would have produced there. Returns the drafted tokens kept.
int32_t engine_core::accept_one(request_state & r, const std::vector<llama_token> & proposal, int32_t row0) {
    size_t kept = 0;
    llama_token last = r.id_last;
    for (size_t k = 0; k <= proposal.size() && !r.done; ++k) {
        // Synthetic acceptance decides a drafted token by its own draw
        // alone: a rejected one ends the step even when the target agrees.
        const bool drafted = k < proposal.size();
        const llama_pos pos = r.n_past + 1 + static_cast<llama_pos>(k); // where the token would be decoded
        const float * logits = b_.logits(row0 + static_cast<int32_t>(k));
        if (r.synthetic && drafted && keep_synthetic(r, proposal[k])) {
            last = proposal[k];
            emit(r, last, pos, logits);
            ++kept;
            continue;
        }
        const std::optional<verdict> chosen =
            choose(r, logits, pos, drafted ? &proposal[k] : nullptr,
                   drafted ? b_.proposal_probs(r.result.seq_id, k) : std::span<const specdec_token_prob>());
        if (!chosen) {
            break;
        }
        last = chosen->token;
        emit(r, last, pos, logits);
        if (r.synthetic || !chosen->kept) {
            break;
        }
        ++kept;
    }
    specdec_sequence_stats & st = r.result.output.stats;
    st.n_steps++;
    st.n_drafted += proposal.size();
    st.n_accepted += kept;
    for (size_t k = 0; k < proposal.size(); ++k) {
        st.n_proposed_at[k]++;
    }
    for (size_t k = 0; k < kept; ++k) {
        st.n_accepted_at[k]++;
    }
    for (size_t k = 0; k <= kept && k < proposal.size(); ++k) {
        st.n_reached_at[k]++;
    }
    if (!proposal.empty()) {
        b_.accept(r.result.seq_id, static_cast<uint16_t>(kept));
    }
    if (kept < proposal.size()) {
        b_.truncate(r.result.seq_id, r.n_past + 1 + static_cast<llama_pos>(kept));
    }
    r.n_past += 1 + static_cast<llama_pos>(kept);
    r.id_last = last;
    held_[static_cast<size_t>(r.result.seq_id)].resize(static_cast<size_t>(r.n_past));
    return static_cast<int32_t>(kept);
}

// The target's token at position `pos` from a row's logits, shaped as the
// request asks, and whether it keeps the row's draft (drafted: null when
// the row verifies none; q: the distribution the draft was drawn from). In
// exact mode the draft is kept when it equals the target's choice; in
// rejection mode the verifier decides. None when the request's grammar
// allows no token there, which ends the request (SPECDEC_STOP_ERROR) and no
// other.
std::optional<verdict> engine_core::choose(request_state & r, const float * logits, llama_pos pos, const llama_token * drafted,
                                           std::span<const specdec_token_prob> q) {
    verdict v{};
    try {
        if (r.rejection) {
            r.sampler.distribution(r.shaper != nullptr ? r.shaper->apply(logits) : logits, r.dist);
            const double u = uniform_at(r.p.seed, pos, draw_stream::target);
            v = drafted != nullptr ? verify_draft(r.dist, *drafted, q, uniform_at(r.p.seed, pos, draw_stream::accept), u, r.residual)
                                   : verdict{draw(r.dist, u), false};
        } else {
            llama_token x;
            if (r.shaper == nullptr) {
                x = r.sampler.choose(logits);
            } else if (r.sampler.samples()) {
                x = r.sampler.choose(r.shaper->apply(logits));
            } else {
                // Most greedy choices are ones the grammar allows; for the
                // others the grammar is asked about the best-ranked tokens
                // first (logit_shaper::best_allowed). Neither masks the
                // whole vocabulary.
                x = r.sampler.choose(r.shaper->shape(logits));
                if (!r.shaper->allows(x)) {
                    x = r.shaper->best_allowed();
                }
            }
            v = {x, drafted != nullptr && x == *drafted};
        }
    } catch (const error & e) {
        if (e.code() != SPECDEC_STATUS_INVALID_ARGUMENT) {
            throw;
        }
        finish(r, SPECDEC_STOP_ERROR); // the shaping's: the grammar allows nothing, or was left
        return std::nullopt;
    }
    if (r.shaper != nullptr && !b_.is_eog(v.token)) {
        r.shaper->accept(v.token);
    }
    return v;
}

// The synthetic-acceptance benchmark mode's decision for a drafted token.
bool engine_core::keep_synthetic(request_state & r, llama_token drafted) {
    return std::uniform_real_distribution<float>(0.0f, 1.0f)(r.synthetic_draws) < r.p.synthetic_acceptance &&
           !b_.is_eog(drafted);
}

// Adds the target's token x, which would be decoded at position pos and was
// chosen from `logits`, to the output (with its log-probabilities, when the
// request asked) and streams the text it releases; or ends the request.
void engine_core::emit(request_state & r, llama_token x, llama_pos pos, const float * logits) {
    const llama_seq_id seq = r.result.seq_id;
    if (!r.p.ignore_eog && b_.is_eog(x)) {
        finish(r, SPECDEC_STOP_EOG);
        const std::string_view rest = r.text.finish();
        if (!rest.empty()) {
            engine_event e; // the end: its answer changes nothing
            e.id = r.result.id;
            e.seq_id = seq;
            e.piece = rest;
            deliver(e);
        }
        return;
    }
    sequence_result & out = r.result.output;
    out.tokens.push_back(x);
    out.stats.n_generated++;
    engine_event e;
    e.id = r.result.id;
    e.seq_id = seq;
    e.token = x;
    if (r.p.n_top_logprobs >= 0) {
        const size_t first = out.top_logprobs.size();
        out.logprobs.push_back(log_probability(logits, b_.n_vocab(), x, r.p.n_top_logprobs, out.top_logprobs));
        r.logprob = {x, out.logprobs.back()};
        e.logprob = &r.logprob;
        e.top_logprobs = std::span(out.top_logprobs).subspan(first);
    }
    if (out.tokens.size() == 1) {
        r.result.times.t_first_token_us = since_us(r.t_added);
    }
    const bool budget = out.tokens.size() >= static_cast<size_t>(r.p.n_predict);
    const bool full = pos >= n_ctx_; // x itself cannot be decoded
    e.piece = r.text.push(b_.piece(x), budget || full);
    if (r.text.stopped()) {
        finish(r, SPECDEC_STOP_STRING);
    } else if (budget || full) {
        finish(r, budget ? SPECDEC_STOP_BUDGET : SPECDEC_STOP_CONTEXT);
    }
    if (!deliver(e) && !r.done) {
        finish(r, SPECDEC_STOP_CALLBACK);
    }
}

bool engine_core::deliver(const engine_event & e) {
    return on_event_ ? on_event_(e) : true;
}

void engine_core::finish(request_state & r, specdec_stop_reason stop) {
    r.done = true;
    r.result.output.stop = stop;
}

void engine_core::hand_out(request_state & r) {
    r.result.output.text = r.text.take_text();
    r.result.times.t_total_us = since_us(r.t_added);
    engine_event e;
    e.type = SPECDEC_ENGINE_EVENT_FINISHED;
    e.id = r.result.id;
    e.seq_id = r.result.seq_id;
    e.result = &r.result;
    deliver(e);
}

// Finished requests leave: their slots are free (and emptied unless
// keep_finished or reuse_prompts) before their finished events go out.
void engine_core::retire() {
    for (size_t s = 0; s < slots_.size(); ++s) {
        if (slots_[s] == nullptr || !slots_[s]->done) {
            continue;
        }
        const std::unique_ptr<request_state> r = std::move(slots_[s]);
        if (!p_.keep_finished && !p_.reuse_prompts) {
            b_.clear(r->result.seq_id);
            held_[s].clear();
        }
        hand_out(*r);
    }
}

// Every request in a slot ends (SPECDEC_STOP_ERROR if it was still running)
// and every slot is emptied, with no proposal pending, ready for the next
// step; waiting requests stay queued.
void engine_core::fail_running() noexcept {
    for (size_t s = 0; s < slots_.size(); ++s) {
        b_.reset(static_cast<llama_seq_id>(s));
        held_[s].clear();
        const std::unique_ptr<request_state> r = std::move(slots_[s]);
        if (r == nullptr) {
            continue;
        }
        if (!r->done) {
            finish(*r, SPECDEC_STOP_ERROR);
        }
        try {
            hand_out(*r);
        } catch (...) {
            // The step's own failure is the one reported.
        }
    }
}

} // namespace specdec::detail
