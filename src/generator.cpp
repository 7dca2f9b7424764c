// The generation loop: prefill, then per step draft for every active
// sequence, verify all proposals in one target batch, keep the agreeing
// prefix plus the target's own token, and drop the rest. Each sequence's
// text goes through a text_stream (stop strings, held-back streaming); a
// failure part-way empties the call's sequences and hands out the output
// so far with the error.
#include "generation-backend.h"

#include "draft-length.h"
#include "error.h"
#include "sampler.h"
#include "text-stream.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>

namespace specdec::detail {

namespace {

using clock_type = std::chrono::steady_clock;

int64_t since_us(clock_type::time_point t0) {
    return std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - t0).count();
}

// A batch the loop owns, with every token in one sequence.
class token_batch {
public:
    explicit token_batch(int32_t capacity) : b_(llama_batch_init(capacity, 0, 1)), capacity_(capacity) {}
    ~token_batch() { llama_batch_free(b_); }
    token_batch(const token_batch &) = delete;
    token_batch & operator=(const token_batch &) = delete;

    void clear() { b_.n_tokens = 0; }
    int32_t size() const { return b_.n_tokens; }
    int32_t room() const { return capacity_ - b_.n_tokens; }
    void add(llama_token t, llama_pos pos, llama_seq_id seq, bool logits) {
        const int32_t i = b_.n_tokens++;
        b_.token[i] = t;
        b_.pos[i] = pos;
        b_.n_seq_id[i] = 1;
        b_.seq_id[i][0] = seq;
        b_.logits[i] = logits;
    }
    const llama_batch & get() const { return b_; }

private:
    llama_batch b_;
    int32_t capacity_;
};

struct sequence_state {
    sequence_state(llama_seq_id id, const generate_params & p, uint32_t seed, int32_t n_vocab, const stop_matcher & stops)
        : seq(id), sampler(p, seed, n_vocab), synthetic(seed), text(stops) {}

    llama_seq_id    seq = 0;
    llama_pos       n_past = 0;  // tokens in the target
    llama_token     id_last = 0; // next token to decode
    bool            active = true;
    token_sampler   sampler;
    std::mt19937    synthetic;   // draws of the synthetic-acceptance benchmark mode
    text_stream     text;        // becomes result.text at the end
    sequence_result result;
};

void validate(generation_backend & backend, std::span<const std::vector<llama_token>> prompts,
              const generate_params & p, int32_t n_ctx) {
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
    validate_sampling(p);
    if (prompts.empty()) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "no prompt given");
    }
    if (prompts.size() > static_cast<size_t>(backend.n_batch())) {
        fail(SPECDEC_STATUS_BATCH_CAPACITY, prompts.size(), " sequences cannot share a verification batch of n_batch = ",
             backend.n_batch(), " tokens");
    }
    if (prompts.size() > backend.n_seq()) {
        fail(SPECDEC_STATUS_SEQ_CAPACITY, prompts.size(), " prompts need as many sequences, but only ", backend.n_seq(),
             " are available");
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
        const auto & prompt = prompts[i];
        if (prompt.empty()) {
            fail(SPECDEC_STATUS_INVALID_ARGUMENT, "prompt ", i, " is empty; it needs at least one token");
        }
        if (prompt.size() > static_cast<size_t>(n_ctx)) {
            fail(SPECDEC_STATUS_CONTEXT_FULL, "prompt ", i, " has ", prompt.size(), " tokens; the context holds ",
                 n_ctx, " per sequence here");
        }
        for (llama_token t : prompt) {
            if (t < 0 || t >= backend.n_vocab()) {
                fail(SPECDEC_STATUS_INVALID_ARGUMENT, "prompt ", i, " holds token ", t, ", outside the vocabulary [0, ",
                     backend.n_vocab(), ")");
            }
        }
    }
}

std::vector<std::string> stop_strings(const generate_params & p) {
    std::vector<std::string> out;
    for (size_t i = 0; i < p.n_stop_strings; ++i) {
        out.emplace_back(p.stop_strings[i]);
    }
    return out;
}

