// Adaptive draft length: at each step, the length that maximises the tokens
// expected over a discounted horizon less their time at the best rate the
// step can reach. One length for every active sequence (llama.cpp v0.5.0
// decodes a batch in one pass only when its sequences verify equal rows).
// Per sequence this is a two-state Markov decision problem, solved by value
// iteration: the sequence is after a kept or after a rejected drafted token
// (acceptance comes in runs) and may decode plainly, draft l tokens, or draft
// a shadow token (never verified: it reveals the next state for the price of
// a drafting pass). The estimates are posteriors over evidence that fades at
// every step:
//  - acceptance per state and draft position: Beta over decayed counts; a
//    position's prior is the position before it, position 0's is every
//    sequence's evidence pooled over a constant per state;
//  - the time of verifying r rows and of a drafting pass over r rows:
//    decayed means, linear between measured sizes, and a prior shape through
//    the nearest measured size elsewhere.
// Lengths follow the posterior means. Shadows follow an optimistic bound on
// position 0, so that exploration comes only from what is not known: as its
// evidence fades, a sequence probes again. The choice never changes which
// tokens are emitted, only how fast.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace specdec::detail {

class adaptive_draft_length {
public:
    // Share of the acceptance evidence kept at each step.
    static constexpr double memory = 0.99;
    // Discount per step of the gains planned ahead (horizon ~ 1 / (1 - this)).
    static constexpr double discount = 0.7;
    // Share of a cost measurement's weight kept at each step.
    static constexpr double cost_memory = 0.99;
    // Prior acceptance of position 0 after a rejected and after a kept
    // drafted token, and the pseudo-observations behind every prior.
    static constexpr double prior_acceptance[2] = {0.1, 0.95};
    static constexpr double prior_weight = 1.0;
    // Share of the pooled evidence that weighs in a sequence's prior.
    static constexpr double pool_share = 0.5;
    // Standard deviations above its mean at which position 0 is judged for
    // a shadow.
    static constexpr double shadow_optimism = 0.25;
    // Prior cost of verifying one more row, as a share of a one-row step,
    // and of a drafting pass over r rows, as a share of verifying r rows.
    static constexpr double prior_row_cost = 0.2;
    static constexpr double prior_pass_share = 0.25;
    // Pseudo-measurements behind the prior cost of a size: a measurement
    // outweighs it until it has faded for ~230 steps.
    static constexpr double cost_prior_weight = 0.1;

    // n_seq sequences, each drafting at most n_max tokens a step (n_max >= 1).
    adaptive_draft_length(size_t n_seq, int32_t n_max);

    // Draft lengths for the next step. caps[s] is the most sequence s may
    // draft now (0: it drafts nothing; < 0: it is not active). Every active
    // sequence gets the same length, within every cap; a positive length is
    // at least n_min when every cap allows it, else it is 0.
    std::vector<int32_t> choose(std::span<const int32_t> caps, int32_t n_min = 0);

    // Whether sequence `seq`, given length 0 by the last choose(), should
    // draft one shadow token and report it through observe(seq, 1, hit).
    bool shadow(size_t seq) const { return shadow_[seq]; }

    // The outcome of a step for sequence `seq`: `proposed` tokens were
    // drafted (0: nothing is learnt) and the first `kept` of them kept.
    void observe(size_t seq, int32_t proposed, int32_t kept);

    // A new request takes sequence `seq`: it has no evidence of its own (its
    // priors lean on every sequence's) and starts after a rejection. The cost
    // measurements stay.
    void reset(size_t seq);

    // The request of sequence `from` now runs in sequence `to`, with its
    // evidence; `from` is left as reset() leaves it.
    void move(size_t from, size_t to);

    // A step with n_active sequences verified `rows` rows (n_active plus
    // what they drafted) in `microseconds` (decode and drafter processing).
    void observe_verify(int32_t n_active, int32_t rows, double microseconds);

    // A step drafted `rows` rows in all (shadows included) in `passes`
    // drafting passes (its longest draft), in `microseconds`.
    void observe_draft(int32_t passes, int32_t rows, double microseconds);

    // Posterior mean probability that sequence `seq` keeps its drafted
    // tokens 0..i (all of them) at its next step, for i < n_max.
    double p_keep_through(size_t seq, int32_t i) const;

    // Estimated time of verifying `rows` rows, and of drafting `passes`
    // passes over `rows` rows each, in microseconds (prior units, a one-row
    // verification being 1, before any measurement). rows >= 1.
    double verify_cost(int32_t rows) const;
    double draft_cost(int32_t passes, int32_t rows) const;

private:
    struct position_counts {
        double reached = 0; // decayed count of steps that decided this position
        double kept    = 0; // ... and kept it
    };
    using table = std::vector<position_counts>; // [position]
    struct sequence_evidence {
        table after[2];     // [last decided drafted token kept]
        int   last_kept = 0;
    };
    struct cost_cell {
        double weight = 0; // decayed count of measurements (as of step `at`)
        double sum    = 0; // ... and of their microseconds
        uint64_t at   = 0;
    };

    // Acceptance [state][position]: posterior means, position 0 raised by
    // `optimism` standard deviations (the later positions then lean on it).
    std::array<std::vector<double>, 2> acceptance(const sequence_evidence & e, double optimism) const;
    // Costs of sizes [0, n) (0 costs 0): see the header comment. `prior`
    // (null: the verification prior) gives the prior's shape, for at least
    // max(n, cells.size()) sizes.
    std::vector<double> curve(const std::vector<cost_cell> & cells, size_t n, const std::vector<double> * prior) const;
    std::vector<double> verify_curve(size_t n) const;
    std::vector<double> first_pass_curve(size_t n) const; // prior: prior_pass_share of verification
    std::vector<double> next_pass_curve(size_t n) const;  // prior: the same, or the first pass where cheaper
    void record(std::vector<cost_cell> & cells, size_t size, double microseconds);

    int32_t n_max_;
    uint64_t step_ = 0; // choose() calls so far
    std::vector<sequence_evidence> evidence_; // [seq]
    table pooled_[2];                         // every sequence's observations
    std::vector<bool> shadow_;                // the last choose()'s shadows
    std::vector<cost_cell> verify_;           // [rows verified]
    std::vector<cost_cell> first_pass_;       // [rows of a step's first drafting pass]
    std::vector<cost_cell> next_pass_;        // [rows of each later pass]
};

} // namespace specdec::detail
