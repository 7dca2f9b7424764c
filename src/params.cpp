#include "params.h"

#include "error.h"
#include "strategy-traits.h"

#include <cmath>
#include <cstring>

namespace specdec::detail {

void validate_params(const specdec_session_params & p) {
    if (find_traits(p.strategy) == nullptr) {
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
    if (p.draft_vocab < SPECDEC_DRAFT_VOCAB_AUTO) {
        fail(SPECDEC_STATUS_INVALID_CONFIG, "draft_vocab is ", p.draft_vocab,
             "; it must be a token count, 0 (the whole vocabulary) or SPECDEC_DRAFT_VOCAB_AUTO (-1)");
    }
    if ((p.draft_vocab_ranking == nullptr) != (p.n_draft_vocab_ranking == 0)) {
        fail(SPECDEC_STATUS_INVALID_CONFIG, p.draft_vocab_ranking == nullptr
             ? "n_draft_vocab_ranking is not 0, but draft_vocab_ranking is NULL"
             : "draft_vocab_ranking is empty (n_draft_vocab_ranking 0); give NULL for the tokenizer's ranking");
    }
    if (p.draft_vocab_ranking != nullptr && p.draft_vocab > 0 && static_cast<size_t>(p.draft_vocab) > p.n_draft_vocab_ranking) {
        fail(SPECDEC_STATUS_INVALID_CONFIG, "draft_vocab is ", p.draft_vocab, ", but the ranking holds only ",
             p.n_draft_vocab_ranking, " tokens");
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
    p.draft_vocab = 0;
    p.draft_vocab_ranking   = nullptr;
    p.n_draft_vocab_ranking = 0;
    return p;
}

const char * specdec_strategy_name(specdec_strategy strategy) {
    const auto * t = specdec::detail::find_traits(strategy);
    return t != nullptr ? t->name : nullptr;
}

bool specdec_strategy_needs_draft_context(specdec_strategy strategy) {
    const auto * t = specdec::detail::find_traits(strategy);
    return t != nullptr && t->weights != specdec::detail::draft_weights::none;
}

specdec_status specdec_strategy_from_name(const char * name, specdec_strategy * out) {
    if (name == nullptr || out == nullptr) {
        specdec::detail::set_last_error("specdec_strategy_from_name: name and out must not be NULL");
        return SPECDEC_STATUS_INVALID_ARGUMENT;
    }
    std::string names;
    for (const auto & t : specdec::detail::all_traits()) {
        if (std::strcmp(t.name, name) == 0) {
            *out = t.strategy;
            return SPECDEC_STATUS_OK;
        }
        names += names.empty() ? t.name : std::string(", ") + t.name;
    }
    specdec::detail::set_last_error(specdec::detail::concat("unknown strategy '", name, "'; expected one of ", names));
    return SPECDEC_STATUS_INVALID_ARGUMENT;
}

} // extern "C"
