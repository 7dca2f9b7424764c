// The two real generation backends: a session (speculative) and a bare
// target context (plain decoding), plus the public generate functions and
// the public engine over them.
#include "generation-backend.h"

#include "engine.h"

#include "error.h"
#include "restore-points.h"
#include "sequence-copy.h"
#include "state-codec.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <cstring>

namespace specdec {

namespace detail {
namespace {

// Shared by both backends: the target context's own answers.
class context_backend : public generation_backend {
public:
    explicit context_backend(llama_context * target)
        : target_(target), vocab_(llama_model_get_vocab(llama_get_model(target))) {}

    int32_t n_vocab() const override { return llama_vocab_n_tokens(vocab_); }
    int32_t n_ctx(uint32_t n_seq) const override {
        const uint32_t n_ctx_seq = llama_n_ctx_seq(target_);
        const uint32_t n_seq_max = llama_n_seq_max(target_);
        // A unified cache (kv_unified) reports its whole size as n_ctx_seq.
        if (n_seq_max <= 1 || streams_per_sequence(target_)) {
            return static_cast<int32_t>(n_ctx_seq);
        }
        // Cells held by the sequences outside this call, by their positions.
        int64_t free = n_ctx_seq;
        if (llama_memory_t mem = llama_get_memory(target_)) {
            for (uint32_t s = n_seq; s < n_seq_max; ++s) {
                const llama_pos p0 = llama_memory_seq_pos_min(mem, static_cast<llama_seq_id>(s));
                if (p0 >= 0) {
                    free -= llama_memory_seq_pos_max(mem, static_cast<llama_seq_id>(s)) - p0 + 1;
                }
            }
        }
        return static_cast<int32_t>(std::max<int64_t>(free, 0) / std::max<uint32_t>(n_seq, 1));
    }
    int32_t n_batch() const override { return static_cast<int32_t>(llama_n_batch(target_)); }
    void check_exact_batching(uint32_t n_seq) const override {
        if (n_seq > 1 && llama_n_seq_max(target_) > 1 && !streams_per_sequence(target_) && specdec_exact_kernels()) {
            fail(SPECDEC_STATUS_UNAVAILABLE, "exact kernels: ", n_seq, " sequences share one KV cache (kv_unified), "
                 "so each sequence's keys lie among the others' cells and attention sums them in an order that "
                 "depends on the others; create the target context without kv_unified (a KV stream per sequence), "
                 "or turn exact kernels off (specdec_set_exact_kernels(false))");
        }
    }
    const float * logits(int32_t i) override {
        const float * row = llama_get_logits_ith(target_, i);
        if (row == nullptr) {
            fail(SPECDEC_STATUS_NATIVE_FAILURE, "the target produced no logits for batch row ", i);
        }
        return row;
    }
    bool is_eog(llama_token token) const override { return llama_vocab_is_eog(vocab_, token); }
    const llama_vocab * vocab() const override { return vocab_; }
    std::string piece(llama_token token) const override { return specdec::token_to_piece(vocab_, token); }

protected:
    llama_context *     target_;
    const llama_vocab * vocab_;
};

// Where positions [0, n) of a sequence holding `held` can be kept: n itself
// when every memory cuts back anywhere (or nothing is cut), else the latest
// restore point at or below n of the first memory that records them (the
// others record theirs at the same points); 0: none.
int32_t keepable(std::initializer_list<const restore_points *> memories, llama_seq_id seq, int32_t n, int32_t held) {
    if (n >= held) {
        return n;
    }
    for (const restore_points * points : memories) {
        if (points->enabled()) {
            return points->latest(seq, n);
        }
    }
    return n;
}

// What save() reads: each context's full per-sequence state, the
// session's own bytes (speculative backend only) and the restore points.
struct saved_state final : generation_backend::saved_sequence {
    std::vector<uint8_t>               target, draft, session;
    std::vector<restore_points::point> target_points, draft_points;

    size_t bytes() const override {
        size_t n = target.size() + draft.size() + session.size();
        for (const auto * ps : {&target_points, &draft_points}) {
            for (const restore_points::point & p : *ps) {
                n += p.bytes.size();
            }
        }
        return n;
    }
};

// What a saved sequence's bytes hold only for: the target model (its
// shape and size) and the drafter (0: plain decoding; else the strategy + 1).
struct saved_identity {
    static constexpr size_t n = 6;
    static constexpr const char * names[n] = {"vocabulary size", "embedding width", "layer count",
                                              "parameter count", "size in bytes",  "drafter"};
    std::array<uint64_t, n> values{};

