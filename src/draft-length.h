// Adaptive draft length: one objective, solved at every step. A sequence is
// after a kept or after a rejected drafted token (acceptance comes in runs)
// and may decode plainly, draft a shadow token (never verified: it only
// reveals the next state) or draft l tokens. The controller maximises the
// discounted sum over the coming steps of tokens less their time at the best
// rate the step can reach: a two-state Markov decision problem per sequence,
// solved by value iteration. All sequences draft one length (llama.cpp v0.5.0
// decodes a batch in one pass only when its sequences verify equal rows).
// Every estimate is a posterior over evidence that fades with age:
//  - acceptance per state and position: Beta over decayed counts, with the
//    previous position's estimate as prior (position 0 after a kept token:
//    the estimate after a rejected one; after a rejected one: a constant);
//  - the time of verifying r rows, of a step's first drafting pass (it also
//    runs the drafter over the kept rows) and of a later pass: decayed means,
//    with the prior's shape through the size measured most as prior, linear
//    between measured sizes and that shape's increments beyond them.
// Each step draws the first position's acceptance from its posterior
// (Thompson sampling): exploration comes only from what is not known, and a
// faded cost is priced as the prior prices it, and tried again.
// The choice never changes which tokens are emitted, only how fast.
#pragma once

#include <array>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace specdec::detail {

class adaptive_draft_length {
public:
    // Share of the evidence kept at each new observation of the same kind.
    static constexpr double memory = 0.98;
    // Discount per step of the gains planned ahead (horizon ~ 1 / (1 - this)).
    static constexpr double discount = 0.9;
    // Share of a cost measurement's weight kept at each step.
    static constexpr double cost_memory = 0.99;
    // Prior acceptance of a state's first position, and the pseudo-observations
    // behind every position's prior.
    static constexpr double prior_acceptance = 0.5;
    static constexpr double prior_weight = 0.5;
    // Prior cost of verifying one more row, as a share of a one-row step,
    // and of a drafting pass over r rows, as a share of verifying r rows.
    static constexpr double prior_row_cost = 0.2;
    static constexpr double prior_pass_share = 0.25;
    // Pseudo-measurements behind the prior cost of a size: a measurement
    // outweighs it until it has faded for ~230 steps.
    static constexpr double cost_prior_weight = 0.1;

    // n_seq sequences, each drafting at most n_max tokens a step (n_max >= 1).
    // `seed` fixes the draws (the choice never changes the tokens).
    adaptive_draft_length(size_t n_seq, int32_t n_max, uint64_t seed = 0);

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

    // A new request takes sequence `seq`: its evidence becomes the pooled
    // evidence of every sequence so far, and it starts after a rejection.
    // The cost measurements stay.
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

    // Posterior means (draw == nullptr) or draws of acceptance [state][position].
    std::array<std::vector<double>, 2> acceptance(const sequence_evidence & e, std::mt19937_64 * draw) const;
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
    std::mt19937_64 rng_;
    std::vector<sequence_evidence> evidence_; // [seq]
    table pooled_[2];                         // every sequence's observations
    std::vector<bool> shadow_;                // the last choose()'s shadows
    std::vector<cost_cell> verify_;           // [rows verified]
    std::vector<cost_cell> first_pass_;       // [rows of a step's first drafting pass]
    std::vector<cost_cell> next_pass_;        // [rows of each later pass]
};

} // namespace specdec::detail
