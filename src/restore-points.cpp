#include "restore-points.h"

#include "error.h"
#include "sequence-copy.h"

#include <algorithm>

namespace specdec::detail {

bool restore_points::needed_for(const llama_context * ctx) {
    const llama_model * m = llama_get_model(ctx);
    return llama_model_is_recurrent(m) || llama_model_is_hybrid(m) || llama_model_n_swa(m) > 0;
}

restore_points::restore_points(llama_context * ctx, uint32_t n_seq, bool enabled)
    : ctx_(ctx), enabled_(enabled), points_(n_seq) {}

void restore_points::record(llama_seq_id seq, llama_pos n) {
    if (!enabled_ || n <= 0) {
        return;
    }
    std::vector<point> & ps = points_[static_cast<size_t>(seq)];
    forget_above(seq, n - 1); // a point at n again replaces the old one
    if (ps.size() == max_points) {
        ps.erase(ps.begin());
    }
    ps.push_back({n, read_sequence(ctx_, seq, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY)});
}

llama_pos restore_points::latest(llama_seq_id seq, llama_pos n) const {
    llama_pos best = 0;
    for (const point & p : points_[static_cast<size_t>(seq)]) {
        if (p.n <= n) {
            best = p.n;
        }
    }
    return best;
}

void restore_points::restore(llama_seq_id seq, llama_pos n) {
    forget_above(seq, n);
    const std::vector<point> & ps = points_[static_cast<size_t>(seq)];
    if (ps.empty() || ps.back().n != n) {
        fail(SPECDEC_STATUS_NATIVE_FAILURE, "no restore point of sequence ", seq, " at position ", n);
    }
    if (!write_sequence(ctx_, seq, LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY, ps.back().bytes)) {
        fail(SPECDEC_STATUS_NATIVE_FAILURE, "llama.cpp refused the restore point of sequence ", seq, " at position ", n,
             " (", ps.back().bytes.size(), " bytes)");
    }
}

void restore_points::forget_above(llama_seq_id seq, llama_pos n) {
    std::vector<point> & ps = points_[static_cast<size_t>(seq)];
    ps.erase(std::remove_if(ps.begin(), ps.end(), [n](const point & p) { return p.n > n; }), ps.end());
}

void restore_points::move(llama_seq_id from, llama_seq_id to) {
    points_[static_cast<size_t>(to)] = std::move(points_[static_cast<size_t>(from)]);
    points_[static_cast<size_t>(from)].clear();
}

size_t restore_points::bytes() const {
    size_t n = 0;
    for (const std::vector<point> & ps : points_) {
        for (const point & p : ps) {
            n += p.bytes.size();
        }
    }
    return n;
}

} // namespace specdec::detail