class loop {
public:
    loop(generation_backend & backend, const generate_params & params, const token_callback & on_token, int32_t n_ctx)
        : b_(backend), p_(params), on_token_(on_token), n_ctx_(n_ctx),
          n_draft_(params.n_draft < 0 ? backend.n_draft_max() : params.n_draft),
          synthetic_(params.synthetic_acceptance >= 0.0f),
          batch_(std::max(backend.n_batch(), 1)), stops_(stop_strings(params)) {}

    generation_result run(std::span<const std::vector<llama_token>> prompts) {
        const auto t0 = clock_type::now();
        for (size_t i = 0; i < prompts.size(); ++i) {
            const uint32_t seed = p_.seed + static_cast<uint32_t>(i);
            seqs_.emplace_back(static_cast<llama_seq_id>(i), p_, seed, b_.n_vocab(), stops_);
        }
        if (p_.n_draft == SPECDEC_N_DRAFT_AUTO && n_draft_ > 0) {
            adaptive_.emplace(seqs_.size(), n_draft_);
        }
        try {
            prefill(prompts);
            times_.t_prefill_us = since_us(t0);
            for (sequence_state & s : seqs_) {
                if (p_.n_predict == 0) {
                    s.active = false;
                }
            }
            while (std::any_of(seqs_.begin(), seqs_.end(), [](const sequence_state & s) { return s.active; })) {
                step();
            }
        } catch (const error & e) {
            times_.t_total_us = since_us(t0);
            recover();
            throw generation_error(e.code(), e.what(), result());
        } catch (...) {
            recover();
            throw;
        }
        times_.t_total_us = since_us(t0);
        return result();
    }

private:
    // Decodes every prompt but its last token, in batches of at most n_batch
    // tokens that may mix sequences; the last token becomes id_last.
    void prefill(std::span<const std::vector<llama_token>> prompts) {
        for (sequence_state & s : seqs_) {
            b_.clear(s.seq);
        }
        batch_.clear();
        for (sequence_state & s : seqs_) {
            const auto & prompt = prompts[static_cast<size_t>(s.seq)];
            for (size_t i = 0; i + 1 < prompt.size(); ++i) {
                if (batch_.room() == 0) {
                    flush_prefill();
                }
                batch_.add(prompt[i], static_cast<llama_pos>(i), s.seq, false);
            }
            s.n_past = static_cast<llama_pos>(prompt.size()) - 1;
            s.id_last = prompt.back();
        }
        flush_prefill();
        for (sequence_state & s : seqs_) {
            const auto & prompt = prompts[static_cast<size_t>(s.seq)];
            b_.begin(s.seq, std::span<const llama_token>(prompt.data(), prompt.size() - 1));
        }
    }

    void flush_prefill() {
        if (batch_.size() > 0) {
            b_.decode(batch_.get());
            b_.process(batch_.get());
            batch_.clear();
        }
    }

