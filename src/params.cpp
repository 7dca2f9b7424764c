#include "params.h"

#include "error.h"

#include <array>
#include <cmath>
#include <cstring>

namespace {

struct strategy_info {
    specdec_strategy strategy;
    const char *     name;
    bool             needs_draft_context;
};

constexpr std::array<strategy_info, SPECDEC_STRATEGY_COUNT> strategies = {{
    {SPECDEC_STRATEGY_MTP,           "mtp",           true},
    {SPECDEC_STRATEGY_EAGLE3,        "eagle3",        true},
    {SPECDEC_STRATEGY_DFLASH,        "dflash",        true},
    {SPECDEC_STRATEGY_DSPARK,        "dspark",        true},
    {SPECDEC_STRATEGY_DRAFT,         "draft",         true},
    {SPECDEC_STRATEGY_NGRAM_SIMPLE,  "ngram-simple",  false},
    {SPECDEC_STRATEGY_NGRAM_MAP_K,   "ngram-map-k",   false},
    {SPECDEC_STRATEGY_NGRAM_MAP_K4V, "ngram-map-k4v", false},
    {SPECDEC_STRATEGY_NGRAM_MOD,     "ngram-mod",     false},
    {SPECDEC_STRATEGY_NGRAM_CACHE,   "ngram-cache",   false},
}};

const strategy_info * find(specdec_strategy strategy) {
    const int value = static_cast<int>(strategy);
    if (value < 0 || value >= SPECDEC_STRATEGY_COUNT) {
        return nullptr;
    }
    return &strategies[static_cast<size_t>(value)];
}

} // namespace

namespace specdec::detail {

void validate_params(const specdec_session_params & p) {
    if (find(p.strategy) == nullptr) {
        fail(SPECDEC_STATUS_INVALID_CONFIG, "strategy ", static_cast<int>(p.strategy), " is not a specdec_strategy value");
    }
    if (p.n_seq < 1 || p.n_seq > SPECDEC_MAX_SEQ) {
        fail(SPECDEC_STATUS_INVALID_CONFIG, "n_seq is ", p.n_seq, "; it must be within [1, ", SPECDEC_MAX_SEQ, "]");
    }
    if (p.n_draft_max < 1 || p.n_draft_max > SPECDEC_MAX_DRAFT) {
        fail(SPECDEC_STATUS_INVALID_CONFIG, "n_draft_max is ", p.n_draft_max, "; it must be within [1, ", SPECDEC_MAX_DRAFT, "]");
    }
    if (p.n_draft_min < 0 || p.n_draft_min > p.n_draft_max) {
        fail(SPECDEC_STATUS_INVALID_CONFIG, "n_draft_min is ", p.n_draft_min, "; it must be within [0, n_draft_max = ", p.n_draft_max, "]");
    }
    if (!std::isfinite(p.p_min) || p.p_min < 0.0f || p.p_min > 1.0f) {
        fail(SPECDEC_STATUS_INVALID_CONFIG, "p_min is ", p.p_min, "; it must be within [0, 1]");
    }
}

} // namespace specdec::detail

extern "C" {

specdec_session_params specdec_session_default_params(void) {
    specdec_session_params p{};
    p.strategy    = SPECDEC_STRATEGY_MTP;
    p.n_seq       = 1;
    p.n_draft_max = 3; // upstream's default draft length
    p.n_draft_min = 0;
    p.p_min       = 0.0f;
    return p;
}

const char * specdec_strategy_name(specdec_strategy strategy) {
    const strategy_info * info = find(strategy);
    return info != nullptr ? info->name : nullptr;
}

bool specdec_strategy_needs_draft_context(specdec_strategy strategy) {
    const strategy_info * info = find(strategy);
    return info != nullptr && info->needs_draft_context;
}

specdec_status specdec_strategy_from_name(const char * name, specdec_strategy * out) {
    if (name == nullptr || out == nullptr) {
        specdec::detail::set_last_error("specdec_strategy_from_name: name and out must not be NULL");
        return SPECDEC_STATUS_INVALID_ARGUMENT;
    }
    for (const strategy_info & info : strategies) {
        if (std::strcmp(info.name, name) == 0) {
            *out = info.strategy;
            return SPECDEC_STATUS_OK;
        }
    }
    specdec::detail::set_last_error(specdec::detail::concat(
        "unknown strategy '", name, "'; expected one of mtp, eagle3, dflash, dspark, draft, ngram-simple, "
        "ngram-map-k, ngram-map-k4v, ngram-mod, ngram-cache"));
    return SPECDEC_STATUS_INVALID_ARGUMENT;
}

} // extern "C"
