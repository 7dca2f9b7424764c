// A scripted target and drafter for the generation engine's model-free
// tests: a deterministic "language", positions checked against a real
// context's contract, failures on demand, and a record of every batch.
#pragma once

#include "generation-backend.h"
#include "rejection-sampler.h"
#include "state-codec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>

namespace specdec::test {

using detail::byte_reader;
using detail::byte_writer;
using detail::generation_backend;

inline constexpr int32_t V = 16;
inline constexpr llama_token eog = 15;

// A deterministic "language": the target's logits at a position depend only
// on the token there. Greedy successor: (3t + 1) mod 15, never the EOG id.
inline llama_token greedy_next(llama_token t) {
    return (3 * t + 1) % 15;
}

// Scripted target + drafter. It also checks the contract the loop must keep
// with a real context: positions continue exactly where each sequence ends.
class fake_backend : public generation_backend {
public:
    // drafter(seq, id_last, cap) -> proposal
    using drafter_fn = std::function<std::vector<llama_token>(llama_seq_id, llama_token, int32_t)>;

    fake_backend(int32_t n_draft_max, drafter_fn drafter, uint32_t n_seq = 4, int32_t n_ctx = 4096,
                 int32_t n_batch = 64)
        : n_draft_max_(n_draft_max), drafter_(std::move(drafter)), n_seq_(n_seq), n_ctx_(n_ctx), n_batch_(n_batch) {}

    // Logits for the position after token t (greedy_next(t) is the argmax).
    std::function<void(llama_token, float *)> logits_for = [](llama_token t, float * out) {
        std::fill(out, out + V, 0.0f);
        out[greedy_next(t)] = 10.0f;
    };

    int32_t n_vocab() const override { return V; }
    // kv_unified: n_ctx cells shared by every sequence, split equally.
    int32_t n_ctx(uint32_t n_seq) const override { return unified ? n_ctx_ / static_cast<int32_t>(std::max(n_seq, 1u)) : n_ctx_; }
    int32_t n_batch() const override { return n_batch_; }
    uint32_t n_seq() const override { return n_seq_; }
    int32_t n_draft_max() const override { return n_draft_max_; }
    int32_t n_draft_min() const override { return 0; }
    void check_exact_batching(uint32_t n_seq) const override { checked_n_seq = n_seq; }

    void clear(llama_seq_id seq) override {
        kv[seq].clear();
        points[seq].clear();
    }
    void reset(llama_seq_id seq) noexcept override {
        pending.erase(seq);
        kv[seq].clear();
        ++n_resets;
    }
    void begin(llama_seq_id seq, std::span<const llama_token> prompt) override {
        EXPECT_EQ(kv[seq], std::vector<llama_token>(prompt.begin(), prompt.end())) << "begin() sees the whole prompt decoded";
        points[seq].push_back(static_cast<int32_t>(prompt.size()));
    }
    // With cuts_anywhere false, as a recurrent memory: everything held, or a
    // point begin() recorded, or nothing.
    int32_t keep(llama_seq_id seq, int32_t n, int32_t held) override {
        EXPECT_FALSE(pending.count(seq));
        EXPECT_EQ(held, static_cast<int32_t>(kv[seq].size()));
        EXPECT_LE(n, held);
        int32_t m = n;
        if (!cuts_anywhere && n < held) {
            m = 0;
            for (int32_t p : points[seq]) {
                if (p <= n) {
                    m = std::max(m, p);
                }
            }
        }
        kv[seq].resize(static_cast<size_t>(m));
        keeps.push_back({seq, m});
        return m;
    }
    bool moves_sequences() const override { return movable && !unified; }
    void move(llama_seq_id from, llama_seq_id to) override {
        EXPECT_TRUE(moves_sequences());
        EXPECT_FALSE(pending.count(from));
        EXPECT_TRUE(kv[to].empty()) << "a sequence moves only into an empty one";
        kv[to] = std::move(kv[from]);
        kv[from].clear();
        moves.emplace_back(from, to);
    }
    bool copies_sequences() const override { return copyable; }
    void copy(llama_seq_id from, llama_seq_id to) override {
        EXPECT_TRUE(copyable);
        EXPECT_FALSE(pending.count(from));
        EXPECT_TRUE(kv[to].empty()) << "a sequence is copied only into an empty one";
        kv[to] = kv[from];
        copies.emplace_back(from, to);
    }

