#include "draft-length.h"

#include <algorithm>
#include <cmath>

namespace specdec::detail {

adaptive_draft_length::adaptive_draft_length(size_t n_seq, int32_t n_max) : n_max_(std::max(n_max, 1)), acceptance_(n_seq) {
    for (size_t s = 0; s < n_seq; ++s) {
        reset(s);
    }
}

void adaptive_draft_length::reset(size_t seq) {
    sequence_evidence & e = acceptance_[seq];
    e = sequence_evidence{};
    e.after[0] = pooled_[0];
    e.after[1] = pooled_[1];
}

void adaptive_draft_length::move(size_t from, size_t to) {
    acceptance_[to] = acceptance_[from];
    reset(from);
}

adaptive_draft_length::chain adaptive_draft_length::estimates(const sequence_evidence & e) {
    chain c;
    c.a = e.after[1].share(prior_kept_after_kept);
    c.q = e.after[0].share(prior_kept_after_miss);
    const double stationary = c.q / (c.q + 1.0 - c.a);
    const double from = e.last < 0 ? stationary : static_cast<double>(e.last);
    c.kept_before = stationary + (from - stationary) * std::pow(c.a - c.q, e.idle);
    return c;
}

std::vector<double> adaptive_draft_length::cumulative(const sequence_evidence & e) const {
    const chain c = estimates(e);
    std::vector<double> out(static_cast<size_t>(n_max_));
    out[0] = c.q + c.kept_before * (c.a - c.q);
    for (size_t i = 1; i < out.size(); ++i) {
        out[i] = out[i - 1] * c.a;
    }
    return out;
}

double adaptive_draft_length::grid_point(size_t i) {
    return (static_cast<double>(i) + 0.5) / grid_points;
}

double adaptive_draft_length::p_keep_through(size_t seq, int32_t i) const {
    return cumulative(acceptance_[seq])[static_cast<size_t>(i)];
}

double adaptive_draft_length::verify_cost(int32_t rows) const {
    return costs_.verify_curve(static_cast<size_t>(std::max(rows, 1)) + 1).back();
}

double adaptive_draft_length::pass_cost(int32_t rows) const {
    return costs_.pass_curve(static_cast<size_t>(std::max(rows, 1)) + 1).back();
}

std::vector<int32_t> adaptive_draft_length::choose(std::span<const int32_t> caps, std::span<const int64_t> left, int32_t n_min) {
    costs_.tick();
    std::vector<int32_t> lengths(caps.size(), 0);
    const auto n_active = static_cast<int32_t>(std::count_if(caps.begin(), caps.end(), [](int32_t c) { return c >= 0; }));
    if (n_active == 0) {
        return lengths;
    }
    const auto n = static_cast<size_t>(n_active);
    const size_t n_rows = costs_.rows_allowed(n, static_cast<size_t>(n_max_) + 1);
    const std::vector<double> verify = costs_.verify_curve(n * static_cast<size_t>(n_max_ + 1) + 1);
    const std::vector<double> pass = costs_.pass_curve(n + 1);
    // Expected tokens per cost when every active sequence drafts l tokens,
    // for l = 0 (plain decoding) up to l_max, within `n_rows` rows a step:
    // kept[i] is how many sequences are expected to keep tokens 0..i (the
    // sum of their p_keep_through).
    const auto rates = [&](const std::vector<double> & kept, int32_t l_max) {
        std::vector<double> rate(1, n_active / verify[n]);
        double expected = n_active; // every active sequence gets the target's own token
        for (int32_t l = 1; l <= l_max && n * static_cast<size_t>(l + 1) <= n_rows; ++l) {
            expected += kept[static_cast<size_t>(l - 1)];
            rate.push_back(expected / (verify[n * static_cast<size_t>(l + 1)] + l * pass[n]));
        }
        return rate;
    };
    // The best length: 0 unless it beats plain decoding by min_gain.
    const auto best_of = [](const std::vector<double> & rate) {
        const auto best = static_cast<size_t>(std::max_element(rate.begin(), rate.end()) - rate.begin());
        return rate[best] > (1.0 + min_gain) * rate[0] ? best : 0;
    };
    std::vector<size_t> active;
    std::vector<double> first;                           // [k]: active sequence k's p_keep_through(0)
    std::vector<double> kept(static_cast<size_t>(n_max_), 0.0);
    int32_t l_max = n_max_;
    for (size_t s = 0; s < caps.size(); ++s) {
        if (caps[s] < 0) {
            continue;
        }
        const std::vector<double> through = cumulative(acceptance_[s]);
        active.push_back(s);
        first.push_back(through[0]);
        for (size_t i = 0; i < kept.size(); ++i) {
            kept[i] += through[i];
        }
        l_max = std::min(l_max, caps[s]);
    }
    auto length = static_cast<int32_t>(best_of(rates(kept, l_max)));
    if (length > 0 && length < n_min) {
        length = l_max >= n_min ? n_min : 0;
    }
    for (size_t s : active) {
        lengths[s] = length;
        acceptance_[s].look = false;
    }
    if (length > 0) {
        return lengths;
    }
    // Shadows, for a step that drafts nothing. What a token of one sequence
    // would save, in plain steps of the batch, if every sequence's drafter
    // kept each token with probability a after a hit (the batch then
    // drafting its best length), at points a of a grid; a shadow costs a
    // one-row pass.
    std::vector<double> saving(grid_points);
    std::vector<double> hits(static_cast<size_t>(n_max_));
    for (size_t i = 0; i < grid_points; ++i) {
        const double a = grid_point(i);
        double through = 1.0;
        for (double & h : hits) {
            through *= a;
            h = static_cast<double>(n_active) * through;
        }
        const std::vector<double> rate = rates(hits, l_max);
        const size_t l = best_of(rate);
        saving[i] = l == 0 ? 0.0 : (1.0 - rate[0] / rate[l]) / static_cast<double>(n_active);
    }
    if (std::all_of(saving.begin(), saving.end(), [](double s) { return s == 0.0; })) {
        return lengths; // not even a drafter that is almost always right would pay
    }
    const double price = pass[1] / verify[n];
    for (size_t k = 0; k < active.size(); ++k) {
        sequence_evidence & e = acceptance_[active[k]];
        if (caps[active[k]] <= 0) {
            continue;
        }
        // The expected saving over the posterior of a (a beta distribution
        // from the decayed counts and the prior).
        const transitions & t = e.after[1];
        const double alpha = t.kept + prior_weight * prior_kept_after_kept;
        const double beta = t.reached - t.kept + prior_weight * (1.0 - prior_kept_after_kept);
        double weight = 0.0;
        double saved = 0.0;
        for (size_t i = 0; i < grid_points; ++i) {
            const double a = grid_point(i);
            const double density = std::exp((alpha - 1.0) * std::log(a) + (beta - 1.0) * std::log1p(-a));
            weight += density;
            saved += density * saving[i];
        }
        // A hit's token saves saved / weight: a look that every token left
        // could not repay is not taken.
        const double per_token = saved / weight;
        const bool repaid = left.empty() || static_cast<double>(left[active[k]]) * per_token >= price;
        e.unseen += first[k] * per_token;
        e.look = repaid && (e.last < 0 || e.unseen >= price);
    }
    return lengths;
}

bool adaptive_draft_length::shadow_due(size_t seq) {
    sequence_evidence & e = acceptance_[seq];
    e.idle += e.look ? 0 : 1;
    return e.look;
}

void adaptive_draft_length::observe(size_t seq, int32_t proposed, int32_t kept) {
    if (proposed <= 0) {
        return;
    }
    sequence_evidence & e = acceptance_[seq];
    // Each decided token is one transition of the chain, from the state of
    // the token before it: position i is decided when every token before it
    // was kept. Position 0 follows the unseen tokens of the steps since the
    // last observation, so that state is known only in probability: each
    // state is credited with its posterior share of the transition.
    const chain c = estimates(e);
    const int32_t decided = std::min(proposed, n_max_);
    for (int32_t i = 0; i < decided && i <= kept; ++i) {
        const bool hit = i < kept;
        double w = 1.0; // the share of the transition that starts from a kept token
        if (i == 0) {
            const double p_kept = c.kept_before * (hit ? c.a : 1.0 - c.a);
            w = p_kept / (p_kept + (1.0 - c.kept_before) * (hit ? c.q : 1.0 - c.q));
        }
        for (int state : {0, 1}) {
            const double share = state == 1 ? w : 1.0 - w;
            for (transitions * t : {&e.after[state], &pooled_[state]}) {
                const double kept_share = std::pow(decay, share);
                t->reached = t->reached * kept_share + share;
                t->kept = t->kept * kept_share + (hit ? share : 0.0);
            }
        }
    }
    e.last = kept >= decided ? 1 : 0;
    e.idle = 0;
    e.unseen = 0.0;
}

void adaptive_draft_length::observe_verify(int32_t n_active, int32_t rows, double microseconds) {
    costs_.observe_verify(n_active, rows, n_max_ + 1, microseconds);
}

void adaptive_draft_length::observe_draft(int32_t passes, int32_t rows, double microseconds) {
    costs_.observe_draft(passes, rows, microseconds);
}

} // namespace specdec::detail
