#include "rejection-sampler.h"

#include <algorithm>

namespace specdec::detail {

namespace {

// splitmix64's finaliser: consecutive inputs give unrelated outputs.
uint64_t mix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

float prob_of(std::span<const specdec_token_prob> dist, llama_token t) {
    const auto it = std::find_if(dist.begin(), dist.end(), [t](const specdec_token_prob & e) { return e.token == t; });
    return it == dist.end() ? 0.0f : it->p;
}

} // namespace

double uniform_at(uint64_t seed, llama_pos pos, draw_stream stream) {
    const uint64_t h = mix(mix(mix(seed) ^ static_cast<uint64_t>(static_cast<uint32_t>(pos))) ^ static_cast<uint64_t>(stream));
    return static_cast<double>(h >> 11) * 0x1.0p-53;
}

llama_token draw(std::span<const specdec_token_prob> dist, double u) {
    double total = 0.0;
    for (const specdec_token_prob & e : dist) {
        total += e.p;
    }
    const double target = u * total;
    double sum = 0.0;
    for (const specdec_token_prob & e : dist) {
        sum += e.p;
        if (target < sum) {
            return e.token;
        }
    }
    // u * total rounded onto the last sum: the last token with any mass.
    const auto last = std::find_if(dist.rbegin(), dist.rend(), [](const specdec_token_prob & e) { return e.p > 0.0f; });
    return last == dist.rend() ? dist.back().token : last->token;
}

verdict verify_draft(std::span<const specdec_token_prob> p, llama_token x, std::span<const specdec_token_prob> q,
                     double u_accept, double u_residual, std::vector<specdec_token_prob> & residual) {
    const specdec_token_prob point{x, 1.0f};
    if (q.empty()) {
        q = std::span(&point, 1);
    }
    const double qx = prob_of(q, x);
    if (u_accept * qx < static_cast<double>(prob_of(p, x))) {
        return {x, true};
    }
    residual.clear();
    for (const specdec_token_prob & e : p) {
        const float r = e.p - prob_of(q, e.token);
        if (r > 0.0f) {
            residual.push_back({e.token, r});
        }
    }
    return {draw(residual.empty() ? p : std::span<const specdec_token_prob>(residual), u_residual), false};
}

} // namespace specdec::detail
