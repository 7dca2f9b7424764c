// The adaptive draft-length controller against simulated drafters and cost
// curves: its estimates, its choices against the computed optimum, and its
// throughput against every fixed length.
#include "bench-oracle.h"
#include "draft-length.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>

namespace specdec::test {
namespace {

using detail::adaptive_draft_length;
using detail::step_costs;

// A linear step cost in microseconds: `base` plus `per_token` per drafted token.
struct linear_cost {
    double base;
    double per_token;
    double operator()(int32_t m) const { return base + per_token * m; }
};

// A size counts once it is measured twice: both measurements at once.
void measure_verify(adaptive_draft_length & c, int32_t n_active, int32_t rows, double microseconds) {
    c.observe_verify(n_active, rows, microseconds);
    c.observe_verify(n_active, rows, microseconds);
}
void measure_draft(adaptive_draft_length & c, int32_t passes, int32_t rows, double microseconds) {
    c.observe_draft(passes, rows, microseconds);
    c.observe_draft(passes, rows, microseconds);
}
// One sequence: a plain step 100, two rows and nine rows as given, a pass.
void measure_one_sequence(adaptive_draft_length & c, double two_rows, double nine_rows, double pass) {
    c.observe_verify(1, 1, 100.0);
    measure_verify(c, 1, 2, two_rows);
    measure_verify(c, 1, 9, nine_rows);
    measure_draft(c, 1, 1, pass);
}

// The steps, of `steps`, at which the one sequence of `c` shadows while its
// drafter is never right. It drafts at most once (checked): a first draft on
// what the prior expects, before any evidence.
std::vector<int> shadows_while_missing(adaptive_draft_length & c, int steps) {
    std::vector<int> due;
    int drafts = 0;
    for (int step = 0; step < steps; ++step) {
        const int32_t k = c.choose(std::vector<int32_t>{8})[0];
        if (k > 0) {
            drafts++;
            c.observe(0, k, 0);
        } else if (c.shadow_due(0)) {
            due.push_back(step);
            c.observe(0, 1, 0);
        }
    }
    EXPECT_LE(drafts, 1);
    return due;
}

// Expected tokens of a step that drafts k tokens when each is kept with
// probability a given the ones before it were.
double expected_tokens(double a, int32_t k) {
    double e = 1.0;
    double through = 1.0;
    for (int32_t i = 0; i < k; ++i) {
        through *= a;
        e += through;
    }
    return e;
}

int32_t best_fixed_length(double a, const linear_cost & cost, int32_t n_max) {
    int32_t best = 0;
    for (int32_t k = 1; k <= n_max; ++k) {
        if (expected_tokens(a, k) / cost(k) > expected_tokens(a, best) / cost(best)) {
            best = k;
        }
    }
    return best;
}

// Tokens kept of a k-token draft whose positions are kept with probability
// acceptance(step) each, given the ones before.
int32_t simulate_kept(int32_t k, double a, std::mt19937 & rng) {
    std::bernoulli_distribution keep(a);
    int32_t kept = 0;
    while (kept < k && keep(rng)) {
        ++kept;
    }
    return kept;
}

struct throughput {
    double tokens = 0;
    double cost = 0;
    double rate() const { return tokens / cost; }
};

// Runs `steps` single-sequence steps; length(step) picks each step's draft length.
throughput simulate(int steps, const std::function<double(int)> & acceptance, const linear_cost & cost,
                    const std::function<int32_t(int)> & length, const std::function<void(int32_t, int32_t)> & observe,
                    uint32_t seed) {
    std::mt19937 rng(seed);
    throughput t;
    for (int step = 0; step < steps; ++step) {
        const int32_t k = length(step);
        const int32_t kept = simulate_kept(k, acceptance(step), rng);
        t.tokens += 1 + kept;
        t.cost += cost(k);
        observe(k, kept);
    }
    return t;
}

// The controller as the generator drives it: a step that verifies no draft
// reports a one-token shadow draft when one is due, right with the drafter's
// probability at that step.
throughput simulate_adaptive(int steps, const std::function<double(int)> & acceptance, const linear_cost & cost,
                             int32_t n_max, uint32_t seed) {
    adaptive_draft_length c(1, n_max);
    const std::vector<int32_t> caps = {n_max};
    std::mt19937 shadow_rng(seed + 1);
    int step = 0;
    return simulate(
        steps, acceptance, cost, [&](int s) { return step = s, c.choose(caps)[0]; },
        [&](int32_t k, int32_t kept) {
            if (k > 0) {
                c.observe(0, k, kept);
            } else if (c.shadow_due(0)) {
                c.observe(0, 1, simulate_kept(1, acceptance(step), shadow_rng));
            }
            // The whole step's cost as verification; drafting is free.
            c.observe_verify(1, 1 + k, cost(k));
            c.observe_draft(std::max(k, 1), std::max(k, 1), 0.0);
        },
        seed);
}

throughput simulate_fixed(int steps, const std::function<double(int)> & acceptance, const linear_cost & cost, int32_t k,
                          uint32_t seed) {
    return simulate(steps, acceptance, cost, [k](int) { return k; }, [](int32_t, int32_t) {}, seed);
}

TEST(DraftLength, PriorsBeforeAnyEvidence) {
    // A drafter never observed: the last outcome is unknown, so the chain's
    // stationary share. Right after a hit, a at every position, which the
    // hit raised.
    adaptive_draft_length c(2, 4);
    const double a = adaptive_draft_length::prior_kept_after_kept;
    const double q = adaptive_draft_length::prior_kept_after_miss;
    EXPECT_DOUBLE_EQ(c.p_keep_through(0, 0), q / (q + 1.0 - a));
    c.observe(1, 1, 1);
    const double a_hit = c.p_keep_through(1, 1) / c.p_keep_through(1, 0);
    EXPECT_DOUBLE_EQ(c.p_keep_through(1, 0), a_hit);
    EXPECT_NEAR(c.p_keep_through(1, 2), std::pow(a_hit, 3), 1e-12);
    EXPECT_GT(a_hit, a);
    EXPECT_DOUBLE_EQ(c.verify_cost(1), 1.0);
    EXPECT_DOUBLE_EQ(c.verify_cost(5), 1.0 + 4 * step_costs::prior_row_cost);
    EXPECT_DOUBLE_EQ(c.pass_cost(5), step_costs::prior_pass_share * c.verify_cost(5));
    // Two measurements of a step that drafted scale the prior's shape.
    c.observe_verify(1, 3, 300.0);
    EXPECT_DOUBLE_EQ(c.verify_cost(3), 1.0 + 2 * step_costs::prior_row_cost); // one sample is not trusted yet
    c.observe_verify(1, 3, 310.0);
    EXPECT_DOUBLE_EQ(c.verify_cost(3), 300.0);
    EXPECT_DOUBLE_EQ(c.verify_cost(1), 300.0 / (1.0 + 2 * step_costs::prior_row_cost));
    // Until a pass is measured, a pass costs its share of a verification.
    EXPECT_DOUBLE_EQ(c.pass_cost(3), step_costs::prior_pass_share * 300.0);
    c.observe_draft(2, 2, 80.0); // two passes of one row
    EXPECT_DOUBLE_EQ(c.pass_cost(3), step_costs::prior_pass_share * 300.0); // one sample is not trusted yet
    c.observe_draft(1, 1, 45.0);
    EXPECT_DOUBLE_EQ(c.pass_cost(1), 40.0);
    EXPECT_DOUBLE_EQ(c.pass_cost(3), 40.0 * (1.0 + 2 * step_costs::prior_row_cost));
}

TEST(DraftLength, EveryBatchSizeSharesOneVerificationCurve) {
    // Plain steps of one and of three sequences: one sequence drafting two
    // tokens verifies three rows, as three plain sequences do.
    adaptive_draft_length c(3, 4);
    c.observe_verify(1, 1, 100.0);
    c.observe_verify(3, 3, 160.0);
    EXPECT_DOUBLE_EQ(c.verify_cost(3), 160.0);
    EXPECT_DOUBLE_EQ(c.verify_cost(2), 130.0);
    c.observe(0, 1, 1); // a hit
    // Drafting is free here, and a second row costs 30% of a step: one
    // sequence drafts.
    measure_draft(c, 1, 1, 1.0);
    EXPECT_GT(c.choose(std::vector<int32_t>{4, -1, -1})[0], 0);
    // Where verification grows linearly (each row costs as much as a plain
    // step's share), three sequences drafting cannot beat plain decoding,
    // once the larger sizes are measured.
    adaptive_draft_length d(3, 4);
    for (size_t s = 0; s < 3; ++s) {
        d.observe(s, 4, 4);
        d.observe(s, 4, 4);
    }
    d.observe_verify(1, 1, 50.0);
    d.observe_verify(3, 3, 150.0);
    measure_verify(d, 3, 15, 750.0);
    measure_draft(d, 1, 3, 1.0);
    EXPECT_EQ(d.choose(std::vector<int32_t>{4, 4, 4}), (std::vector<int32_t>{0, 0, 0}));
}

TEST(DraftLength, SizesAboveTheMeasuredOnesAreEstimatedOptimistically) {
    // One row 100, two rows 160: a steep first row (a CPU). Extending that
    // slope would price every longer draft out; above the largest measured
    // size the prior's shape through it stands where it is cheaper, so the
    // loop goes and measures longer drafts.
    adaptive_draft_length c(1, 8);
    c.observe_verify(1, 1, 100.0);
    measure_verify(c, 1, 2, 160.0);
    const double through_two = 160.0 / (1.0 + step_costs::prior_row_cost);
    EXPECT_DOUBLE_EQ(c.verify_cost(5), through_two * (1.0 + 4 * step_costs::prior_row_cost));
    // Where the measured slope is the cheaper, it goes on.
    measure_verify(c, 1, 4, 130.0);
    EXPECT_DOUBLE_EQ(c.verify_cost(7), 130.0 + 3 * (130.0 - 100.0) / 3.0);
}

TEST(DraftLength, LargerBatchesAreExploredInGrowingSteps) {
    // Drafters that are always right, with nothing but a plain step
    // measured: four sequences' first drafts verify at most max_growth times
    // its rows, then more once that size is measured.
    adaptive_draft_length c(4, 8);
    const std::vector<int32_t> caps(4, 8);
    for (size_t s = 0; s < 4; ++s) {
        c.observe(s, 1, 1);
    }
    c.observe_verify(4, 4, 100.0);
    measure_draft(c, 1, 4, 1.0);
    EXPECT_EQ(c.choose(caps), std::vector<int32_t>(4, step_costs::max_growth - 1));
    for (size_t s = 0; s < 4; ++s) {
        c.observe(s, 3, 3);
    }
    c.observe_verify(4, 16, 130.0);
    EXPECT_GT(c.choose(caps), std::vector<int32_t>(4, step_costs::max_growth - 1));
}

TEST(DraftLength, OneSequencesWholeDraftIsWithinTheGrowthLimit) {
    // After one right probe, with nothing but a plain step measured, one
    // sequence drafts what its estimates say, beyond max_growth rows.
    adaptive_draft_length c(1, 8);
    c.observe(0, 1, 1);
    c.observe_verify(1, 1, 100.0);
    measure_draft(c, 1, 1, 1.0);
    EXPECT_GT(c.choose(std::vector<int32_t>{8})[0], step_costs::max_growth - 1);
}

TEST(DraftLength, APlainStepCountsAfterOneMeasurement) {
    // Four sequences whose drafts are all kept, where drafting 8 tokens each
    // costs 9.4 plain steps for 9 tokens each: plain decoding is faster. A
    // single plain measurement must stand against the prior's guess below
    // the large measured size (which would put a plain step at a third of it).
    adaptive_draft_length c(4, 8);
    for (int i = 0; i < 10; ++i) {
        for (size_t s = 0; s < 4; ++s) {
            c.observe(s, 8, 8);
        }
    }
    measure_verify(c, 4, 36, 940.0);
    EXPECT_GT(c.choose(std::vector<int32_t>{8, 8, 8, 8})[0], 0); // plain unmeasured: the prior says draft
    c.observe_verify(4, 4, 100.0);
    EXPECT_DOUBLE_EQ(c.verify_cost(4), 100.0);
    EXPECT_EQ(c.choose(std::vector<int32_t>{8, 8, 8, 8}), (std::vector<int32_t>{0, 0, 0, 0}));
}

TEST(DraftLength, NoShadowsWhereEvenAPerfectDrafterLoses) {
    // Four sequences whose drafts were always kept, at costs where drafting
    // anything is slower than plain decoding: a shadow cannot change a choice.
    adaptive_draft_length c(4, 8);
    for (size_t s = 0; s < 4; ++s) {
        c.observe(s, 8, 8);
    }
    c.observe_verify(4, 4, 100.0);
    measure_verify(c, 4, 36, 940.0);
    const std::vector<int32_t> caps{8, 8, 8, 8};
    EXPECT_EQ(c.choose(caps), (std::vector<int32_t>{0, 0, 0, 0}));
    for (size_t s = 0; s < 4; ++s) {
        EXPECT_FALSE(c.shadow_due(s)) << s;
    }
    // One sequence alone, where a plain step costs 40 and a second row 20:
    // drafting may pay, so the sequence without a draft shadows again.
    c.observe_verify(1, 1, 40.0);
    measure_draft(c, 1, 1, 1.0);
    c.observe(0, 8, 2); // rejected part-way: the controller drafts nothing next, and shadows at once
    EXPECT_EQ(c.choose(std::vector<int32_t>{8, -1, -1, -1}), (std::vector<int32_t>{0, 0, 0, 0}));
    EXPECT_TRUE(c.shadow_due(0));
}

TEST(DraftLength, ShadowsGoOnWhereAHitMaySaveMoreThanTheShadowCosts) {
    // Four sequences: a plain step 50, 36 rows 250. With a pass of 16 over
    // the batch, drafters that are right would gain 1.19x with eight tokens
    // each; a sequence whose drafts were kept whole, then missed, shadows
    // within a few steps. With a pass of 40 even a drafter that is always
    // right would gain nothing: no shadow.
    const auto shadows = [](double pass_us) {
        adaptive_draft_length c(4, 8);
        const std::vector<int32_t> caps(4, 8);
        for (int i = 0; i < 3; ++i) {
            c.observe_verify(4, 4, 50.0);
        }
        measure_verify(c, 4, 36, 250.0);
        measure_draft(c, 1, 4, pass_us);
        measure_draft(c, 1, 1, pass_us / 4.0);
        for (size_t s = 0; s < 4; ++s) {
            c.observe(s, 1, 1);
            c.observe(s, 8, 8);
        }
        c.observe(0, 8, 0);
        int looks = 0;
        for (int step = 0; step < 20; ++step) {
            EXPECT_EQ(c.choose(caps), std::vector<int32_t>(4, 0));
            if (c.shadow_due(0)) {
                looks++;
                c.observe(0, 1, 0);
            }
        }
        return looks;
    };
    EXPECT_GT(shadows(16.0), 0);
    EXPECT_EQ(shadows(40.0), 0);
}

TEST(DraftLength, AHitThenAMissIsLookedAtRarelyButNotForgotten) {
    // One sequence where only a drafter right almost every time gains (a
    // plain step 100, two rows 200, nine 500, a pass 22: a shadow costs 22%
    // of a step). Its first hit was followed by a miss: from two tokens, a
    // drafter that good is unlikely but not ruled out. While it misses, its
    // shadows take at most 2% of the time; a drafter that is right from then
    // on is found within two hundred steps, and drafts.
    const auto after_hit_and_miss = [] {
        adaptive_draft_length c(1, 8);
        measure_one_sequence(c, 200.0, 500.0, 22.0);
        c.observe(0, 1, 1);
        c.observe(0, 1, 0);
        return c;
    };
    adaptive_draft_length wrong = after_hit_and_miss();
    const std::vector<int> due = shadows_while_missing(wrong, 400);
    ASSERT_GE(due.size(), 2u);
    EXPECT_LE(static_cast<double>(due.size()) * 22.0, 0.02 * 400 * 100.0) << ::testing::PrintToString(due);

    adaptive_draft_length right = after_hit_and_miss();
    int first_draft = -1;
    for (int step = 0; step < 200 && first_draft < 0; ++step) {
        const int32_t k = right.choose(std::vector<int32_t>{8})[0];
        if (k > 0) {
            first_draft = step;
        } else if (right.shadow_due(0)) {
            right.observe(0, 1, 1);
        }
    }
    EXPECT_GE(first_draft, 0);
}

TEST(DraftLength, CostCurveInterpolatesAndNeverFalls) {
    adaptive_draft_length c(1, 8);
    for (int i = 0; i < 2; ++i) {
        c.observe_verify(1, 3, 120.0);
        c.observe_verify(1, 7, 160.0);
    }
    // A hiccup of the machine: the lowest recent measurement stands (and
    // one high measurement is no excess: see InterferenceIsPricedOnceAStep).
    c.observe_verify(1, 3, 500.0);
    EXPECT_DOUBLE_EQ(c.verify_cost(5), 140.0);
    EXPECT_DOUBLE_EQ(c.verify_cost(9), 180.0); // the measured slope, extended
    EXPECT_DOUBLE_EQ(c.verify_cost(1), 120.0 / (1.0 + 2 * step_costs::prior_row_cost)); // the prior's shape
    // A noisy measurement that makes a larger batch look cheaper does not
    // make the curve fall.
    measure_verify(c, 1, 8, 100.0);
    for (int32_t rows = 2; rows <= 9; ++rows) {
        EXPECT_GE(c.verify_cost(rows), c.verify_cost(rows - 1)) << rows;
    }
    // New measurements replace old ones (the window holds the recent ones).
    for (int i = 0; i < 30; ++i) {
        c.observe_verify(1, 3, 60.0);
    }
    EXPECT_NEAR(c.verify_cost(3), 60.0, 1.0);
}

TEST(DraftLength, ASizeMeasuredInASlowSpellIsTriedAgain) {
    // One sequence whose drafts are all kept. Nine rows were measured at
    // 1000 while the host was slow, against a plain step of 100: drafting
    // looks slower than plain decoding, so nothing drafts and nine rows are
    // not measured again. After cost_memory steps without a measurement they
    // stop counting: the prior prices them from the plain step, and the
    // sequence drafts again. The plain step's measurement never expires.
    adaptive_draft_length c(1, 8);
    for (int i = 0; i < 10; ++i) {
        c.observe(0, 8, 8);
    }
    c.observe_verify(1, 1, 100.0);
    measure_verify(c, 1, 9, 1000.0);
    measure_draft(c, 8, 8, 10.0);
    const std::vector<int32_t> caps{8};
    for (uint64_t step = 1; step <= step_costs::memory; ++step) {
        ASSERT_EQ(c.choose(caps)[0], 0) << step;
    }
    EXPECT_EQ(c.choose(caps)[0], 8);
    EXPECT_DOUBLE_EQ(c.verify_cost(1), 100.0);
    EXPECT_DOUBLE_EQ(c.verify_cost(9), 100.0 * (1.0 + 8 * step_costs::prior_row_cost));
}

TEST(DraftLength, InterferenceIsPricedOnceAStep) {
    // The plain step measured at 100, 100, 104, 108, 112 and one 300 (a
    // hiccup, left out): a step pays 4.8 over its size's lowest on average.
    // That applies to every size, also one measured only at its lowest.
    adaptive_draft_length c(1, 8);
    for (double us : {100.0, 100.0, 104.0, 300.0, 108.0, 112.0}) {
        c.observe_verify(1, 1, us);
    }
    measure_verify(c, 1, 9, 400.0);
    EXPECT_DOUBLE_EQ(c.verify_cost(1), 104.8);
    EXPECT_DOUBLE_EQ(c.verify_cost(9), 404.8);
    // A pass is timed with its step's other passes and the recorded rows the
    // first one runs: its spread is not interference, its lowest stands.
    for (double us : {10.0, 10.0, 14.0, 18.0}) {
        c.observe_draft(1, 1, us);
    }
    EXPECT_DOUBLE_EQ(c.pass_cost(1), 10.0);
    // Two measurements say nothing of the spread: no excess.
    adaptive_draft_length d(1, 8);
    d.observe_verify(1, 1, 100.0);
    d.observe_verify(1, 1, 140.0);
    EXPECT_DOUBLE_EQ(d.verify_cost(1), 100.0);
}

TEST(DraftLength, AcceptanceEstimatesFollowTheEvidence) {
    adaptive_draft_length c(2, 4);
    for (int i = 0; i < 30; ++i) {
        c.observe(0, 4, 4); // every draft kept
        c.observe(1, 4, 0); // every draft rejected at position 0
    }
    EXPECT_GT(c.p_keep_through(0, 3), 0.9);
    EXPECT_LT(c.p_keep_through(1, 0), 0.2);
    // A step that drafted nothing teaches nothing.
    const double before = c.p_keep_through(1, 0);
    c.observe(1, 0, 0);
    EXPECT_EQ(c.p_keep_through(1, 0), before);
}

TEST(DraftLength, AcceptanceIsConditionedOnTheLastOutcome) {
    // Runs of ten hits and ten misses: after a hit the next first token is
    // almost always kept, after a miss almost never, so the estimate flips
    // with one observation instead of fading over many.
    adaptive_draft_length c(1, 4);
    for (int i = 0; i < 200; ++i) {
        c.observe(0, 1, (i / 10) % 2 == 0 ? 1 : 0);
    }
    c.observe(0, 1, 0);
    const double after_miss = c.p_keep_through(0, 0);
    c.observe(0, 1, 1);
    const double after_hit = c.p_keep_through(0, 0);
    EXPECT_LT(after_miss, 0.25);
    EXPECT_GT(after_hit, 0.75);

    // Independent outcomes (pattern 1100: after a hit or a miss, either
    // follows as often): both estimates near one half.
    adaptive_draft_length d(1, 4);
    for (int i = 0; i < 200; ++i) {
        d.observe(0, 1, i % 4 < 2 ? 1 : 0);
    }
    EXPECT_NEAR(d.p_keep_through(0, 0), 0.5, 0.2);
}

TEST(DraftLength, ADraftRejectedPartWayCountsAsAMiss) {
    // The drafter was right up to a point and then wrong: the text has
    // turned, so the next step leans on what follows a miss.
    // Sequence 1 misses at once where sequence 0 is rejected part-way:
    // both lean on the same estimate then.
    adaptive_draft_length c(2, 8);
    for (size_t s = 0; s < 2; ++s) {
        c.observe(s, 1, 0);
        c.observe(s, 1, 0);
        c.observe(s, 8, 8);
    }
    EXPECT_GT(c.p_keep_through(0, 0), 0.75);
    c.observe(0, 8, 5);
    c.observe(1, 8, 0);
    EXPECT_LT(c.p_keep_through(0, 0), 0.5);
    EXPECT_DOUBLE_EQ(c.p_keep_through(0, 0), c.p_keep_through(1, 0));
    c.observe(0, 1, 1); // a probe that was right
    EXPECT_GT(c.p_keep_through(0, 0), 0.75);
}

TEST(DraftLength, ShadowsOfANeverRightDrafterThinOutAndAHitMakesItDraft) {
    // One sequence, where drafting pays well when the drafter is right (a
    // plain step 100, two rows 120, nine 200, a pass 10). A drafter never
    // right: every miss lowers its chance of a hit, so the waits between
    // shadows grow. After a hit it drafts at once.
    const auto gaps = [](const std::vector<int> & due) {
        std::vector<int> out;
        for (size_t i = 1; i < due.size(); ++i) {
            out.push_back(due[i] - due[i - 1]);
        }
        return out;
    };
    adaptive_draft_length c(1, 8);
    measure_one_sequence(c, 120.0, 200.0, 10.0);
    const std::vector<int> never = shadows_while_missing(c, 200);
    ASSERT_GE(never.size(), 3u);
    const std::vector<int> never_gaps = gaps(never);
    EXPECT_TRUE(std::is_sorted(never_gaps.begin(), never_gaps.end())) << ::testing::PrintToString(never);
    EXPECT_GE(never_gaps.back(), 3 * never_gaps.front()) << ::testing::PrintToString(never);
    c.observe(0, 1, 1);
    EXPECT_GT(c.choose(std::vector<int32_t>{8})[0], 0);
}

TEST(DraftLength, ANeverRightDrafterCostsLittleAndIsStillFollowed) {
    // A shadow costs 30% of a plain step; a right drafter would gain much
    // (two rows 110, nine 150). Over 2,000 steps of a drafter that is never
    // right, the shadows take under 1% of the time, and they go on: their
    // waits grow with the misses, but the last is still under 120 steps, so
    // that a drafter that turns right is found.
    adaptive_draft_length c(1, 8);
    measure_one_sequence(c, 110.0, 150.0, 30.0);
    const std::vector<int> due = shadows_while_missing(c, 2000);
    EXPECT_LE(static_cast<double>(due.size()) * 30.0, 0.01 * 2000 * 100.0) << due.size();
    EXPECT_GE(due.size(), 2000u / 120u);
    EXPECT_LE(due.back() - due[due.size() - 2], 120);
}

TEST(DraftLength, EverySequencesMissesCountAgainstANeverRightDrafter) {
    // Four sequences that miss together, each on its own text: four misses
    // a step are as much evidence as one sequence's four misses, so in the
    // same steps they shadow no more often than one sequence alone, and
    // always together (one pass).
    const auto shadow_steps = [](size_t n) {
        adaptive_draft_length c(n, 4);
        c.observe_verify(static_cast<int32_t>(n), static_cast<int32_t>(n), 100.0);
        measure_verify(c, static_cast<int32_t>(n), static_cast<int32_t>(5 * n), 150.0);
        measure_draft(c, 1, static_cast<int32_t>(n), 10.0);
        std::vector<int> due_steps;
        for (int step = 0; step < 300; ++step) {
            const std::vector<int32_t> lengths = c.choose(std::vector<int32_t>(n, 4));
            if (lengths[0] > 0) { // a first draft on the prior, before any evidence
                EXPECT_EQ(step, 0);
                for (size_t s = 0; s < n; ++s) {
                    c.observe(s, lengths[s], 0);
                }
                continue;
            }
            size_t due = 0;
            for (size_t s = 0; s < n; ++s) {
                if (c.shadow_due(s)) {
                    c.observe(s, 1, 0);
                    due++;
                }
            }
            EXPECT_TRUE(due == 0 || due == n) << step;
            if (due > 0) {
                due_steps.push_back(step);
            }
        }
        return due_steps;
    };
    const std::vector<int> one = shadow_steps(1);
    const std::vector<int> four = shadow_steps(4);
    EXPECT_LT(four.size(), one.size()) << ::testing::PrintToString(four) << ::testing::PrintToString(one);
}

TEST(DraftLength, NoShadowEveryStepWhereAHitWouldNotMakeItDraft) {
    // A plain step costs 100, each more row 65, a drafting pass 10: a
    // drafter that is always right would gain 29% with eight tokens, but one
    // right seven times in ten, independently, is never worth drafting, and
    // once its estimate has settled a hit is unlikely to change that: its
    // shadows take at most 2% of the time, not one after every hit, and go
    // on (its estimate wanders).
    adaptive_draft_length c(1, 8);
    measure_one_sequence(c, 165.0, 620.0, 10.0);
    std::mt19937 rng(3);
    std::bernoulli_distribution right(0.7);
    int drafted = 0;
    int late_shadows = 0;
    for (int step = 0; step < 400; ++step) {
        const int32_t k = c.choose(std::vector<int32_t>{8})[0];
        if (k > 0) {
            drafted++;
            c.observe(0, k, simulate_kept(k, 0.7, rng));
            c.observe_verify(1, k + 1, 100.0 + 65.0 * k);
            c.observe_draft(k, k, 10.0 * k);
        } else if (c.shadow_due(0)) {
            late_shadows += step >= 100 ? 1 : 0;
            c.observe(0, 1, right(rng) ? 1 : 0);
        }
    }
    EXPECT_LE(drafted, 400 / 20); // rarely: a memory of about twenty observations wanders
    EXPECT_GE(late_shadows, 1);
    EXPECT_LE(late_shadows * 10.0, 0.02 * 300 * 100.0);
}

TEST(DraftLength, ShadowsComeAsOftenAsTheirPriceAllows) {
    // A drafter right for stretches: kept whole after a hit, then wrong ten
    // times in a row. A plain step costs 100, two rows 200, nine rows 500 (a
    // CPU where a second row costs as much as the first). A hit would make
    // it draft 8 tokens for the rest of a stretch. With a pass of 2 a shadow
    // costs 2% of a step, with a pass of 22 11 times as much: it looks at
    // least three times as often at the low price, and at both less often
    // the longer it misses.
    const auto due_steps = [](double pass_us) {
        adaptive_draft_length c(1, 8);
        measure_one_sequence(c, 200.0, 500.0, pass_us);
        c.observe(0, 1, 0); // the first probe
        c.observe(0, 1, 1); // a hit after that miss
        for (int i = 0; i < 5; ++i) {
            c.observe(0, 8, 8);
        }
        c.observe(0, 8, 3);
        for (int i = 0; i < 10; ++i) {
            c.observe(0, 1, 0);
        }
        return shadows_while_missing(c, 100);
    };
    const std::vector<int> cheap = due_steps(2.0);
    const std::vector<int> dear = due_steps(22.0);
    EXPECT_GE(cheap.size(), 3 * dear.size()) << ::testing::PrintToString(cheap) << ::testing::PrintToString(dear);
    for (const std::vector<int> & due : {cheap, dear}) {
        ASSERT_GE(due.size(), 3u);
        std::vector<int> gaps;
        for (size_t i = 1; i < due.size(); ++i) {
            gaps.push_back(due[i] - due[i - 1]);
        }
        EXPECT_TRUE(std::is_sorted(gaps.begin(), gaps.end())) << ::testing::PrintToString(due);
        EXPECT_GT(gaps.back(), gaps.front()) << ::testing::PrintToString(due);
    }
}

TEST(DraftLength, NoLookThatTheTokensLeftCouldNotRepay) {
    // A new request does not know its state and looks at once, unless a hit
    // could not repay the look before the request ends. A plain step costs
    // 100, two rows 200, nine rows 500, a pass 22: nothing drafts on the
    // prior alone, and a look costs a fifth of a step. The cap is what the
    // engine gives, at most the tokens left. Three tokens left allow a draft
    // of three, which could pay (without an end known it looks), but not
    // enough of them to repay a look; with many it looks; more tokens left
    // never turn a look down.
    const auto looks = [](int64_t left, bool end_known) {
        adaptive_draft_length c(1, 8);
        measure_one_sequence(c, 200.0, 500.0, 22.0);
        const std::vector<int32_t> caps{static_cast<int32_t>(std::min<int64_t>(left, 8))};
        const std::vector<int64_t> lefts{left};
        const std::vector<int32_t> lengths = c.choose(caps, end_known ? std::span<const int64_t>(lefts) : std::span<const int64_t>());
        EXPECT_EQ(lengths[0], 0);
        return c.shadow_due(0);
    };
    EXPECT_TRUE(looks(3, false));
    EXPECT_FALSE(looks(3, true));
    EXPECT_TRUE(looks(1000, true));
    EXPECT_TRUE(looks(1000, false));
    bool looked = false;
    for (int64_t left = 0; left <= 1000; ++left) {
        const bool now = looks(left, true);
        ASSERT_TRUE(now || !looked) << "no look at " << left << " tokens left, after a look with fewer";
        looked = now;
    }
}

TEST(DraftLength, ASequenceJoiningANeverRightDrafterWaitsLong) {
    // A new request does not know its state: it shadows at once, whether
    // the drafter is new or two others have missed four times each. After
    // that shadow misses too, it waits longer for its next where the others'
    // misses say the drafter is rarely right.
    adaptive_draft_length c(3, 4);
    c.observe_verify(1, 1, 100.0);
    measure_verify(c, 1, 5, 300.0);
    measure_draft(c, 1, 1, 10.0);
    adaptive_draft_length joining = c;
    for (int i = 0; i < 4; ++i) {
        joining.observe(0, 1, 0);
        joining.observe(1, 1, 0);
    }
    joining.reset(2);
    const auto second_shadow = [](adaptive_draft_length & d) {
        const std::vector<int32_t> caps{-1, -1, 4};
        EXPECT_EQ(d.choose(caps)[2], 0);
        EXPECT_TRUE(d.shadow_due(2));
        d.observe(2, 1, 0);
        for (int step = 1; step < 1000; ++step) {
            EXPECT_EQ(d.choose(caps)[2], 0);
            if (d.shadow_due(2)) {
                return step;
            }
        }
        return 1000;
    };
    const int fresh_wait = second_shadow(c);
    EXPECT_GT(second_shadow(joining), fresh_wait);
}

TEST(DraftLength, AnUnknownLastOutcomeIsTheChainsStationaryShare) {
    // A new request, whose last outcome is unknown, starts from the pooled
    // evidence in the chain's stationary share q / (q + 1 - a).
    adaptive_draft_length c(2, 8);
    for (int i = 0; i < 10; ++i) {
        c.observe(1, 8, 8);
        c.observe(1, 1, 0);
        c.observe(1, 1, 0);
    }
    c.reset(0);
    const double a = c.p_keep_through(1, 1) / c.p_keep_through(1, 0);
    c.observe(1, 1, 0);
    const double q = c.p_keep_through(1, 0);
    c.reset(0);
    EXPECT_NEAR(c.p_keep_through(0, 0), q / (q + 1.0 - a), 1e-9);

    // A first probe, from an unknown state, is credited to each state in
    // proportion to the chance that the chain was in it: a miss, before any
    // evidence, mostly to the state after a miss.
    const double a0 = adaptive_draft_length::prior_kept_after_kept;
    const double q0 = adaptive_draft_length::prior_kept_after_miss;
    const double w = adaptive_draft_length::prior_weight;
    const double from_kept = q0 / (q0 + 1.0 - a0);
    const double share = from_kept * (1.0 - a0) / (from_kept * (1.0 - a0) + (1.0 - from_kept) * (1.0 - q0));
    adaptive_draft_length d(1, 8);
    d.observe(0, 1, 0);
    EXPECT_NEAR(d.p_keep_through(0, 0), w * q0 / (1.0 - share + w), 1e-12); // the state now: after a miss
    EXPECT_NEAR(d.p_keep_through(0, 1) / d.p_keep_through(0, 0), w * a0 / (share + w), 1e-12);
}

TEST(DraftLength, ANewRequestStartsFromTheDraftersRecentAcceptance) {
    // A drafter that has been right for every request: the next request in
    // a slot drafts long at once, without probing first.
    adaptive_draft_length c(2, 8);
    c.observe_verify(2, 2, 100.0);
    measure_verify(c, 2, 18, 130.0);
    measure_draft(c, 1, 2, 1.0);
    for (int i = 0; i < 20; ++i) {
        c.observe(0, 8, 8);
        c.observe(1, 8, 8);
    }
    c.reset(0);
    EXPECT_EQ(c.choose(std::vector<int32_t>{8, 8})[0], 8);
    EXPECT_NEAR(c.p_keep_through(0, 0), c.p_keep_through(1, 0), 0.02);

    // A drafter that has never been right: a new request does not draft; it
    // shadows once, to learn its own state.
    adaptive_draft_length d(2, 8);
    d.observe_verify(1, 1, 100.0);
    measure_verify(d, 1, 9, 300.0);
    measure_draft(d, 1, 1, 30.0);
    for (int i = 0; i < 6; ++i) {
        d.observe(1, 1, 0);
    }
    d.reset(0);
    EXPECT_EQ(d.choose(std::vector<int32_t>{8, -1})[0], 0);
    EXPECT_TRUE(d.shadow_due(0));
}

TEST(DraftLength, AMovedRequestKeepsItsEvidence) {
    // Sequence 2's drafts keep their first two tokens; sequence 0 only
    // misses. After the engine moves 2's request into sequence 1, 1 holds
    // 2's estimates and 2 starts as a new request would.
    adaptive_draft_length c(3, 4);
    for (int i = 0; i < 10; ++i) {
        c.observe(2, 3, 2);
        c.observe(0, 1, 0);
    }
    std::vector<double> before;
    for (int32_t k = 0; k < 4; ++k) {
        before.push_back(c.p_keep_through(2, k));
    }
    adaptive_draft_length fresh = c;
    fresh.reset(2);
    c.move(2, 1);
    for (int32_t k = 0; k < 4; ++k) {
        EXPECT_DOUBLE_EQ(c.p_keep_through(1, k), before[static_cast<size_t>(k)]) << k;
        EXPECT_DOUBLE_EQ(c.p_keep_through(2, k), fresh.p_keep_through(2, k)) << k;
    }
    EXPECT_GT(before[0], 0.8); // after a miss, its next token is kept
    EXPECT_LT(c.p_keep_through(0, 0), 0.2);
}

TEST(DraftLength, ChoosesTheLengthThatMaximisesExpectedTokensPerCost) {
    const int32_t n_max = 8;
    for (double a : {0.3, 0.6, 0.8, 0.95}) {
        for (const linear_cost cost : {linear_cost{100, 10}, linear_cost{100, 40}}) {
            adaptive_draft_length c(1, n_max);
            const std::vector<int32_t> caps = {n_max};
            std::mt19937 rng(7);
            // Learn the cost of every length and the acceptance at every position.
            for (int step = 0; step < 400; ++step) {
                const int32_t k = step % (n_max + 1);
                c.observe(0, k, simulate_kept(k, a, rng));
                c.observe_verify(1, 1 + k, cost(k));
                c.observe_draft(std::max(k, 1), std::max(k, 1), 0.0);
            }
            const int32_t want = best_fixed_length(a, cost, n_max);
            const int32_t got = c.choose(caps)[0];
            // The estimate follows the last ~10 steps and leans on an
            // optimistic prior, so it is noisy: the choice is near the
            // optimum and its rate within 10% of the optimum's.
            EXPECT_NEAR(got, want, 2) << "a=" << a << " slope=" << cost.per_token;
            EXPECT_GT(expected_tokens(a, got) / cost(got), 0.90 * expected_tokens(a, want) / cost(want))
                << "a=" << a << " slope=" << cost.per_token;
        }
    }
}

TEST(DraftLength, RespectsCapsInactiveSequencesAndTheMinimum) {
    adaptive_draft_length c(3, 8);
    for (int i = 0; i < 20; ++i) {
        for (size_t s = 0; s < 3; ++s) {
            c.observe(s, 8, 8);
        }
    }
    // Every active sequence drafts one length, within every cap; a sequence
    // at the end of its budget (cap 0) holds the step to plain decoding.
    EXPECT_EQ(c.choose(std::vector<int32_t>{2, -1, 5}), (std::vector<int32_t>{2, 0, 2}));
    EXPECT_EQ(c.choose(std::vector<int32_t>{2, -1, 0}), (std::vector<int32_t>{0, 0, 0}));

    // Sequences whose drafter is poor: their best length is 1, raised to the
    // minimum when every cap allows, else nothing.
    adaptive_draft_length poor(2, 8);
    for (int i = 0; i < 30; ++i) {
        poor.observe(0, 1, i % 4 < 2 ? 1 : 0); // kept half the time, after a hit or a miss alike
        poor.observe(1, 1, i % 4 < 2 ? 1 : 0);
        poor.observe_verify(2, 2, 100.0);
        poor.observe_verify(2, 4, 140.0);
        poor.observe_verify(2, 6, 300.0);
        poor.observe_draft(1, 2, 1.0);
    }
    const std::vector<int32_t> lengths = poor.choose(std::vector<int32_t>{8, 8});
    ASSERT_EQ(lengths, (std::vector<int32_t>{1, 1}));
    EXPECT_EQ(poor.choose(std::vector<int32_t>{8, 8}, {}, 3), (std::vector<int32_t>{3, 3}));
    EXPECT_EQ(poor.choose(std::vector<int32_t>{8, 2}, {}, 3), (std::vector<int32_t>{0, 0}));
}

// A batch of a sequence whose drafter is always right and one whose drafter
// is never right: both draft one length (one pass verifies it), which the
// right one's tokens pay for at this cost.
TEST(DraftLength, AGoodAndAPoorSequenceDraftOneLength) {
    adaptive_draft_length c(2, 8);
    const linear_cost cost{200, 20};
    for (int i = 0; i < 30; ++i) {
        c.observe(0, 8, 8);
        c.observe(1, 1, 0);
        for (int32_t m : {1, 4, 9, 16}) {
            c.observe_verify(2, 2 + m, cost(m));
        }
        c.observe_draft(1, 1, 1.0);
    }
    EXPECT_EQ(c.choose(std::vector<int32_t>{8, 8}), (std::vector<int32_t>{8, 8}));
}

TEST(DraftLength, SeveralGoodSequencesDraftBeforeLongerStepsAreMeasured) {
    // Only plain steps of four sequences measured so far: the prior, per
    // sequence, must not make drafting for all four look four times dearer.
    adaptive_draft_length c(4, 8);
    for (int i = 0; i < 10; ++i) {
        for (size_t s = 0; s < 4; ++s) {
            c.observe(s, 1, 1);
        }
        c.observe_verify(4, 4, 400.0);
    }
    for (int32_t length : c.choose(std::vector<int32_t>{8, 8, 8, 8})) {
        EXPECT_GT(length, 0);
    }
}

TEST(DraftLength, StationaryDrafterIsNearTheBestFixedLength) {
    const int32_t n_max = 8;
    for (double a : {0.4, 0.7, 0.9}) {
        const linear_cost cost{100, 15};
        const auto acceptance = [a](int) { return a; };
        double best = 0;
        for (int32_t k = 0; k <= n_max; ++k) {
            best = std::max(best, simulate_fixed(4000, acceptance, cost, k, 11).rate());
        }
        const double adaptive = simulate_adaptive(4000, acceptance, cost, n_max, 11).rate();
        EXPECT_GT(adaptive, 0.95 * best) << "a=" << a;
    }
}

TEST(DraftLength, MixedStretchesBeatEveryFixedLength) {
    // 40 steps where the drafter is good, 40 where it is poor, and so on.
    const int32_t n_max = 8;
    const linear_cost cost{100, 20};
    const auto acceptance = [](int step) { return (step / 40) % 2 == 0 ? 0.95 : 0.05; };
    double best = 0;
    for (int32_t k = 0; k <= n_max; ++k) {
        best = std::max(best, simulate_fixed(4000, acceptance, cost, k, 5).rate());
    }
    const double adaptive = simulate_adaptive(4000, acceptance, cost, n_max, 5).rate();
    RecordProperty("adaptive_over_best_fixed", std::to_string(adaptive / best));
    EXPECT_GT(adaptive, 1.1 * best);
}

// Bench runs replayed without a clock: what `specdec bench --fixture F
// --n-seq N -n 48` decodes (and the same texts to 192 tokens), with the
// step costs that run measured and a noise of its own, so that auto ÷ oracle
// is the controller's alone (the bench's own ratio moves by ±10% between
// runs of one build on a 2-core host).
// Costs, per sequence count: the step of every sequence drafting k = 0..4,
// in microseconds (exact kernels, Qwen3-0.6B-shaped Q4_K_M target, 2
// threads), from hosts whose costs differ in shape, so that a controller
// tuned to one is seen on the others; and a drafting pass over r rows as a
// share of a plain step of r sequences (the head's whole vocabulary),
// verification being the rest. A restricted draft vocabulary
// (--draft-vocab 32768) leaves verification as it is and makes a pass about
// a third as dear (drafting 15-19% of an n = 8 run against 38-40% on the
// first host: docs/results/2026-12-05-epyc-draft-vocab-end-to-end.md).
// Agreement: each fixture's text, as the bench measured it (every sequence
// decodes the same prompt).
struct measured_steps {
    const char *                           host;
    std::map<int32_t, std::vector<double>> step;
    double                                 pass_share;
};
const measured_steps measured_hosts[3] = {
    // docs/results/2026-12-05-epyc-mtp-fixtures-auto.json: verifying two
    // rows cost 2.35 plain steps; a pass 0.3 of one.
    {"2026-12-05 EPYC", {{1, {22625, 60041, 64500, 68202, 76472}}, {4, {52123, 89463, 120421, 147135, 192609}}, {16, {111095, 231202, 331557, 459571, 550852}}}, 0.3},
    // docs/results/2026-12-06-epyc-controller-fourth-formulation.json (the
    // exact fixture, its first run): two rows cost 1.15 plain steps; a pass
    // 0.2 of one (drafting took 29% of an n = 4 step of one sequence, 18% and
    // 17% at four and sixteen).
    {"2026-12-06 EPYC", {{1, {18502, 24987, 31656, 39165, 48359}}, {4, {31125, 59092, 87525, 108199, 167203}}, {16, {104625, 221082, 322511, 433208, 530202}}}, 0.2},
    // docs/results/2026-12-06-epyc-mtp-exact-fixed-lengths-step-costs.json
    // (the same host, quiet, after patches/0009): at four sequences
    // drafting is break-even (3 tokens each 1.05x plain decoding, 4 tokens
    // 0.88x), so a policy that drafts on too little evidence loses there; a
    // pass 0.23-0.26 of a plain step.
    {"2026-12-06 EPYC, quiet", {{1, {15747, 23409, 30769, 39194, 45274}}, {4, {26738, 54336, 80122, 99363, 142762}}, {16, {85278, 196540, 312031, 404955, 481542}}}, 0.24},
};

struct replayed_costs {
    std::map<int32_t, std::vector<double>> step;
    const double pass_share; // of a plain step of as many sequences as the pass has rows
    // Verification of r rows at the sizes the runs measured: every step
    // less its passes (at the measured share), averaged where two sequence
    // counts verify the same rows, never falling.
    std::vector<std::pair<double, double>> verified;

