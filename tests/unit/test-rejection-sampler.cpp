// Speculative sampling (SPECDEC_ACCEPT_REJECTION) without a model: the
// counter-based draws, the verifier's rule, and the engine on a scripted
// soft target whose drafter samples, against the closed forms: every
// position's marginal distribution (chi-square at the 1% level, with the
// power to see a 2% shift) and the acceptance sum_t min(p, q).
#include "engine.h"
#include "rejection-sampler.h"
#include "sampler.h"

#include "chi-square.h"
#include "fake-backend.h"

#include <gtest/gtest.h>

#include <cmath>

namespace specdec::test {
namespace {

using detail::draw;
using detail::draw_stream;
using detail::uniform_at;
using detail::verify_draft;
using dist_t = std::vector<specdec_token_prob>;

std::map<llama_token, double> as_map(const dist_t & d) {
    std::map<llama_token, double> m;
    for (const auto & e : d) {
        m[e.token] += e.p;
    }
    return m;
}

TEST(RejectionSampler, DrawsAreAFunctionOfSeedPositionAndStream) {
    EXPECT_EQ(uniform_at(7, 3, draw_stream::accept), uniform_at(7, 3, draw_stream::accept));
    EXPECT_NE(uniform_at(7, 3, draw_stream::accept), uniform_at(7, 3, draw_stream::target));
    EXPECT_NE(uniform_at(7, 3, draw_stream::accept), uniform_at(7, 4, draw_stream::accept));
    EXPECT_NE(uniform_at(7, 3, draw_stream::accept), uniform_at(8, 3, draw_stream::accept));
    // Uniform over ten bins, across positions and across seeds.
    std::map<int, long> by_pos, by_seed;
    std::map<int, double> flat;
    const long n = 100000;
    for (long i = 0; i < n; ++i) {
        const double a = uniform_at(42, static_cast<llama_pos>(i), draw_stream::draft);
        const double b = uniform_at(static_cast<uint64_t>(i), 5, draw_stream::target);
        ASSERT_TRUE(a >= 0.0 && a < 1.0 && b >= 0.0 && b < 1.0);
        by_pos[static_cast<int>(a * 10)]++;
        by_seed[static_cast<int>(b * 10)]++;
    }
    for (int k = 0; k < 10; ++k) {
        flat[k] = 0.1;
    }
    const auto r1 = chi_square(by_pos, flat, n);
    const auto r2 = chi_square(by_seed, flat, n);
    EXPECT_TRUE(r1.pass) << r1.statistic << " > " << r1.critical << r1.detail;
    EXPECT_TRUE(r2.pass) << r2.statistic << " > " << r2.critical << r2.detail;
}

TEST(RejectionSampler, DrawFollowsTheDistributionInAnyOrder) {
    const dist_t d = {{4, 0.1f}, {9, 0.6f}, {2, 0.3f}};
    std::map<llama_token, long> seen;
    for (long i = 0; i < min_samples_for_2pct_shift; ++i) {
        seen[draw(d, uniform_at(1, static_cast<llama_pos>(i), draw_stream::target))]++;
    }
    const auto r = chi_square(seen, as_map(d), min_samples_for_2pct_shift);
    EXPECT_TRUE(r.pass) << r.statistic << " > " << r.critical << r.detail;
    EXPECT_EQ(draw(d, 0.0), 4);
    EXPECT_EQ(draw(d, 0.99999), 2);
}

// Drafts x ~ q, verifies against p; returns the emitted tokens' counts and
// how many drafts were kept. Asserts that a kept draft emits x and that a
// rejection never emits a token the residual lacks (p(t) <= q(t)).
struct run_result {
    std::map<llama_token, long> emitted;
    long kept = 0;
};
run_result verify_many(const dist_t & p, const dist_t & q, long n, uint64_t seed) {
    run_result out;
    dist_t scratch;
    const auto pm = as_map(p);
    const auto qm = as_map(q.empty() ? dist_t{{p.front().token, 1.0f}} : q);
    for (long i = 0; i < n; ++i) {
        const auto pos = static_cast<llama_pos>(i);
        const llama_token x = q.empty() ? p.front().token : draw(q, uniform_at(seed, pos, draw_stream::draft));
        const auto v = verify_draft(p, x, q, uniform_at(seed, pos, draw_stream::accept), uniform_at(seed, pos, draw_stream::target), scratch);
        if (v.kept) {
            EXPECT_EQ(v.token, x);
            ++out.kept;
        } else {
            const double pt = pm.count(v.token) ? pm.at(v.token) : 0.0;
            const double qt = qm.count(v.token) ? qm.at(v.token) : 0.0;
            EXPECT_GT(pt, qt) << "a rejection emitted token " << v.token << ", which has no residual mass";
        }
        out.emitted[v.token]++;
    }
    return out;
}

double overlap(const dist_t & p, const dist_t & q) {
    double s = 0;
    const auto qm = as_map(q);
    for (const auto & e : p) {
        s += std::min<double>(e.p, qm.count(e.token) ? qm.at(e.token) : 0.0);
    }
    return s;
}

// Kept within 4.5 binomial standard deviations of `expected`.
void expect_rate(long kept, long n, double expected) {
    const double sd = std::sqrt(expected * (1 - expected) / static_cast<double>(n));
    EXPECT_NEAR(static_cast<double>(kept) / static_cast<double>(n), expected, 4.5 * sd + 1e-9);
}

TEST(RejectionSampler, EmitsTheTargetDistributionAndKeepsTheOverlap) {
    const long n = min_samples_for_2pct_shift;
    struct pair_case {
        dist_t p, q;
    };
    const std::vector<pair_case> cases = {
        {{{3, 0.5f}, {4, 0.25f}, {5, 0.25f}}, {{3, 0.7f}, {4, 0.05f}, {5, 0.25f}}}, // overlap 0.8
        {{{3, 0.5f}, {4, 0.25f}, {5, 0.25f}}, {{3, 0.5f}, {4, 0.25f}, {5, 0.25f}}}, // q = p: always kept
        {{{3, 0.9f}, {6, 0.1f}}, {{6, 0.6f}, {7, 0.4f}}},                         // mostly disjoint
        {{{1, 0.2f}, {2, 0.2f}, {3, 0.2f}, {4, 0.2f}, {5, 0.2f}}, {{1, 1.0f}}},  // a point mass
    };
    for (size_t c = 0; c < cases.size(); ++c) {
        const auto r = verify_many(cases[c].p, cases[c].q, n, 100 + c);
        const auto chi = chi_square(r.emitted, as_map(cases[c].p), n);
        EXPECT_TRUE(chi.pass) << "case " << c << ": " << chi.statistic << " > " << chi.critical << chi.detail;
        expect_rate(r.kept, n, overlap(cases[c].p, cases[c].q));
    }
    // No distribution (a drafter without one): a point mass, kept with p(x).
    const dist_t p = {{3, 0.35f}, {4, 0.65f}};
    const auto r = verify_many(p, {}, n, 7);
    expect_rate(r.kept, n, 0.35);
    const auto chi = chi_square(r.emitted, as_map(p), n);
    EXPECT_TRUE(chi.pass) << chi.statistic << " > " << chi.critical << chi.detail;
}

// The residual's draw is read after a rejection and never after an
// acceptance: a kept draft's verdict is the same whatever that draw, and
// after a rejection the draw decides among the residual's tokens.
TEST(RejectionSampler, TheResidualDrawDecidesOnlyAfterARejection) {
    dist_t scratch;
    const dist_t p = {{3, 0.5f}, {4, 0.25f}, {5, 0.25f}};
    const dist_t q = {{3, 0.7f}, {4, 0.05f}, {5, 0.25f}}; // residual: token 4 alone (0.2)
    int kept = 0, rejected = 0;
    for (int i = 0; i < 2000; ++i) {
        const double u = uniform_at(5, i, draw_stream::accept);
        const auto lo = verify_draft(p, 3, q, u, 0.0, scratch);
        const auto hi = verify_draft(p, 3, q, u, 0.999999, scratch);
        EXPECT_EQ(lo.kept, hi.kept);
        if (lo.kept) {
            ++kept;
            EXPECT_EQ(lo.token, 3);
            EXPECT_EQ(hi.token, 3);
        } else {
            ++rejected;
            EXPECT_EQ(lo.token, 4); // max(0, p - q) is all on token 4
            EXPECT_EQ(hi.token, 4);
        }
    }
    EXPECT_GT(kept, 0);
    EXPECT_GT(rejected, 0);
    // A residual of two tokens: the draw picks either end of it.
    const dist_t q2 = {{3, 1.0f}};
    EXPECT_EQ(verify_draft(p, 3, q2, 0.99, 0.0, scratch).token, 4);
    EXPECT_EQ(verify_draft(p, 3, q2, 0.99, 0.999, scratch).token, 5);
}

TEST(RejectionSampler, ADraftTheTargetRulesOutIsNeverKept) {
    dist_t scratch;
    const dist_t p = {{3, 0.6f}, {4, 0.4f}};
    const dist_t q = {{5, 0.9f}, {3, 0.1f}};
    for (int i = 0; i < 1000; ++i) {
        const auto v = verify_draft(p, 5, q, uniform_at(1, i, draw_stream::accept), uniform_at(1, i, draw_stream::target), scratch);
        EXPECT_FALSE(v.kept);
        EXPECT_NE(v.token, 5);
    }
}

// --- the engine on a scripted soft target ------------------------------------

// After token t the target's distribution is `pmix` over t + 1, t + 2 and
// t + 3 (mod 15, so never the EOG id; logit -30 elsewhere), and the
// drafter's is `qmix` over the same tokens.
std::array<llama_token, 3> chain3(llama_token t) {
    return {(t + 1) % 15, (t + 2) % 15, (t + 3) % 15};
}

struct soft_setup {
    std::array<float, 3> pmix, qmix;

