#include "draft-length.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

namespace specdec::detail {

adaptive_draft_length::adaptive_draft_length(size_t n_seq, int32_t n_max)
    : n_max_(std::max(n_max, 1)), evidence_(n_seq), shadow_(n_seq, false) {
    for (table & t : pooled_) {
        t.resize(static_cast<size_t>(n_max_));
    }
    for (size_t s = 0; s < n_seq; ++s) {
        reset(s);
    }
}

void adaptive_draft_length::reset(size_t seq) {
    evidence_[seq] = {{table(pooled_[0].size()), table(pooled_[1].size())}, 0};
}

void adaptive_draft_length::move(size_t from, size_t to) {
    evidence_[to] = std::move(evidence_[from]);
    reset(from);
}

std::array<std::vector<double>, 2> adaptive_draft_length::acceptance(const sequence_evidence & e,
                                                                    double optimism) const {
    std::array<std::vector<double>, 2> p;
    for (int x = 0; x < 2; ++x) {
        const table & t = e.after[x];
        // Position 0 leans on every sequence's evidence, the more of it the more.
        const position_counts & pool = pooled_[x][0];
        double prior = (pool.kept + prior_weight * prior_acceptance[x]) / (pool.reached + prior_weight);
        double weight = prior_weight + pool_share * pool.reached;
        for (size_t i = 0; i < t.size(); ++i) {
            const double a = t[i].kept + weight * prior;
            const double b = t[i].reached - t[i].kept + weight * (1.0 - prior);
            double v = a / (a + b);
            if (optimism > 0.0 && i == 0) {
                // An optimistic bound: the mean plus `optimism` standard deviations.
                v = std::min(1.0, v + optimism * std::sqrt(v * (1.0 - v) / (a + b + 1.0)));
            }
            p[static_cast<size_t>(x)].push_back(v);
            prior = std::clamp(v, 1e-6, 1.0 - 1e-6);
            weight = prior_weight;
        }
    }
    return p;
}

double adaptive_draft_length::p_keep_through(size_t seq, int32_t i) const {
    const sequence_evidence & e = evidence_[seq];
    const std::vector<double> p = acceptance(e, 0.0)[static_cast<size_t>(e.last_kept)];
    double through = 1.0;
    for (int32_t j = 0; j <= i; ++j) {
        through *= p[static_cast<size_t>(j)];
    }
    return through;
}

std::vector<double> adaptive_draft_length::curve(const std::vector<cost_cell> & cells, size_t n,
                                                 const std::vector<double> * prior) const {
    // Every measured size counts, also those at or above n (a prior's scale).
    const size_t m = std::max(n, cells.size());
    const auto shape = [&](size_t x) {
        return prior != nullptr ? (*prior)[x] : 1.0 + prior_row_cost * (static_cast<double>(x) - 1.0);
    };
    // Weights and means as of this step.
    std::vector<std::pair<double, double>> seen(m, {0.0, 0.0});
    for (size_t x = 1; x < cells.size(); ++x) {
        const cost_cell & c = cells[x];
        if (c.weight > 0.0) {
            const double fade = std::pow(cost_memory, static_cast<double>(step_ - c.at));
            seen[x] = {c.weight * fade, c.sum / c.weight};
        }
    }
    // The prior: its shape through the size with the most weight (in a
    // running engine, its plain step).
    size_t anchor = 0;
    for (size_t x = 1; x < m; ++x) {
        anchor = seen[x].first > seen[anchor].first ? x : anchor;
    }
    const double scale = anchor == 0 ? 1.0 : seen[anchor].second / shape(anchor);
    // Measured sizes: the posterior mean. Between them, linear; below and
    // beyond them, the prior's shape through the nearest.
    std::vector<std::pair<size_t, double>> known; // (size, estimate), ascending
    for (size_t x = 1; x < m; ++x) {
        const auto [w, mean] = seen[x];
        if (w > 0.0) {
            known.emplace_back(x, (w * mean + cost_prior_weight * scale * shape(x)) / (w + cost_prior_weight));
        }
    }
    std::vector<double> out(n, 0.0);
    for (size_t x = 1; x < n; ++x) {
        const auto hi = std::lower_bound(known.begin(), known.end(), x, [](const auto & k, size_t v) { return k.first < v; });
        if (known.empty()) {
            out[x] = shape(x);
        } else if (hi != known.end() && hi->first == x) {
            out[x] = hi->second;
        } else if (hi == known.begin()) {
            out[x] = hi->second * shape(x) / shape(hi->first);
        } else if (hi == known.end()) {
            const auto & [x0, c0] = known.back();
            out[x] = c0 * shape(x) / shape(x0);
        } else {
            const auto & [x0, c0] = *(hi - 1);
            const auto & [x1, c1] = *hi;
            out[x] = c0 + (c1 - c0) * static_cast<double>(x - x0) / static_cast<double>(x1 - x0);
        }
    }
    // More rows never cost less.
    for (size_t x = 2; x < n; ++x) {
        out[x] = std::max(out[x], out[x - 1]);
    }
    return out;
}

std::vector<double> adaptive_draft_length::verify_curve(size_t n) const {
    return curve(verify_, n, nullptr);
}

std::vector<double> adaptive_draft_length::first_pass_curve(size_t n) const {
    std::vector<double> prior = verify_curve(std::max(n, first_pass_.size()));
    for (double & c : prior) {
        c *= prior_pass_share;
    }
    return curve(first_pass_, n, &prior);
}

std::vector<double> adaptive_draft_length::next_pass_curve(size_t n) const {
    const size_t m = std::max(n, next_pass_.size());
    std::vector<double> prior = verify_curve(m);
    const std::vector<double> first = first_pass_curve(m);
    for (size_t x = 0; x < m; ++x) {
        prior[x] = std::min(prior_pass_share * prior[x], first[x]);
    }
    return curve(next_pass_, n, &prior);
}

double adaptive_draft_length::verify_cost(int32_t rows) const {
    return verify_curve(static_cast<size_t>(std::max(rows, 1)) + 1).back();
}

double adaptive_draft_length::draft_cost(int32_t passes, int32_t rows) const {
    const size_t n = static_cast<size_t>(std::max(rows, 1)) + 1;
    return passes <= 0 ? 0.0 : first_pass_curve(n).back() + (passes - 1) * next_pass_curve(n).back();
}

std::vector<int32_t> adaptive_draft_length::choose(std::span<const int32_t> caps, int32_t n_min) {
    step_++;
    // Evidence fades with every step, observed or not.
    const auto fade = [](table & t) {
        for (position_counts & c : t) {
            c.reached *= memory;
            c.kept *= memory;
        }
    };
    for (sequence_evidence & e : evidence_) {
        fade(e.after[0]);
        fade(e.after[1]);
    }
    fade(pooled_[0]);
    fade(pooled_[1]);
    std::vector<int32_t> lengths(caps.size(), 0);
    std::fill(shadow_.begin(), shadow_.end(), false);
    std::vector<size_t> active;
    int32_t l_max = n_max_;
    for (size_t s = 0; s < caps.size(); ++s) {
        if (caps[s] >= 0) {
            active.push_back(s);
            l_max = std::min(l_max, caps[s]);
        }
    }
    if (active.empty()) {
        return lengths;
    }
    const size_t n = active.size();
    const auto nd = static_cast<double>(n);
    const std::vector<double> verify = verify_curve(n * static_cast<size_t>(l_max + 1) + 1);
    const std::vector<double> first_passes = first_pass_curve(n + 1); // [rows]
    const double first_pass = first_passes[n];
    const double next_pass = next_pass_curve(n + 1)[n];
    // The step's time when every active sequence drafts l tokens.
    std::vector<double> step_time(static_cast<size_t>(l_max) + 1);
    for (int32_t l = 0; l <= l_max; ++l) {
        step_time[static_cast<size_t>(l)] = verify[n * static_cast<size_t>(l + 1)] + (l > 0 ? first_pass + (l - 1) * next_pass : 0.0);
    }
    // Per sequence and state, from acceptance (posterior means, or optimistic):
    // the chance `through[l]` that a draft of l is kept whole and the
    // expected tokens `tokens[l]`.
    struct outlook {
        std::array<std::vector<double>, 2> through, tokens;
    };
    const auto outlooks = [&](double optimism) {
        std::vector<outlook> seqs(n);
        for (size_t k = 0; k < n; ++k) {
            const std::array<std::vector<double>, 2> p = acceptance(evidence_[active[k]], optimism);
            for (int x = 0; x < 2; ++x) {
                std::vector<double> & through = seqs[k].through[x];
                std::vector<double> & tokens = seqs[k].tokens[x];
                through.assign(1, 1.0);
                tokens.assign(1, 1.0);
                for (int32_t l = 1; l <= n_max_; ++l) {
                    through.push_back(through.back() * p[static_cast<size_t>(x)][static_cast<size_t>(l - 1)]);
                    tokens.push_back(tokens.back() + through.back());
                }
            }
        }
        return seqs;
    };
    const std::vector<outlook> mean = outlooks(0.0);
    // The price of time: the best rate a length reaches in this step.
    double price = 0.0;
    for (int32_t l = 0; l <= l_max; ++l) {
        double expected = 0.0;
        for (size_t k = 0; k < n; ++k) {
            expected += mean[k].tokens[evidence_[active[k]].last_kept][static_cast<size_t>(l)];
        }
        price = std::max(price, expected / step_time[static_cast<size_t>(l)]);
    }
    // Per sequence, the value of each action from its current state: its
    // share of the step's tokens less their time at that price, plus the
    // discounted value of the state it leads to. Actions: 0 plain, 1 shadow,
    // 1 + l a draft of l.
    const size_t n_actions = static_cast<size_t>(l_max) + 2;
    const auto values = [&](const std::vector<outlook> & seqs) {
        std::vector<std::vector<double>> q(n, std::vector<double>(n_actions, 0.0));
        for (size_t k = 0; k < n; ++k) {
            const outlook & o = seqs[k];
            const bool may_shadow = caps[active[k]] > 0;
            // gain(x, a) and the chance that action a in state x ends after a kept token.
            const auto gain = [&](int x, size_t a) {
                if (a == 0) {
                    return 1.0 - price * step_time[0] / nd;
                }
                if (a == 1) {
                    return 1.0 - price * (step_time[0] + first_pass) / nd;
                }
                return o.tokens[x][a - 1] - price * step_time[a - 1] / nd;
            };
            const auto kept_chance = [&](int x, size_t a) {
                return a == 0 ? static_cast<double>(x) : a == 1 ? o.through[x][1] : o.through[x][a - 1];
            };
            std::array<double, 2> value = {0.0, 0.0};
            const auto q_of = [&](int x, size_t a) {
                const double up = kept_chance(x, a);
                return gain(x, a) + discount * (up * value[1] + (1.0 - up) * value[0]);
            };
            // Value iteration: the error shrinks by `discount` per round.
            for (int round = 0; round < 200; ++round) {
                std::array<double, 2> next = {0.0, 0.0};
                for (int x = 0; x < 2; ++x) {
                    next[static_cast<size_t>(x)] = q_of(x, 0);
                    for (size_t a = may_shadow ? 1 : 2; a < n_actions; ++a) {
                        next[static_cast<size_t>(x)] = std::max(next[static_cast<size_t>(x)], q_of(x, a));
                    }
                }
                const bool settled = std::abs(next[0] - value[0]) + std::abs(next[1] - value[1]) < 1e-9;
                value = next;
                if (settled) {
                    break;
                }
            }
            const int x = evidence_[active[k]].last_kept;
            for (size_t a = 0; a < n_actions; ++a) {
                q[k][a] = a == 1 && !may_shadow ? q_of(x, 0) : q_of(x, a);
            }
        }
        return q;
    };
    // Lengths from the means; shadows, which only learn, from the optimistic
    // bound: a sequence probes while its evidence leaves room for a drafter
    // that would pay.
    const std::vector<std::vector<double>> q = values(mean);
    const std::vector<std::vector<double>> q_hopeful = values(outlooks(shadow_optimism));
    // Shadows share one pass: of a step that drafts nothing, the m whose
    // shadows are worth most more than plain decoding shadow, m making that
    // worth less the pass over m rows (the values above priced each shadow
    // at its share of a pass over the whole batch) largest.
    std::vector<double> worth(n);
    for (size_t k = 0; k < n; ++k) {
        worth[k] = q_hopeful[k][1] + price * first_pass / nd - q_hopeful[k][0];
    }
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return worth[a] > worth[b]; });
    size_t n_shadows = 0;
    double shadows_worth = 0.0;
    double sum = 0.0;
    for (size_t m = 1; m <= n; ++m) {
        sum += worth[order[m - 1]];
        if (sum - price * first_passes[m] > shadows_worth) {
            n_shadows = m;
            shadows_worth = sum - price * first_passes[m];
        }
    }
    // The batch's length: the best sum over its sequences (at 0, each plain or shadowing).
    int32_t best = 0;
    double best_score = 0.0;
    for (size_t k = 0; k < n; ++k) {
        best_score += std::max(q[k][0], q[k][1]);
    }
    for (int32_t l = std::max(n_min, 1); l <= l_max; ++l) {
        double score = 0.0;
        for (size_t k = 0; k < n; ++k) {
            score += q[k][static_cast<size_t>(l) + 1];
        }
        if (score > best_score) {
            best = l;
            best_score = score;
        }
    }
    for (size_t k = 0; k < n; ++k) {
        lengths[active[k]] = best;
    }
    for (size_t m = 0; best == 0 && m < n_shadows; ++m) {
        shadow_[active[order[m]]] = true;
    }
    return lengths;
}

