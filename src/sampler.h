// Choosing a token from the target's logits: argmax, or a seeded draw from
// the distribution shaped by top-k / top-p / min-p / temperature (llama.cpp's
// samplers, in that order). The same transforms give the distribution
// itself, for speculative sampling (rejection-sampler.h) and for a drafter
// that samples.
#pragma once

#include "specdec/specdec.h"

#include <vector>

struct llama_sampler;

namespace specdec::detail {

// Throws error(INVALID_ARGUMENT) for parameters out of range.
void validate_sampling(float temperature, float top_p, float min_p);

// The highest of n > 0 logits (-inf when all are). Throws
// error(NATIVE_FAILURE) naming the first NaN's token when one is NaN.
float highest_logit(const float * logits, int32_t n);

class token_sampler {
public:
    // Greedy when temperature < SPECDEC_MIN_SAMPLING_TEMPERATURE.
    token_sampler(float temperature, int32_t top_k, float top_p, float min_p, uint32_t seed, int32_t n_vocab);
    token_sampler(const specdec_generate_params & params, uint32_t seed, int32_t n_vocab);
    ~token_sampler();
    token_sampler(token_sampler && other) noexcept;
    token_sampler & operator=(token_sampler &&) = delete;
    token_sampler(const token_sampler &) = delete;
    token_sampler & operator=(const token_sampler &) = delete;

    bool samples() const { return transforms_ != nullptr; }

    // One choice from n_vocab logits; a sampled choice consumes one draw.
    // Throws error(NATIVE_FAILURE) when a logit is NaN.
    llama_token choose(const float * logits);

    // Sampling only: the distribution a choice from n_vocab logits draws
    // from, as its nonzero entries (order unspecified), into `out`. Throws
    // error(NATIVE_FAILURE) when a logit is NaN.
    void distribution(const float * logits, std::vector<specdec_token_prob> & out);
    // The same over candidates the caller filled (logits in .logit; the
    // array is transformed in place).
    void distribution(llama_token_data_array & candidates, std::vector<specdec_token_prob> & out);

private:
    void fill(const float * logits);

    llama_sampler *               transforms_ = nullptr; // nullptr: greedy
    llama_sampler *               dist_ = nullptr;
    int32_t                       n_vocab_;
    std::vector<llama_token_data> candidates_;
};

} // namespace specdec::detail
