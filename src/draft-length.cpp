#include "draft-length.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace specdec::detail {

adaptive_draft_length::adaptive_draft_length(size_t n_seq, int32_t n_max) : n_max_(std::max(n_max, 1)), acceptance_(n_seq) {
    for (auto & table : pooled_) {
        table.resize(static_cast<size_t>(n_max_));
    }
    for (size_t s = 0; s < n_seq; ++s) {
        reset(s);
    }
}

void adaptive_draft_length::reset(size_t seq) {
    sequence_evidence & e = acceptance_[seq];
    e = sequence_evidence{};
    for (int k = 0; k < 2; ++k) {
        e.after[k] = pooled_[k];
    }
    e.fresh = pooled_[0][0].reached + pooled_[1][0].reached == 0.0;
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

std::vector<double> adaptive_draft_length::curve(const std::vector<cost_cell> & cells, size_t n,
                                                 const std::vector<double> * fallback) {
    std::vector<std::pair<double, double>> seen; // (size, measured cost), ascending size
    for (size_t x = 1; x < cells.size(); ++x) {
        if (cells[x].counts()) {
            seen.emplace_back(static_cast<double>(x), cells[x].lowest());
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
            // Above: the prior's shape through a single measurement; through
            // several, the average slope between the smallest and the largest
            // (never downhill), which one noisy neighbour cannot tilt.
            const auto & [x0, c0] = seen.front();
            const auto & [x1, c1] = seen.back();
            out[i] = seen.size() == 1 ? prior_through(x1, c1, x) : c1 + std::max(0.0, (c1 - c0) / (x1 - x0)) * (x - x1);
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

std::vector<double> adaptive_draft_length::verify_curve(size_t n) const {
    return curve(verify_, n, nullptr);
}

std::vector<double> adaptive_draft_length::pass_curve(size_t n) const {
    std::vector<double> fallback = verify_curve(n);
    for (double & c : fallback) {
        c *= prior_pass_share;
    }
    return curve(pass_, n, &fallback);
}

double adaptive_draft_length::verify_cost(int32_t rows) const {
    return verify_curve(static_cast<size_t>(std::max(rows, 1)) + 1).back();
}

double adaptive_draft_length::pass_cost(int32_t rows) const {
    return pass_curve(static_cast<size_t>(std::max(rows, 1)) + 1).back();
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
    // Growing steps: at most max_growth times the most rows measured yet.
    size_t largest = static_cast<size_t>(n_active);
    for (size_t x = 1; x < verify_.size(); ++x) {
        largest = verify_[x].n > 0 ? std::max(largest, x) : largest;
    }
    const size_t n_rows = static_cast<size_t>(max_growth) * largest;
    const std::vector<double> verify = verify_curve(static_cast<size_t>(n_active) * static_cast<size_t>(n_max_ + 1) + 1);
    const std::vector<double> pass = pass_curve(static_cast<size_t>(n_active) + 1);
    // Expected tokens per cost of the first m slots of `order` for every m
    // the growth limit allows, p(slot) being each slot's probability.
    const auto rates = [&](const auto & order, auto p) {
        std::vector<double> rate(1, n_active / verify[static_cast<size_t>(n_active)]);
        std::vector<int32_t> rows_at(static_cast<size_t>(n_max_), 0); // rows of each drafting pass
        double expected = n_active; // every active sequence gets the target's own token
        double drafting = 0;
        for (size_t m = 1; m <= order.size() && static_cast<size_t>(n_active) + m <= n_rows; ++m) {
            const auto & slot = order[m - 1];
            int32_t & r = rows_at[static_cast<size_t>(std::get<1>(slot))];
            drafting += pass[static_cast<size_t>(r + 1)] - pass[static_cast<size_t>(r)];
            ++r;
            expected += p(slot);
            rate.push_back(expected / (verify[static_cast<size_t>(n_active) + m] + drafting));
        }
        return rate;
    };
    const std::vector<double> rate = rates(slots, [](const auto & slot) { return std::get<0>(slot); });
    size_t best_m = static_cast<size_t>(std::max_element(rate.begin(), rate.end()) - rate.begin());
    best_m = rate[best_m] > (1.0 + min_gain) * rate[0] ? best_m : 0;
    for (size_t j = 0; j < best_m; ++j) {
        lengths[std::get<2>(slots[j])]++;
    }
    // Could a drafter that is always right beat plain decoding here (every
    // sequence's slots, position by position)? If not, no shadow can change
    // a choice (shadow_due).
    std::vector<std::tuple<double, int32_t, size_t>> perfect;
    for (int32_t i = 0; i < n_max_; ++i) {
        for (size_t s = 0; s < caps.size(); ++s) {
            if (i < caps[s]) {
                perfect.emplace_back(1.0, i, s);
            }
        }
    }
    // A shadow step costs a drafting pass over the batch on top of a plain
    // step: shadows are worth it only where drafting may gain more than that.
    const std::vector<double> best_case = rates(perfect, [](const auto &) { return 1.0; });
    const double shadow_share = pass[static_cast<size_t>(n_active)] / verify[static_cast<size_t>(n_active)];
    drafting_may_pay_ = std::any_of(best_case.begin() + 1, best_case.end(),
                                    [&](double r) { return r > (1.0 + min_gain + shadow_share) * best_case[0]; });
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
    for (auto * table : {&e.after[e.last_kept], &pooled_[e.last_kept]}) {
        for (position_counts & c : *table) {
            c.reached *= decay;
            c.kept *= decay;
        }
        // Position i was decided only when every token before it was kept.
        for (int32_t i = 0; i < std::min(proposed, n_max_) && i <= kept; ++i) {
            (*table)[static_cast<size_t>(i)].reached += 1.0;
            (*table)[static_cast<size_t>(i)].kept += i < kept ? 1.0 : 0.0;
        }
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
    const auto n_seq = static_cast<size_t>(std::max(n_active, 1));
    const bool measured = n_seq < verify_.size() && verify_[n_seq].n > 0 &&
                          std::any_of(pass_.begin(), pass_.end(), [](const cost_cell & c) { return c.n > 0; });
    if (measured) {
        // n_active sequences missing together shadow together: one pass over
        // n_active rows every (wait + 1) steps, against a plain step's cost.
        const double steps = pass_cost(n_active) / (shadow_budget * verify_[n_seq].lowest());
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
    if (e.fresh || (drafting_may_pay_ && e.idle >= shadow_wait(e.misses, n_active))) {
        return true;
    }
    e.idle++;
    return false;
}

void adaptive_draft_length::record(std::vector<cost_cell> & cells, size_t size, double microseconds, bool sure) {
    if (cells.size() <= size) {
        cells.resize(size + 1);
    }
    cost_cell & c = cells[size];
    c.samples[c.n % cost_cell::window] = std::max(microseconds, 1.0); // a clock that read 0 must not make a step free
    c.n++;
    c.sure = c.sure || sure;
}

void adaptive_draft_length::observe_verify(int32_t n_active, int32_t rows, double microseconds) {
    if (n_active <= 0 || rows < n_active || rows > n_active * (n_max_ + 1)) {
        return;
    }
    record(verify_, static_cast<size_t>(rows), microseconds, rows == n_active);
}

void adaptive_draft_length::observe_draft(int32_t passes, int32_t rows, double microseconds) {
    if (passes <= 0 || rows < passes) {
        return;
    }
    // The passes' average size stands for each of them.
    const auto size = static_cast<size_t>(std::lround(static_cast<double>(rows) / passes));
    record(pass_, size, microseconds / passes, false);
}

} // namespace specdec::detail
