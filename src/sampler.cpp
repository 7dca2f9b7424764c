#include "sampler.h"

#include "error.h"

#include <cmath>

namespace specdec::detail {

void validate_sampling(const specdec_generate_params & p) {
    if (!std::isfinite(p.temperature)) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "temperature must be finite");
    }
    if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "top_p is ", p.top_p, "; it must be within (0, 1]");
    }
    if (!(p.min_p >= 0.0f && p.min_p < 1.0f)) {
        fail(SPECDEC_STATUS_INVALID_ARGUMENT, "min_p is ", p.min_p, "; it must be within [0, 1)");
    }
}

token_sampler::token_sampler(const specdec_generate_params & p, uint32_t seed, int32_t n_vocab) : n_vocab_(n_vocab) {
    if (p.temperature < SPECDEC_MIN_SAMPLING_TEMPERATURE) {
        return; // greedy
    }
    chain_ = llama_sampler_chain_init(llama_sampler_chain_default_params());
    if (p.top_k > 0) {
        llama_sampler_chain_add(chain_, llama_sampler_init_top_k(p.top_k));
    }
    if (p.top_p < 1.0f) {
        llama_sampler_chain_add(chain_, llama_sampler_init_top_p(p.top_p, 1));
    }
    if (p.min_p > 0.0f) {
        llama_sampler_chain_add(chain_, llama_sampler_init_min_p(p.min_p, 1));
    }
    llama_sampler_chain_add(chain_, llama_sampler_init_temp(p.temperature));
    llama_sampler_chain_add(chain_, llama_sampler_init_dist(seed));
    candidates_.resize(static_cast<size_t>(n_vocab));
}

token_sampler::~token_sampler() {
    if (chain_ != nullptr) {
        llama_sampler_free(chain_);
    }
}

token_sampler::token_sampler(token_sampler && other) noexcept
    : chain_(other.chain_), n_vocab_(other.n_vocab_), candidates_(std::move(other.candidates_)) {
    other.chain_ = nullptr;
}

[[noreturn]] static void fail_nan(llama_token t) {
    fail(SPECDEC_STATUS_NATIVE_FAILURE, "the target's logit of token ", t,
         " is NaN: the model or its backend computed garbage (check the weights, the quantization, the device)");
}

llama_token token_sampler::choose(const float * logits) {
    if (chain_ == nullptr) {
        llama_token best = 0;
        for (llama_token t = 0; t < n_vocab_; ++t) {
            if (std::isnan(logits[t])) {
                fail_nan(t);
            }
            if (logits[t] > logits[best]) {
                best = t;
            }
        }
        return best;
    }
    for (llama_token t = 0; t < n_vocab_; ++t) {
        if (std::isnan(logits[t])) {
            fail_nan(t);
        }
        candidates_[static_cast<size_t>(t)] = {t, logits[t], 0.0f};
    }
    llama_token_data_array arr = {candidates_.data(), candidates_.size(), -1, false};
    llama_sampler_apply(chain_, &arr);
    return arr.data[arr.selected].id;
}

} // namespace specdec::detail
