// Reference models of the controlled drafters: what each construction must
// propose, derived from the fixture design, so tests assert exact counts.
#pragma once

#include "fixtures.h"

#include <vector>

namespace specdec::test {

// The proposal a controlled drafter of `kind` makes after id_last `t`
// (`prev` is the token before it), capped at n tokens. hidden_only drafts
// succ(succ(prev)) first, from the target's row at prev; then an MTP head is
// fed its own output row, which carries the same token direction, so it
// repeats that guess, while EAGLE-3 and DFlash drafts advance one token per
// step (`chained_features`).
inline std::vector<int32_t> reference_proposal(fixtures::drafter_kind kind, int32_t t, int n, uint32_t n_vocab,
                                               uint32_t wrong_every, int32_t prev = -1,
                                               bool chained_features = false) {
    using fixtures::successor;
    std::vector<int32_t> out;
    int32_t x = t;
    for (int j = 0; j < n; ++j) {
        switch (kind) {
            case fixtures::drafter_kind::exact:
                x = successor(x, n_vocab);
                break;
            case fixtures::drafter_kind::wrong_every_k:
                x = (x % static_cast<int32_t>(wrong_every) == 0) ? successor(successor(x, n_vocab), n_vocab)
                                                                 : successor(x, n_vocab);
                break;
            case fixtures::drafter_kind::hidden_only: {
                const int32_t first = successor(successor(prev < 0 ? t - 1 : prev, n_vocab), n_vocab);
                x = (j == 0 || !chained_features) ? first : successor(x, n_vocab);
                break;
            }
            case fixtures::drafter_kind::random:
                return {};
        }
        out.push_back(x);
    }
    return out;
}

inline const char * kind_name(fixtures::drafter_kind k) {
    switch (k) {
        case fixtures::drafter_kind::exact:         return "exact";
        case fixtures::drafter_kind::wrong_every_k: return "wrong";
        case fixtures::drafter_kind::hidden_only:   return "hidden";
        case fixtures::drafter_kind::random:        return "random";
    }
    return "?";
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

} // namespace specdec::test
