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
//  - what a step costs, in two measured curves shared by every batch size:
//    verifying a batch of r rows (the target's decode plus the drafter's
//    processing of it: a plain step of r sequences and a step of one
//    sequence drafting r - 1 tokens measure the same point), and one
//    drafting pass over r rows (a step drafting k tokens for some sequences
//    makes k passes, pass j over the sequences drafting more than j). Each
//    point is the lowest of its recent measurements, and a verification
//    point adds what a step pays over its size's lowest: interference from
//    the rest of the machine adds about the same time to a step, long or
//    short (so many short steps pay it many times, one long step once), and
//    the lowest sees none of it. That excess is the mean of the recent
//    measurements but the highest, over their lowest, of the size measured
//    most. (A pass is timed with the other passes of its step and the
//    recorded rows the first one runs, so the spread of its measurements is
//    mostly how many rows that was, not interference.) A size counts once
//    it has been measured twice (a plain step's at once: a high one only
//    makes drafting look better, and plain steps come back), since one slow
//    first pass (buffers allocated, a prompt caught up) must not stop
//    drafting for good. A size no plain step measured stops counting once
//    it has gone cost_memory steps without a measurement (until it is
//    measured again): a size is measured only while it is drafted, so one
//    priced during a slow spell of the host would otherwise keep drafting
//    priced out for good.
//    Sizes between measured ones are interpolated; below the smallest and
//    above the largest, the prior's shape scales through the nearest one
//    (above several, the average measured slope goes on where that is
//    cheaper): optimistic, so that the loop goes and measures them, since a
//    steep first row (one row to two costs more than any row after it on a
//    CPU) extended would price every longer draft out for good. Before
//    anything is measured the prior shape stands in. A step never verifies
//    more than max_growth times the most rows measured so far, so that the
//    large batches of many sequences are explored in growing steps, not in
//    one expensive leap; one sequence's whole draft (n_max + 1 rows) is
//    always allowed, since a single sequence's first draft is where a run
//    learns whether drafting pays at all, and in a short run a ramp through
//    shorter drafts costs more than such a leap can lose.
//
// Every active sequence drafts one length: the one with the best expected
// tokens per cost (verification of the whole batch plus the drafting passes
// it needs), from each sequence's cumulative acceptance. One length, because
// llama.cpp v0.5.0 decodes a batch in one forward pass only when its
// sequences verify equal rows (split_equal;
// docs/results/2026-12-02-xeon-batch-splits.md): a step where
// some sequences verify more rows than others costs a pass for each extra
// level, each about as dear as the whole step, which the row-priced curve
// does not see. So a sequence at the end of its budget (cap 0), or one that
// has not probed yet, holds the whole step to plain decoding.
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
    // before evidence, after the last decided drafted token was kept ...
    static constexpr double prior_acceptance = 0.9;
    // ... and after it was rejected (or before any: see reset).
    static constexpr double prior_acceptance_after_miss = 0.2;
    // Pseudo-observations behind each prior.
    static constexpr double prior_weight = 1.0;
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
    // A step verifies at most this many times the most rows measured so far
    // (or n_max + 1 rows, when that is more).
    static constexpr int32_t max_growth = 4;
    // Drafting must promise this much more throughput than plain decoding:
    // where verification grows linearly with the rows (a CPU with several
    // sequences) drafting is break-even at best, and the estimates' noise
    // would otherwise decide, losing more on a wrong draft than a right one
    // gains.
    static constexpr double min_gain = 0.05;
    // Decayed observations of position 0 after a kept token (the
    // sequence's own, or the pool's it started from) from which the
    // estimate, rather than the prior, says whether a shadow is worth its
    // price (see shadow_due): one, so that a drafter whose right stretches
    // end soon after they begin stops probing for them early.
    static constexpr double settled_evidence = 1.0;
    // The most a whole draft is taken to be kept with, when counting the
    // steps a hit keeps a sequence drafting (at most 1 / (1 - this)).
    static constexpr double max_kept_whole = 0.95;
    // Share of the throughput the shadows of sequences that draft nothing
    // may cost (bounds how rarely they probe: see shadow_due).
    static constexpr double shadow_budget = 0.01;
    // Most steps between two shadows of one sequence.
    static constexpr int max_shadow_wait = 63;
    // Steps (choose() calls) after its newest measurement at which a size
    // no plain step measured stops counting (see the header comment): where
    // the size truly does not pay, drafting it again once in this many
    // steps costs about 1% where that step wastes two or three plain steps.
    static constexpr uint64_t cost_memory = 256;
    // Most steps between the shadows of a sequence that misses, once the
    // drafter has been right (see shadow_due).
    static constexpr int max_probe_wait = 7;

    // n_seq sequences, each drafting at most n_max tokens a step (n_max >= 1).
    adaptive_draft_length(size_t n_seq, int32_t n_max);

    // Draft lengths for the next step. caps[s] is the most sequence s may
    // draft now (0: it drafts nothing; < 0: it is not active). Every active
    // sequence gets the same length, within every cap; a positive length is
    // at least n_min when every cap allows it, else it is 0.
    std::vector<int32_t> choose(std::span<const int32_t> caps, int32_t n_min = 0);

    // The outcome of a step for active sequence `seq`: `proposed` tokens were
    // drafted (0 when it drafted nothing: nothing is learnt) and the first
    // `kept` of them kept. A sequence given length 0 should still draft one
    // token without verifying it and report (1, whether the target picked
    // it): else what it learnt last about position 0 never changes. A fresh
    // sequence's first outcome (its first probe) follows no decided drafted
    // token, so it counts for neither state's estimates: it sets the state
    // and the probe schedule only.
    void observe(size_t seq, int32_t proposed, int32_t kept);

    // A new request takes the slot of sequence `seq`: its acceptance
    // evidence becomes the drafter's recent acceptance over every sequence
    // (the same decayed counts, pooled), so that it drafts at once where the
    // drafter has been right and probes rarely where it has not; before any
    // evidence at all the sequence is fresh (see shadow_due). It starts as
    // after a kept token where the drafter has been observed after one
    // before, else as after a miss. The cost measurements stay.
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

    // Whether sequence `seq`, given length 0 for this step of n_active
    // sequences, should draft a shadow token (see observe). A sequence with
    // no evidence yet (new, or reset) is given length 0 and a shadow: its
    // first step probes before it verifies anything. After consecutive
    // misses at position 0 the shadows thin out. Once the drafter has been
    // right anywhere (any sequence, any request), it is likely to be right
    // again soon: waits of 0, 1, 3, then 7 (max_probe_wait) steps. While it
    // has never been right, waits of 0, 3, 15, 63 steps after 1, 2, 3, 4
    // misses (its own, or those of all sequences, whichever are more: each
    // miss is on its own text), capped at the interval at which shadows
    // cost shadow_budget of the throughput (a pass over n_active rows
    // against a plain step of n_active sequences, both measured; 7 before
    // they are), so that a drafter that is never right costs close to
    // nothing.
    // Shadows are for choices worth changing. Where the last choose() found
    // that a shadow would not pay for itself, the sequence shadows only at
    // that budget's interval, to follow drift. A shadow pays when the
    // chance that it hits (the sequence's estimate for its next token) times
    // what a hit saves is at least its price (a one-row drafting pass,
    // against a plain step of the batch). A hit saves what drafting the
    // length it would then choose gains over plain decoding at each step,
    // for as many steps as its drafts are expected to be kept whole; it
    // saves nothing where it would not make the sequence draft at all (a
    // drafter right seven times in ten where drafting needs nine). Both are
    // judged only from at least settled_evidence decayed observations after
    // a kept token. So where drafting a right stretch gains little and a
    // pass costs much (a drafter whose head has the full vocabulary, on a
    // CPU where verifying two rows costs two plain steps), a drafter that is
    // wrong for stretches stops paying a shadow every few steps to find
    // them. And apart from a fresh sequence's first probe
    // (which also measures what drafting costs), no sequence shadows when
    // the last choose() found that even a drafter that is always right
    // would not beat plain decoding, at any length the caps allow and the
    // measured costs of this batch size, by min_gain plus what its shadows
    // cost at the longest wait after misses (a drafting pass over the batch
    // every max_probe_wait + 1 steps, against a plain step).
    // Counts the step as one without a shadow when it returns false.
    bool shadow_due(size_t seq, int32_t n_active);

    // Estimated probability that sequence `seq` keeps its drafted tokens
    // 0..i (all of them) at its next step, for i < n_max.
    double p_keep_through(size_t seq, int32_t i) const;

    // Estimated cost of verifying `rows` rows, and of one drafting pass over
    // `rows` rows, in microseconds (or prior units, a one-row verification
    // being 1, before any measurement). rows >= 1.
    double verify_cost(int32_t rows) const;
    double pass_cost(int32_t rows) const;