    saved_identity(const llama_context * target, uint64_t drafter) {
        const llama_model * m = llama_get_model(target);
        values = {static_cast<uint64_t>(llama_vocab_n_tokens(llama_model_get_vocab(m))), static_cast<uint64_t>(llama_model_n_embd(m)),
                  static_cast<uint64_t>(llama_model_n_layer(m)), llama_model_n_params(m), llama_model_size(m), drafter};
    }
};

constexpr char saved_magic[8] = {'S', 'P', 'D', 'C', 'S', 'E', 'Q', 'S'};
constexpr uint32_t saved_format_version = 1;

// saved_state as bytes: magic, version, the identity, then each context's
// state, the session's, and the restore points (position and state each),
// every size a u64 before its bytes.
std::vector<uint8_t> encode_saved(const saved_state & s, const saved_identity & id) {
    byte_writer w;
    w.header(saved_magic, saved_format_version);
    for (const uint64_t v : id.values) {
        w.u64(v);
    }
    for (const auto * v : {&s.target, &s.draft, &s.session}) {
        w.sized(*v);
    }
    for (const auto * ps : {&s.target_points, &s.draft_points}) {
        w.u64(ps->size());
        for (const restore_points::point & p : *ps) {
            w.u32(static_cast<uint32_t>(p.n));
            w.sized(p.bytes);
        }
    }
    return w.take();
}

std::unique_ptr<saved_state> decode_saved(std::span<const uint8_t> bytes, const saved_identity & id) {
    byte_reader r(bytes);
    r.header(saved_magic, saved_format_version, "saved sequence");
    for (size_t i = 0; i < saved_identity::n; ++i) {
        const uint64_t v = r.u64(saved_identity::names[i]);
        if (v != id.values[i]) {
            fail(SPECDEC_STATUS_STATE_CONFIG, "the saved sequence was written for another target model or drafter: its ",
                 saved_identity::names[i], " is ", v, ", this one's ", id.values[i]);
        }
    }
    auto out = std::make_unique<saved_state>();
    for (auto * v : {&out->target, &out->draft, &out->session}) {
        const std::span<const uint8_t> b = r.sized("state");
        v->assign(b.begin(), b.end());
    }
    for (auto * ps : {&out->target_points, &out->draft_points}) {
        const uint64_t n = r.u64("restore point count");
        for (uint64_t i = 0; i < n; ++i) {
            restore_points::point p;
            p.n = static_cast<llama_pos>(r.u32("restore point position"));
            const std::span<const uint8_t> b = r.sized("restore point");
            p.bytes.assign(b.begin(), b.end());
            ps->push_back(std::move(p));
        }
    }
    if (r.remaining() != 0) {
        fail(SPECDEC_STATUS_STATE_MALFORMED, "the saved sequence has ", r.remaining(), " bytes after its end");
    }
    return out;
}

class session_backend final : public context_backend {
public:
    explicit session_backend(session & s)
        : context_backend(s.target_context()), s_(s),
          target_points_(s.target_context(), s.params().n_seq, restore_points::needed_for(s.target_context())),
          // The MTP strategy's head cache is attention only, whatever the model.
          draft_points_(s.draft_context(), s.params().n_seq,
                        s.draft_context() != nullptr && s.params().strategy != SPECDEC_STRATEGY_MTP &&
                            restore_points::needed_for(s.draft_context())) {}

