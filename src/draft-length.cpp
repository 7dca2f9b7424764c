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

std::vector<double> adaptive_draft_length::cumulative(const sequence_evidence & e, int last, int idle, bool proven) const {
    const auto estimate = [](const transitions & t, double prior) {
        return (t.kept + prior_weight * prior) / (t.reached + prior_weight);
    };
    const double a = estimate(e.after[1], prior_kept_after_kept);
    const double q = estimate(e.after[0], prior_kept_after_miss);
    const double stationary = q / (q + 1.0 - a);
    const double from = last < 0 ? stationary : static_cast<double>(last);
    // Bayes over "it can be right" (then a look hits with about q) against
    // "it never is", after misses_ misses and no hit.
    const double can = proven || hits_ > 0 ? 1.0 :
        1.0 / (1.0 + (1.0 / prior_can_be_right - 1.0) * std::pow(1.0 - prior_kept_after_miss, -static_cast<double>(misses_)));
    std::vector<double> out(static_cast<size_t>(n_max_));
    out[0] = can * (stationary + (from - stationary) * std::pow(a - q, idle + 1));
    for (size_t i = 1; i < out.size(); ++i) {
        out[i] = out[i - 1] * a;
    }
    return out;
}

double adaptive_draft_length::p_keep_through(size_t seq, int32_t i) const {
    const sequence_evidence & e = acceptance_[seq];
    return cumulative(e, e.last, e.idle, false)[static_cast<size_t>(i)];
}

double adaptive_draft_length::verify_cost(int32_t rows) const {
    return costs_.verify_curve(static_cast<size_t>(std::max(rows, 1)) + 1).back();
}

double adaptive_draft_length::pass_cost(int32_t rows) const {
    return costs_.pass_curve(static_cast<size_t>(std::max(rows, 1)) + 1).back();
}

std::vector<int32_t> adaptive_draft_length::choose(std::span<const int32_t> caps, int32_t n_min) {
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
    // through[k] is active sequence k's p_keep_through.
    const auto rates = [&](const std::vector<std::vector<double>> & through, int32_t l_max) {
        std::vector<double> rate(1, n_active / verify[n]);
        double expected = n_active; // every active sequence gets the target's own token
        for (int32_t l = 1; l <= l_max && n * static_cast<size_t>(l + 1) <= n_rows; ++l) {
            for (const std::vector<double> & t : through) {
                expected += t[static_cast<size_t>(l - 1)];
            }
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
    std::vector<std::vector<double>> through;
    std::vector<std::vector<double>> after_hit; // as if each sequence that may draft had just been right
    int32_t l_max = n_max_;
    for (size_t s = 0; s < caps.size(); ++s) {
        if (caps[s] < 0) {
            continue;
        }
        const sequence_evidence & e = acceptance_[s];
        active.push_back(s);
        through.push_back(cumulative(e, e.last, e.idle, false));
        after_hit.push_back(caps[s] > 0 ? cumulative(e, 1, 0, true) : through.back());
        l_max = std::min(l_max, caps[s]);
    }
    auto length = static_cast<int32_t>(best_of(rates(through, l_max)));
    if (length > 0 && length < n_min) {
        length = l_max >= n_min ? n_min : 0;
    }
    for (size_t s : active) {
        lengths[s] = length;
    }
    // Shadows, for a step that drafts nothing. A hit would make the step
    // draft length l, saving at each step of its stretch what plain decoding
    // would take for the step's expected tokens less what the step costs;
    // the shadow costs a one-row pass. All in plain steps of this batch.
    // Where a hit would not make the step draft but a drafter that is always
    // right would, a sequence still shadows once in as many steps as keep
    // the batch's shadows at look_budget of its time, so that its estimates
    // follow the text.
    const std::vector<double> rate = rates(after_hit, l_max);
    const size_t l = best_of(rate);
    const double price = pass[1] / verify[n];
    const bool may_pay = best_of(rates(std::vector<std::vector<double>>(n, std::vector<double>(static_cast<size_t>(n_max_), 1.0)), l_max)) > 0;
    const double interval = pass[n] / (look_budget * verify[n]);
    for (size_t k = 0; k < active.size(); ++k) {
        sequence_evidence & e = acceptance_[active[k]];
        e.look = false;
        if (length > 0 || caps[active[k]] <= 0) {
            continue;
        }
        e.look = may_pay && e.idle + 1 >= interval;
        if (l > 0) {
            const double step = verify[n * (l + 1)] + static_cast<double>(l) * pass[n];
            const double saved = step * (rate[l] - rate[0]) / static_cast<double>(n);
            const double steps = 1.0 / (1.0 - after_hit[k][l - 1]);
            e.look = e.look || through[k][0] * steps * saved >= price;
        }
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
    // the token decided before it: position i is decided when every token
    // before it was kept.
    int from = e.last;
    for (int32_t i = 0; i < std::min(proposed, n_max_) && i <= kept; ++i) {
        const double hit = i < kept ? 1.0 : 0.0;
        if (from >= 0) {
            for (transitions * t : {&e.after[from], &pooled_[from]}) {
                t->reached = t->reached * decay + 1.0;
                t->kept = t->kept * decay + hit;
            }
        }
        from = i < kept ? 1 : 0;
    }
    e.last = from;
    e.idle = 0;
    hits_ += kept > 0 ? 1 : 0;
    misses_ += kept > 0 ? 0 : 1;
}

void adaptive_draft_length::observe_verify(int32_t n_active, int32_t rows, double microseconds) {
    costs_.observe_verify(n_active, rows, n_max_ + 1, microseconds);
}

void adaptive_draft_length::observe_draft(int32_t passes, int32_t rows, double microseconds) {
    costs_.observe_draft(passes, rows, microseconds);
}

} // namespace specdec::detail
