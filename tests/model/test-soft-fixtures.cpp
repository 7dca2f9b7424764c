// Soft controlled fixtures (fixtures.h, soft_mix): after token t the
// target's next token is successor^k(t) with the chosen probabilities, the
// MTP head's (soft drafter) with its own, and both depend on t alone.
#include "harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace specdec::test {
namespace {

using fixtures::drafter_kind;
using fixtures::soft_mix;

constexpr uint32_t n_vocab = 128;
const soft_mix target_mix{{0.5f, 0.25f, 0.25f}};
const soft_mix drafter_mix{{0.7f, 0.05f, 0.25f}};

// Tolerances: on each of the mixture's tokens, and on the rest together.
constexpr double mix_tolerance  = 0.01;
constexpr double rest_tolerance = 1e-3;

// The tokens every check reads the distribution after: control tokens, the
// cycle's first and last, and tokens in between (all active at n_vocab 128).
const std::vector<llama_token> probe_tokens = {0, 1, 2, 3, 4, 20, 57, 64, 100, 125, 126, 127};

fixtures::fixture_options soft_options(drafter_kind drafter) {
    fixtures::fixture_options opt;
    opt.n_vocab = n_vocab;
    opt.n_embd = 256;
    opt.soft_target = target_mix;
    opt.drafter = drafter;
    if (drafter == drafter_kind::soft) {
        opt.soft_drafter = drafter_mix;
    }
    return opt;
}

std::string mix_tag(const soft_mix & m) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g-%g-%g", static_cast<double>(m.p[0]), static_cast<double>(m.p[1]),
                  static_cast<double>(m.p[2]));
    return buf;
}

// `arch`: glm4moe, qwen35 (MTP targets), llama, or llama-draft (the
// classic draft for the llama target).
std::string soft_fixture(const std::string & arch, const fixtures::fixture_options & opt) {
    std::string name = arch + "-soft-t" + mix_tag(opt.soft_target);
    name += opt.drafter == drafter_kind::soft ? "-d" + mix_tag(opt.soft_drafter) : "-exact";
    return fixture(name, [&](const std::string & path) {
        if (arch == "qwen35") {
            fixtures::write_qwen35_mtp(path, opt);
        } else if (arch == "glm4moe") {
            fixtures::write_glm4moe_mtp(path, opt);
        } else if (arch == "llama-draft") {
            fixtures::write_llama_draft(path, opt);
        } else {
            fixtures::write_llama_target(path, opt);
        }
    });
}

std::vector<double> softmax(const float * logits, int32_t n) {
    const double top = *std::max_element(logits, logits + n);
    std::vector<double> p(static_cast<size_t>(n));
    double sum = 0.0;
    for (int32_t i = 0; i < n; ++i) {
        p[static_cast<size_t>(i)] = std::exp(static_cast<double>(logits[i]) - top);
        sum += p[static_cast<size_t>(i)];
    }
    for (double & v : p) {
        v /= sum;
    }
    return p;
}

// Largest deviation seen over a set of rows, for the report.
struct deviation {
    double mix  = 0.0; // |measured - nominal| on a mixture token
    double rest = 0.0; // mass outside the mixture
};

// Checks that `probs`, the distribution after token t, is `mix` over
// soft_next(t) and (nearly) nothing else.
void expect_mixture(const std::vector<double> & probs, llama_token t, const soft_mix & mix, deviation & dev,
                    const std::string & where) {
    double rest = 1.0;
    for (const auto & [token, nominal] : fixtures::soft_next(t, mix, n_vocab)) {
        const double got = probs.at(static_cast<size_t>(token));
        EXPECT_NEAR(got, nominal, mix_tolerance) << where << ": after " << t << ", token " << token;
        dev.mix = std::max(dev.mix, std::fabs(got - nominal));
        rest -= got;
    }
    EXPECT_LT(rest, rest_tolerance) << where << ": after " << t << ", outside the mixture";
    dev.rest = std::max(dev.rest, rest);
}

// Decodes `tokens` as one sequence from position 0 with logits for every
// row and returns each row's distribution.
std::vector<std::vector<double>> target_rows(llama_context * ctx, const std::vector<llama_token> & tokens) {
    llama_memory_clear(llama_get_memory(ctx), true);
    test_batch batch(static_cast<int32_t>(tokens.size()));
    for (size_t i = 0; i < tokens.size(); ++i) {
        batch.add(tokens[i], static_cast<llama_pos>(i), 0, true);
    }
    if (llama_decode(ctx, batch.b) != 0) {
        throw std::runtime_error("target decode failed");
    }
    std::vector<std::vector<double>> rows;
    for (size_t i = 0; i < tokens.size(); ++i) {
        rows.push_back(softmax(llama_get_logits_ith(ctx, static_cast<int32_t>(i)), static_cast<int32_t>(n_vocab)));
    }
    return rows;
}

void report(const char * what, const std::string & arch, const deviation & dev) {
    std::printf("[ measured ] %s %s: max |p - nominal| %.5f on the mixture, max mass outside it %.2e\n", arch.c_str(), what,
                dev.mix, dev.rest);
}