    uint32_t n_seq() const override { return s_.params().n_seq; }
    int32_t n_draft_max() const override { return s_.params().n_draft_max; }
    int32_t n_draft_min() const override { return s_.params().n_draft_min; }
    void clear(llama_seq_id seq) override {
        s_.remove_range(SPECDEC_CONTEXT_TARGET, seq, -1, -1);
        if (s_.draft_context() != nullptr) {
            s_.remove_range(SPECDEC_CONTEXT_DRAFT, seq, -1, -1);
        }
        target_points_.forget_above(seq, 0);
        draft_points_.forget_above(seq, 0);
    }
    void reset(llama_seq_id seq) noexcept override {
        try {
            if (!s_.proposal(seq).empty()) {
                s_.accept(seq, 0);
            }
        } catch (...) {
            // A proposal that failed half-way was never pending: nothing to complete.
        }
        try {
            clear(seq);
        } catch (...) {
            // Only a proposal still pending refuses this; the next begin() reports it.
        }
    }
    void begin(llama_seq_id seq, std::span<const llama_token> prompt) override {
        s_.begin(seq, prompt);
        target_points_.record(seq, static_cast<llama_pos>(prompt.size()));
        draft_points_.record(seq, static_cast<llama_pos>(prompt.size()));
    }
    int32_t keep(llama_seq_id seq, int32_t n, int32_t held) override {
        const int32_t m = keepable({&target_points_, &draft_points_}, seq, n, held);
        if (m == 0) {
            clear(seq);
            return 0;
        }
        if (m < held) {
            for (restore_points * points : {&target_points_, &draft_points_}) {
                if (points->enabled()) {
                    points->restore(seq, m);
                }
            }
            try {
                s_.remove_range(SPECDEC_CONTEXT_TARGET, seq, m, -1);
                if (s_.draft_context() != nullptr) {
                    s_.remove_range(SPECDEC_CONTEXT_DRAFT, seq, m, -1);
                }
            } catch (const error & e) {
                if (e.code() != SPECDEC_STATUS_MODEL_UNSUPPORTED) {
                    throw;
                }
                clear(seq); // a memory that refuses to be cut: nothing is kept
                return 0;
            }
        }
        return m;
    }
    bool moves_sequences() const override { return streams_per_sequence(target_) && s_.can_move_sequences(); }
    void move(llama_seq_id from, llama_seq_id to) override {
        s_.move_sequence(from, to);
        target_points_.move(from, to);
        draft_points_.move(from, to);
    }
    bool copies_sequences() const override { return s_.can_move_sequences(); }
    void copy(llama_seq_id from, llama_seq_id to) override { s_.copy_sequence(from, to); }
    std::unique_ptr<saved_sequence> save(llama_seq_id seq) override {
        auto out = std::make_unique<saved_state>();
        out->target = s_.context_state(SPECDEC_CONTEXT_TARGET, seq, 0);
        if (s_.draft_context() != nullptr) {
            out->draft = s_.context_state(SPECDEC_CONTEXT_DRAFT, seq, 0);
        }
        out->session = s_.state(seq);
        out->target_points = target_points_.points(seq);
        out->draft_points = draft_points_.points(seq);
        return out;
    }
    std::vector<uint8_t> write(const saved_sequence & saved) const override {
        return encode_saved(dynamic_cast<const saved_state &>(saved), identity());
    }
    std::unique_ptr<saved_sequence> read(std::span<const uint8_t> bytes) const override { return decode_saved(bytes, identity()); }
    int32_t load(llama_seq_id seq, const saved_sequence & saved) override {
        const auto & in = dynamic_cast<const saved_state &>(saved);
        s_.restore_context_state(SPECDEC_CONTEXT_TARGET, seq, 0, in.target);
        if (s_.draft_context() != nullptr) {
            s_.restore_context_state(SPECDEC_CONTEXT_DRAFT, seq, 0, in.draft);
        }
        s_.restore_state(seq, in.session);
        target_points_.set_points(seq, in.target_points);
        draft_points_.set_points(seq, in.draft_points);
        const int32_t held = llama_memory_seq_pos_max(llama_get_memory(target_), seq) + 1;
        // llama.cpp's drafters over a draft context keep the target's last
        // row to themselves until the next token comes (their exported state
        // carries it only over a recurrent target): their context holds one
        // position less, and they resume from there.
        const bool deferred_row = s_.params().strategy != SPECDEC_STRATEGY_MTP && s_.draft_context() != nullptr &&
                                  !restore_points::needed_for(target_);
        return deferred_row ? keep(seq, held - 1, held) : held;
    }
    size_t restore_bytes() const override { return target_points_.bytes() + draft_points_.bytes(); }
    void decode(const llama_batch & batch) override { s_.decode_target(batch); }
    void process(const llama_batch & batch) override { s_.process(batch); }
    void draft(std::span<const draft_request> requests) override { s_.draft(requests); }
    std::span<const llama_token> proposal(llama_seq_id seq) override { return s_.proposal(seq); }
    std::span<const specdec_token_prob> proposal_probs(llama_seq_id seq, size_t k) override { return s_.proposal_probs(seq, k); }
    void accept(llama_seq_id seq, uint16_t n) override { s_.accept(seq, n); }
    void truncate(llama_seq_id seq, llama_pos p0) override { s_.remove_range(SPECDEC_CONTEXT_TARGET, seq, p0, -1); }

private:
    saved_identity identity() const { return saved_identity(target_, static_cast<uint64_t>(s_.params().strategy) + 1); }

