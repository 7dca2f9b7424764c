// What specdec knows about each strategy, in one table: adding a strategy
// is one row in strategy-traits.cpp (and its enum value in specdec.h).
#pragma once

#include "specdec/specdec.h"

#include "common.h" // common_speculative_type

#include <span>

namespace specdec::detail {

// Where a strategy's draft weights come from.
enum class draft_weights {
    none,         // the token history alone (n-gram family): no draft context
    target_heads, // the target's own NextN blocks: a draft context over the target model
    draft_model,  // a separate draft model: a draft context over that model
};

// How many target layers a draft model names in <arch>.target_layers.
enum class extraction_sites {
    none,         // reads no target layers
    exactly_three,// EAGLE-3: low, middle and high layers
    at_least_one, // DFlash / DSpark
};

struct strategy_traits {
    specdec_strategy        strategy;
    const char *            name;            // specdec_strategy_name / --spec
    common_speculative_type upstream;        // llama.cpp's drafter
    draft_weights           weights;
    llama_context_type      draft_context;   // type of the draft context (when weights != none)
    const char *            draft_arch;      // general.architecture the draft model must have; nullptr: a target-like model
    extraction_sites        sites;
    bool                    reads_features;  // process() reads the target's hidden states of the batch just decoded
    bool                    markov_head;     // the draft model carries a Markov head (markov_w1.weight)
    bool                    dflash_block;    // drafts a DFlash block: needs a mask token, a block size >= 2 and n_outputs_max_per_seq >= n_draft_max + 1
    bool                    one_seq_per_draft; // drafts one sequence per llama.cpp call (v0.5.0 EAGLE-3 drafts wrongly for several)
    bool                    boundary_state;  // over a recurrent/hybrid target, llama.cpp's drafter state is one deferred
                                             // boundary row: a llama_pos and n_embd(draft) floats (else it keeps none)
    bool                    movable;         // llama.cpp's drafter keeps no per-sequence state but the draft context's
                                             // cells, so session::move_sequence can carry it (MTP: false here, since
                                             // specdec's own driver, mtp-drafter.h, carries its state when it runs)
    int                     detect_rank;     // order auto-detection tries draft strategies in (lower first); 0: never detected from a draft
};

// The row of `strategy`, or nullptr when it is not a specdec_strategy value.
const strategy_traits * find_traits(specdec_strategy strategy);

// The row of a validated strategy (callers ran validate_params first).
const strategy_traits & traits_of(specdec_strategy strategy);

// Every row, in enum order.
std::span<const strategy_traits> all_traits();

// True when `arch` is a draft-only architecture (some row's draft_arch): such
// a file cannot be a target nor a classic draft model.
bool is_draft_arch(const char * arch);

} // namespace specdec::detail
