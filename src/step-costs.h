// What a step costs, measured: the curves the adaptive draft length
// (draft-length.h) prices its choices with, shared by every batch size.
//  - Verification of r rows: the target's decode of the batch plus the
//    drafter's processing of it (a plain step of r sequences and a step of
//    one sequence drafting r - 1 tokens measure the same point).
//  - One drafting pass over r rows (a step drafting k tokens for some
//    sequences makes k passes, pass j over the sequences drafting more
//    than j).
// Each point is the lowest of its recent measurements. A verification point
// adds what a step pays over its size's lowest: interference from the rest
// of the machine adds about the same time to a step, long or short (many
// short steps pay it many times, one long step once), and the lowest sees
// none of it. That excess is the mean of the recent measurements but the
// highest, over their lowest, of the size measured most. (A pass is timed
// with the other passes of its step and the recorded rows the first one
// runs, so the spread of its measurements is mostly how many rows that was.)
// A size counts once it has been measured twice (a plain step's at once: a
// high one only makes drafting look better, and plain steps come back), so
// that one slow first pass (buffers allocated, a prompt caught up) cannot
// stop drafting for good; and a size no plain step measured stops counting
// after memory steps without a measurement, until it is measured again: a
// size is measured only while it is drafted, so one priced during a slow
// spell of the host would otherwise stay priced out.
// Sizes between measured ones are interpolated. Below the smallest and
// above the largest, the prior's shape scales through the nearest (above
// several, the average measured slope goes on where that is cheaper):
// optimistic, so that drafting goes and measures them, since a steep first
// row (one row to two costs more than any row after it on a CPU) extended
// would price every longer draft out for good. Before anything is measured
// the prior stands in. So that large batches are explored in growing steps,
// not in one expensive leap, rows_allowed() bounds a step at max_growth
// times the most rows measured so far.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace specdec::detail {

class step_costs {
public:
    // Cost of verifying one more row, as a share of a one-row step, assumed
    // where nothing is measured (and above the largest measured size when
    // cheaper than the last measured segment extended). A little under the
    // dearest measured (an AMD EPYC without AMX: four sequences verifying 36
    // rows cost 5.2 times their 4-row step, 0.22 a row), so that the prior
    // stays optimistic there too.
    static constexpr double prior_row_cost = 0.2;
    // Cost of a drafting pass over r rows, as a share of verifying r rows,
    // assumed before any pass is measured.
    static constexpr double prior_pass_share = 0.25;
    // A step verifies at most this many times the most rows measured so far.
    static constexpr size_t max_growth = 4;
    // Steps (tick() calls) after its newest measurement at which a size no
    // plain step measured stops counting: where the size truly does not pay,
    // drafting it again once in this many steps costs about 1% where that
    // step wastes two or three plain steps.
    static constexpr uint64_t memory = 256;

    // One step more (ages the measurements).
    void tick() { step_++; }

    // A step with n_active sequences verified `rows` rows in `microseconds`.
    // Ignored unless n_active <= rows <= n_active * max_rows_per_seq.
    void observe_verify(int32_t n_active, int32_t rows, int32_t max_rows_per_seq, double microseconds);
    // A step drafted `rows` rows in all in `passes` passes, in `microseconds`.
    void observe_draft(int32_t passes, int32_t rows, double microseconds);

    // Cost of verifying r rows, and of one drafting pass over r rows, for
    // r = 0 .. n - 1 (r = 0 costs 0), in microseconds (or prior units, a
    // one-row verification being 1, before any measurement).
    std::vector<double> verify_curve(size_t n) const;
    std::vector<double> pass_curve(size_t n) const;

    // The most rows a step of n_active sequences may verify: max_growth
    // times the most measured so far (at least n_active), or `whole_draft`
    // when that is more.
    size_t rows_allowed(size_t n_active, size_t whole_draft) const;

private:
    // The most recent measurements of one size, oldest overwritten first.
    struct cell {
        static constexpr size_t window = 8;
        double   samples[window] = {};
        size_t   n = 0;        // measurements so far
        bool     sure = false; // one measurement counts, and none expires (a plain step's)
        uint64_t newest = 0;   // the step of the newest measurement
        double lowest() const;
        double excess() const; // the mean but the highest, over the lowest (0 below three)
        bool   counts(uint64_t step) const { return n >= (sure ? 1u : 2u) && (sure || step - newest <= memory); }
    };
    // Cost of sizes [0, n) from the cells that count, `excess` added to
    // each; `fallback` (may be null) stands in for an empty curve.
    std::vector<double> curve(const std::vector<cell> & cells, size_t n, const std::vector<double> * fallback, double excess) const;
    void record(std::vector<cell> & cells, size_t size, double microseconds, bool sure);

    uint64_t          step_ = 0;
    std::vector<cell> verify_; // [rows verified]
    std::vector<cell> pass_;   // [rows of one drafting pass]
};

} // namespace specdec::detail