    // The exact mode's drafter drafts greedily: the most likely of q.
    static std::vector<llama_token> greedy(llama_token t, int32_t cap) {
        std::vector<llama_token> out;
        for (int32_t i = 0; i < cap; ++i) {
            t = chain3(t)[0];
            out.push_back(t);
        }
        return out;
    }

    void install(fake_backend & fb) const {
        fb.logits_for = [this](llama_token t, float * out) {
            std::fill(out, out + V, -30.0f);
            const auto n = chain3(t);
            for (int k = 0; k < 3; ++k) {
                out[n[k]] = std::log(pmix[k]);
            }
        };
        fb.q_after = [this](llama_token t) {
            const auto n = chain3(t);
            dist_t q;
            for (int k = 0; k < 3; ++k) {
                q.push_back({n[k], qmix[k]});
            }
            return q;
        };
    }
};

struct sampled {
    std::vector<std::map<llama_token, long>> at; // per output position
    std::vector<uint64_t> proposed_at, kept_at;   // per draft position, given the ones before it were kept
};

// n sequences of n_predict tokens from `prompt`, `group` at a time (seed = i).
sampled sample_engine(const soft_setup & soft, const request_params & p, long n, int32_t n_predict, int32_t n_draft,
                      uint32_t group = 32) {
    sampled out;
    out.at.resize(static_cast<size_t>(n_predict));
    out.proposed_at.assign(static_cast<size_t>(n_draft), 0);
    out.kept_at.assign(static_cast<size_t>(n_draft), 0);
    for (long first = 0; first < n; first += group) {
        fake_backend fb(n_draft, [](llama_seq_id, llama_token t, int32_t cap) { return soft_setup::greedy(t, cap); }, group,
                        4096, 512);
        soft.install(fb);
        std::vector<std::vector<llama_token>> prompts(group, std::vector<llama_token>{1, 2});
        request_params q = p;
        q.n_predict = n_predict;
        q.n_draft = n_draft;
        q.seed = static_cast<uint32_t>(first);
        const auto res = detail::run_generation(fb, prompts, q, {});
        for (const auto & s : res.sequences) {
            EXPECT_EQ(s.tokens.size(), static_cast<size_t>(n_predict));
            for (size_t k = 0; k < s.tokens.size(); ++k) {
                out.at[k][s.tokens[k]]++;
            }
        }
        // Per draft position k: the steps that verified a token there after
        // keeping the k before it, and those that kept it too.
        for (size_t i = 0; i < fb.accepted_calls.size(); ++i) {
            for (size_t k = 0; k < fb.proposed_calls[i]; ++k) {
                if (fb.accepted_calls[i] >= k) {
                    out.proposed_at[k]++;
                    out.kept_at[k] += fb.accepted_calls[i] > k ? 1 : 0;
                }
            }
        }
    }
    return out;
}

// Every position's exact marginal under plain decoding: the chain of the
// target's transformed distributions (token_sampler::distribution, checked
// against llama.cpp's own draws by the exact mode below) from the prompt's
// last token.
std::vector<std::map<llama_token, double>> marginals(const soft_setup & soft, const request_params & p, int32_t n_predict) {
    fake_backend fb(1, chained_drafter());
    soft.install(fb);
    detail::token_sampler sampler(p, 0, V);
    std::vector<std::map<llama_token, double>> out;
    std::map<llama_token, double> cur = {{2, 1.0}};
    std::vector<float> logits(V);
    dist_t d;
    for (int32_t k = 0; k < n_predict; ++k) {
        std::map<llama_token, double> next;
        for (const auto & [t, w] : cur) {
            fb.logits_for(t, logits.data());
            sampler.distribution(logits.data(), d);
            for (const auto & e : d) {
                next[e.token] += w * e.p;
            }
        }
        out.push_back(next);
        cur = next;
    }
    return out;
}

struct engine_case {
    const char * name;
    float temperature;
    int32_t top_k;
    float top_p;
    float min_p;
};

class EngineSampling : public ::testing::TestWithParam<engine_case> {};

TEST_P(EngineSampling, EveryPositionHasTheTargetsMarginalInBothModes) {
    const soft_setup soft{{0.5f, 0.25f, 0.25f}, {0.7f, 0.05f, 0.25f}};
    const engine_case c = GetParam();
    request_params p = specdec_generate_default_params();
    p.temperature = c.temperature;
    p.top_k = c.top_k;
    p.top_p = c.top_p;
    p.min_p = c.min_p;
    const int32_t n_predict = 6;
    const auto expected = marginals(soft, p, n_predict);
    for (const specdec_accept_mode mode : {SPECDEC_ACCEPT_EXACT, SPECDEC_ACCEPT_REJECTION}) {
        p.accept = mode;
        const auto got = sample_engine(soft, p, min_samples_for_2pct_shift, n_predict, 3);
        for (int32_t k = 0; k < n_predict; ++k) {
            const auto r = chi_square(got.at[static_cast<size_t>(k)], expected[static_cast<size_t>(k)], min_samples_for_2pct_shift);
            EXPECT_TRUE(r.pass) << c.name << (mode == SPECDEC_ACCEPT_EXACT ? " exact" : " rejection") << ", position " << k
                                << ": " << r.statistic << " > " << r.critical << r.detail;
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Transforms, EngineSampling,
                         ::testing::Values(engine_case{"T1", 1.0f, 0, 1.0f, 0.0f}, engine_case{"T0.6", 0.6f, 0, 1.0f, 0.0f},
                                           engine_case{"T1.5_topk2", 1.5f, 2, 1.0f, 0.0f},
                                           engine_case{"T1_topp0.7", 1.0f, 0, 0.7f, 0.0f},
                                           engine_case{"T0.8_minp0.55", 0.8f, 0, 1.0f, 0.55f}),
                         [](const ::testing::TestParamInfo<engine_case> & param_info) {
                             std::string s = param_info.param.name;
                             std::replace(s.begin(), s.end(), '.', '_');
                             return s;
                         });

// One sequence at a time (the batch of one a plain client decodes): the
// same marginals.
TEST(EngineSampling, OneSequenceAtATimeHasTheTargetsMarginals) {
    const soft_setup soft{{0.5f, 0.25f, 0.25f}, {0.7f, 0.05f, 0.25f}};
    request_params p = specdec_generate_default_params();
    p.temperature = 1.0f;
    const int32_t n_predict = 5;
    const auto expected = marginals(soft, p, n_predict);
    for (const specdec_accept_mode mode : {SPECDEC_ACCEPT_EXACT, SPECDEC_ACCEPT_REJECTION}) {
        p.accept = mode;
        const auto got = sample_engine(soft, p, min_samples_for_2pct_shift, n_predict, 3, 1);
        for (int32_t k = 0; k < n_predict; ++k) {
            const auto r = chi_square(got.at[static_cast<size_t>(k)], expected[static_cast<size_t>(k)], min_samples_for_2pct_shift);
            EXPECT_TRUE(r.pass) << (mode == SPECDEC_ACCEPT_EXACT ? "exact" : "rejection") << ", position " << k << ": "
                                << r.statistic << " > " << r.critical << r.detail;
        }
    }
}

// Acceptance against the closed forms: at every draft position, given the
// ones before it were kept, sum_t min(p, q) = 0.8 in rejection mode and
// p(argmax q) = 0.5 in exact mode (the drafter then drafts greedily).
TEST(EngineSampling, AcceptanceMatchesTheClosedForm) {
    const soft_setup soft{{0.5f, 0.25f, 0.25f}, {0.7f, 0.05f, 0.25f}};
    request_params p = specdec_generate_default_params();
    p.temperature = 1.0f;
    const long n = 4000;
    for (const auto & [mode, rate] : {std::pair{SPECDEC_ACCEPT_REJECTION, 0.8}, std::pair{SPECDEC_ACCEPT_EXACT, 0.5}}) {
        p.accept = mode;
        const auto got = sample_engine(soft, p, n, 13, 4);
        for (size_t k = 0; k < got.kept_at.size(); ++k) {
            const uint64_t given = got.proposed_at[k];
            const double r = static_cast<double>(got.kept_at[k]) / static_cast<double>(given);
            EXPECT_NEAR(r, rate, 0.02) << (mode == SPECDEC_ACCEPT_EXACT ? "exact" : "rejection") << ", draft position " << k << " ("
                                       << got.kept_at[k] << " of " << given << ")";
        }
    }
}

} // namespace
} // namespace specdec::test

namespace specdec::test {
namespace {

// Without drafts (no drafter, or n_draft 0) there is nothing to verify:
// either mode draws what plain decoding draws, seed for seed.
TEST(EngineSampling, WithoutDraftsBothModesArePlainDecoding) {
    const soft_setup soft{{0.5f, 0.25f, 0.25f}, {0.7f, 0.05f, 0.25f}};
    request_params p = specdec_generate_default_params();
    p.temperature = 1.0f;
    p.n_predict = 32;
    p.seed = 3;
    std::vector<std::vector<llama_token>> got;
    for (const specdec_accept_mode mode : {SPECDEC_ACCEPT_EXACT, SPECDEC_ACCEPT_REJECTION}) {
        for (const int32_t n_draft_max : {0, 4}) {
            fake_backend fb(n_draft_max, chained_drafter(), 1);
            soft.install(fb);
            request_params q = p;
            q.accept = mode;
            q.n_draft = 0;
            got.push_back(detail::run_generation(fb, {{std::vector<llama_token>{1, 2}}}, q, {}).sequences[0].tokens);
            EXPECT_EQ(got.back(), got.front()) << "mode " << mode << ", n_draft_max " << n_draft_max;
        }
    }
    // With drafts, rejection mode draws otherwise (the test could fail).
    fake_backend fb(4, chained_drafter(), 1);
    soft.install(fb);
    p.accept = SPECDEC_ACCEPT_REJECTION;
    p.n_draft = 4;
    EXPECT_NE(detail::run_generation(fb, {{std::vector<llama_token>{1, 2}}}, p, {}).sequences[0].tokens, got.front());
}

} // namespace
} // namespace specdec::test
