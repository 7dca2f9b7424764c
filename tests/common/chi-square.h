// Pearson's chi-square goodness-of-fit test for the sampling tests: observed
// counts against an expected distribution, at the 1% level.
//
// Power: moving a probability of 0.02 from one token to another (each of
// probability p_a, p_b with p_a + p_b <= 1) gives a noncentrality of
// n * 0.02^2 * (1/p_a + 1/p_b) >= n * 0.0016. With n = 20,000 samples that
// is >= 32, which the test at the 1% level detects with probability above
// 0.95 for up to 10 degrees of freedom (min_samples_for_2pct_shift).
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace specdec::test {

inline constexpr int min_samples_for_2pct_shift = 20000;

// The chi-square quantile at 0.99 for `df` degrees of freedom (Wilson and
// Hilferty's approximation: within 1% of the exact value from df = 1 up).
inline double chi_square_99(int df) {
    const double z = 2.3263478740408408; // standard normal quantile at 0.99
    const double k = df;
    const double c = 1.0 - 2.0 / (9.0 * k) + z * std::sqrt(2.0 / (9.0 * k));
    return k * c * c * c;
}

struct chi_square_result {
    double      statistic = 0;
    int         df = 0;
    double      critical = 0;
    bool        pass = true;
    std::string detail; // per bin: token, observed, expected
};

// `observed` counts per token (n in all) against `expected` probabilities
// per token (summing to 1). Tokens expected fewer than 5 times are pooled
// into one bin (with any observed token not expected at all), and that bin,
// when still below 5, into the rarest other bin; a token observed that has
// no probability at all fails the test.
template <typename Token>
chi_square_result chi_square(const std::map<Token, long> & observed, const std::map<Token, double> & expected, long n) {
    struct bin {
        double o = 0, e = 0;
        std::string name;
    };
    std::vector<bin> bins;
    bin pooled{0, 0, "other"};
    for (const auto & [t, p] : expected) {
        const auto it = observed.find(t);
        const bin b{it == observed.end() ? 0.0 : static_cast<double>(it->second), p * static_cast<double>(n), std::to_string(t)};
        if (b.e < 5.0) {
            pooled.o += b.o;
            pooled.e += b.e;
        } else {
            bins.push_back(b);
        }
    }
    for (const auto & [t, o] : observed) {
        if (!expected.count(t)) {
            pooled.o += static_cast<double>(o);
        }
    }
    chi_square_result r;
    if (pooled.e == 0.0 && pooled.o > 0.0) {
        r.pass = false; // a token seen that can never be
        r.detail = " [" + std::to_string(pooled.o) + " tokens of probability 0]";
        return r;
    }
    if (pooled.e > 0.0) {
        // Rare tokens together; below 5 expected, merged into the rarest bin.
        auto rarest = std::min_element(bins.begin(), bins.end(), [](const bin & a, const bin & b) { return a.e < b.e; });
        if (pooled.e >= 5.0 || rarest == bins.end()) {
            bins.push_back(pooled);
        } else {
            rarest->o += pooled.o;
            rarest->e += pooled.e;
            rarest->name += "+other";
        }
    }
    std::ostringstream d;
    for (const bin & b : bins) {
        r.statistic += (b.o - b.e) * (b.o - b.e) / b.e;
        d << " [" << b.name << ": " << b.o << " vs " << b.e << "]";
    }
    r.df = std::max(static_cast<int>(bins.size()) - 1, 1);
    r.critical = chi_square_99(r.df);
    r.pass = r.statistic <= r.critical;
    r.detail = d.str();
    return r;
}

} // namespace specdec::test
