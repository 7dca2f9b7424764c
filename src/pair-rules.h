// The one set of rules a target, a draft model and a strategy must meet,
// over facts that both a GGUF file's metadata (gguf-inspect.cpp) and a
// loaded llama_model (compat.cpp) can fill. specdec_check_pair and session
// creation call the same function, so the CLI never refuses a pair the
// library accepts, nor the reverse.
#pragma once

#include "specdec/specdec.h"

#include <cstdint>
#include <string>
#include <vector>

namespace specdec::detail {

// llama.cpp's DFlash block size when dflash.block_size is absent
// (common/speculative.cpp, v0.5.0).
constexpr int64_t dflash_default_block_size = 16;

// What the rules read about one model. Every field has the value llama.cpp
// would see after loading the file (its defaults included).
struct model_facts {
    std::string          arch;                 // general.architecture
    uint32_t             n_layer = 0;          // trunk blocks: block_count - nextn_predict_layers
    uint32_t             n_layer_nextn = 0;    // declared NextN (MTP) blocks
    bool                 nextn_tensors = false;// the NextN blocks' tensors are present (file) or loaded (load_mtp)
    uint32_t             n_embd = 0;           // hidden width
    std::vector<int32_t> target_layers;        // <arch>.target_layers (EAGLE-3 / DFlash drafts)
    int64_t              target_hidden_size = 0; // <arch>.target_hidden_size; 0: not stated
    int64_t              dflash_block_size = dflash_default_block_size;
    int64_t              dflash_selector_top_k = 0; // dflash.selector_top_k: > 0 announces DFlash2
    bool                 dflash_selector = false;   // selector_hidden.weight is present
    bool                 markov_head = false;       // markov_w1.weight is present (DSpark)
    // Vocabulary, as llama.cpp's vocabulary loader resolves it.
    std::string              tokenizer;        // tokenizer.ggml.model
    std::vector<std::string> tokens;           // token texts by id (only the classic-draft rule reads them)
    int64_t                  bos = -1;         // -1: none
    int64_t                  eos = -1;
    int64_t                  mask = -1;
    bool                     add_bos = false;
    bool                     add_eos = false;
};

// Throws error(<compatibility status>, or INVALID_ARGUMENT for a draft model
// given to a strategy that takes none and the reverse) for the first rule
// broken; each message says what to change. `draft` is nullptr for MTP (the
// target drafts with its own heads) and the n-gram strategies. `strategy`
// must be a specdec_strategy value. A classic draft model's vocabulary must
// match the target's as llama.cpp's draft-model rule has it: same tokenizer,
// same BOS/EOS handling (ids compared only where they are added), sizes
// within 128, identical texts from id 5 on.
void check_models(const model_facts & target, const model_facts * draft, specdec_strategy strategy);

} // namespace specdec::detail
