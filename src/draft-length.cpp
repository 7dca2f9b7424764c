#include "draft-length.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace specdec::detail {

adaptive_draft_length::adaptive_draft_length(size_t n_seq, int32_t n_max) : n_max_(std::max(n_max, 1)), acceptance_(n_seq) {
    for (size_t s = 0; s < n_seq; ++s) {
        reset(s);
    }
}

void adaptive_draft_length::reset(size_t seq) {
    sequence_evidence & e = acceptance_[seq];
    e = sequence_evidence{};
    for (auto & table : e.after) {
        table.resize(static_cast<size_t>(n_max_));
    }
}

double adaptive_draft_length::cost_cell::lowest() const {
    return *std::min_element(samples, samples + std::min(n, window));
}

std::vector<double> adaptive_draft_length::cumulative(size_t seq) const {
    const sequence_evidence & e = acceptance_[seq];
    const std::vector<position_counts> & table = e.after[e.last_kept];
    std::vector<double> out(static_cast<size_t>(n_max_));
    double prior = e.last_kept ? prior_acceptance : prior_acceptance_after_miss;
    double through = 1.0;
    for (size_t i = 0; i < out.size(); ++i) {
        const position_counts & c = table[i];
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
    std::vector<std::pair<double, double>> seen; // (m, measured cost), ascending m
    if (static_cast<size_t>(n_active) < cost_.size()) {
        const auto & cells = cost_[static_cast<size_t>(n_active)];
        for (size_t m = 0; m < cells.size(); ++m) {
            // One measurement may be a hiccup of the machine: a size counts
            // once it has been measured twice (the curve's optimism sends the
            // loop back to it). Steps that draft nothing count at once: a
            // hiccup there only makes drafting look better, so the loop
            // drafts and measures, while guessing their cost from the prior
            // below a large measured size can make plain decoding look
            // several times dearer than it is.
            if (cells[m].n >= (m == 0 ? 1u : 2u)) {
                seen.emplace_back(static_cast<double>(m), cells[m].lowest());
            }
        }
    }
    // The prior's shape through a measured point (x0, c0).
    // (The prior's slope is per drafted token of one sequence's share.)
    const double slope = prior_cost_slope / n_active;
    auto prior_through = [slope](double x0, double c0, double x) { return c0 * (1.0 + slope * x) / (1.0 + slope * x0); };
    std::vector<double> curve(n);
    for (size_t m = 0; m < n; ++m) {
        const double x = static_cast<double>(m);
        if (seen.empty()) {
            curve[m] = prior_through(0.0, 1.0, x);
        } else if (x <= seen.front().first) {
            // Below every measurement: the prior's shape, which never makes a
            // shorter draft look dearer than it may be.
            curve[m] = prior_through(seen.front().first, seen.front().second, x);
        } else if (x >= seen.back().first) {
            // Above: the last measured segment extended (never downhill) or
            // the prior's shape, whichever is cheaper: verification costs
            // less per token in larger batches, and an optimistic guess
            // sends the loop to measure the size.
            const auto & [x1, c1] = seen.back();
            curve[m] = prior_through(x1, c1, x);
            if (seen.size() >= 2) {
                const auto & [x0, c0] = seen[seen.size() - 2];
                curve[m] = std::min(curve[m], c1 + std::max(0.0, (c1 - c0) / (x1 - x0)) * (x - x1));
            }
        } else {
            const auto hi = std::lower_bound(seen.begin(), seen.end(), x, [](const auto & p, double v) { return p.first < v; });
            const auto lo = hi - 1;
            curve[m] = lo->second + (hi->second - lo->second) * (x - lo->first) / (hi->first - lo->first);
        }
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
        if (caps[s] <= 0 || acceptance_[s].fresh) {
            continue; // a fresh sequence probes first (shadow_due)
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
    std::vector<double> rate(slots.size() + 1);
    double expected = n_active; // every active sequence gets the target's own token
    size_t best_m = 0;
    for (size_t m = 0; m <= slots.size(); ++m) {
        expected += m > 0 ? std::get<0>(slots[m - 1]) : 0.0;
        rate[m] = expected / cost[m];
        best_m = rate[m] > rate[best_m] ? m : best_m;
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
    if (proposed <= 0) {
        return;
    }
    sequence_evidence & e = acceptance_[seq];
    auto & table = e.after[e.last_kept];
    for (position_counts & c : table) {
        c.reached *= decay;
        c.kept *= decay;
    }
    // Position i was decided only when every token before it was kept.
    for (int32_t i = 0; i < std::min(proposed, n_max_) && i <= kept; ++i) {
        table[static_cast<size_t>(i)].reached += 1.0;
        table[static_cast<size_t>(i)].kept += i < kept ? 1.0 : 0.0;
    }
    hits_ += kept > 0 ? 1 : 0;
    misses_ += kept > 0 ? 0 : 1;
    // The last token decided: the first rejected one, or the last drafted.
    e.last_kept = kept >= std::min(proposed, n_max_) ? 1 : 0;
    e.misses = kept > 0 ? 0 : e.misses + 1;
    e.idle = 0;
    e.fresh = false;
}

int adaptive_draft_length::shadow_wait(int misses, int32_t n_active) const {
    int cap = 7;
    const double plain = shadow_cost_.n > 0 && n_active > 0 && static_cast<size_t>(n_active) < cost_.size() &&
                                 !cost_[static_cast<size_t>(n_active)].empty() && cost_[static_cast<size_t>(n_active)][0].n > 0
                             ? cost_[static_cast<size_t>(n_active)][0].lowest()
                             : 0.0;
    if (plain > 0.0) {
        // n_active sequences each shadowing every (wait + 1) steps cost
        // n_active * shadow / (wait + 1) of a step that costs `plain`.
        const double steps = n_active * shadow_cost_.lowest() / (shadow_budget * plain);
        cap = static_cast<int>(std::clamp(std::ceil(steps) - 1.0, 7.0, static_cast<double>(max_shadow_wait)));
    }
    if (hits_ > 0) {
        return (1 << std::min(std::max(misses - 1, 0), 3)) - 1; // 0, 1, 3, 7
    }
    // Never right: the misses of the other sequences are evidence too (per
    // active sequence, so that sequences starting together each wait as one
    // sequence would, and a new one joining a never-right drafter waits long).
    const uint64_t all = misses_ / static_cast<uint64_t>(std::max(n_active, 1));
    const uint64_t n = std::max<uint64_t>({static_cast<uint64_t>(std::max(misses, 0)), all, 1}) - 1;
    return std::min((1 << std::min<uint64_t>(2 * n, 6)) - 1, cap); // 0, 3, 15, 63
}

bool adaptive_draft_length::shadow_due(size_t seq, int32_t n_active) {
    sequence_evidence & e = acceptance_[seq];
    if (e.fresh || e.idle >= shadow_wait(e.misses, n_active)) {
        return true;
    }
    e.idle++;
    return false;
}

void adaptive_draft_length::observe_shadow_cost(int32_t n_shadows, double microseconds) {
    if (n_shadows <= 0) {
        return;
    }
    shadow_cost_.samples[shadow_cost_.n % cost_cell::window] = std::max(microseconds / n_shadows, 1.0);
    shadow_cost_.n++;
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
    c.samples[c.n % cost_cell::window] = std::max(microseconds, 1.0); // a clock that read 0 must not make a step free
    c.n++;
}

} // namespace specdec::detail