    session &      s_;
    restore_points target_points_;
    restore_points draft_points_;
};

class plain_backend final : public context_backend {
public:
    explicit plain_backend(llama_context * target)
        : context_backend(target), points_(target, llama_n_seq_max(target), restore_points::needed_for(target)) {}

    uint32_t n_seq() const override { return llama_n_seq_max(target_); }
    int32_t n_draft_max() const override { return 0; }
    int32_t n_draft_min() const override { return 0; }
    void clear(llama_seq_id seq) override {
        llama_memory_seq_rm(llama_get_memory(target_), seq, -1, -1);
        points_.forget_above(seq, 0);
    }
    void reset(llama_seq_id seq) noexcept override { clear(seq); }
    void begin(llama_seq_id seq, std::span<const llama_token> prompt) override {
        points_.record(seq, static_cast<llama_pos>(prompt.size()));
    }
    int32_t keep(llama_seq_id seq, int32_t n, int32_t held) override {
        const int32_t m = keepable({&points_}, seq, n, held);
        if (m == 0) {
            clear(seq);
        } else if (m < held) {
            if (points_.enabled()) {
                points_.restore(seq, m);
            }
            if (!llama_memory_seq_rm(llama_get_memory(target_), seq, m, -1)) {
                clear(seq); // a memory that refuses to be cut: nothing is kept
                return 0;
            }
        }
        return m;
    }
    bool moves_sequences() const override { return streams_per_sequence(target_); }
    void move(llama_seq_id from, llama_seq_id to) override {
        copy_sequence(target_, from, to);
        llama_memory_seq_rm(llama_get_memory(target_), from, -1, -1);
        points_.move(from, to);
    }
    bool copies_sequences() const override { return true; }
    void copy(llama_seq_id from, llama_seq_id to) override { copy_sequence(target_, from, to); }
    std::unique_ptr<saved_sequence> save(llama_seq_id seq) override {
        auto out = std::make_unique<saved_state>();
        out->target = read_sequence(target_, seq, 0);
        out->target_points = points_.points(seq);
        return out;
    }
    std::vector<uint8_t> write(const saved_sequence & saved) const override {
        return encode_saved(dynamic_cast<const saved_state &>(saved), saved_identity(target_, 0));
    }
    std::unique_ptr<saved_sequence> read(std::span<const uint8_t> bytes) const override {
        return decode_saved(bytes, saved_identity(target_, 0));
    }
    int32_t load(llama_seq_id seq, const saved_sequence & saved) override {
        const auto & in = dynamic_cast<const saved_state &>(saved);
        if (!write_sequence(target_, seq, 0, in.target)) {
            fail(SPECDEC_STATUS_NATIVE_FAILURE, "llama.cpp rejected the saved state of sequence ", seq, " (",
                 in.target.size(), " bytes)");
        }
        points_.set_points(seq, in.target_points);
        return llama_memory_seq_pos_max(llama_get_memory(target_), seq) + 1;
    }
    size_t restore_bytes() const override { return points_.bytes(); }
    void decode(const llama_batch & batch) override {
        const int32_t rc = llama_decode(target_, batch);
        if (rc == 1) {
            fail(SPECDEC_STATUS_CONTEXT_FULL, "the target context has no room for this batch (llama_decode returned 1)");
        }
        if (rc != 0) {
            fail(SPECDEC_STATUS_DECODE_FAILED, "target decode failed (llama_decode returned ", rc, ")");
        }
    }
    void process(const llama_batch &) override {}
    void draft(std::span<const draft_request>) override {}
    std::span<const llama_token> proposal(llama_seq_id) override { return {}; }
    std::span<const specdec_token_prob> proposal_probs(llama_seq_id, size_t) override { return {}; }
    void accept(llama_seq_id, uint16_t) override {}
    void truncate(llama_seq_id, llama_pos) override {}

private:
    restore_points points_;
};

} // namespace

std::unique_ptr<generation_backend> make_session_backend(session & s) {
    return std::make_unique<session_backend>(s);
}

std::unique_ptr<generation_backend> make_plain_backend(llama_context * target) {
    if (target == nullptr) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "the target context must not be NULL");
    }
    return std::make_unique<plain_backend>(target);
}

} // namespace detail

