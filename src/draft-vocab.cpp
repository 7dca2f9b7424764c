#include "draft-vocab.h"

#include "error.h"
#include "llama-internal.h"

#include "ggml-cpu.h"
#include "ggml.h"

#include <algorithm>
#include <cstring>

namespace specdec::detail {

int32_t auto_draft_vocab(int32_t n_vocab) {
    return n_vocab > SPECDEC_DRAFT_VOCAB_AUTO_MIN ? SPECDEC_DRAFT_VOCAB_DEFAULT : 0;
}

std::vector<llama_token> tokenizer_ranking(const llama_vocab * vocab) {
    const int32_t n_vocab = llama_vocab_n_tokens(vocab);
    const enum llama_vocab_type type = llama_vocab_type(vocab);
    const bool by_score = type == LLAMA_VOCAB_TYPE_SPM || type == LLAMA_VOCAB_TYPE_UGM;
    // (class, -score, id): class 0 end of generation, 1 user-defined, 2
    // normal and byte, 3 the rest.
    struct entry {
        int         cls;
        float       key;
        llama_token id;
    };
    std::vector<entry> all(static_cast<size_t>(n_vocab));
    for (llama_token t = 0; t < n_vocab; ++t) {
        const auto attr = static_cast<uint32_t>(llama_vocab_get_attr(vocab, t));
        int cls = 3;
        if (llama_vocab_is_eog(vocab, t)) {
            cls = 0;
        } else if ((attr & LLAMA_TOKEN_ATTR_USER_DEFINED) != 0) {
            cls = 1;
        } else if ((attr & (LLAMA_TOKEN_ATTR_NORMAL | LLAMA_TOKEN_ATTR_BYTE)) != 0) {
            cls = 2;
        }
        all[static_cast<size_t>(t)] = {cls, cls == 2 && by_score ? -llama_vocab_get_score(vocab, t) : 0.0f, t};
    }
    std::stable_sort(all.begin(), all.end(), [](const entry & a, const entry & b) {
        return a.cls != b.cls ? a.cls < b.cls : a.key < b.key;
    });
    std::vector<llama_token> out(all.size());
    std::transform(all.begin(), all.end(), out.begin(), [](const entry & e) { return e.id; });
    return out;
}

std::vector<llama_token> top_by_count(std::span<const uint64_t> counts, std::span<const llama_token> fallback, int32_t n) {
    std::vector<uint32_t> place(fallback.size());
    for (size_t i = 0; i < fallback.size(); ++i) {
        place[static_cast<size_t>(fallback[i])] = static_cast<uint32_t>(i);
    }
    std::vector<llama_token> out(fallback.begin(), fallback.end());
    const auto before = [&](llama_token a, llama_token b) {
        const uint64_t ca = counts[static_cast<size_t>(a)];
        const uint64_t cb = counts[static_cast<size_t>(b)];
        return ca != cb ? ca > cb : place[static_cast<size_t>(a)] < place[static_cast<size_t>(b)];
    };
    std::partial_sort(out.begin(), out.begin() + n, out.end(), before);
    out.resize(static_cast<size_t>(n));
    return out;
}

void check_ranking(std::span<const llama_token> ranking, int32_t n_vocab) {
    if (ranking.empty()) {
        fail(SPECDEC_STATUS_INVALID_CONFIG, "the draft vocabulary's ranking is empty");
    }
    std::vector<bool> seen(static_cast<size_t>(std::max(n_vocab, 0)), false);
    for (size_t i = 0; i < ranking.size(); ++i) {
        const llama_token t = ranking[i];
        if (t < 0 || t >= n_vocab) {
            fail(SPECDEC_STATUS_INVALID_CONFIG, "entry ", i + 1, " of the draft vocabulary's ranking is token ", t,
                 ", outside the vocabulary [0, ", n_vocab, ")");
        }
        if (seen[static_cast<size_t>(t)]) {
            fail(SPECDEC_STATUS_INVALID_CONFIG, "entry ", i + 1, " of the draft vocabulary's ranking repeats token ", t);
        }
        seen[static_cast<size_t>(t)] = true;
    }
}

struct draft_vocab::impl {
    ggml_context *       weights = nullptr; // the gathered matrix, [n_embd, N]
    ggml_tensor *        w = nullptr;
    int32_t              n_threads = 1;
    std::vector<uint8_t> graph_mem; // tensors and graph of one score() call
    std::vector<uint8_t> work;      // ggml's work buffer (the rows converted to the kernel's input type)

