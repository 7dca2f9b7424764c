// The adaptive draft-length controller against simulated drafters and cost
// curves: its estimates, its choices against the computed optimum, and its
// throughput against every fixed length.
#include "draft-length.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

namespace specdec::test {
namespace {

using detail::adaptive_draft_length;

// A linear step cost in microseconds: `base` plus `per_token` per drafted token.
struct linear_cost {
    double base;
    double per_token;
    double operator()(int32_t m) const { return base + per_token * m; }
};

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

// Runs `steps` single-sequence steps; length(step) picks each step's draft
// length, and observe(k, kept) reports it and returns what else the step
// cost (a shadow's drafting pass).
throughput simulate(int steps, const std::function<double(int)> & acceptance, const linear_cost & cost,
                    const std::function<int32_t(int)> & length, const std::function<double(int32_t, int32_t)> & observe,
                    uint32_t seed) {
    std::mt19937 rng(seed);
    throughput t;
    for (int step = 0; step < steps; ++step) {
        const int32_t k = length(step);
        const int32_t kept = simulate_kept(k, acceptance(step), rng);
        t.tokens += 1 + kept;
        t.cost += cost(k) + observe(k, kept);
    }
    return t;
}

// The controller as the generator drives it: a step that verifies no draft
// reports a one-token shadow draft when one is asked for, right with the
// drafter's probability at that step. A drafting pass costs `pass` (part of
// cost(k) for a draft of k; on top of a plain step for a shadow).
throughput simulate_adaptive(int steps, const std::function<double(int)> & acceptance, const linear_cost & cost,
                             int32_t n_max, uint32_t seed, double pass = 0.0) {
    adaptive_draft_length c(1, n_max);
    const std::vector<int32_t> caps = {n_max};
    std::mt19937 shadow_rng(seed + 1);
    int step = 0;
    return simulate(
        steps, acceptance, cost, [&](int s) { return step = s, c.choose(caps)[0]; },
        [&](int32_t k, int32_t kept) {
            double extra = 0.0;
            if (k > 0) {
                c.observe(0, k, kept);
                c.observe_draft(k, k, pass * k);
            } else if (c.shadow(0)) {
                c.observe(0, 1, simulate_kept(1, acceptance(step), shadow_rng));
                c.observe_draft(1, 1, pass);
                extra = pass;
            }
            c.observe_verify(1, 1 + k, cost(k) - pass * k);
            return extra;
        },
        seed);
}

throughput simulate_fixed(int steps, const std::function<double(int)> & acceptance, const linear_cost & cost, int32_t k,
                          uint32_t seed) {
    return simulate(steps, acceptance, cost, [k](int) { return k; }, [](int32_t, int32_t) { return 0.0; }, seed);
}

TEST(DraftLength, PriorsBeforeAnyEvidence) {
    adaptive_draft_length c(1, 4);
    EXPECT_DOUBLE_EQ(c.p_keep_through(0, 0), adaptive_draft_length::prior_acceptance);
    // Each position's prior is the estimate of the one before it.
    EXPECT_NEAR(c.p_keep_through(0, 2), std::pow(adaptive_draft_length::prior_acceptance, 3), 1e-12);
    // Costs in prior units: a one-row verification is 1.
    for (int32_t rows : {1, 2, 9}) {
        const double verify = 1.0 + adaptive_draft_length::prior_row_cost * (rows - 1);
        EXPECT_NEAR(c.verify_cost(rows), verify, 1e-12) << rows;
        EXPECT_NEAR(c.draft_cost(3, rows), 3 * adaptive_draft_length::prior_pass_share * verify, 1e-12) << rows;
    }
    EXPECT_EQ(c.draft_cost(0, 4), 0.0);
}

TEST(DraftLength, CostsAreMeasuredMeansThatFadeBackToThePrior) {
    adaptive_draft_length c(1, 8);
    const double shape3 = 1.0 + 2 * adaptive_draft_length::prior_row_cost;
    const double shape5 = 1.0 + 4 * adaptive_draft_length::prior_row_cost;
    // One measured size: sizes below and above it take the prior's shape through it.
    c.observe_verify(1, 3, 300.0);
    EXPECT_NEAR(c.verify_cost(3), 300.0, 1e-9);
    EXPECT_NEAR(c.verify_cost(1), 300.0 / shape3, 1e-9);
    EXPECT_NEAR(c.verify_cost(5), 300.0 * shape5 / shape3, 1e-9);
    // Measurements average; more rows never cost less.
    c.observe_verify(1, 3, 500.0);
    EXPECT_NEAR(c.verify_cost(3), 400.0, 1.0);
    c.observe_verify(1, 4, 100.0);
    EXPECT_GE(c.verify_cost(4), c.verify_cost(3));
    // A plain step measured at every step stays; a size not measured for
    // 230 steps has faded to a tenth of its weight, near the prior's.
    c.observe_verify(1, 1, 100.0);
    for (int step = 0; step < 230; ++step) {
        c.choose(std::vector<int32_t>{0});
        c.observe_verify(1, 1, 100.0);
    }
    EXPECT_NEAR(c.verify_cost(1), 100.0, 1.0);
    const double prior3 = 100.0 * shape3;
    const double w = 2 * std::pow(adaptive_draft_length::cost_memory, 230);
    const double cw = adaptive_draft_length::cost_prior_weight;
    EXPECT_NEAR(c.verify_cost(3), (w * 400.0 + cw * prior3) / (w + cw), 1.0);
    EXPECT_LT(c.verify_cost(3), 350.0);
    // Drafting: a step's first pass, then each later pass.
    c.observe_draft(1, 1, 50.0);
    c.observe_draft(4, 4, 50.0 + 3 * 10.0);
    EXPECT_NEAR(c.draft_cost(1, 1), 50.0, 1e-9);
    EXPECT_NEAR(c.draft_cost(4, 1), 80.0, 1e-9);
}

TEST(DraftLength, TheSameEvidenceGivesTheSameChoices) {
    // The draws come from a seeded generator: a run repeats exactly.
    const auto run = [](uint64_t seed) {
        adaptive_draft_length c(2, 8, seed);
        std::vector<int32_t> out;
        for (int step = 0; step < 200; ++step) {
            const std::vector<int32_t> l = c.choose(std::vector<int32_t>{8, 8});
            out.push_back(c.shadow(0) ? -1 : l[0]);
            c.observe(0, l[0] > 0 ? l[0] : c.shadow(0) ? 1 : 0, step % 3 == 0 ? 0 : std::max(l[0], 1));
            c.observe(1, l[1], 0);
            c.observe_verify(2, 2 * (1 + l[0]), 100.0 + 30.0 * l[0]);
            c.observe_draft(std::max(l[0], 1), 2 * std::max(l[0], 1), 20.0 * std::max(l[0], 1));
        }
        return out;
    };
    EXPECT_EQ(run(1), run(1));
    EXPECT_NE(run(1), run(2));
}

TEST(DraftLength, AcceptanceEstimatesFollowTheEvidence) {
    adaptive_draft_length c(2, 4);
    for (int i = 0; i < 30; ++i) {
        c.observe(0, 4, 4); // every draft kept
        c.observe(1, 4, 0); // every draft rejected at position 0
    }
    EXPECT_GT(c.p_keep_through(0, 3), 0.9);
    EXPECT_LT(c.p_keep_through(1, 0), 0.2);
    // Position 1 of sequence 1 was never decided; it leans on position 0.
    EXPECT_LE(c.p_keep_through(1, 1), c.p_keep_through(1, 0));
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
        for (int i = 0; i < 3; ++i) {
            c.observe(s, 8, 8);
        }
    }
    EXPECT_GT(c.p_keep_through(0, 0), 0.75);
    c.observe(0, 8, 5);
    c.observe(1, 8, 0);
    EXPECT_LT(c.p_keep_through(0, 0), 0.5);
    EXPECT_DOUBLE_EQ(c.p_keep_through(0, 0), c.p_keep_through(1, 0));
    c.observe(0, 1, 1); // a probe that was right
    EXPECT_GT(c.p_keep_through(0, 0), 0.75);
}

TEST(DraftLength, AMovedRequestKeepsItsEvidence) {
    // Sequence 2 has seen hits at positions 0-1 and misses at 2; sequence 0
    // only misses. After the engine moves 2's request into sequence 1, 1
    // holds 2's estimates and 2 starts as a new request would.
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
    EXPECT_GT(before[1], 0.8);
    EXPECT_LT(before[2], 0.2);
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

    // Sequences whose drafter is poor: their best length is 1. The minimum
    // narrows the choice to plain decoding or at least the minimum: here
    // three tokens kept half the time lose to plain decoding.
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
    EXPECT_EQ(poor.choose(std::vector<int32_t>{8, 8}, 3), (std::vector<int32_t>{0, 0}));
    // A good drafter at the minimum: at least the minimum when every cap
    // allows it, else nothing.
    EXPECT_EQ(c.choose(std::vector<int32_t>{8, -1, 3}, 3), (std::vector<int32_t>{3, 0, 3}));
    EXPECT_EQ(c.choose(std::vector<int32_t>{8, -1, 2}, 3), (std::vector<int32_t>{0, 0, 0}));
}

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

TEST(DraftLength, ANeverRightDrafterCostsLittle) {
    // Plain decoding against a drafter that is never right: what its probes
    // cost, where verifying a row costs a plain step and a pass 40% of one
    // (a CPU with a large vocabulary), and where both are cheap (a GPU).
    const auto never = [](int) { return 0.0; };
    for (const auto & [cost, pass] : {std::pair{linear_cost{100, 100}, 40.0}, std::pair{linear_cost{100, 10}, 5.0}}) {
        const double plain = simulate_fixed(2000, never, cost, 0, 3).rate();
        const double adaptive = simulate_adaptive(2000, never, cost, 8, 3, pass).rate();
        RecordProperty("adaptive_over_plain_" + std::to_string(cost.per_token), std::to_string(adaptive / plain));
        EXPECT_GT(adaptive, 0.98 * plain) << cost.per_token;
    }
}

TEST(DraftLength, ADrafterThatTurnsRightIsFound) {
    // Never right for 1,000 steps, then right 95% of the time: the probes
    // that go on at the drafter's remaining uncertainty find the turn, and
    // the second half runs near the best fixed length for it.
    const linear_cost cost{100, 15};
    const auto turning = [](int step) { return step < 1000 ? 0.0 : 0.95; };
    const auto good = [](int) { return 0.95; };
    double best_good = 0;
    for (int32_t k = 0; k <= 8; ++k) {
        best_good = std::max(best_good, simulate_fixed(1000, good, cost, k, 9).rate());
    }
    const double plain = simulate_fixed(1000, good, cost, 0, 9).rate();
    const throughput whole = simulate_adaptive(2000, turning, cost, 8, 9, 5.0);
    const throughput first = simulate_adaptive(1000, turning, cost, 8, 9, 5.0);
    const double second = (whole.tokens - first.tokens) / (whole.cost - first.cost);
    RecordProperty("second_half_over_best_fixed", std::to_string(second / best_good));
    EXPECT_GT(first.rate(), 0.97 * plain);
    EXPECT_GT(second, 0.8 * best_good); // never finding it: about 0.3
}

} // namespace
} // namespace specdec::test