    // A saved sequence: its tokens and restore points, at bytes_per_token
    // bytes a token (the prompt cache's budget in the tests).
    struct saved : saved_sequence {
        llama_seq_id             seq = 0; // saved from
        std::vector<llama_token> tokens;
        std::vector<int32_t>     points;
        size_t bytes() const override { return tokens.size() * bytes_per_token; }
    };
    std::unique_ptr<saved_sequence> save(llama_seq_id seq) override {
        EXPECT_FALSE(pending.count(seq));
        if (fail_save) {
            throw error(SPECDEC_STATUS_NATIVE_FAILURE, "scripted save failure");
        }
        auto out = std::make_unique<saved>();
        out->seq = seq;
        out->tokens = kv[seq];
        out->points = points[seq];
        saves.push_back({seq, kv[seq]});
        return out;
    }
    int32_t load(llama_seq_id seq, const saved_sequence & s) override {
        EXPECT_TRUE(kv[seq].empty()) << "a saved sequence is loaded only into an empty one";
        if (fail_load) {
            throw error(SPECDEC_STATUS_NATIVE_FAILURE, "scripted load failure");
        }
        const auto & in = dynamic_cast<const saved &>(s);
        if (!copyable && in.seq != seq) {
            throw error(SPECDEC_STATUS_STATE_SEQUENCE, "the drafter's state of a sequence stays in it");
        }
        kv[seq] = in.tokens;
        points[seq] = in.points;
        loads.push_back({seq, in.tokens});
        return static_cast<int32_t>(kv[seq].size());
    }
    // As bytes: the sequence saved from (u32), then the tokens and the
    // restore points, each an i32 after a u32 count.
    std::vector<uint8_t> write(const saved_sequence & s) const override {
        const auto & in = dynamic_cast<const saved &>(s);
        byte_writer w;
        w.u32(static_cast<uint32_t>(in.seq));
        for (const auto * v : {&in.tokens, &in.points}) {
            w.u32(static_cast<uint32_t>(v->size()));
            for (const int32_t x : *v) {
                w.u32(static_cast<uint32_t>(x));
            }
        }
        return w.take();
    }
    std::unique_ptr<saved_sequence> read(std::span<const uint8_t> bytes) const override {
        byte_reader r(bytes);
        auto out = std::make_unique<saved>();
        out->seq = static_cast<llama_seq_id>(r.u32("sequence"));
        for (auto * v : {&out->tokens, &out->points}) {
            const uint32_t n = r.u32("count");
            for (uint32_t i = 0; i < n; ++i) {
                v->push_back(static_cast<int32_t>(r.u32("value")));
            }
        }
        if (r.remaining() != 0) {
            throw error(SPECDEC_STATUS_STATE_MALFORMED, "trailing bytes");
        }
        return out;
    }
    size_t restore_bytes() const override { return restore_bytes_held; }

    void decode(const llama_batch & b) override {
        if (fail_at_decode == n_decodes) {
            throw error(SPECDEC_STATUS_DECODE_FAILED, "scripted decode failure");
        }
        EXPECT_LE(b.n_tokens, n_batch_);
        rows.assign(static_cast<size_t>(b.n_tokens) * V, 0.0f);
        for (int32_t i = 0; i < b.n_tokens; ++i) {
            auto & seq_kv = kv[b.seq_id[i][0]];
            EXPECT_EQ(b.pos[i], static_cast<llama_pos>(seq_kv.size())) << "positions must continue the sequence";
            EXPECT_LT(b.pos[i], n_ctx_);
            seq_kv.push_back(b.token[i]);
            if (unified) {
                size_t cells = 0;
                for (const auto & [id, held] : kv) {
                    cells += held.size();
                }
                EXPECT_LE(cells, static_cast<size_t>(n_ctx_)) << "the shared cache overflows";
            }
            logits_for(b.token[i], rows.data() + static_cast<size_t>(i) * V);
        }
        int32_t n_logits = 0;
        for (int32_t i = 0; i < b.n_tokens; ++i) {
            n_logits += b.logits[i] ? 1 : 0;
        }
        batches.push_back({b.n_tokens, n_logits});
        std::vector<llama_seq_id> seqs;
        for (int32_t i = 0; i < b.n_tokens; ++i) {
            if (seqs.empty() || seqs.back() != b.seq_id[i][0]) {
                seqs.push_back(b.seq_id[i][0]);
            }
        }
        batch_seqs.push_back(seqs);
        ++n_decodes;
    }
    void process(const llama_batch &) override {}
    const float * logits(int32_t i) override { return rows.data() + static_cast<size_t>(i) * V; }

