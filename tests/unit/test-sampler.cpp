// The greedy choice of token_sampler: the first of the highest logits, as
// a loop that carries the best index from token to token picks it, over the
// inputs that tell the vectorised two-pass version apart from it: every
// length up to a few lane widths (the tail), ties (the first wins, -0 and
// +0 included), infinities, all -inf, a vocabulary's size, and a NaN
// anywhere (an error naming the first NaN's token).
#include "sampler.h"
#include "specdec/specdec.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace specdec::test {
namespace {

llama_token reference(const std::vector<float> & logits) {
    llama_token best = 0;
    for (llama_token t = 0; t < static_cast<llama_token>(logits.size()); ++t) {
        if (logits[static_cast<size_t>(t)] > logits[static_cast<size_t>(best)]) {
            best = t;
        }
    }
    return best;
}

llama_token greedy(const std::vector<float> & logits) {
    detail::token_sampler s(0.0f, 0, 1.0f, 0.0f, 0, static_cast<int32_t>(logits.size()));
    return s.choose(logits.data());
}

constexpr float inf = std::numeric_limits<float>::infinity();

TEST(Sampler, GreedyTakesTheFirstOfTheHighestLogits) {
    std::mt19937 rng(7);
    // Few distinct values, so that the highest is often tied; the lengths
    // cover every tail of the 16 lanes and a real vocabulary.
    const std::vector<float> values = {-inf, -2.5f, -0.0f, 0.0f, 1.0f, 3.0f, inf};
    std::vector<int32_t> lengths;
    for (int32_t n = 1; n <= 70; ++n) {
        lengths.push_back(n);
    }
    lengths.push_back(151936);
    for (int32_t n : lengths) {
        for (int trial = 0; trial < 40; ++trial) {
            std::vector<float> logits(static_cast<size_t>(n));
            // Each trial draws from a prefix of the values (so some trials
            // have no +inf, some only -inf), or from a continuous range.
            const size_t k = 1 + static_cast<size_t>(trial) % values.size();
            for (float & x : logits) {
                x = trial % 8 == 7 ? std::uniform_real_distribution<float>(-20.0f, 20.0f)(rng)
                                   : values[std::uniform_int_distribution<size_t>(0, k - 1)(rng)];
            }
            ASSERT_EQ(greedy(logits), reference(logits)) << "n " << n << ", trial " << trial;
        }
    }
}

TEST(Sampler, GreedyPicksTheHighestAtEveryPosition) {
    for (int32_t n : {1, 15, 16, 17, 33, 151936}) {
        for (int32_t at : {0, n / 2, n - 1}) {
            std::vector<float> logits(static_cast<size_t>(n), -1.0f);
            logits[static_cast<size_t>(at)] = 0.5f;
            EXPECT_EQ(greedy(logits), at) << "n " << n;
        }
    }
    EXPECT_EQ(greedy(std::vector<float>(40, -inf)), 0);
    EXPECT_EQ(greedy({-0.0f, 0.0f}), 0);
    EXPECT_EQ(greedy({0.0f, -0.0f}), 0);
}

TEST(Sampler, AGreedyChoiceOverANanIsANativeFailureNamingItsToken) {
    for (int32_t n : {1, 16, 17, 100}) {
        for (int32_t at : {0, n / 3, n - 1}) {
            std::vector<float> logits(static_cast<size_t>(n), 1.0f);
            logits[static_cast<size_t>(at)] = std::nanf("");
            if (at + 1 < n) {
                logits[static_cast<size_t>(n - 1)] = std::nanf(""); // a later NaN too: the first is named
            }
            try {
                greedy(logits);
                ADD_FAILURE() << "no error for a NaN at " << at << " of " << n;
            } catch (const error & e) {
                EXPECT_EQ(e.code(), SPECDEC_STATUS_NATIVE_FAILURE);
                EXPECT_NE(std::string(e.what()).find("token " + std::to_string(at) + " is NaN"), std::string::npos) << e.what();
            }
        }
    }
}

} // namespace
} // namespace specdec::test
