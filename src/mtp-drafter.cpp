#include "mtp-drafter.h"

#include "error.h"
#include "rejection-sampler.h"
#include "sampler.h"

#include "llama-ext.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

namespace specdec::detail {

namespace {

// The top_k largest logits of a row, largest first (on ties the lower id
// first), in one pass over a small sorted array.
struct top_candidates {
    float       logit[mtp_drafter::top_k];
    llama_token id[mtp_drafter::top_k];
    int         n = 0;

    // logits[k] is token ids[k]'s (ids null: token k's).
    top_candidates(const float * logits, int32_t n_vocab, const llama_token * ids = nullptr) {
        for (int32_t k = 0; k < n_vocab; ++k) {
            const float v = logits[k];
            const llama_token t = ids != nullptr ? ids[k] : k;
            if (n == mtp_drafter::top_k && v <= logit[n - 1]) {
                continue;
            }
            int i = n < mtp_drafter::top_k ? n++ : n - 1;
            while (i > 0 && logit[i - 1] < v) {
                logit[i] = logit[i - 1];
                id[i] = id[i - 1];
                --i;
            }
            logit[i] = v;
            id[i] = t;
        }
    }

    // The most likely token's probability within the candidates.
    float p_top() const {
        double sum = 0;
        for (int i = 0; i < n; ++i) {
            sum += std::exp(static_cast<double>(logit[i] - logit[0]));
        }
        return static_cast<float>(1.0 / sum);
    }
};

// A token drawn from the candidates under the request's transforms
// (`transforms`, built from `sp`), with the distribution it was drawn from
// (most likely first) in `q`.
llama_token sample(const top_candidates & c, token_sampler & transforms, const specdec_draft_sampling & sp, llama_pos pos,
                   std::vector<specdec_token_prob> & q) {
    llama_token_data data[mtp_drafter::top_k];
    for (int i = 0; i < c.n; ++i) {
        data[i] = {c.id[i], c.logit[i], 0.0f};
    }
    llama_token_data_array arr = {data, static_cast<size_t>(c.n), -1, false};
    transforms.distribution(arr, q);
    std::stable_sort(q.begin(), q.end(), [](const specdec_token_prob & a, const specdec_token_prob & b) { return a.p > b.p; });
    return draw(q, uniform_at(sp.seed, pos, draw_stream::draft));
}

} // namespace

bool mtp_drafter::handles(llama_context * target, llama_context * draft) {
    return llama_model_n_layer_nextn(llama_get_model(draft)) <= 1 && llama_get_ctx_other(draft) != target;
}

mtp_drafter::mtp_drafter(llama_context * target, llama_context * draft, uint32_t n_seq, float p_min, int32_t n_min,
                         std::unique_ptr<draft_vocab> vocab)
    : target_(target),
      draft_(draft),
      n_embd_(llama_model_n_embd_out(llama_get_model(draft))),
      n_vocab_(llama_vocab_n_tokens(llama_model_get_vocab(llama_get_model(draft)))),
      n_batch_(static_cast<int32_t>(llama_n_batch(draft))),
      p_min_(p_min),
      n_min_(n_min),
      seqs_(n_seq),
      vocab_(std::move(vocab)) {
    if (n_embd_ != llama_model_n_embd_out(llama_get_model(target))) {
        fail(SPECDEC_STATUS_WIDTH_MISMATCH, "the MTP head reads rows of width ", n_embd_, ", but the target writes ",
             llama_model_n_embd_out(llama_get_model(target)));
    }
    for (sequence & s : seqs_) {
        s.h_prev.assign(static_cast<size_t>(n_embd_), 0.0f);
    }
    // Every target row's NextN hidden state (prefill rows have no logits),
    // and every head row's too: v0.5.0's MTP graphs compute the head's
    // hidden state for every row and select the output rows only for the
    // logits, so a masked extraction copies the batch's first n_outputs
    // rows, not the output rows (a drafting row after catch-up rows, or the
    // second sequence's, would chain from another row's state). With a
    // restricted vocabulary no row asks for logits at all: the drafting rows'
    // states are projected here.
    llama_set_embeddings_nextn(target_, true, /*masked=*/false);
    llama_set_embeddings_nextn(draft_, true, /*masked=*/false);
}

void mtp_drafter::observe(const llama_batch & batch) {
    const size_t row = static_cast<size_t>(n_embd_);
    for (int32_t k = 0; k < batch.n_tokens; ++k) {
        const llama_seq_id seq = batch.seq_id[k][0];
        sequence & s = seqs_[static_cast<size_t>(seq)];
        if (batch.pos[k] < s.end()) {
            truncate(seq, batch.pos[k]);
        } else if (batch.pos[k] > s.end()) {
            begin(seq, batch.pos[k]);
        }
        const float * h = llama_get_embeddings_nextn_ith(target_, k);
        if (h == nullptr) {
            fail(SPECDEC_STATUS_NATIVE_FAILURE, "the target produced no NextN hidden row for batch row ", k);
        }
        s.tokens.push_back(batch.token[k]);
        s.h.insert(s.h.end(), h, h + row);
    }
    for (size_t i = 0; i < seqs_.size(); ++i) {
        sequence & s = seqs_[i];
        if (s.tokens.size() >= 2 * kept_rows) {
            // llama.cpp takes a sequence's positions only in order after its cached ones
            drop_cells(static_cast<llama_seq_id>(i), 0);
            pass_recorded(s, s.tokens.size() - kept_rows);
        }
    }
}

void mtp_drafter::truncate(llama_seq_id seq, llama_pos p0) {
    sequence & s = seqs_[static_cast<size_t>(seq)];
    p0 = std::max<llama_pos>(p0, 0);
    if (p0 >= s.end()) {
        return;
    }
    if (p0 >= s.n_run) {
        const size_t keep = static_cast<size_t>(p0 - s.n_run);
        s.tokens.resize(keep);
        s.h.resize(keep * static_cast<size_t>(n_embd_));
        return;
    }
    // Positions already run: their cells go, and the carried row is the one
    // held (the exact h_{p0-1} is no longer known) unless nothing is left.
    s.tokens.clear();
    s.h.clear();
    s.n_run = p0;
    if (p0 == 0) {
        std::fill(s.h_prev.begin(), s.h_prev.end(), 0.0f);
    }
    drop_cells(seq, p0);
}

void mtp_drafter::begin(llama_seq_id seq, llama_pos n) {
    sequence & s = seqs_[static_cast<size_t>(seq)];
    if (n < s.end()) {
        truncate(seq, n);
    } else if (n > s.end()) {
        s.tokens.clear();
        s.h.clear();
        s.n_run = n;
        std::fill(s.h_prev.begin(), s.h_prev.end(), 0.0f);
    }
}

void mtp_drafter::move(llama_seq_id from, llama_seq_id to) {
    sequence & a = seqs_[static_cast<size_t>(from)];
    seqs_[static_cast<size_t>(to)] = std::move(a);
    a = sequence{};
    a.h_prev.assign(static_cast<size_t>(n_embd_), 0.0f);
}

void mtp_drafter::copy(llama_seq_id from, llama_seq_id to) {
    seqs_[static_cast<size_t>(to)] = seqs_[static_cast<size_t>(from)];
}

void mtp_drafter::clear_batch() {
    b_token_.clear();
    b_embd_.clear();
    b_pos_.clear();
    b_n_seq_.clear();
    b_seq_.clear();
    b_logits_.clear();
}

void mtp_drafter::add_row(llama_token token, llama_pos pos, llama_seq_id seq, const float * embd, bool output) {
    b_token_.push_back(token);
    b_embd_.insert(b_embd_.end(), embd, embd + n_embd_);
    b_pos_.push_back(pos);
    b_n_seq_.push_back(1);
    b_seq_.push_back(seq);
    b_logits_.push_back(output && vocab_ == nullptr ? 1 : 0);
}

void mtp_drafter::decode_batch(const char * what) {
    const int32_t n = static_cast<int32_t>(b_token_.size());
    if (n == 0) {
        return;
    }
    b_seq_ptr_.resize(b_seq_.size());
    for (size_t i = 0; i < b_seq_.size(); ++i) {
        b_seq_ptr_[i] = &b_seq_[i];
    }
    llama_batch b{};
    b.n_tokens = n;
    b.token    = b_token_.data();
    b.embd     = b_embd_.data();
    b.pos      = b_pos_.data();
    b.n_seq_id = b_n_seq_.data();
    b.seq_id   = b_seq_ptr_.data();
    b.logits   = b_logits_.data();
    const int32_t rc = llama_decode(draft_, b);
    if (rc != 0) {
        fail(SPECDEC_STATUS_NATIVE_FAILURE, "the MTP head's decode failed while ", what, " (llama_decode returned ", rc, ")");
    }
}

void mtp_drafter::add_recorded(sequence & s, llama_seq_id seq, size_t count) {
    const size_t row = static_cast<size_t>(n_embd_);
    count = std::min(count, s.tokens.size());
    if (count == 0) {
        return;
    }
    for (size_t k = 0; k < count; ++k) {
        const float * embd = k == 0 ? s.h_prev.data() : s.h.data() + (k - 1) * row;
        add_row(s.tokens[k], s.n_run + static_cast<llama_pos>(k), seq, embd, false);
    }
    pass_recorded(s, count); // the batch holds copies now
}

void mtp_drafter::pass_recorded(sequence & s, size_t count) {
    const auto rows = static_cast<std::ptrdiff_t>(count * static_cast<size_t>(n_embd_));
    std::copy(s.h.begin() + rows - n_embd_, s.h.begin() + rows, s.h_prev.begin());
    s.n_run += static_cast<llama_pos>(count);
    s.tokens.erase(s.tokens.begin(), s.tokens.begin() + static_cast<std::ptrdiff_t>(count));
    s.h.erase(s.h.begin(), s.h.begin() + rows);
}

void mtp_drafter::drop_cells(llama_seq_id seq, llama_pos p) {
    // The head's cache is attention only: removing a tail always succeeds.
    llama_memory_seq_rm(llama_get_memory(draft_), seq, p, -1);
}

void mtp_drafter::flush(llama_seq_id seq) {
    sequence & s = seqs_[static_cast<size_t>(seq)];
    while (!s.tokens.empty()) {
        // A chunk of at most n_batch rows, run as a batch of its own.
        drop_cells(seq, s.n_run);
        clear_batch();
        add_recorded(s, seq, static_cast<size_t>(n_batch_));
        decode_batch("running recorded rows");
    }
}

void mtp_drafter::draft(std::span<const request> requests, std::vector<std::vector<llama_token>> & out,
                        std::vector<std::vector<std::vector<specdec_token_prob>>> & probs) {
    out.assign(requests.size(), {});
    probs.assign(requests.size(), {});
    size_t rows = requests.size();
    for (const request & q : requests) {
        begin(q.seq, q.pos0); // normally a no-op: every position before pos0 was observed
        rows += seqs_[static_cast<size_t>(q.seq)].tokens.size();
    }
    if (rows > static_cast<size_t>(n_batch_)) {
        for (const request & q : requests) {
            flush(q.seq);
        }
    }

    // First decode: each sequence's catch-up rows, then its id_last row.
    const size_t row = static_cast<size_t>(n_embd_);
    std::vector<int32_t> i_out(requests.size(), -1); // batch row of each drafting request's output
    clear_batch();
    for (size_t r = 0; r < requests.size(); ++r) {
        const request & q = requests[r];
        sequence & s = seqs_[static_cast<size_t>(q.seq)];
        drop_cells(q.seq, s.n_run);
        add_recorded(s, q.seq, s.tokens.size());
        i_out[r] = static_cast<int32_t>(b_token_.size());
        add_row(q.id_last, q.pos0, q.seq, s.h_prev.data(), true);
    }
    // Each sampling request's transforms, built once for all it drafts here.
    std::vector<std::optional<token_sampler>> transforms(requests.size());
    for (size_t r = 0; r < requests.size(); ++r) {
        if (const specdec_draft_sampling * sp = requests[r].sampling) {
            transforms[r].emplace(sp->temperature, sp->top_k, sp->top_p, sp->min_p, 0, 0);
        }
    }
    std::vector<float> h_next(requests.size() * row);
    for (int32_t step = 0;; ++step) {
        decode_batch("drafting");
        if (vocab_ != nullptr) {
            // The drafting rows' hidden states, projected onto the subset in
            // one product. Reading logits would wait for the decode; its
            // hidden rows alone do not, so wait here.
            llama_synchronize(draft_);
            v_h_.clear();
            int32_t n_rows = 0;
            for (size_t r = 0; r < requests.size(); ++r) {
                if (i_out[r] < 0) {
                    continue;
                }
                const float * h = llama_get_embeddings_nextn_ith(draft_, i_out[r]);
                if (h == nullptr) {
                    fail(SPECDEC_STATUS_NATIVE_FAILURE, "the MTP head produced no hidden row for draft row ", i_out[r]);
                }
                v_h_.insert(v_h_.end(), h, h + row);
                ++n_rows;
            }
            vocab_->score(v_h_.data(), n_rows, v_logits_);
        }
        // Read every output before the batch is rebuilt over its buffers.
        std::vector<size_t> next;
        for (size_t r = 0, j = 0; r < requests.size(); ++r) {
            if (i_out[r] < 0) {
                continue;
            }
            const float * logits = vocab_ != nullptr ? v_logits_.data() + j++ * static_cast<size_t>(vocab_->size())
                                                     : llama_get_logits_ith(draft_, i_out[r]);
            const float * h = llama_get_embeddings_nextn_ith(draft_, i_out[r]);
            if (logits == nullptr || h == nullptr) {
                fail(SPECDEC_STATUS_NATIVE_FAILURE, "the MTP head produced no output for draft row ", i_out[r]);
            }
            const top_candidates c = vocab_ != nullptr ? top_candidates(logits, vocab_->size(), vocab_->ids().data())
                                                       : top_candidates(logits, n_vocab_);
            i_out[r] = -1;
            if (c.p_top() < p_min_) {
                continue;
            }
            const request & q = requests[r];
            if (q.sampling != nullptr) {
                const llama_pos pos = q.pos0 + 1 + static_cast<llama_pos>(out[r].size());
                probs[r].emplace_back();
                out[r].push_back(sample(c, *transforms[r], *q.sampling, pos, probs[r].back()));
            } else {
                out[r].push_back(c.id[0]);
            }
            if (static_cast<int32_t>(out[r].size()) >= requests[r].n_max) {
                continue;
            }
            std::memcpy(h_next.data() + r * row, h, row * sizeof(float));
            next.push_back(r);
        }
        if (next.empty()) {
            break;
        }
        clear_batch();
        for (size_t r : next) {
            const request & q = requests[r];
            i_out[r] = static_cast<int32_t>(b_token_.size());
            add_row(out[r].back(), q.pos0 + static_cast<llama_pos>(out[r].size()), q.seq, h_next.data() + r * row, true);
        }
    }
    for (size_t r = 0; r < out.size(); ++r) {
        if (static_cast<int32_t>(out[r].size()) < n_min_) {
            out[r].clear();
            probs[r].clear();
        }
    }
}

size_t mtp_drafter::state_size() const {
    return sizeof(llama_pos) + sizeof(float) * static_cast<size_t>(n_embd_);
}

std::vector<uint8_t> mtp_drafter::state(llama_seq_id seq) const {
    const sequence & s = seqs_[static_cast<size_t>(seq)];
    const llama_pos pos = s.end() - 1;
    const float * h = s.tokens.empty() ? s.h_prev.data() : s.h.data() + s.h.size() - static_cast<size_t>(n_embd_);
    std::vector<uint8_t> bytes(state_size());
    std::memcpy(bytes.data(), &pos, sizeof(pos));
    std::memcpy(bytes.data() + sizeof(pos), h, sizeof(float) * static_cast<size_t>(n_embd_));
    return bytes;
}

void mtp_drafter::set_state(llama_seq_id seq, std::span<const uint8_t> bytes, llama_pos n_positions) {
    sequence & s = seqs_[static_cast<size_t>(seq)];
    llama_pos pos = 0;
    std::memcpy(&pos, bytes.data(), sizeof(pos));
    if (pos != n_positions - 1) {
        fail(SPECDEC_STATUS_STATE_MALFORMED, "the checkpoint's MTP row belongs to position ", pos, ", but its history ends at ",
             n_positions - 1);
    }
    s.tokens.clear();
    s.h.clear();
    s.n_run = n_positions;
    std::memcpy(s.h_prev.data(), bytes.data() + sizeof(pos), sizeof(float) * static_cast<size_t>(n_embd_));
}

} // namespace specdec::detail
