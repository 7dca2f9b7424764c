#include "logprobs.h"

#include "error.h"
#include "sampler.h"

#include <algorithm>
#include <cmath>

namespace specdec::detail {

float log_probability(const float * logits, int32_t n_vocab, llama_token token, int32_t n_top,
                      std::vector<specdec_token_logprob> & top) {
    const float max = highest_logit(logits, n_vocab);
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; ++i) {
        sum += std::exp(static_cast<double>(logits[i]) - max);
    }
    const double log_z = static_cast<double>(max) + std::log(sum);
    const auto logprob = [&](llama_token t) { return static_cast<float>(static_cast<double>(logits[t]) - log_z); };

    // A bounded min-heap of the best n_top (worst on top).
    const auto better = [&](llama_token a, llama_token b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    std::vector<llama_token> best;
    best.reserve(static_cast<size_t>(n_top) + 1);
    for (llama_token t = 0; n_top > 0 && t < n_vocab; ++t) {
        if (best.size() < static_cast<size_t>(n_top)) {
            best.push_back(t);
            std::push_heap(best.begin(), best.end(), better);
        } else if (better(t, best.front())) {
            std::pop_heap(best.begin(), best.end(), better);
            best.back() = t;
            std::push_heap(best.begin(), best.end(), better);
        }
    }
    std::sort(best.begin(), best.end(), better);
    for (llama_token t : best) {
        top.push_back({t, logprob(t)});
    }
    return logprob(token);
}

} // namespace specdec::detail
