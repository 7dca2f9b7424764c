// Pearson's chi-square goodness-of-fit test for the sampling tests: observed
// counts against an expected distribution, at the 1% level.
//
// Power: moving a probability of 0.02 from one token to another (each of
// probability p_a, p_b with p_a + p_b <= 1) gives a noncentrality of
// n * 0.02^2 * (1/p_a + 1/p_b) >= n * 0.0016. With n = 20,000 samples that
// is >= 32, which the test at the 1% level detects with probability above
// 0.95 for up to 10 degrees of freedom (min_samples_for_2pct_shift).
#pragma once

#include <cmath>
#include <map>
#include <sstream>
#include <string>

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
// into one bin (with any observed token not expected at all).
template <typename Token>
chi_square_result chi_square(const std::map<Token, long> & observed, const std::map<Token, double> & expected, long n) {
    chi_square_result r;
    std::ostringstream d;
    double pooled_e = 0;
    double pooled_o = 0;
    int bins = 0;
    for (const auto & [t, p] : expected) {
        const double e = p * static_cast<double>(n);
        const auto it = observed.find(t);
        const double o = it == observed.end() ? 0.0 : static_cast<double>(it->second);
        if (e < 5.0) {
            pooled_e += e;
            pooled_o += o;
            continue;
        }
        r.statistic += (o - e) * (o - e) / e;
        ++bins;
        d << " [" << t << ": " << o << " vs " << e << "]";
    }
    for (const auto & [t, o] : observed) {
        if (!expected.count(t)) {
            pooled_o += static_cast<double>(o);
        }
    }
    if (pooled_e > 0 || pooled_o > 0) {
        // A token seen that should never be: a certain failure.
        r.statistic += pooled_e > 0 ? (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e : 1e9;
        ++bins;
        d << " [other: " << pooled_o << " vs " << pooled_e << "]";
    }
    r.df = std::max(bins - 1, 1);
    r.critical = chi_square_99(r.df);
    r.pass = r.statistic <= r.critical;
    r.detail = d.str();
    return r;
}

} // namespace specdec::test
