// Points a sequence's memory can go back to where llama.cpp cannot cut it
// back to any position: a recurrent state (Mamba, the gated delta net of
// hybrid models) and a sliding-window cache keep only their latest values,
// so dropping positions >= p is refused or would leave them wrong. The
// engine's prompt reuse records such a point where each prompt ends and
// restores it when a later prompt shares at least that much of the text.
#pragma once

#include "llama.h"

#include <cstdint>
#include <vector>

namespace specdec::detail {

class restore_points {
public:
    // The points kept per sequence; the oldest goes first.
    static constexpr size_t max_points = 4;

    struct point {
        llama_pos            n;     // the sequence held exactly [0, n)
        std::vector<uint8_t> bytes; // llama.cpp's partial state there
    };

    // Whether `ctx`'s memory needs points: a recurrent or hybrid model, or
    // sliding-window attention. An attention cache cuts back anywhere.
    static bool needed_for(const llama_context * ctx);

    // Borrows ctx (which must outlive this); `enabled` false records nothing.
    restore_points(llama_context * ctx, uint32_t n_seq, bool enabled);

    bool enabled() const { return enabled_; }
    // `seq` holds exactly positions [0, n): records the part of its state
    // that cannot be cut back (llama.cpp's LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY
    // bytes; for a hybrid model, the recurrent state alone). Throws
    // error(NATIVE_FAILURE) when llama.cpp writes fewer bytes than it sized.
    void record(llama_seq_id seq, llama_pos n);
    // The latest point recorded at or below n; 0 when none.
    llama_pos latest(llama_seq_id seq, llama_pos n) const;
    // Writes the point recorded at exactly n back into `seq`; the caller
    // then drops positions >= n (which the restored part then allows).
    // Points above n are forgotten. Throws error(NATIVE_FAILURE) when
    // llama.cpp refuses the bytes, or no point was recorded at n.
    void restore(llama_seq_id seq, llama_pos n);
    // Forgets the points above n (0: every point).
    void forget_above(llama_seq_id seq, llama_pos n);
    // `to` takes `from`'s points; `from` has none afterwards.
    void move(llama_seq_id from, llama_seq_id to);
    // A copy of `seq`'s points, and replacing them (the prompt cache's save and load).
    std::vector<point> points(llama_seq_id seq) const { return points_[static_cast<size_t>(seq)]; }
    void set_points(llama_seq_id seq, std::vector<point> ps) { points_[static_cast<size_t>(seq)] = std::move(ps); }
    // Bytes every sequence's points hold.
    size_t bytes() const;

private:
    llama_context *                 ctx_;
    bool                            enabled_;
    std::vector<std::vector<point>> points_; // [seq], ascending n
};

} // namespace specdec::detail
