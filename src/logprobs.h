// Log-probabilities of the target's distribution at one position, read from
// the logits that chose the token there (specdec_generate_params.n_top_logprobs).
#pragma once

#include "specdec/specdec.h"

#include <vector>

namespace specdec::detail {

// The log-softmax of n_vocab logits at `token`, and the n_top most likely
// tokens (most likely first; equal logits: lowest id first) appended to
// `top`. The normaliser is summed in double, so the values do not depend on
// anything but the logits. Throws error(NATIVE_FAILURE) on a NaN logit.
float log_probability(const float * logits, int32_t n_vocab, llama_token token, int32_t n_top,
                      std::vector<specdec_token_logprob> & top);

} // namespace specdec::detail