    void step() {
        // Draft for every active sequence that has room for more than id_last:
        // within its token budget, the context, and its share of the batch.
        const auto n_active = std::count_if(seqs_.begin(), seqs_.end(), [](const sequence_state & s) { return s.active; });
        const int64_t share = b_.n_batch() / n_active - 1;
        std::vector<int32_t> caps(seqs_.size(), -1); // -1: inactive
        for (const sequence_state & s : seqs_) {
            if (s.active) {
                const int64_t budget = p_.n_predict - static_cast<int64_t>(s.result.tokens.size()) - 1;
                const int64_t room = static_cast<int64_t>(n_ctx_) - s.n_past - 1;
                caps[static_cast<size_t>(s.seq)] =
                    static_cast<int32_t>(std::clamp<int64_t>(std::min<int64_t>({n_draft_, budget, room, share}), 0, n_draft_));
            }
        }
        // Adaptive: a sequence that will verify no draft may still draft a
        // "shadow" token, never verified, only compared with the token the
        // target picks: it keeps the acceptance estimate current for the
        // price of drafting alone.
        std::vector<bool> shadow(seqs_.size(), false);
        std::vector<int32_t> asked = caps;
        if (adaptive_) {
            const std::vector<int32_t> lengths = adaptive_->choose(caps, b_.n_draft_min());
            for (size_t i = 0; i < caps.size(); ++i) {
                shadow[i] = caps[i] > 0 && lengths[i] == 0 && adaptive_->shadow_due(i);
                asked[i] = shadow[i] ? std::min(caps[i], std::max(1, b_.n_draft_min())) : lengths[i];
            }
        }
        std::vector<draft_request> requests;
        for (const sequence_state & s : seqs_) {
            if (asked[static_cast<size_t>(s.seq)] > 0) {
                requests.push_back({s.seq, s.n_past, s.id_last, asked[static_cast<size_t>(s.seq)]});
            }
        }
        const auto t_step = clock_type::now();
        auto t = t_step;
        if (!requests.empty()) {
            b_.draft(requests);
        }
        times_.t_draft_us += since_us(t);

        // One verification batch: per sequence id_last, then its proposal.
        batch_.clear();
        std::vector<int32_t> row0(seqs_.size(), -1);
        std::vector<std::vector<llama_token>> proposals(seqs_.size());
        std::vector<std::vector<llama_token>> guesses(seqs_.size()); // shadow proposals, not verified
        for (sequence_state & s : seqs_) {
            if (!s.active) {
                continue;
            }
            const size_t i = static_cast<size_t>(s.seq);
            if (asked[i] > 0) {
                const auto p = b_.proposal(s.seq);
                (shadow[i] ? guesses[i] : proposals[i]).assign(p.begin(), p.end());
            }
            row0[i] = batch_.size();
            batch_.add(s.id_last, s.n_past, s.seq, true);
            for (size_t k = 0; k < proposals[i].size(); ++k) {
                batch_.add(proposals[i][k], s.n_past + 1 + static_cast<llama_pos>(k), s.seq, true);
            }
        }
        t = clock_type::now();
        b_.decode(batch_.get());
        times_.t_verify_us += since_us(t);
        t = clock_type::now();
        b_.process(batch_.get());
        times_.t_draft_us += since_us(t);
        const auto step_us = static_cast<double>(since_us(t_step));

        int32_t n_proposed = 0;
        for (sequence_state & s : seqs_) {
            if (!s.active) {
                continue;
            }
            const size_t i = static_cast<size_t>(s.seq);
            const int32_t kept = verify(s, proposals[i], row0[i]);
            n_proposed += static_cast<int32_t>(proposals[i].size());
            if (!guesses[i].empty()) {
                // The target's token is id_last now; nothing of the guess was
                // decoded. (Synthetic acceptance decides shadows as it decides drafts.)
                const bool hit = synthetic_ ? keep_synthetic(s, guesses[i][0]) : guesses[i][0] == s.id_last;
                adaptive_->observe(i, 1, hit ? 1 : 0);
                b_.accept(s.seq, 0);
            } else if (adaptive_) {
                adaptive_->observe(i, static_cast<int32_t>(proposals[i].size()), kept);
            }
        }
        if (adaptive_) {
            adaptive_->observe_cost(static_cast<int32_t>(n_active), n_proposed, step_us);
        }
    }

    // Draws the target's token at each position in turn and keeps going while
    // the draw equals the drafted token: each emitted token is exactly what
    // the target alone would have produced there. Returns the drafted tokens
    // kept.
    int32_t verify(sequence_state & s, const std::vector<llama_token> & proposal, int32_t row0) {
        size_t kept = 0;
        llama_token last = s.id_last;
        for (size_t k = 0; k <= proposal.size() && s.active; ++k) {
            // Synthetic acceptance decides a drafted token by its own draw
            // alone: a rejected one ends the step even when the target agrees.
            const bool drafted = k < proposal.size();
            const llama_pos pos = s.n_past + 1 + static_cast<llama_pos>(k); // where the token would be decoded
            if (synthetic_ && drafted && keep_synthetic(s, proposal[k])) {
                last = proposal[k];
                emit(s, last, pos);
                ++kept;
                continue;
            }
            const llama_token x = s.sampler.choose(b_.logits(row0 + static_cast<int32_t>(k)));
            last = x;
            emit(s, x, pos);
            if (synthetic_ || !drafted || x != proposal[k]) {
                break;
            }
            ++kept;
        }
        sequence_stats_update(s, proposal.size(), kept);
        if (!proposal.empty()) {
            b_.accept(s.seq, static_cast<uint16_t>(kept));
        }
        if (kept < proposal.size()) {
            b_.truncate(s.seq, s.n_past + 1 + static_cast<llama_pos>(kept));
        }
        s.n_past += 1 + static_cast<llama_pos>(kept);
        s.id_last = last;
        return static_cast<int32_t>(kept);
    }