// One row for the report: measured (nominal) probability of each mixture token after t.
void report_row(const std::string & arch, const std::vector<double> & probs, llama_token t, const soft_mix & mix) {
    std::printf("[ measured ] %s after %d:", arch.c_str(), t);
    for (const auto & [token, nominal] : fixtures::soft_next(t, mix, n_vocab)) {
        std::printf(" %d %.4f (%g)", token, probs.at(static_cast<size_t>(token)), static_cast<double>(nominal));
    }
    std::printf("\n");
}

// The model of `arch` in the soft fixtures these tests write: the MTP
// targets with the soft drafter, the llama target (it has no MTP head), and
// the llama draft with the soft drafter.
llama_model_ptr load_soft(const std::string & arch) {
    return load_model(soft_fixture(arch, soft_options(arch == "llama" ? drafter_kind::exact : drafter_kind::soft)));
}

// The mixture a model of `arch` follows: the llama draft's is the drafter's.
const soft_mix & mix_of(const std::string & arch) {
    return arch == "llama-draft" ? drafter_mix : target_mix;
}

class SoftTarget : public ::testing::TestWithParam<std::string> {};

TEST_P(SoftTarget, NextTokenFollowsTheMixture) {
    const std::string & arch = GetParam();
    const llama_model_ptr model = load_soft(arch);
    const llama_context_ptr ctx = make_context(model.get(), context_options{});
    ASSERT_EQ(llama_vocab_n_tokens(llama_model_get_vocab(model.get())), static_cast<int32_t>(n_vocab));

    const std::vector<std::vector<double>> rows = target_rows(ctx.get(), probe_tokens);
    deviation dev;
    for (size_t i = 0; i < probe_tokens.size(); ++i) {
        expect_mixture(rows[i], probe_tokens[i], mix_of(arch), dev, arch + " row " + std::to_string(i));
    }
    report_row(arch, rows[5], probe_tokens[5], mix_of(arch));
    report(arch == "llama-draft" ? "draft model" : "target", arch, dev);
}

// The same last token gives the same distribution whatever came before it
// and at whatever position (the residual stream carries the token alone).
TEST_P(SoftTarget, NextTokenDependsOnTheLastTokenOnly) {
    const std::string & arch = GetParam();
    const llama_model_ptr model = load_soft(arch);
    const llama_context_ptr ctx = make_context(model.get(), context_options{});

    const std::vector<std::vector<llama_token>> prompts = {
        {30},
        {5, 9, 30},
        {100, 7, 8, 12, 60, 1, 2, 30},
        {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30},
    };
    const std::vector<double> first = target_rows(ctx.get(), prompts[0]).back();
    double worst = 0.0;
    for (size_t i = 1; i < prompts.size(); ++i) {
        const std::vector<double> last = target_rows(ctx.get(), prompts[i]).back();
        for (size_t v = 0; v < first.size(); ++v) {
            worst = std::max(worst, std::fabs(last[v] - first[v]));
        }
    }
    EXPECT_LT(worst, 1e-4);
    std::printf("[ measured ] %s: max difference of the distributions after token 30 over prompts of 1 to 28 tokens %.2e\n",
                arch.c_str(), worst);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SoftTarget, ::testing::Values("glm4moe", "qwen35", "llama", "llama-draft"),
                         [](const auto & tc) {
                             std::string name = tc.param;
                             std::replace(name.begin(), name.end(), '-', '_');
                             return name;
                         });

// The MTP head, decoded on its own: input row i is drafted token x_i with a
// zero hidden row (the soft and exact drafters read the token half only),
// so the row's distribution is the drafter's after x_i.
class SoftHead : public ::testing::TestWithParam<std::tuple<std::string, drafter_kind>> {};

TEST_P(SoftHead, DraftFollowsTheDrafterMixture) {
    const auto & [arch, kind] = GetParam();
    const llama_model_ptr model = load_model(soft_fixture(arch, soft_options(kind)));
    const llama_context_ptr target = make_context(model.get(), context_options{});
    context_options d;
    d.type = LLAMA_CONTEXT_TYPE_MTP;
    d.other = target.get();
    const llama_context_ptr head = make_context(model.get(), d);

    const auto n = static_cast<int32_t>(probe_tokens.size());
    const int32_t n_embd = llama_model_n_embd(model.get());
    std::vector<llama_token> tokens = probe_tokens;
    std::vector<float> embd(static_cast<size_t>(n) * static_cast<size_t>(n_embd), 0.0f);
    std::vector<llama_pos> pos(static_cast<size_t>(n));
    std::vector<int32_t> n_seq_id(static_cast<size_t>(n), 1);
    llama_seq_id seq0 = 0;
    std::vector<llama_seq_id *> seq_id(static_cast<size_t>(n), &seq0);
    std::vector<int8_t> logits(static_cast<size_t>(n), 1);
    for (int32_t i = 0; i < n; ++i) {
        pos[static_cast<size_t>(i)] = i;
    }
    const llama_batch batch{n, tokens.data(), embd.data(), pos.data(), n_seq_id.data(), seq_id.data(), logits.data()};
    ASSERT_EQ(llama_decode(head.get(), batch), 0);

    const soft_mix & mix = kind == drafter_kind::soft ? drafter_mix : target_mix; // exact: the target's head
    deviation dev;
    for (int32_t i = 0; i < n; ++i) {
        const std::vector<double> probs = softmax(llama_get_logits_ith(head.get(), i), static_cast<int32_t>(n_vocab));
        expect_mixture(probs, tokens[static_cast<size_t>(i)], mix, dev, arch + " head row " + std::to_string(i));
        if (i == 5) {
            report_row(arch + " head", probs, tokens[static_cast<size_t>(i)], mix);
        }
    }
    report(kind == drafter_kind::soft ? "soft head" : "exact head (the target's)", arch, dev);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SoftHead,
                         ::testing::Combine(::testing::Values("glm4moe", "qwen35"),
                                            ::testing::Values(drafter_kind::soft, drafter_kind::exact)),
                         [](const auto & tc) {
                             return std::get<0>(tc.param) + (std::get<1>(tc.param) == drafter_kind::soft ? "_soft" : "_exact");
                         });

