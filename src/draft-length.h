// Adaptive draft length: picks how many tokens each sequence drafts in the
// next step so that the expected number of tokens the step yields, divided by
// what the step is expected to cost, is as large as possible.
//
// Two running estimates feed the choice:
//  - per sequence and draft position i, the probability that the drafted
//    token at i is kept given that every token before it was kept. Counts
//    decay geometrically each step, so the estimate follows text where the
//    drafter is good and text where it is poor. A position with little recent
//    evidence leans on the position before it (and position 0 on a prior),
//    which makes the controller try longer drafts again after a poor stretch.
//  - per number of active sequences, the measured cost of a step (drafting +
//    verification) against the number of drafted tokens in it. Unmeasured
//    sizes are interpolated between measured ones, or extrapolated; before
//    there are two measurements a prior slope stands in.
//
// Verification cost depends only on the batch totals, and each sequence's
// cumulative acceptance probabilities fall with position, so the best plan for
// a total of m drafted tokens drafts the m (sequence, position) slots with the
// highest probabilities; the controller tries every m and keeps the best.
// The choice never changes which tokens are emitted, only how fast.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace specdec::detail {

class adaptive_draft_length {
public:
    // Share of a step's evidence kept at the next step (memory ~ 1 / (1 - decay) steps).
    static constexpr double decay = 0.9;
    // Conditional acceptance assumed for a sequence's first draft position before evidence.
    static constexpr double prior_acceptance = 0.8;
    // Pseudo-observations behind each prior.
    static constexpr double prior_weight = 1.0;
    // Cost of one more drafted token, as a share of a step's cost, assumed
    // until two step sizes have been measured.
    static constexpr double prior_cost_slope = 0.25;

    // n_seq sequences, each drafting at most n_max tokens a step (n_max >= 1).
    adaptive_draft_length(size_t n_seq, int32_t n_max);

    // Draft lengths for the next step. caps[s] is the most sequence s may
    // draft now (0: it drafts nothing; < 0: it is not active). Lengths are
    // within [0, caps[s]]; a positive length is at least n_min when the cap
    // allows it, else it is 0.
    std::vector<int32_t> choose(std::span<const int32_t> caps, int32_t n_min = 0);

    // The outcome of a step for active sequence `seq`: `proposed` tokens were
    // drafted (0 when it drafted nothing) and the first `kept` of them kept.
    void observe(size_t seq, int32_t proposed, int32_t kept);

    // A step with n_active sequences and m drafted tokens in total took
    // `microseconds` of drafting and verification.
    void observe_cost(int32_t n_active, int32_t m, double microseconds);

    // Estimated probability that sequence `seq` keeps its drafted tokens
    // 0..i (all of them), for i < n_max.
    double p_keep_through(size_t seq, int32_t i) const;

    // Estimated cost of a step with n_active sequences and m drafted tokens,
    // in microseconds (or prior units before any measurement).
    double step_cost(int32_t n_active, int32_t m) const;

private:
    struct position_counts {
        double reached = 0; // decayed count of steps that drafted this position
        double kept    = 0; // ... and kept it
    };
    struct cost_cell {
        double mean = 0;
        double n    = 0; // measurements (capped, so the mean keeps following drift)
    };

    std::vector<double> cumulative(size_t seq) const;
    std::vector<double> cost_curve(int32_t n_active) const;

    int32_t n_max_;
    std::vector<std::vector<position_counts>> acceptance_; // [seq][position]
    std::vector<std::vector<cost_cell>>       cost_;       // [n_active][m]
};

} // namespace specdec::detail
