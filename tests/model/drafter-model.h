// Reference models of the controlled drafters: what each construction must
// propose, derived from the fixture design, so tests assert exact counts.
#pragma once

#include "fixtures.h"
#include "harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace specdec::test {

// Whether the mixed drafter drafts successor(t) from input id t: t lies in
// an even stretch of `stretch` cycle tokens (control ids are in none).
inline bool mixed_is_accurate(int32_t t, uint32_t stretch) {
    return t < fixtures::first_cycle_token || (t - fixtures::first_cycle_token) / static_cast<int32_t>(stretch) % 2 == 0;
}

// The proposal a controlled drafter of opt.drafter makes after id_last `t`
// (`prev` is the token before it), capped at n tokens. hidden_only drafts
// succ(succ(prev)) first, from the target's row at prev; then an MTP head is
// fed its own output row, which carries the same token direction, so it
// repeats that guess, while EAGLE-3 and DFlash drafts advance one token per
// step (`chained_features`).
inline std::vector<int32_t> reference_proposal(const fixtures::fixture_options & opt, int32_t t, int n,
                                               int32_t prev = -1, bool chained_features = false) {
    using fixtures::successor;
    const uint32_t n_vocab = opt.n_vocab;
    std::vector<int32_t> out;
    int32_t x = t;
    for (int j = 0; j < n; ++j) {
        switch (opt.drafter) {
            case fixtures::drafter_kind::exact:
                x = successor(x, n_vocab);
                break;
            case fixtures::drafter_kind::wrong_every_k:
                x = (x % static_cast<int32_t>(opt.wrong_every) == 0) ? successor(successor(x, n_vocab), n_vocab)
                                                                     : successor(x, n_vocab);
                break;
            case fixtures::drafter_kind::mixed:
                x = mixed_is_accurate(x, opt.stretch) ? successor(x, n_vocab) : successor(successor(x, n_vocab), n_vocab);
                break;
            case fixtures::drafter_kind::hidden_only: {
                const int32_t first = successor(successor(prev < 0 ? t - 1 : prev, n_vocab), n_vocab);
                x = (j == 0 || !chained_features) ? first : successor(x, n_vocab);
                break;
            }
            case fixtures::drafter_kind::soft: {
                // greedy: the most likely of the mixture (the first of equals)
                const auto next = fixtures::soft_next(x, opt.soft_drafter, n_vocab);
                x = std::max_element(next.begin(), next.end(), [](const auto & a, const auto & b) { return a.second < b.second; })->first;
                break;
            }
            case fixtures::drafter_kind::random:
                return {};
        }
        out.push_back(x);
    }
    return out;
}

// A prompt for the n-gram strategies: five periods of the target's cycle
// (first_cycle_token .. active_vocab - 1), each followed by `extra`, then
// the first `tail` cycle tokens. Lookups of windows that end at the cycle's
// last token draft `extra` where the target continues the cycle (rejected);
// the others draft the cycle (accepted).
inline std::vector<llama_token> glitched_cycle_prompt(llama_token extra, int tail, uint32_t n_vocab) {
    std::vector<llama_token> out;
    const auto last = static_cast<llama_token>(fixtures::active_vocab(n_vocab)) - 1;
    for (int period = 0; period < 5; ++period) {
        for (llama_token t = fixtures::first_cycle_token; t <= last; ++t) {
            out.push_back(t);
        }
        out.push_back(extra);
    }
    for (int i = 0; i < tail; ++i) {
        out.push_back(fixtures::first_cycle_token + i);
    }
    return out;
}

inline const char * kind_name(fixtures::drafter_kind k) {
    switch (k) {
        case fixtures::drafter_kind::exact:         return "exact";
        case fixtures::drafter_kind::wrong_every_k: return "wrong";
        case fixtures::drafter_kind::hidden_only:   return "hidden";
        case fixtures::drafter_kind::mixed:         return "mixed";
        case fixtures::drafter_kind::soft:          return "soft";
        case fixtures::drafter_kind::random:        return "random";
    }
    return "?";
}

// The drafter part of a fixture's name: the kind, and the stretch of a mixed drafter.
inline std::string drafter_tag(const fixtures::fixture_options & opt) {
    const std::string kind = kind_name(opt.drafter);
    return opt.drafter == fixtures::drafter_kind::mixed ? kind + std::to_string(opt.stretch) : kind;
}