generation_result generate(session & s, std::span<const std::vector<llama_token>> prompts, const generate_params & params,
                           const token_callback & on_token) {
    detail::session_backend backend(s);
    return detail::run_generation(backend, prompts, params, on_token);
}

generation_result generate_plain(llama_context * target, std::span<const std::vector<llama_token>> prompts,
                                 const generate_params & params, const token_callback & on_token) {
    return detail::run_generation(*detail::make_plain_backend(target), prompts, params, on_token);
}

struct engine::impl {
    impl(std::unique_ptr<detail::generation_backend> b, const engine_params & params, event_callback on_event)
        : backend(std::move(b)), core(*backend, params, std::move(on_event)) {}

    std::unique_ptr<detail::generation_backend> backend; // before core, which refers to it
    detail::engine_core                         core;
};

engine::engine(session & s, const engine_params & params, event_callback on_event)
    : impl_(std::make_unique<impl>(detail::make_session_backend(s), params, std::move(on_event))) {}

engine::engine(llama_context * target, const engine_params & params, event_callback on_event)
    : impl_(std::make_unique<impl>(detail::make_plain_backend(target), params, std::move(on_event))) {}

engine::~engine() = default;

request_id engine::add(std::span<const llama_token> prompt, const request_params & params) {
    return impl_->core.add_n(prompt, params, 1);
}

request_id engine::add_n(std::span<const llama_token> prompt, const request_params & params, uint32_t n) {
    return impl_->core.add_n(prompt, params, n);
}

void engine::cancel(request_id id) {
    impl_->core.cancel(id);
}

void engine::pause(request_id id, bool paused) {
    impl_->core.pause(id, paused);
}

void engine::step() {
    impl_->core.step();
}

void engine::run_until_idle() {
    while (impl_->core.has_work()) {
        impl_->core.step();
    }
}

bool engine::has_work() const {
    return impl_->core.has_work();
}

specdec_generation_times engine::times() const {
    return impl_->core.times();
}

engine::prompt_cache_use engine::prompt_cache() const {
    return {impl_->core.n_cached(), impl_->core.cached_bytes()};
}

std::vector<uint8_t> engine::export_slot(uint32_t slot, size_t & n_tokens) {
    return impl_->core.export_slot(slot, n_tokens);
}

size_t engine::import_slot(uint32_t slot, std::span<const uint8_t> blob) {
    return impl_->core.import_slot(slot, blob);
}

size_t engine::erase_slot(uint32_t slot) {
    return impl_->core.erase_slot(slot);
}

} // namespace specdec

extern "C" specdec_generate_params specdec_generate_default_params(void) {
    specdec_generate_params p{};
    p.n_predict = 128;
    p.n_draft = -1;
    p.temperature = 0.0f;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = 0;
    p.ignore_eog = false;
    p.stop_strings = nullptr;
    p.n_stop_strings = 0;
    p.synthetic_acceptance = -1.0f;
    p.n_top_logprobs = -1;
    p.prompt_logprobs = false;
    p.logit_bias = nullptr;
    p.n_logit_bias = 0;
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.0f;
    p.repeat_penalty = 1.0f;
    p.repeat_last_n = 64;
    p.grammar = nullptr;
    p.grammar_triggers = nullptr;
    p.n_grammar_triggers = 0;
    p.grammar_prefix = nullptr;
    p.accept = SPECDEC_ACCEPT_REJECTION;
    p.reasoning_start = nullptr;
    p.reasoning_end = nullptr;
    p.reasoning_budget = -1;
    p.reasoning_budget_message = nullptr;
    p.reasoning_prefix = nullptr;
    return p;
}

extern "C" specdec_engine_params specdec_engine_default_params(void) {
    specdec_engine_params p{};
    p.n_seq = 0;
    p.max_waiting = 64;
    p.n_prefill_chunk = 256;
    p.keep_finished = false;
    p.reuse_prompts = true;
    p.prompt_cache_bytes = 0;
    return p;
}
