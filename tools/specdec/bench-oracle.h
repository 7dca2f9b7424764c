// The oracle of `specdec bench`: the best speed any draft-length policy
// could have reached on the bench's text, in hindsight. It needs two
// measurements:
//  - the agreement at every position of the text: how many tokens the
//    drafter, drafting from that position, proposes that the target would
//    keep (measure_agreement);
//  - what a step costs for each draft length, from the run's own
//    measurements (cmd-bench.cpp builds the curve).
// Then a policy that knows the agreement chooses, at each position, the
// length whose step yields the most text per cost over the rest of the run
// (oracle_plan): no length policy can do better on that text at those costs.
#pragma once

#include "specdec/specdec.hpp"

#include <functional>
#include <span>
#include <vector>

namespace cli {

// Greedy text `text` (the target's own continuation of `prompt`, token by
// token) replayed through sequence 0 of `s`: at every position i the
// drafter drafts up to n_max tokens, and agreement[i] is the length of the
// prefix equal to text[i..]; then the target decodes the text's own token
// (nothing drafted is kept). Clears sequence 0 of both contexts first and
// leaves it holding the prompt and the text. `on_position(i, n)` (may be
// empty) hears of each of the text's n positions as it is done. Throws
// specdec::error.
std::vector<int32_t> measure_agreement(specdec::session & s, const std::vector<llama_token> & prompt,
                                       const std::vector<llama_token> & text, int32_t n_max,
                                       const std::function<void(size_t, size_t)> & on_position = {});

struct oracle_result {
    double  cost  = 0; // total, in step_cost's unit
    int64_t steps = 0;
};

// The least total cost of producing agreement.size() tokens when a step
// that drafts k tokens (k < step_cost.size()) costs step_cost[k] and, at
// position i, yields min(k, agreement[i]) drafted tokens plus the target's
// own. Exact (dynamic programming over positions).
oracle_result oracle_plan(std::span<const int32_t> agreement, std::span<const double> step_cost);

} // namespace cli
