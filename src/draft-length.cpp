#include "draft-length.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>

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
    e.last_kept = pooled_[1][0].reached > 0.0 ? 1 : 0;
}

void adaptive_draft_length::move(size_t from, size_t to) {
    acceptance_[to] = std::move(acceptance_[from]);
    reset(from);
}

double adaptive_draft_length::cost_cell::lowest() const {
    return *std::min_element(samples, samples + std::min(n, window));
}

double adaptive_draft_length::cost_cell::excess() const {
    const size_t m = std::min(n, window);
    if (m < 3) {
        return 0.0;
    }
    const double * end = samples + m;
    const double sum = std::accumulate(samples, end, 0.0) - *std::max_element(samples, end);
    return sum / static_cast<double>(m - 1) - lowest();
}

std::vector<double> adaptive_draft_length::cumulative(size_t seq, int last_kept) const {
    const std::vector<position_counts> & table = acceptance_[seq].after[last_kept];
    std::vector<double> out(static_cast<size_t>(n_max_));
    double prior = last_kept ? prior_acceptance : prior_acceptance_after_miss;
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
    return cumulative(seq, acceptance_[seq].last_kept)[static_cast<size_t>(i)];
}

std::vector<double> adaptive_draft_length::curve(const std::vector<cost_cell> & cells, size_t n,
                                                 const std::vector<double> * fallback, double excess) const {
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
            // that is cheaper (see the header comment).
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

std::vector<double> adaptive_draft_length::verify_curve(size_t n) const {
    // What a step pays over its size's lowest: that of the size measured most.
    const auto most = std::max_element(verify_.begin(), verify_.end(), [](const cost_cell & a, const cost_cell & b) { return a.n < b.n; });
    return curve(verify_, n, nullptr, most != verify_.end() ? most->excess() : 0.0);
}

std::vector<double> adaptive_draft_length::pass_curve(size_t n) const {
    std::vector<double> fallback = verify_curve(n);
    for (double & c : fallback) {
        c *= prior_pass_share;
    }
    return curve(pass_, n, &fallback, 0.0);
}

double adaptive_draft_length::verify_cost(int32_t rows) const {
    return verify_curve(static_cast<size_t>(std::max(rows, 1)) + 1).back();
}

double adaptive_draft_length::pass_cost(int32_t rows) const {
    return pass_curve(static_cast<size_t>(std::max(rows, 1)) + 1).back();
}

std::vector<int32_t> adaptive_draft_length::choose(std::span<const int32_t> caps, int32_t n_min) {
    step_++;
    std::vector<int32_t> lengths(caps.size(), 0);
    const auto n_active = static_cast<int32_t>(std::count_if(caps.begin(), caps.end(), [](int32_t c) { return c >= 0; }));
    if (n_active == 0) {
        return lengths;
    }
    // Growing steps: at most max_growth times the most rows measured yet,
    // or one sequence's whole draft.
    size_t largest = static_cast<size_t>(n_active);
    for (size_t x = 1; x < verify_.size(); ++x) {
        largest = verify_[x].n > 0 ? std::max(largest, x) : largest;
    }
    const auto n = static_cast<size_t>(n_active);
    const size_t all_rows = n * static_cast<size_t>(n_max_ + 1);
    const size_t n_rows = std::max(static_cast<size_t>(max_growth) * largest, static_cast<size_t>(n_max_) + 1);
    const std::vector<double> verify = verify_curve(all_rows + 1);
    const std::vector<double> pass = pass_curve(n + 1);
    // Expected tokens per cost when every active sequence drafts l tokens,
    // for l = 0 (plain decoding) up to l_max and `rows` rows a step:
    // through[k] is active sequence k's p_keep_through. The step verifies
    // n (l + 1) rows in one pass and drafts in l passes over n rows.
    const auto rates = [&](const std::vector<std::vector<double>> & through, int32_t l_max, size_t rows) {
        std::vector<double> rate(1, n_active / verify[n]);
        double expected = n_active; // every active sequence gets the target's own token
        for (int32_t l = 1; l <= l_max && n * static_cast<size_t>(l + 1) <= rows; ++l) {
            for (const std::vector<double> & t : through) {
                expected += t[static_cast<size_t>(l - 1)];
            }
            rate.push_back(expected / (verify[n * static_cast<size_t>(l + 1)] + l * pass[n]));
        }
        return rate;
    };
    // The best length: 0 unless it beats plain decoding by min_gain.
    const auto best_of = [](const std::vector<double> & rate) {
        const auto best = static_cast<int32_t>(std::max_element(rate.begin(), rate.end()) - rate.begin());
        return rate[static_cast<size_t>(best)] > (1.0 + min_gain) * rate[0] ? best : 0;
    };
    std::vector<size_t> active;
    std::vector<std::vector<double>> through;
    int32_t l_max = n_max_;
    int32_t l_cap = n_max_; // the caps alone
    for (size_t s = 0; s < caps.size(); ++s) {
        if (caps[s] < 0) {
            continue;
        }
        active.push_back(s);
        through.push_back(cumulative(s, acceptance_[s].last_kept));
        l_cap = std::min(l_cap, caps[s]);
        // A fresh sequence probes before anything drafts (shadow_due).
        l_max = std::min(l_max, acceptance_[s].fresh ? 0 : caps[s]);
    }
    int32_t length = best_of(rates(through, l_max, n_rows));
    if (length > 0 && length < n_min) {
        length = l_max >= n_min ? n_min : 0;
    }
    for (size_t s : active) {
        lengths[s] = length;
    }
    // Could a drafter that is always right beat plain decoding here, at any
    // length the caps allow (the growth limit paces exploration, it does not
    // say a length cannot pay)? By more than min_gain and what its probes
    // cost at the schedule's longest wait: a drafting pass over the batch
    // every max_probe_wait + 1 steps, against a plain step (shadow_due).
    const std::vector<double> best_case = rates(std::vector<std::vector<double>>(n, std::vector<double>(static_cast<size_t>(n_max_), 1.0)), l_cap, all_rows);
    const double probe_share = pass[n] / verify[n] / (max_probe_wait + 1);
    drafting_may_pay_ = std::any_of(best_case.begin() + 1, best_case.end(),
                                    [&](double r) { return r > (1.0 + min_gain + probe_share) * best_case[0]; });
    // For each sequence of a step that drafts nothing: is a shadow now
    // worth its price (see shadow_due)? A hit would make the step draft
    // length l (its evidence after a kept token, the others' as it is),
    // saving at each step while its drafts are kept whole what plain
    // decoding would take for the step's expected tokens less what the step
    // costs; the shadow hits with the sequence's estimate now and costs a
    // one-row pass. All in plain steps of this batch (rate[0] = n / verify[n]).
    const double shadow_price = pass[1] / verify[n];
    for (size_t k = 0; k < active.size(); ++k) {
        const size_t s = active[k];
        acceptance_[s].shadow_pays = true;
        if (length > 0 || caps[s] <= 0 || acceptance_[s].fresh || !drafting_may_pay_ ||
            acceptance_[s].after[1][0].reached < settled_evidence) {
            continue;
        }
        std::vector<std::vector<double>> after_hit = through;
        after_hit[k] = cumulative(s, 1);
        const std::vector<double> rate = rates(after_hit, l_max, n_rows);
        const auto l = static_cast<size_t>(best_of(rate));
        if (l == 0) {
            acceptance_[s].shadow_pays = false;
            continue;
        }
        const double cost = verify[n * (l + 1)] + static_cast<double>(l) * pass[n];
        const double saved = cost * (rate[l] - rate[0]) / static_cast<double>(n);
        const double steps = 1.0 / (1.0 - std::min(after_hit[k][l - 1], max_kept_whole));
        acceptance_[s].shadow_pays = through[k][0] * steps * saved >= shadow_price;
    }
    return lengths;
}

void adaptive_draft_length::observe(size_t seq, int32_t proposed, int32_t kept) {
    if (proposed <= 0) {
        return;
    }
    sequence_evidence & e = acceptance_[seq];
    // One more decayed observation in `table`: position i was decided only
    // when every token before it was kept.
    const auto count = [&](std::vector<position_counts> & table) {
        for (position_counts & c : table) {
            c.reached *= decay;
            c.kept *= decay;
        }
        for (int32_t i = 0; i < std::min(proposed, n_max_) && i <= kept; ++i) {
            table[static_cast<size_t>(i)].reached += 1.0;
            table[static_cast<size_t>(i)].kept += i < kept ? 1.0 : 0.0;
        }
    };
    // A fresh sequence's first probe follows no decided drafted token: it
    // says whether the drafter can be right, not what follows a hit or a miss.
    if (!e.fresh) {
        count(e.after[e.last_kept]);
        count(pooled_[e.last_kept]);
    }
    hits_ += kept > 0 ? 1 : 0;
    misses_ += kept > 0 ? 0 : 1;
    // The last token decided: the first rejected one, or the last drafted.
    e.last_kept = kept >= std::min(proposed, n_max_) ? 1 : 0;
    e.misses = kept > 0 ? 0 : e.misses + 1;
    e.idle = 0;
    e.fresh = false;
}

int adaptive_draft_length::shadow_interval(int32_t n_active) const {
    const auto n_seq = static_cast<size_t>(std::max(n_active, 1));
    const bool measured = n_seq < verify_.size() && verify_[n_seq].n > 0 &&
                          std::any_of(pass_.begin(), pass_.end(), [](const cost_cell & c) { return c.n > 0; });
    if (!measured) {
        return 7;
    }
    // n_active sequences shadowing together: one pass over n_active rows
    // every (wait + 1) steps, against a plain step's cost.
    const double steps = pass_cost(n_active) / (shadow_budget * verify_[n_seq].lowest());
    return static_cast<int>(std::clamp(std::ceil(steps) - 1.0, 7.0, static_cast<double>(max_shadow_wait)));
}

int adaptive_draft_length::shadow_wait(const sequence_evidence & e, int32_t n_active) const {
    const int interval = shadow_interval(n_active);
    if (!e.shadow_pays) {
        return interval; // a hit is not worth a shadow: only drift is followed
    }
    if (hits_ > 0) {
        constexpr int doublings = 3; // waits of 0, 1, 3, 7
        static_assert((1 << doublings) - 1 == max_probe_wait);
        return (1 << std::min(std::max(e.misses - 1, 0), doublings)) - 1;
    }
    // Never right: every miss of every sequence is evidence, each on its own
    // text (so four sequences that miss together wait as one sequence
    // would after four misses, and a new one joining waits long).
    const uint64_t n = std::max<uint64_t>({static_cast<uint64_t>(std::max(e.misses, 0)), misses_, 1}) - 1;
    return std::min((1 << std::min<uint64_t>(2 * n, 6)) - 1, interval); // 0, 3, 15, 63
}

bool adaptive_draft_length::shadow_due(size_t seq, int32_t n_active) {
    sequence_evidence & e = acceptance_[seq];
    if (e.fresh || (drafting_may_pay_ && e.idle >= shadow_wait(e, n_active))) {
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
    c.newest = step_;
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
