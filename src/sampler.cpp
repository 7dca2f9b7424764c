#include "sampler.h"

#include "error.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace specdec::detail {

void validate_sampling(float temperature, float top_p, float min_p) {
    if (!std::isfinite(temperature)) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "temperature must be finite");
    }
    if (!(top_p > 0.0f && top_p <= 1.0f)) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "top_p is ", top_p, "; it must be within (0, 1]");
    }
    if (!(min_p >= 0.0f && min_p < 1.0f)) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "min_p is ", min_p, "; it must be within [0, 1)");
    }
}

token_sampler::token_sampler(float temperature, int32_t top_k, float top_p, float min_p, uint32_t seed, int32_t n_vocab)
    : n_vocab_(n_vocab) {
    if (temperature < SPECDEC_MIN_SAMPLING_TEMPERATURE) {
        return; // greedy
    }
    transforms_ = llama_sampler_chain_init(llama_sampler_chain_default_params());
    if (top_k > 0) {
        llama_sampler_chain_add(transforms_, llama_sampler_init_top_k(top_k));
    }
    if (top_p < 1.0f) {
        llama_sampler_chain_add(transforms_, llama_sampler_init_top_p(top_p, 1));
    }
    if (min_p > 0.0f) {
        llama_sampler_chain_add(transforms_, llama_sampler_init_min_p(min_p, 1));
    }
    llama_sampler_chain_add(transforms_, llama_sampler_init_temp(temperature));
    dist_ = llama_sampler_init_dist(seed);
    candidates_.resize(static_cast<size_t>(n_vocab));
}

token_sampler::token_sampler(const specdec_generate_params & p, uint32_t seed, int32_t n_vocab)
    : token_sampler(p.temperature, p.top_k, p.top_p, p.min_p, seed, n_vocab) {}

token_sampler::~token_sampler() {
    if (transforms_ != nullptr) {
        llama_sampler_free(transforms_);
        llama_sampler_free(dist_);
    }
}

token_sampler::token_sampler(token_sampler && other) noexcept
    : transforms_(other.transforms_), dist_(other.dist_), n_vocab_(other.n_vocab_), candidates_(std::move(other.candidates_)) {
    other.transforms_ = nullptr;
    other.dist_ = nullptr;
}

[[noreturn]] static void fail_nan(llama_token t) {
    fail(SPECDEC_STATUS_NATIVE_FAILURE, "the target's logit of token ", t,
         " is NaN: the model or its backend computed garbage (check the weights, the quantization, the device)");
}

void token_sampler::fill(const float * logits) {
    for (llama_token t = 0; t < n_vocab_; ++t) {
        if (std::isnan(logits[t])) {
            fail_nan(t);
        }
        candidates_[static_cast<size_t>(t)] = {t, logits[t], 0.0f};
    }
}

float highest_logit(const float * logits, int32_t n) {
    // Independent lanes, so that the compiler vectorises the pass (a loop
    // carrying the best index from token to token does not vectorise).
    constexpr int32_t lanes = 16;
    float top[lanes];
    int32_t nans[lanes] = {};
    std::fill(top, top + lanes, -INFINITY);
    const auto take = [&](int32_t j, float x) {
        nans[j] += x != x ? 1 : 0;
        top[j] = x > top[j] ? x : top[j];
    };
    int32_t t = 0;
    for (; t + lanes <= n; t += lanes) {
        for (int32_t j = 0; j < lanes; ++j) {
            take(j, logits[t + j]);
        }
    }
    for (int32_t j = 0; t + j < n; ++j) {
        take(j, logits[t + j]);
    }
    if (std::accumulate(nans, nans + lanes, 0) > 0) {
        fail_nan(static_cast<llama_token>(std::find_if(logits, logits + n, [](float x) { return std::isnan(x); }) - logits));
    }
    return *std::max_element(top, top + lanes);
}

llama_token token_sampler::choose(const float * logits) {
    if (transforms_ == nullptr) {
        // The first of the highest logits.
        return static_cast<llama_token>(std::find(logits, logits + n_vocab_, highest_logit(logits, n_vocab_)) - logits);
    }
    fill(logits);
    llama_token_data_array arr = {candidates_.data(), candidates_.size(), -1, false};
    // The chain of transforms, then the draw: what one llama.cpp chain of
    // them all does.
    llama_sampler_apply(transforms_, &arr);
    llama_sampler_apply(dist_, &arr);
    return arr.data[arr.selected].id;
}

void token_sampler::distribution(const float * logits, std::vector<specdec_token_prob> & out) {
    fill(logits);
    llama_token_data_array arr = {candidates_.data(), candidates_.size(), -1, false};
    distribution(arr, out);
}

void token_sampler::distribution(llama_token_data_array & arr, std::vector<specdec_token_prob> & out) {
    llama_sampler_apply(transforms_, &arr);
    // The softmax the draw would take, summed in double.
    float top = -INFINITY;
    for (size_t i = 0; i < arr.size; ++i) {
        top = std::max(top, arr.data[i].logit);
    }
    double sum = 0.0;
    out.clear();
    for (size_t i = 0; i < arr.size; ++i) {
        const float e = std::exp(arr.data[i].logit - top);
        if (e > 0.0f) {
            out.push_back({arr.data[i].id, e});
            sum += e;
        }
    }
    for (specdec_token_prob & e : out) {
        e.p = static_cast<float>(e.p / sum);
    }
}

} // namespace specdec::detail
