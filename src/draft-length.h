// Adaptive draft length: each step, every active sequence drafts the one
// length l that maximises the batch's expected tokens per expected cost,
// E(l) / (V(n (l + 1)) + l D(n)) for n sequences, the objective bench's
// oracle solves in hindsight; V and D are measured (step-costs.h). One length
// for all: llama.cpp decodes a batch in one pass only when its sequences
// verify equal rows (docs/results/2026-12-02-xeon-batch-splits.md).
// Acceptance is a two-state chain per sequence over the text's tokens: a
// drafted token is kept with probability a after a kept token and q after a
// rejected one, with beta posteriors from decayed counts (a new request
// starts from those of every sequence). Between observations the state is
// known only in probability, relaxing towards the chain's stationary share;
// an observation credits each state with its posterior share.
// A sequence that drafts nothing looks one token ahead (a shadow: one
// drafting pass, nothing verified) once the saving it expects to have missed
// since its last look, the chance of a hit at each step times what a hit
// would save (averaged over the posterior of a), reaches a look's price; a
// sequence whose state is unknown looks at once. So thin evidence is looked
// at again, and a drafter that is never right, or that could not pay,
// costs little. No sequence looks whose tokens left could not repay the
// look, each saving what a hit's token would. The choice never changes
// which tokens are emitted.
#pragma once

#include "step-costs.h"

#include <cstdint>
#include <span>
#include <vector>

namespace specdec::detail {

class adaptive_draft_length {
public:
    // Share of the acceptance evidence kept at each new observation
    // (memory ~ 1 / (1 - decay) observations).
    static constexpr double decay = 0.95;
    // a and q before evidence, and the pseudo-observations behind each.
    static constexpr double prior_kept_after_kept = 0.9;
    static constexpr double prior_kept_after_miss = 0.1;
    static constexpr double prior_weight = 1.0;
    // Drafting must promise this much more throughput than plain decoding:
    // where verification grows linearly with the rows (a CPU with several
    // sequences) drafting is break-even at best, and the estimates' noise
    // would otherwise decide, losing more on a wrong draft than a right one
    // gains.
    static constexpr double min_gain = 0.05;
    // Points of the grid over which a hit's saving is averaged (see above).
    static constexpr size_t grid_points = 32;

    // n_seq sequences, each drafting at most n_max tokens a step (n_max >= 1).
    adaptive_draft_length(size_t n_seq, int32_t n_max);

    // Draft lengths for the next step. caps[s] is the most sequence s may
    // draft now (0: it drafts nothing; < 0: it is not active); left[s] the
    // most tokens it may decode after this step (its budget and context;
    // empty: no end known). Every active sequence gets the same length,
    // within every cap; a positive length is at least n_min when every cap
    // allows it, else it is 0. Also decides, for each sequence given 0,
    // whether it shadows (shadow_due).
    std::vector<int32_t> choose(std::span<const int32_t> caps, std::span<const int64_t> left = {}, int32_t n_min = 0);

    // Whether sequence `seq`, given length 0 by the last choose() and a cap
    // above 0, should draft a shadow token: one drafted token, not verified,
    // whose outcome is reported through observe(seq, 1, hit).
    bool shadow_due(size_t seq);

    // The outcome of a step for active sequence `seq`: `proposed` tokens were
    // drafted (0 when it drafted nothing: nothing is learnt) and the first
    // `kept` of them kept.
    void observe(size_t seq, int32_t proposed, int32_t kept);

    // A new request takes the slot of sequence `seq`: its evidence becomes
    // the pooled counts, and its last outcome unknown. The costs stay.
    void reset(size_t seq);

    // The request of sequence `from` now runs in sequence `to`: its evidence
    // goes with it; `from` is left as reset() would leave it.
    void move(size_t from, size_t to);

    // A step with n_active sequences verified `rows` rows (n_active plus
    // what they drafted) in `microseconds` (decode and drafter processing).
    void observe_verify(int32_t n_active, int32_t rows, double microseconds);

    // A step drafted for `rows` rows in all (shadows included) in `passes`
    // drafting passes (its longest draft), in `microseconds`.
    void observe_draft(int32_t passes, int32_t rows, double microseconds);

    // Estimated probability that sequence `seq` keeps its drafted tokens
    // 0..i (all of them) at its next step, for i < n_max.
    double p_keep_through(size_t seq, int32_t i) const;

    // Estimated cost of verifying `rows` rows, and of one drafting pass over
    // `rows` rows (see step_costs). rows >= 1.
    double verify_cost(int32_t rows) const;
    double pass_cost(int32_t rows) const;

private:
    struct transitions {
        double reached = 0; // decayed count of decided tokens after this state (shares of them, see observe)
        double kept    = 0; // ... that were kept
        // The posterior mean of the kept share, from `prior`.
        double share(double prior) const { return (kept + prior_weight * prior) / (reached + prior_weight); }
    };
    struct sequence_evidence {
        transitions after[2];   // [the previous decided token was kept]
        int  last = -1;         // the last decided drafted token was kept (1), rejected (0), unknown (-1)
        int  idle = 0;          // steps since its last observation
        double unseen = 0;      // what drafting would have saved since then, expected (plain steps)
        bool look = false;      // the last choose(): a shadow is due
    };

    // The chain's estimates for evidence `e`, and the chance that the token
    // before its next decided one was kept.
    struct chain {
        double a = 0;
        double q = 0;
        double kept_before = 0;
    };
    static chain estimates(const sequence_evidence & e);
    // Point i of the grid over a: the middle of its (i / grid_points, (i + 1) / grid_points).
    static double grid_point(size_t i);
    // p_keep_through for every position.
    std::vector<double> cumulative(const sequence_evidence & e) const;

    int32_t                        n_max_;
    std::vector<sequence_evidence> acceptance_; // [seq]
    transitions                    pooled_[2];  // every sequence's observations
    step_costs                     costs_;
};

} // namespace specdec::detail