    // The synthetic-acceptance benchmark mode's decision for a drafted token.
    bool keep_synthetic(sequence_state & s, llama_token drafted) {
        return std::uniform_real_distribution<float>(0.0f, 1.0f)(s.synthetic) < p_.synthetic_acceptance && !b_.is_eog(drafted);
    }

    void sequence_stats_update(sequence_state & s, size_t proposed, size_t kept) {
        specdec_sequence_stats & st = s.result.stats;
        st.n_steps++;
        st.n_drafted += proposed;
        st.n_accepted += kept;
        for (size_t k = 0; k < proposed; ++k) {
            st.n_proposed_at[k]++;
        }
        for (size_t k = 0; k < kept; ++k) {
            st.n_accepted_at[k]++;
        }
    }

    // Adds the target's token x, which would be decoded at position pos, to
    // the output and streams the text it releases; or ends the sequence.
    void emit(sequence_state & s, llama_token x, llama_pos pos) {
        if (!p_.ignore_eog && b_.is_eog(x)) {
            s.active = false;
            s.result.stop = SPECDEC_STOP_EOG;
            const std::string_view rest = s.text.finish();
            if (on_token_ && !rest.empty()) {
                on_token_(s.seq, LLAMA_TOKEN_NULL, rest); // the end: its answer changes nothing
            }
            return;
        }
        s.result.tokens.push_back(x);
        s.result.stats.n_generated++;
        const bool budget = s.result.tokens.size() >= static_cast<size_t>(p_.n_predict);
        const bool full = pos >= n_ctx_; // x itself cannot be decoded
        const std::string_view out = s.text.push(b_.piece(x), budget || full);
        if (s.text.stopped()) {
            s.active = false;
            s.result.stop = SPECDEC_STOP_STRING;
        } else if (budget || full) {
            s.active = false;
            s.result.stop = budget ? SPECDEC_STOP_BUDGET : SPECDEC_STOP_CONTEXT;
        }
        if (on_token_ && !on_token_(s.seq, x, out) && s.active) {
            s.active = false;
            s.result.stop = SPECDEC_STOP_CALLBACK;
        }
    }

    // After a failure: sequences still running end with SPECDEC_STOP_ERROR,
    // and every sequence of the call is emptied (no pending proposal, no
    // positions in the contexts), ready for the next call.
    void recover() noexcept {
        for (sequence_state & s : seqs_) {
            if (s.active) {
                s.active = false;
                s.result.stop = SPECDEC_STOP_ERROR;
            }
            b_.reset(s.seq);
        }
    }

    generation_result result() {
        generation_result out;
        out.times = times_;
        for (sequence_state & s : seqs_) {
            s.result.text = s.text.take_text();
            out.sequences.push_back(std::move(s.result));
        }
        return out;
    }

    generation_backend &        b_;
    const generate_params &     p_;
    const token_callback &      on_token_;
    const int32_t               n_ctx_; // positions per sequence in this call
    const int32_t               n_draft_;
    const bool                  synthetic_;
    std::optional<adaptive_draft_length> adaptive_;
    token_batch                 batch_;
    const stop_matcher          stops_; // before seqs_, whose streams refer to it
    std::vector<sequence_state> seqs_;
    specdec_generation_times    times_{};
};

} // namespace

generation_result run_generation(generation_backend & backend, std::span<const std::vector<llama_token>> prompts,
                                 const generate_params & params, const token_callback & on_token) {
    const int32_t n_ctx = backend.n_ctx(static_cast<uint32_t>(std::min<size_t>(prompts.size(), UINT32_MAX)));
    validate(backend, prompts, params, n_ctx);
    return loop(backend, params, on_token, n_ctx).run(prompts);
}

} // namespace specdec::detail