    replayed_costs(const measured_steps & m, double share) : step(m.step), pass_share(share) {
        std::map<double, std::pair<double, int>> at;
        for (const auto & [n, costs] : step) {
            for (size_t k = 0; k < costs.size(); ++k) {
                auto & [sum, count] = at[n * (static_cast<double>(k) + 1.0)];
                sum += costs[k] - static_cast<double>(k) * m.pass_share * plain(n);
                count++;
            }
        }
        for (const auto & [r, sum_count] : at) {
            const double mean = sum_count.first / sum_count.second;
            verified.emplace_back(r, verified.empty() ? mean : std::max(mean, verified.back().second));
        }
    }
    // Piecewise linear through (x[i], y[i]), constant outside.
    static double through(const std::vector<std::pair<double, double>> & xy, double x) {
        if (x <= xy.front().first) {
            return xy.front().second;
        }
        for (size_t i = 1; i < xy.size(); ++i) {
            if (x <= xy[i].first) {
                const auto [x0, y0] = xy[i - 1];
                const auto [x1, y1] = xy[i];
                return y0 + (y1 - y0) * (x - x0) / (x1 - x0);
            }
        }
        return xy.back().second;
    }
    // A plain step of `rows` sequences.
    double plain(double rows) const { return through({{1, step.at(1)[0]}, {4, step.at(4)[0]}, {16, step.at(16)[0]}}, rows); }
    double pass(double rows) const {
        return pass_share * plain(rows);
    }
    double verify(double rows) const { return through(verified, rows); }
};

// Tokens/s of the bench's best policy in hindsight on this text
// (bench-oracle.h), every sequence drafting l at a step of n sequences.
double replayed_oracle(int32_t n, int32_t n_max, const std::vector<int32_t> & agreement, const replayed_costs & c) {
    std::vector<double> step_cost;
    for (int32_t l = 0; l <= n_max; ++l) {
        step_cost.push_back(c.verify(n * (l + 1.0)) + l * c.pass(n));
    }
    return n * static_cast<double>(agreement.size()) / cli::oracle_plan(agreement, step_cost).cost;
}

// Tokens/s of the controller on the same text and costs, driven as the
// engine drives it: caps from each sequence's budget, one batch a step,
// shadows drafted and judged, every step's passes and verification timed
// with a log-normal noise (sigma 0.1) and one step in twenty 40% slower.
double replayed_adaptive(int32_t n, int32_t n_max, const std::vector<int32_t> & agreement, const replayed_costs & c,
                         uint32_t seed) {
    std::mt19937 rng(seed);
    std::lognormal_distribution<double> noise(0.0, 0.1);
    std::bernoulli_distribution slow(0.05);
    const auto timed = [&](double us) { return us * noise(rng) * (slow(rng) ? 1.4 : 1.0); };
    const auto n_predict = static_cast<int32_t>(agreement.size());
    adaptive_draft_length ctl(static_cast<size_t>(n), n_max);
    std::vector<int32_t> produced(static_cast<size_t>(n), 0);
    double tokens = 0;
    double time = 0;
    for (;;) {
        std::vector<int32_t> caps(static_cast<size_t>(n), -1);
        std::vector<int64_t> left(static_cast<size_t>(n), 0);
        int32_t n_active = 0;
        for (size_t s = 0; s < caps.size(); ++s) {
            if (produced[s] < n_predict) {
                left[s] = n_predict - produced[s] - 1;
                caps[s] = static_cast<int32_t>(std::min<int64_t>(left[s], n_max));
                n_active++;
            }
        }
        if (n_active == 0) {
            break;
        }
        const std::vector<int32_t> lengths = ctl.choose(caps, left);
        std::vector<int32_t> asked(caps.size(), 0);
        std::vector<bool> shadow(caps.size(), false);
        int32_t passes = 0;
        int32_t drafted = 0;
        int32_t verified = 0;
        for (size_t s = 0; s < caps.size(); ++s) {
            if (caps[s] >= 0) {
                shadow[s] = caps[s] > 0 && lengths[s] == 0 && ctl.shadow_due(s);
                asked[s] = shadow[s] ? 1 : lengths[s];
                passes = std::max(passes, asked[s]);
                drafted += asked[s];
                verified += 1 + (shadow[s] ? 0 : asked[s]);
            }
        }
        double draft_us = 0;
        for (int32_t j = 0; j < passes; ++j) {
            draft_us += c.pass(static_cast<double>(std::count_if(asked.begin(), asked.end(), [j](int32_t a) { return a > j; })));
        }
        draft_us = timed(draft_us);
        if (passes > 0) {
            ctl.observe_draft(passes, drafted, draft_us);
        }
        const double verify_us = timed(c.verify(verified));
        ctl.observe_verify(n_active, verified, verify_us);
        time += draft_us + verify_us;
        for (size_t s = 0; s < caps.size(); ++s) {
            if (caps[s] < 0) {
                continue;
            }
            const int32_t agree = agreement[static_cast<size_t>(produced[s])];
            if (shadow[s]) {
                ctl.observe(s, 1, agree >= 1 ? 1 : 0);
            } else if (asked[s] > 0) {
                ctl.observe(s, asked[s], std::min(agree, asked[s]));
            }
            const int32_t step_tokens = std::min(1 + (shadow[s] ? 0 : std::min(agree, asked[s])), n_predict - produced[s]);
            produced[s] += step_tokens;
            tokens += step_tokens;
        }
    }
    return tokens / time;
}

// auto ÷ oracle on one fixture's text at these costs, the controller's
// rate averaged over 20 seeds of the timing noise.
double replayed_share(int32_t n, int32_t n_max, const std::vector<int32_t> & agreement, const replayed_costs & c) {
    const int seeds = 20;
    double rate = 0;
    for (int seed = 0; seed < seeds; ++seed) {
        rate += replayed_adaptive(n, n_max, agreement, c, static_cast<uint32_t>(seed)) / seeds;
    }
    return rate / replayed_oracle(n, n_max, agreement, c);
}

TEST(DraftLength, ReplayedBenchFixturesReachTheirShareOfTheOracle) {
    const int32_t n_max = 4; // the bench's auto(4) and oracle
    // The mixed head's text as the bench measured it: right on alternate
    // stretches of 16 tokens, the first whole one from token 18.
    const auto mixed = [](int32_t n) {
        std::vector<int32_t> agreement;
        for (int32_t i = 0; i < n; ++i) {
            const int32_t in = (i + 14) % 32; // tokens into the current stretch of 32
            agreement.push_back(in < 16 ? std::min(4, 16 - in) : 0);
        }
        return agreement;
    };
    struct fixture {
        const char *         name;
        std::vector<int32_t> agreement;
        double               floor[3][2][3]; // auto ÷ oracle at 1, 4 and 16 sequences, mean over the seeds; [host][whole, restricted]
    };
    // The floors: what the controller in use reaches, less about 0.03 (each
    // cell's value is recorded as a test property: --gtest_output=json).
    // The 192-token texts show what a policy does once settled, not only as
    // it starts: the mixed head's stretches come and go six times. On the
    // first host at 16 sequences with cheap passes (exact, restricted),
    // drafting gains 1.2x and the controller never finds it within 48
    // tokens: with only the plain step measured, the prior's shape through it
    // prices 80 rows 25% over what they cost.
    const std::vector<fixture> fixtures = {
        {"exact", std::vector<int32_t>(48, 4), {{{0.92, 0.91, 0.94}, {0.91, 0.92, 0.82}}, {{0.91, 0.88, 0.94}, {0.91, 0.81, 0.92}}, {{0.92, 0.85, 0.94}, {0.91, 0.82, 0.94}}}},
        {"mixed", mixed(48), {{{0.79, 0.82, 0.94}, {0.83, 0.81, 0.90}}, {{0.82, 0.91, 0.94}, {0.82, 0.88, 0.94}}, {{0.78, 0.90, 0.94}, {0.83, 0.86, 0.94}}}},
        {"random", std::vector<int32_t>(48, 0), {{{0.92, 0.93, 0.94}, {0.93, 0.94, 0.94}}, {{0.92, 0.93, 0.94}, {0.93, 0.94, 0.94}}, {{0.92, 0.93, 0.94}, {0.93, 0.94, 0.94}}}},
        {"exact, 192 tokens", std::vector<int32_t>(192, 4), {{{0.94, 0.93, 0.94}, {0.94, 0.93, 0.82}}, {{0.93, 0.90, 0.94}, {0.93, 0.81, 0.92}}, {{0.93, 0.86, 0.94}, {0.93, 0.82, 0.94}}}},
        {"mixed, 192 tokens", mixed(192), {{{0.79, 0.79, 0.94}, {0.85, 0.82, 0.88}}, {{0.82, 0.92, 0.94}, {0.84, 0.87, 0.93}}, {{0.80, 0.90, 0.94}, {0.84, 0.84, 0.94}}}},
        {"random, 192 tokens", std::vector<int32_t>(192, 0), {{{0.93, 0.94, 0.94}, {0.93, 0.94, 0.94}}, {{0.93, 0.94, 0.94}, {0.93, 0.94, 0.94}}, {{0.93, 0.94, 0.94}, {0.93, 0.94, 0.94}}}},
    };
    const int32_t counts[3] = {1, 4, 16};
    for (size_t h = 0; h < std::size(measured_hosts); ++h) {
        const measured_steps & m = measured_hosts[h];
        const double shares[2] = {m.pass_share, m.pass_share / 3.0};
        for (size_t v = 0; v < 2; ++v) {
            const replayed_costs costs(m, shares[v]);
            for (const fixture & f : fixtures) {
                for (size_t i = 0; i < 3; ++i) {
                    const double share = replayed_share(counts[i], n_max, f.agreement, costs);
                    const std::string cell = std::string(m.host) + " " + f.name + " x" + std::to_string(counts[i]) +
                                             (v == 0 ? "" : " restricted");
                    RecordProperty(cell + " auto/oracle", std::to_string(share));
                    EXPECT_GE(share, f.floor[h][v][i]) << cell;
                }
            }
        }
    }
}

} // namespace
} // namespace specdec::test
