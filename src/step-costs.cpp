#include "step-costs.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace specdec::detail {

double step_costs::cell::lowest() const {
    return *std::min_element(samples, samples + std::min(n, window));
}

double step_costs::cell::excess() const {
    const size_t m = std::min(n, window);
    if (m < 3) {
        return 0.0;
    }
    const double * end = samples + m;
    const double sum = std::accumulate(samples, end, 0.0) - *std::max_element(samples, end);
    return sum / static_cast<double>(m - 1) - lowest();
}

std::vector<double> step_costs::curve(const std::vector<cell> & cells, size_t n, const std::vector<double> * fallback,
                                      double excess) const {
    std::vector<std::pair<double, double>> seen; // (size, expected cost), ascending size
    for (size_t x = 1; x < cells.size(); ++x) {
        if (cells[x].counts(step_)) {
            seen.emplace_back(static_cast<double>(x), cells[x].lowest() + excess);
        }
    }
    // The prior's shape through a measured point (x0, c0).
    auto prior_through = [](double x0, double c0, double x) {
        return c0 * (1.0 + prior_row_cost * (x - 1.0)) / (1.0 + prior_row_cost * (x0 - 1.0));
    };
    std::vector<double> out(n, 0.0);
    for (size_t i = 1; i < n; ++i) {
        const double x = static_cast<double>(i);
        if (seen.empty()) {
            out[i] = fallback != nullptr ? (*fallback)[i] : prior_through(1.0, 1.0, x);
        } else if (x <= seen.front().first) {
            // Below every measurement: the prior's shape, which never makes a
            // smaller size look dearer than it may be.
            out[i] = prior_through(seen.front().first, seen.front().second, x);
        } else if (x >= seen.back().first) {
            // Above: the prior's shape through the largest measurement, or
            // the average slope between the smallest and the largest
            // (never downhill, and one noisy neighbour cannot tilt it) where
            // that is cheaper.
            const auto & [x0, c0] = seen.front();
            const auto & [x1, c1] = seen.back();
            out[i] = prior_through(x1, c1, x);
            if (seen.size() > 1) {
                out[i] = std::min(out[i], c1 + std::max(0.0, (c1 - c0) / (x1 - x0)) * (x - x1));
            }
        } else {
            const auto hi = std::lower_bound(seen.begin(), seen.end(), x, [](const auto & p, double v) { return p.first < v; });
            const auto lo = hi - 1;
            out[i] = lo->second + (hi->second - lo->second) * (x - lo->first) / (hi->first - lo->first);
        }
    }
    // More rows never cost less.
    for (size_t i = 2; i < n; ++i) {
        out[i] = std::max(out[i], out[i - 1]);
    }
    return out;
}

std::vector<double> step_costs::verify_curve(size_t n) const {
    // What a step pays over its size's lowest: that of the size measured most.
    const auto most = std::max_element(verify_.begin(), verify_.end(), [](const cell & a, const cell & b) { return a.n < b.n; });
    return curve(verify_, n, nullptr, most != verify_.end() ? most->excess() : 0.0);
}

std::vector<double> step_costs::pass_curve(size_t n) const {
    std::vector<double> fallback = verify_curve(n);
    for (double & c : fallback) {
        c *= prior_pass_share;
    }
    return curve(pass_, n, &fallback, 0.0);
}

size_t step_costs::rows_allowed(size_t n_active, size_t whole_draft) const {
    size_t largest = n_active;
    for (size_t x = 1; x < verify_.size(); ++x) {
        largest = verify_[x].n > 0 ? std::max(largest, x) : largest;
    }
    return std::max(max_growth * largest, whole_draft);
}

void step_costs::record(std::vector<cell> & cells, size_t size, double microseconds, bool sure) {
    if (cells.size() <= size) {
        cells.resize(size + 1);
    }
    cell & c = cells[size];
    c.samples[c.n % cell::window] = std::max(microseconds, 1.0); // a clock that read 0 must not make a step free
    c.n++;
    c.sure = c.sure || sure;
    c.newest = step_;
}

void step_costs::observe_verify(int32_t n_active, int32_t rows, int32_t max_rows_per_seq, double microseconds) {
    if (n_active <= 0 || rows < n_active || rows > n_active * max_rows_per_seq) {
        return;
    }
    record(verify_, static_cast<size_t>(rows), microseconds, rows == n_active);
}

void step_costs::observe_draft(int32_t passes, int32_t rows, double microseconds) {
    if (passes <= 0 || rows < passes) {
        return;
    }
    // The passes' average size stands for each of them.
    const auto size = static_cast<size_t>(std::lround(static_cast<double>(rows) / passes));
    record(pass_, size, microseconds / passes, false);
}

} // namespace specdec::detail
