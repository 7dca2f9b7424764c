// Adaptive draft length: each step, every active sequence drafts the one
// length l that maximises the batch's expected tokens per expected cost,
// E(l) / (V(n (l + 1)) + l D(n)) for n sequences, the objective that bench's
// oracle solves in hindsight; V and D are measured (step-costs.h). One length
// for all: llama.cpp decodes a batch in one pass only when its sequences
// verify equal rows (docs/results/2026-12-02-xeon-batch-splits.md).
// Acceptance is a two-state chain per sequence: a drafted token is kept with
// probability a after a kept token and q after a rejected one, from decayed
// counts of the sequence's decided tokens (a new request starts from those of
// every sequence). Between observations the chance of a hit relaxes from the
// last outcome to the chain's stationary share q / (q + 1 - a). Until the
// drafter has been right once, it may be one that never is: the chance is
// scaled by the posterior that it can be, which every miss lowers.
// A sequence that drafts nothing looks one token ahead (a shadow: one drafting
// pass, nothing verified) when the chance of a hit times what a hit saves
// (what drafting then gains over plain decoding, at each step of the stretch
// it starts) pays for the pass; and, where an always-right drafter would pay,
// at least once per look_budget of the time, so that estimates follow the text.
// The choice never changes which tokens are emitted, only how fast.
#pragma once

#include "step-costs.h"

#include <cstdint>
#include <span>
#include <vector>

namespace specdec::detail {

class adaptive_draft_length {
public:
    // Share of the acceptance evidence kept at each new observation
    // (memory ~ 1 / (1 - decay) decided tokens).
    static constexpr double decay = 0.95;
    // a and q before evidence, and the pseudo-observations behind each.
    static constexpr double prior_kept_after_kept = 0.9;
    static constexpr double prior_kept_after_miss = 0.3;
    static constexpr double prior_weight = 1.0;
    // Prior probability that the drafter can be right at all (see above).
    static constexpr double prior_can_be_right = 0.2;
    // Drafting must promise this much more throughput than plain decoding:
    // where verification grows linearly with the rows (a CPU with several
    // sequences) drafting is break-even at best, and the estimates' noise
    // would otherwise decide, losing more on a wrong draft than a right one
    // gains.
    static constexpr double min_gain = 0.05;
    // Share of the time that shadows may take whatever they promise.
    static constexpr double look_budget = 0.0025;

    // n_seq sequences, each drafting at most n_max tokens a step (n_max >= 1).
    adaptive_draft_length(size_t n_seq, int32_t n_max);

    // Draft lengths for the next step. caps[s] is the most sequence s may
    // draft now (0: it drafts nothing; < 0: it is not active). Every active
    // sequence gets the same length, within every cap; a positive length is
    // at least n_min when every cap allows it, else it is 0. Also decides,
    // for each sequence given 0, whether it shadows (shadow_due).
    std::vector<int32_t> choose(std::span<const int32_t> caps, int32_t n_min = 0);

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
        double reached = 0; // decayed count of decided tokens after this state
        double kept    = 0; // ... that were kept
    };
    struct sequence_evidence {
        transitions after[2];   // [the previous decided token was kept]
        int  last = -1;         // the last decided drafted token was kept (1), rejected (0), unknown (-1)
        int  idle = 0;          // steps since its last observation
        bool look = false;      // the last choose(): a shadow is worth its price
    };

    // p_keep_through for every position, for evidence `e` in state `last`
    // after `idle` unobserved steps; `proven`: as if the drafter had been right.
    std::vector<double> cumulative(const sequence_evidence & e, int last, int idle, bool proven) const;

    int32_t                        n_max_;
    uint64_t                       hits_ = 0;   // first drafted tokens kept, over every sequence and request
    uint64_t                       misses_ = 0; // ... and rejected
    std::vector<sequence_evidence> acceptance_; // [seq]
    transitions                    pooled_[2];  // every sequence's observations
    step_costs                     costs_;
};

} // namespace specdec::detail