    void draft(std::span<const draft_request> requests) override {
        for (const auto & r : requests) {
            EXPECT_GE(r.n_max, 1);
            EXPECT_LE(r.n_max, n_draft_max_);
            EXPECT_EQ(r.n_past, static_cast<llama_pos>(kv[r.seq_id].size()));
            EXPECT_FALSE(pending.count(r.seq_id));
            std::vector<llama_token> p;
            probs[r.seq_id].clear();
            if (q_after && r.sampling != nullptr) {
                // Samples each token from q_after(previous token) with the
                // draft stream's draw at its position, as the MTP driver does.
                llama_token t = r.id_last;
                for (int32_t k = 0; k < r.n_max; ++k) {
                    probs[r.seq_id].push_back(q_after(t));
                    t = detail::draw(probs[r.seq_id].back(),
                                     detail::uniform_at(r.sampling->seed, r.n_past + 1 + k, detail::draw_stream::draft));
                    p.push_back(t);
                }
            } else {
                p = drafter_(r.seq_id, r.id_last, r.n_max);
            }
            if (p.size() > static_cast<size_t>(r.n_max)) {
                p.resize(static_cast<size_t>(r.n_max));
            }
            proposals[r.seq_id] = p;
            if (!p.empty()) {
                pending[r.seq_id] = p.size();
            }
        }
    }
    std::span<const llama_token> proposal(llama_seq_id seq) override { return proposals[seq]; }
    std::span<const specdec_token_prob> proposal_probs(llama_seq_id seq, size_t k) override {
        return k < probs[seq].size() ? std::span<const specdec_token_prob>(probs[seq][k]) : std::span<const specdec_token_prob>();
    }
    void accept(llama_seq_id seq, uint16_t n) override {
        ASSERT_TRUE(pending.count(seq));
        EXPECT_LE(n, pending[seq]);
        proposed_calls.push_back(pending[seq]);
        pending.erase(seq);
        accepted_calls.push_back(n);
    }
    void truncate(llama_seq_id seq, llama_pos p0) override {
        EXPECT_LE(p0, static_cast<llama_pos>(kv[seq].size()));
        kv[seq].resize(static_cast<size_t>(p0));
    }
    bool is_eog(llama_token t) const override { return t == eog; }
    const llama_vocab * vocab() const override { return nullptr; }
    std::string piece(llama_token t) const override { return piece_of(t); }
    std::function<std::string(llama_token)> piece_of = [](llama_token t) { return std::string(1, static_cast<char>('a' + t)); };

    std::map<llama_seq_id, std::vector<llama_token>> kv;
    std::map<llama_seq_id, std::vector<int32_t>>     points;            // per sequence: every begin()'s prompt length
    std::vector<std::pair<llama_seq_id, int32_t>>    keeps;             // every keep(): sequence, positions kept
    bool                                             cuts_anywhere = true; // false: keep() as a recurrent memory
    std::map<llama_seq_id, std::vector<llama_token>> proposals;
    // When set, a request that asks the drafter to sample gets tokens drawn
    // from q_after(previous token), and their distributions.
    std::function<std::vector<specdec_token_prob>(llama_token)> q_after;
    std::map<llama_seq_id, std::vector<std::vector<specdec_token_prob>>> probs;
    std::map<llama_seq_id, size_t>                   pending;
    std::vector<uint16_t>                            accepted_calls;
    std::vector<size_t>                              proposed_calls;    // the length of each accepted proposal
    std::vector<float>                               rows;
    int                                              n_decodes = 0;
    int                                              fail_at_decode = -1; // decode number that throws
    int                                              n_resets = 0;
    mutable uint32_t                                 checked_n_seq = 0; // the last check_exact_batching()
    bool                                             unified = false;   // one cache of n_ctx cells for all sequences
    bool                                             movable = true;    // the drafter lets sequences move (with !unified)
    std::vector<std::pair<llama_seq_id, llama_seq_id>> moves;           // every move(from, to)
    bool                                             copyable = true;   // the drafter lets sequences be copied
    std::vector<std::pair<llama_seq_id, llama_seq_id>> copies;          // every copy(from, to)
    static constexpr size_t                          bytes_per_token = 100;
    std::vector<std::pair<llama_seq_id, std::vector<llama_token>>> saves; // every save(): sequence, its tokens
    std::vector<std::pair<llama_seq_id, std::vector<llama_token>>> loads; // every load(): sequence, its tokens
    bool                                             fail_save = false;
    bool                                             fail_load = false;
    size_t                                           restore_bytes_held = 0; // what restore_bytes() reports
    std::vector<std::pair<int32_t, int32_t>>         batches;           // per decode: tokens, rows with logits
    std::vector<std::vector<llama_seq_id>>           batch_seqs;        // per decode: its sequences, in row order

private:
    int32_t    n_draft_max_;
    drafter_fn drafter_;
    uint32_t   n_seq_;
    int32_t    n_ctx_;
    int32_t    n_batch_;
};

// Chains greedy_next; errs (off by one) when the input token is a multiple of `wrong_every`.
inline fake_backend::drafter_fn chained_drafter(int wrong_every = 0) {
    return [wrong_every](llama_seq_id, llama_token t, int32_t cap) {
        std::vector<llama_token> out;
        for (int32_t i = 0; i < cap; ++i) {
            llama_token next = greedy_next(t);
            if (wrong_every > 0 && t % wrong_every == 0) {
                next = (next + 1) % 15;
            }
            out.push_back(next);
            t = next;
        }
        return out;
    };
}

inline fake_backend::drafter_fn silent_drafter() {
    return [](llama_seq_id, llama_token, int32_t) { return std::vector<llama_token>{}; };
}

inline generate_params greedy(int n_predict, int n_draft = -1) {
    generate_params p = specdec_generate_default_params();
    p.n_predict = n_predict;
    p.n_draft = n_draft;
    return p;
}

inline std::vector<llama_token> expected(llama_token last, int n) {
    std::vector<llama_token> out;
    for (int i = 0; i < n; ++i) {
        last = greedy_next(last);
        out.push_back(last);
    }
    return out;
}

} // namespace specdec::test