// Q4_K_M writes and loads with soft options, and keeps the mixture's tokens
// on top (its quantized head is too coarse for the F16 tolerances).
TEST(SoftFixtures, QuantizedWritesAndKeepsTheMixtureTokens) {
    const fixtures::fixture_options opt = soft_options(drafter_kind::soft);
    const std::string path = fixture("glm4moe-soft-q4_k_m-t" + mix_tag(opt.soft_target) + "-d" + mix_tag(opt.soft_drafter),
                                     [&](const std::string & out) {
                                         fixtures::write_with_type([&](const std::string & p) { fixtures::write_glm4moe_mtp(p, opt); },
                                                                   out, fixtures::weight_type::q4_k_m);
                                     });
    const llama_model_ptr model = load_model(path);
    const llama_context_ptr ctx = make_context(model.get(), context_options{});
    const std::vector<std::vector<double>> rows = target_rows(ctx.get(), probe_tokens);
    deviation dev;
    for (size_t i = 0; i < probe_tokens.size(); ++i) {
        double on_mix = 0.0;
        for (const auto & [token, nominal] : fixtures::soft_next(probe_tokens[i], target_mix, n_vocab)) {
            on_mix += rows[i][static_cast<size_t>(token)];
            dev.mix = std::max(dev.mix, std::fabs(rows[i][static_cast<size_t>(token)] - nominal));
        }
        EXPECT_GT(on_mix, 0.99) << "after " << probe_tokens[i];
        dev.rest = std::max(dev.rest, 1.0 - on_mix);
    }
    report("Q4_K_M target", "glm4moe", dev);
}

TEST(SoftFixtures, BadMixturesAreRefused) {
    const auto refused = [](const std::function<void(fixtures::fixture_options &)> & edit) {
        fixtures::fixture_options opt = soft_options(drafter_kind::soft);
        edit(opt);
        try {
            fixtures::check_drafter_options(opt);
        } catch (const std::runtime_error &) {
            return true;
        }
        return false;
    };
    EXPECT_FALSE(refused([](fixtures::fixture_options &) {}));
    EXPECT_TRUE(refused([](fixtures::fixture_options & o) { o.soft_target.p[2] = 0.2f; }));        // sums to 0.95
    EXPECT_TRUE(refused([](fixtures::fixture_options & o) { o.soft_target = soft_mix{{1.0f, 0.0f, 0.0f}}; })); // not in (0, 1)
    EXPECT_TRUE(refused([](fixtures::fixture_options & o) { o.soft_drafter = soft_mix{{0.5f, 0.6f, -0.1f}}; }));
    EXPECT_TRUE(refused([](fixtures::fixture_options & o) { o.soft_drafter = soft_mix{}; }));       // soft kind without one
    EXPECT_TRUE(refused([](fixtures::fixture_options & o) { o.drafter = drafter_kind::exact; }));   // a mixture nothing reads
    EXPECT_TRUE(refused([](fixtures::fixture_options & o) { o.controlled = false; }));
    EXPECT_FALSE(refused([](fixtures::fixture_options & o) {
        o.soft_target.p[0] = 0.50005f; // within 1e-4 of 1
    }));
}

TEST(SoftFixtures, SoftNextListsTheNextThreeCycleTokens) {
    const auto next = fixtures::soft_next(126, target_mix, n_vocab);
    EXPECT_EQ(next[0], std::make_pair(int32_t{127}, 0.5f));
    EXPECT_EQ(next[1], std::make_pair(int32_t{3}, 0.25f));
    EXPECT_EQ(next[2], std::make_pair(int32_t{4}, 0.25f));
    const auto after_bos = fixtures::soft_next(1, target_mix, n_vocab);
    EXPECT_EQ(after_bos[0].first, 3);
    EXPECT_EQ(after_bos[2].first, 5);
}

} // namespace
} // namespace specdec::test