private:
    struct position_counts {
        double reached = 0; // decayed count of steps that drafted this position
        double kept    = 0; // ... and kept it
    };
    struct sequence_evidence {
        std::vector<position_counts> after[2]; // [last first token kept][position]
        int last_kept = 1;                     // the last decided drafted token was kept (see reset)
        int misses = 0;                        // consecutive misses at position 0
        int idle = 0;                          // steps since the last draft or shadow
        bool fresh = true;                     // nothing observed yet
        bool shadow_pays = true;               // the last choose(): a shadow now is worth its price
    };
    // The most recent measurements of one size, oldest overwritten first.
    struct cost_cell {
        static constexpr size_t window = 8;
        double samples[window] = {};
        size_t   n = 0;        // measurements so far
        bool     sure = false; // one measurement counts, and none expires (a plain step's)
        uint64_t newest = 0;   // the step of the newest measurement
        double lowest() const;
        double excess() const; // the mean but the highest, over the lowest (0 below three)
        bool   counts(uint64_t step) const { return n >= (sure ? 1u : 2u) && (sure || step - newest <= cost_memory); }
    };

    // p_keep_through for every position, from the evidence in state last_kept.
    std::vector<double> cumulative(size_t seq, int last_kept) const;
    // Cost of sizes [0, n) (0 costs 0) from the cells that count: see the
    // header comment. `fallback` (may be null) stands in for an empty curve.
    // `excess` is added to every measured point.
    std::vector<double> curve(const std::vector<cost_cell> & cells, size_t n, const std::vector<double> * fallback,
                              double excess) const;
    std::vector<double> verify_curve(size_t n) const;
    std::vector<double> pass_curve(size_t n) const;
    void record(std::vector<cost_cell> & cells, size_t size, double microseconds, bool sure);

    // Steps between the shadows of n_active sequences at which they cost
    // shadow_budget of the throughput (7 before the costs are measured).
    int shadow_interval(int32_t n_active) const;
    // Most steps sequence `e` waits between shadows (see shadow_due).
    int shadow_wait(const sequence_evidence & e, int32_t n_active) const;

    int32_t n_max_;
    uint64_t  step_ = 0;        // choose() calls so far
    uint64_t  hits_ = 0;        // first draft tokens kept, over every sequence and request
    uint64_t  misses_ = 0;      // ... and rejected
    bool      drafting_may_pay_ = true; // the last choose(): some draft beats plain at acceptance 1
    std::vector<sequence_evidence> acceptance_; // [seq]
    std::vector<position_counts>   pooled_[2];  // every sequence's observations, as in sequence_evidence::after
    std::vector<cost_cell>         verify_;     // [rows verified]
    std::vector<cost_cell>         pass_;       // [rows of one drafting pass]
};

} // namespace specdec::detail
