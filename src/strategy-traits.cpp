#include "strategy-traits.h"

#include <array>
#include <cstring>

namespace specdec::detail {

namespace {

using W = draft_weights;
using X = extraction_sites;
constexpr llama_context_type DEF = LLAMA_CONTEXT_TYPE_DEFAULT;

// clang-format off
constexpr std::array<strategy_traits, SPECDEC_STRATEGY_COUNT> table = {{
    // strategy                      name             upstream                                  weights          draft ctx                  draft arch features markov dflash one-seq bound. move rank
    {SPECDEC_STRATEGY_MTP,           "mtp",           COMMON_SPECULATIVE_TYPE_DRAFT_MTP,     W::target_heads, LLAMA_CONTEXT_TYPE_MTP, nullptr,  X::none,          true,  false, false, false, false, false, 0},
    {SPECDEC_STRATEGY_EAGLE3,        "eagle3",        COMMON_SPECULATIVE_TYPE_DRAFT_EAGLE3,  W::draft_model,  DEF,                    "eagle3", X::exactly_three, true,  false, false, true,  true,  false, 1},
    {SPECDEC_STRATEGY_DFLASH,        "dflash",        COMMON_SPECULATIVE_TYPE_DRAFT_DFLASH,  W::draft_model,  DEF,                    "dflash", X::at_least_one,  true,  false, true,  false, false, false, 3},
    {SPECDEC_STRATEGY_DSPARK,        "dspark",        COMMON_SPECULATIVE_TYPE_DRAFT_DSPARK,  W::draft_model,  DEF,                    "dflash", X::at_least_one,  true,  true,  true,  false, false, false, 2},
    {SPECDEC_STRATEGY_DRAFT,         "draft",         COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE,  W::draft_model,  DEF,                    nullptr,  X::none,          false, false, false, false, false, true,  4},
    {SPECDEC_STRATEGY_NGRAM_SIMPLE,  "ngram-simple",  COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE,  W::none,         DEF,                    nullptr,  X::none,          false, false, false, false, false, true,  0},
    {SPECDEC_STRATEGY_NGRAM_MAP_K,   "ngram-map-k",   COMMON_SPECULATIVE_TYPE_NGRAM_MAP_K,   W::none,         DEF,                    nullptr,  X::none,          false, false, false, false, false, false, 0},
    {SPECDEC_STRATEGY_NGRAM_MAP_K4V, "ngram-map-k4v", COMMON_SPECULATIVE_TYPE_NGRAM_MAP_K4V, W::none,         DEF,                    nullptr,  X::none,          false, false, false, false, false, false, 0},
    {SPECDEC_STRATEGY_NGRAM_MOD,     "ngram-mod",     COMMON_SPECULATIVE_TYPE_NGRAM_MOD,     W::none,         DEF,                    nullptr,  X::none,          false, false, false, false, false, false, 0},
    {SPECDEC_STRATEGY_NGRAM_CACHE,   "ngram-cache",   COMMON_SPECULATIVE_TYPE_NGRAM_CACHE,   W::none,         DEF,                    nullptr,  X::none,          false, false, false, false, false, false, 0},
}};
// clang-format on

constexpr bool rows_in_enum_order() {
    for (size_t i = 0; i < table.size(); ++i) {
        if (static_cast<size_t>(table[i].strategy) != i) {
            return false;
        }
    }
    return true;
}
static_assert(rows_in_enum_order(), "strategy_traits rows must follow the specdec_strategy enum");

} // namespace

const strategy_traits * find_traits(specdec_strategy strategy) {
    const int value = static_cast<int>(strategy);
    if (value < 0 || value >= SPECDEC_STRATEGY_COUNT) {
        return nullptr;
    }
    return &table[static_cast<size_t>(value)];
}

const strategy_traits & traits_of(specdec_strategy strategy) {
    const strategy_traits * t = find_traits(strategy);
    return t != nullptr ? *t : table[0];
}

std::span<const strategy_traits> all_traits() {
    return table;
}

bool is_draft_arch(const char * arch) {
    for (const strategy_traits & t : table) {
        if (t.draft_arch != nullptr && std::strcmp(t.draft_arch, arch) == 0) {
            return true;
        }
    }
    return false;
}

} // namespace specdec::detail
