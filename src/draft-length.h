// Adaptive draft length: picks how many tokens each sequence drafts in the
// next step so that the expected number of tokens the step yields, divided by
// what the step is expected to cost, is as large as possible.
//
// Two running estimates feed the choice:
//  - per sequence and draft position i, the probability that the drafted
//    token at i is kept given that every token before it was kept, and given
//    whether the last drafted token the target decided on was kept (a step
//    that kept all of its draft: yes; one that rejected a token: no).
//    Acceptance comes in runs (the drafter is good on some text and poor on
//    other text), so that one bit says much about the next step: after a
//    miss the controller drafts little, after a hit it drafts long, as soon
//    as the text turns. Counts decay geometrically, so the estimates follow
//    the text. A position with little evidence leans on the position before
//    it (and position 0 on a prior: optimistic after a hit, pessimistic
//    after a miss, since acceptance comes in runs).
//  - per number of active sequences, the measured cost of a step (drafting +
//    verification) against the number of drafted tokens in it: the lowest of
//    the recent measurements of each size measured at least twice, since
//    interference from the rest of the machine only ever adds time. Other
//    sizes are interpolated between measured ones, or extrapolated
//    optimistically (so that the loop goes and measures them); before there
//    are two measured sizes a prior slope stands in.
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
    // Share of the evidence kept at each new observation (memory ~ 1 / (1 - decay)).
    static constexpr double decay = 0.9;
    // Conditional acceptance assumed for a sequence's first draft position
    // before evidence, after the last decided drafted token was kept (or
    // before any draft) ...
    static constexpr double prior_acceptance = 0.8;
    // ... and after it was rejected.
    static constexpr double prior_acceptance_after_miss = 0.2;
    // Pseudo-observations behind each prior.
    static constexpr double prior_weight = 1.0;
    // Cost of one more drafted token for each active sequence, as a share of
    // a step's cost, assumed until two step sizes have been measured (and
    // above the largest measured size when cheaper than the last measured
    // segment extended).
    static constexpr double prior_cost_slope = 0.25;
    // Share of the throughput the shadows of sequences that draft nothing
    // may cost (bounds how rarely they probe: see shadow_due).
    static constexpr double shadow_budget = 0.01;
    // Most steps between two shadows of one sequence.
    static constexpr int max_shadow_wait = 63;

    // n_seq sequences, each drafting at most n_max tokens a step (n_max >= 1).
    adaptive_draft_length(size_t n_seq, int32_t n_max);

    // Draft lengths for the next step. caps[s] is the most sequence s may
    // draft now (0: it drafts nothing; < 0: it is not active). Lengths are
    // within [0, caps[s]]; a positive length is at least n_min when the cap
    // allows it, else it is 0.
    std::vector<int32_t> choose(std::span<const int32_t> caps, int32_t n_min = 0);

    // The outcome of a step for active sequence `seq`: `proposed` tokens were
    // drafted (0 when it drafted nothing: nothing is learnt) and the first
    // `kept` of them kept. A sequence given length 0 should still draft one
    // token without verifying it and report (1, whether the target picked
    // it): else what it learnt last about position 0 never changes.
    void observe(size_t seq, int32_t proposed, int32_t kept);

    // Forgets the acceptance evidence of sequence `seq` (a new request takes
    // its slot); the cost measurements stay.
    void reset(size_t seq);

    // A step with n_active sequences and m drafted tokens in total took
    // `microseconds` of drafting and verification.
    void observe_cost(int32_t n_active, int32_t m, double microseconds);

    // Whether sequence `seq`, given length 0 for this step of n_active
    // sequences, should draft a shadow token (see observe). A sequence with
    // no evidence yet (new, or reset) is given length 0 and a shadow: its
    // first step probes before it verifies anything. After consecutive
    // misses at position 0 the shadows thin out. Once the drafter has been
    // right anywhere (any sequence, any request), it is likely to be right
    // again soon: waits of 0, 1, 3, then 7 steps. While it has never been
    // right, waits of 0, 3, 15, 63 steps after 1, 2, 3, 4 misses (its own,
    // or those of all sequences per active sequence, whichever are more),
    // capped at the interval at which
    // shadows cost shadow_budget of the throughput (from
    // observe_shadow_cost and the measured cost of a step without drafts;
    // 7 before both are measured), so that a drafter that is never right
    // costs close to nothing. A hit brings them back every step. Counts the
    // step as one without a shadow when it returns false.
    bool shadow_due(size_t seq, int32_t n_active);

    // A step drafted `n_shadows` shadow tokens and nothing else, in
    // `microseconds` of drafting.
    void observe_shadow_cost(int32_t n_shadows, double microseconds);

    // Estimated probability that sequence `seq` keeps its drafted tokens
    // 0..i (all of them) at its next step, for i < n_max.
    double p_keep_through(size_t seq, int32_t i) const;

    // Estimated cost of a step with n_active sequences and m drafted tokens,
    // in microseconds (or prior units before any measurement).
    double step_cost(int32_t n_active, int32_t m) const;

private:
    struct position_counts {
        double reached = 0; // decayed count of steps that drafted this position
        double kept    = 0; // ... and kept it
    };
    struct sequence_evidence {
        std::vector<position_counts> after[2]; // [last first token kept][position]
        int last_kept = 1;                     // the last decided drafted token was kept (optimistic before any)
        int misses = 0;                        // consecutive misses at position 0
        int idle = 0;                          // steps since the last draft or shadow
        bool fresh = true;                     // nothing observed yet
    };
    // The most recent measurements of one step size, oldest overwritten first.
    struct cost_cell {
        static constexpr size_t window = 8;
        double samples[window] = {};
        size_t n = 0; // measurements so far
        double lowest() const;
    };

    std::vector<double> cumulative(size_t seq) const;
    std::vector<double> cost_curve(int32_t n_active) const;

    // Most steps a sequence with `misses` consecutive misses waits between shadows.
    int shadow_wait(int misses, int32_t n_active) const;

    int32_t n_max_;
    cost_cell shadow_cost_;     // microseconds per shadow token
    uint64_t  hits_ = 0;        // first draft tokens kept, over every sequence and request
    uint64_t  misses_ = 0;      // ... and rejected
    std::vector<sequence_evidence>      acceptance_; // [seq]
    std::vector<std::vector<cost_cell>> cost_;       // [n_active][m]
};

} // namespace specdec::detail