    ~impl() {
        if (weights != nullptr) {
            ggml_free(weights);
        }
    }
};

draft_vocab::draft_vocab(const ggml_tensor * head, std::vector<llama_token> ids, int32_t n_threads)
    : impl_(std::make_unique<impl>()), head_(head), ids_(std::move(ids)), n_embd_(static_cast<int32_t>(head->ne[0])) {
    check_ranking(ids_, static_cast<int32_t>(head->ne[1]));
    impl & m = *impl_;
    m.n_threads = std::max(1, n_threads);
    const size_t row = head->nb[1];
    const size_t bytes = row * ids_.size();
    ggml_init_params p = {bytes + ggml_tensor_overhead() + 256, nullptr, false};
    m.weights = ggml_init(p);
    if (m.weights == nullptr) {
        fail(SPECDEC_STATUS_NATIVE_FAILURE, "cannot allocate the draft vocabulary's matrix (", bytes, " bytes)");
    }
    m.w = ggml_new_tensor_2d(m.weights, head->type, head->ne[0], static_cast<int64_t>(ids_.size()));
    auto * dst = static_cast<uint8_t *>(m.w->data);
    for (size_t k = 0; k < ids_.size(); ++k) {
        head_matrix_row(head, ids_[k], dst + k * row);
    }
}

draft_vocab::~draft_vocab() = default;

int32_t draft_vocab::replace(std::span<const llama_token> ids) {
    const auto n_vocab = static_cast<int32_t>(head_->ne[1]);
    if (ids.size() != ids_.size()) {
        fail(SPECDEC_STATUS_INVALID_CONFIG, "a draft vocabulary of ", ids_.size(), " tokens cannot take ", ids.size());
    }
    check_ranking(ids, n_vocab);
    std::vector<bool> wanted(static_cast<size_t>(n_vocab), false);
    std::vector<bool> held(static_cast<size_t>(n_vocab), false);
    for (llama_token t : ids) {
        wanted[static_cast<size_t>(t)] = true;
    }
    for (llama_token t : ids_) {
        held[static_cast<size_t>(t)] = true;
    }
    const size_t row = head_->nb[1];
    auto * dst = static_cast<uint8_t *>(impl_->w->data);
    int32_t n_entered = 0;
    size_t slot = 0; // the next slot to look at for a leaving token
    for (llama_token t : ids) {
        if (held[static_cast<size_t>(t)]) {
            continue;
        }
        while (wanted[static_cast<size_t>(ids_[slot])]) {
            ++slot; // as many tokens leave as enter, so a leaving one is found
        }
        ids_[slot] = t;
        head_matrix_row(head_, t, dst + slot * row);
        ++slot;
        ++n_entered;
    }
    return n_entered;
}

void draft_vocab::score(const float * h, int32_t n_rows, std::vector<float> & out) {
    impl & m = *impl_;
    const size_t n = ids_.size();
    const size_t data = sizeof(float) * static_cast<size_t>(n_rows) * (static_cast<size_t>(n_embd_) + n);
    const size_t need = data + 4 * ggml_tensor_overhead() + ggml_graph_overhead_custom(8, false) + 1024;
    if (m.graph_mem.size() < need) {
        m.graph_mem.resize(need);
    }
    ggml_init_params p = {m.graph_mem.size(), m.graph_mem.data(), false};
    ggml_context * ctx = ggml_init(p);
    if (ctx == nullptr) {
        fail(SPECDEC_STATUS_NATIVE_FAILURE, "cannot set up the draft vocabulary's projection");
    }
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n_embd_, n_rows);
    std::memcpy(x->data, h, sizeof(float) * static_cast<size_t>(n_embd_) * static_cast<size_t>(n_rows));
    ggml_tensor * y = ggml_mul_mat(ctx, m.w, x);
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, 8, false);
    ggml_build_forward_expand(gf, y);
    ggml_cplan plan = ggml_graph_plan(gf, m.n_threads, nullptr);
    if (m.work.size() < plan.work_size) {
        m.work.resize(plan.work_size);
    }
    plan.work_data = m.work.data();
    const ggml_status st = ggml_graph_compute(gf, &plan);
    if (st != GGML_STATUS_SUCCESS) {
        ggml_free(ctx);
        fail(SPECDEC_STATUS_NATIVE_FAILURE, "the draft vocabulary's projection failed (ggml status ", static_cast<int>(st), ")");
    }
    const auto * logits = static_cast<const float *>(y->data);
    out.assign(logits, logits + n * static_cast<size_t>(n_rows));
    ggml_free(ctx);
}

} // namespace specdec::detail