void adaptive_draft_length::observe(size_t seq, int32_t proposed, int32_t kept) {
    if (proposed <= 0) {
        return;
    }
    sequence_evidence & e = evidence_[seq];
    // Position i was decided only when every token before it was kept.
    const auto count = [&](table & t) {
        for (int32_t i = 0; i < std::min(proposed, n_max_) && i <= kept; ++i) {
            t[static_cast<size_t>(i)].reached += 1.0;
            t[static_cast<size_t>(i)].kept += i < kept ? 1.0 : 0.0;
        }
    };
    count(e.after[e.last_kept]);
    count(pooled_[e.last_kept]);
    e.last_kept = kept >= std::min(proposed, n_max_) ? 1 : 0;
}

void adaptive_draft_length::record(std::vector<cost_cell> & cells, size_t size, double microseconds) {
    if (cells.size() <= size) {
        cells.resize(size + 1);
    }
    cost_cell & c = cells[size];
    const double fade = std::pow(cost_memory, static_cast<double>(step_ - c.at));
    c.weight = c.weight * fade + 1.0;
    c.sum = c.sum * fade + std::max(microseconds, 1.0); // a clock that read 0 must not make a step free
    c.at = step_;
}

void adaptive_draft_length::observe_verify(int32_t n_active, int32_t rows, double microseconds) {
    if (n_active <= 0 || rows < n_active || rows > n_active * (n_max_ + 1)) {
        return;
    }
    record(verify_, static_cast<size_t>(rows), microseconds);
}

void adaptive_draft_length::observe_draft(int32_t passes, int32_t rows, double microseconds) {
    if (passes <= 0 || rows < passes) {
        return;
    }
    // The passes' average size stands for each of them; the later passes
    // take what the first is estimated to cost less.
    const auto size = static_cast<size_t>(std::lround(static_cast<double>(rows) / passes));
    if (passes == 1) {
        record(first_pass_, size, microseconds);
    } else {
        const double first = std::min(first_pass_curve(size + 1)[size], microseconds);
        record(next_pass_, size, (microseconds - first) / (passes - 1));
    }
}

} // namespace specdec::detail
