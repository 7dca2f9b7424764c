#include "draft-length.h"

#include <algorithm>
#include <tuple>

namespace specdec::detail {

adaptive_draft_length::adaptive_draft_length(size_t n_seq, int32_t n_max)
    : n_max_(std::max(n_max, 1)), acceptance_(n_seq, std::vector<position_counts>(static_cast<size_t>(std::max(n_max, 1)))) {}

std::vector<double> adaptive_draft_length::cumulative(size_t seq) const {
    std::vector<double> out(static_cast<size_t>(n_max_));
    double prior = prior_acceptance;
    double through = 1.0;
    for (size_t i = 0; i < out.size(); ++i) {
        const position_counts & c = acceptance_[seq][i];
        const double p = (c.kept + prior_weight * prior) / (c.reached + prior_weight);
        through *= p;
        out[i] = through;
        prior = p;
    }
    return out;
}

double adaptive_draft_length::p_keep_through(size_t seq, int32_t i) const {
    return cumulative(seq)[static_cast<size_t>(i)];
}

std::vector<double> adaptive_draft_length::cost_curve(int32_t n_active) const {
    const size_t n = static_cast<size_t>(n_active) * static_cast<size_t>(n_max_) + 1;
    std::vector<std::pair<double, double>> seen; // (m, mean cost), ascending m
    if (static_cast<size_t>(n_active) < cost_.size()) {
        const auto & cells = cost_[static_cast<size_t>(n_active)];
        for (size_t m = 0; m < cells.size(); ++m) {
            if (cells[m].n > 0) {
                seen.emplace_back(static_cast<double>(m), cells[m].mean);
            }
        }
    }
    std::vector<double> curve(n);
    for (size_t m = 0; m < n; ++m) {
        const double x = static_cast<double>(m);
        if (seen.size() < 2) {
            // The prior's shape, scaled to the one measurement if there is one.
            const double scale = seen.empty() ? 1.0 : seen[0].second / (1.0 + prior_cost_slope * seen[0].first);
            curve[m] = scale * (1.0 + prior_cost_slope * x);
            continue;
        }
        // Interpolate between the measured sizes around m; outside them,
        // extend the nearest segment (never downhill).
        auto hi = std::lower_bound(seen.begin(), seen.end(), x, [](const auto & p, double v) { return p.first < v; });
        if (hi != seen.end() && hi->first == x) {
            curve[m] = hi->second;
            continue;
        }
        if (hi == seen.begin()) {
            hi = seen.begin() + 1;
        } else if (hi == seen.end()) {
            hi = seen.end() - 1;
        }
        const auto lo = hi - 1;
        const double slope = std::max(0.0, (hi->second - lo->second) / (hi->first - lo->first));
        const bool inside = x > lo->first && x < hi->first;
        const double value = inside ? lo->second + (hi->second - lo->second) * (x - lo->first) / (hi->first - lo->first)
                           : x < lo->first ? lo->second - slope * (lo->first - x)
                                           : hi->second + slope * (x - hi->first);
        curve[m] = std::max(value, 0.1 * seen.front().second);
    }
    // A step never gets cheaper by drafting more.
    for (size_t m = 1; m < n; ++m) {
        curve[m] = std::max(curve[m], curve[m - 1]);
    }
    return curve;
}

double adaptive_draft_length::step_cost(int32_t n_active, int32_t m) const {
    return cost_curve(n_active)[static_cast<size_t>(m)];
}

std::vector<int32_t> adaptive_draft_length::choose(std::span<const int32_t> caps, int32_t n_min) {
    std::vector<int32_t> lengths(caps.size(), 0);
    const auto n_active = static_cast<int32_t>(std::count_if(caps.begin(), caps.end(), [](int32_t c) { return c >= 0; }));
    if (n_active == 0) {
        return lengths;
    }
    // Every (probability, position, sequence) slot that may be drafted.
    std::vector<std::tuple<double, int32_t, size_t>> slots;
    for (size_t s = 0; s < caps.size(); ++s) {
        if (caps[s] <= 0) {
            continue;
        }
        const std::vector<double> through = cumulative(s);
        for (int32_t i = 0; i < std::min(caps[s], n_max_); ++i) {
            slots.emplace_back(through[static_cast<size_t>(i)], i, s);
        }
    }
    // Highest probability first; on ties the earlier position, so that every
    // prefix of `slots` is a prefix of each sequence's positions.
    std::sort(slots.begin(), slots.end(), [](const auto & a, const auto & b) {
        return std::get<0>(a) != std::get<0>(b) ? std::get<0>(a) > std::get<0>(b) : std::get<1>(a) < std::get<1>(b);
    });
    const std::vector<double> cost = cost_curve(n_active);
    double expected = n_active; // every active sequence gets the target's own token
    double best_rate = expected / cost[0];
    size_t best_m = 0;
    for (size_t m = 1; m <= slots.size(); ++m) {
        expected += std::get<0>(slots[m - 1]);
        const double rate = expected / cost[m];
        if (rate > best_rate) {
            best_rate = rate;
            best_m = m;
        }
    }
    for (size_t j = 0; j < best_m; ++j) {
        lengths[std::get<2>(slots[j])]++;
    }
    for (size_t s = 0; s < caps.size(); ++s) {
        if (lengths[s] > 0 && lengths[s] < n_min) {
            lengths[s] = caps[s] >= n_min ? n_min : 0;
        }
    }
    return lengths;
}

void adaptive_draft_length::observe(size_t seq, int32_t proposed, int32_t kept) {
    auto & counts = acceptance_[seq];
    for (position_counts & c : counts) {
        c.reached *= decay;
        c.kept *= decay;
    }
    // Position i was decided only when every token before it was kept.
    for (int32_t i = 0; i < std::min(proposed, n_max_) && i <= kept; ++i) {
        counts[static_cast<size_t>(i)].reached += 1.0;
        counts[static_cast<size_t>(i)].kept += i < kept ? 1.0 : 0.0;
    }
}

void adaptive_draft_length::observe_cost(int32_t n_active, int32_t m, double microseconds) {
    if (n_active <= 0 || m < 0 || m > n_active * n_max_) {
        return;
    }
    if (cost_.size() <= static_cast<size_t>(n_active)) {
        cost_.resize(static_cast<size_t>(n_active) + 1);
    }
    auto & cells = cost_[static_cast<size_t>(n_active)];
    if (cells.size() <= static_cast<size_t>(m)) {
        cells.resize(static_cast<size_t>(m) + 1);
    }
    cost_cell & c = cells[static_cast<size_t>(m)];
    constexpr double max_weight = 8; // older measurements fade once there are this many
    c.n = std::min(c.n + 1.0, max_weight);
    c.mean += (std::max(microseconds, 1.0) - c.mean) / c.n; // a clock that read 0 must not make a step free
}

} // namespace specdec::detail
