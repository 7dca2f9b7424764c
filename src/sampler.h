// Choosing a token from the target's logits: argmax, or a seeded draw from
// the distribution shaped by top-k / top-p / min-p / temperature.
#pragma once

#include "specdec/specdec.h"

#include <vector>

struct llama_sampler;

namespace specdec::detail {

// Throws error(INVALID_ARGUMENT) for parameters out of range.
void validate_sampling(const specdec_generate_params & params);

class token_sampler {
public:
    token_sampler(const specdec_generate_params & params, uint32_t seed, int32_t n_vocab);
    ~token_sampler();
    token_sampler(token_sampler && other) noexcept;
    token_sampler & operator=(token_sampler &&) = delete;
    token_sampler(const token_sampler &) = delete;
    token_sampler & operator=(const token_sampler &) = delete;

    // One choice from n_vocab logits; a sampled choice consumes one draw.
    // Throws error(NATIVE_FAILURE) when a logit is NaN.
    llama_token choose(const float * logits);

private:
    llama_sampler *               chain_ = nullptr; // nullptr: greedy
    int32_t                       n_vocab_;
    std::vector<llama_token_data> candidates_;
};

} // namespace specdec::detail