// Accepted prefix length of `proposal` against the controlled target after t.
inline int reference_accepted(const std::vector<int32_t> & proposal, int32_t t, uint32_t n_vocab) {
    int k = 0;
    int32_t x = t;
    for (int32_t d : proposal) {
        x = fixtures::successor(x, n_vocab);
        if (d != x) {
            break;
        }
        ++k;
    }
    return k;
}

// Accepted drafts per step of a greedy n_draft = 1 run of the mixed drafter
// from id_last `t` until n_predict tokens exist: 1 iff the step's id_last
// lies in an accurate stretch (the step then yields the draft and the
// target's next token), else 0 (it yields the target's token alone).
inline std::vector<int> reference_mixed_run(int32_t t, int n_predict, uint32_t stretch, uint32_t n_vocab) {
    std::vector<int> accepted;
    for (int n = 0; n < n_predict;) {
        const int k = mixed_is_accurate(t, stretch) ? 1 : 0;
        accepted.push_back(k);
        for (int i = 0; i <= k; ++i) {
            t = fixtures::successor(t, n_vocab);
        }
        n += 1 + k;
    }
    return accepted;
}

// The statistics specdec::generate must report for one greedy sequence with
// a controlled drafter of opt.drafter (not random) after a prompt ending in
// `prev`, `t`: the prompt's decode yields the first token (a step that drafts
// nothing); then every step drafts reference_proposal(), capped as the loop
// caps it at the budget left after the step's own token (n_predict -
// generated - 1), and keeps reference_accepted() of it, until n_predict
// tokens exist.
inline specdec_sequence_stats reference_generation(const fixtures::fixture_options & opt, int32_t prev, int32_t t, int n_draft,
                                                   int n_predict, bool chained_features) {
    specdec_sequence_stats st{};
    if (n_predict > 0) {
        st.n_steps = 1;
        prev = t;
        t = fixtures::successor(t, opt.n_vocab);
    }
    for (int generated = std::min(n_predict, 1); generated < n_predict;) {
        const int cap = std::min(n_draft, n_predict - generated - 1);
        const std::vector<int32_t> proposal = cap > 0 ? reference_proposal(opt, t, cap, prev, chained_features) : std::vector<int32_t>{};
        const int k = reference_accepted(proposal, t, opt.n_vocab);
        st.n_steps++;
        st.n_drafted += proposal.size();
        st.n_accepted += static_cast<uint64_t>(k);
        for (size_t i = 0; i < proposal.size(); ++i) {
            st.n_proposed_at[i]++;
            st.n_accepted_at[i] += i < static_cast<size_t>(k) ? 1 : 0;
        }
        for (int i = 0; i <= k; ++i) {
            prev = t;
            t = fixtures::successor(t, opt.n_vocab);
        }
        generated += k + 1;
    }
    st.n_generated = static_cast<uint64_t>(n_predict);
    return st;
}

// Every counter of `got` equals `want`.
inline void expect_stats_eq(const specdec_sequence_stats & got, const specdec_sequence_stats & want) {
    EXPECT_EQ(got.n_generated, want.n_generated);
    EXPECT_EQ(got.n_steps, want.n_steps);
    EXPECT_EQ(got.n_drafted, want.n_drafted);
    EXPECT_EQ(got.n_accepted, want.n_accepted);
    for (size_t i = 0; i < SPECDEC_MAX_DRAFT; ++i) {
        EXPECT_EQ(got.n_proposed_at[i], want.n_proposed_at[i]) << "position " << i;
        EXPECT_EQ(got.n_accepted_at[i], want.n_accepted_at[i]) << "position " << i;
    }
}

// Checks a greedy n_draft = 1 run of the mixed drafter through `s` from
// id_last `t`: every step accepted or rejected as reference_mixed_run says,
// both kinds present, and the session's counters agreeing.
inline void expect_mixed_run(const spec_run & run, const session & s, int32_t t, int n_predict, uint32_t stretch,
                             uint32_t n_vocab) {
    const std::vector<int> want = reference_mixed_run(t, n_predict, stretch, n_vocab);
    const int n_accepted = static_cast<int>(std::count(want.begin(), want.end(), 1));
    const int n_rejected = static_cast<int>(want.size()) - n_accepted;
    ASSERT_GT(n_accepted, 0);
    ASSERT_GT(n_rejected, 0);
    EXPECT_EQ(run.accepted, want);
    EXPECT_EQ(run.total_proposed(), n_accepted + n_rejected);
    EXPECT_EQ(s.stats().n_accepted, static_cast<uint64_t>(n_accepted));
    EXPECT_EQ(s.stats().n_drafted, static_cast<uint64_t>(n_accepted + n_rejected));
}

} // namespace specdec::test
