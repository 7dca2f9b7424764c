// Speculative sampling's verifier (SPECDEC_ACCEPT_REJECTION): the one place
// that decides a drafted token against the target's distribution, apart
// from every drafter. Pure functions of their inputs, so the engine, the
// tests and any drafter agree on them.
//
// Randomness is counter based: the uniform for (seed, position, stream) is
// a hash of the three, not the next value of a generator, so a token's draws
// do not depend on how many draws came before it (draft lengths, rejected
// drafts, other requests). Each (position, stream) decides one thing of one
// request: whether the draft at that position is kept, which token the
// target draws there, which token the drafter draws there. A position is
// drafted again only after everything before it changed, and its earlier
// draws decided nothing that was kept, so every decision that reaches the
// output reads draws no other kept decision read.
#pragma once

#include "specdec/specdec.h"

#include <cstdint>
#include <span>
#include <vector>

namespace specdec::detail {

enum class draw_stream : uint32_t {
    accept = 1, // is the draft at this position kept
    target = 2, // the target's token at this position (residual or plain draw)
    draft  = 3, // the drafter's token at this position
};

// A uniform draw in [0, 1) (53 bits), a function of its arguments alone.
double uniform_at(uint64_t seed, llama_pos pos, draw_stream stream);

// The token `u` in [0, 1) picks from `dist` (probabilities in any order,
// summing to about 1): the first whose running sum exceeds u times the
// total. `dist` must not be empty.
llama_token draw(std::span<const specdec_token_prob> dist, double u);

struct verdict {
    llama_token token; // what the target emits at this position
    bool        kept;  // token is the draft
};

// Decides draft `x`, drawn from q (empty: a point mass on x), against the
// target's distribution p (its nonzero entries; empty not allowed): kept
// when u_accept * q(x) < p(x), i.e. with probability min(1, p(x) / q(x));
// otherwise the token is drawn with u_residual from max(0, p - q),
// normalised (from p itself when rounding left that empty). `residual`
// is scratch space.
verdict verify_draft(std::span<const specdec_token_prob> p, llama_token x, std::span<const specdec_token_prob> q,
                     double u_accept, double u_residual, std::vector<specdec_token_prob> & residual);

} // namespace specdec::detail
